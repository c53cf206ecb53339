import torch
import torch.nn as nn

batch_size = 32
dim1 = 1024
dim2 = 128


class Model(nn.Module):
    """Index of the maximum along dim 1 of a 3-D tensor (int64 output, strided reduction axis)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.argmax(x, dim=1)


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return []
