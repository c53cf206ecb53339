import torch
import torch.nn as nn

batch_size = 16
dim1 = 256
dim2 = 512


class Model(nn.Module):
    """Mean over the middle dimension of a 3-D tensor (a strided, non-innermost reduction axis)."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mean(x, dim=self.dim)


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return [1]
