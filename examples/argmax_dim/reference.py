import torch, torch.nn as nn

batch_size = 32
dim1 = 1024
dim2 = 4096
reduce_dim = 2


class Model(nn.Module):
    """argmax over one dimension of a 3-D float32 tensor (int64 indices, first maximum wins)."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.argmax(x, dim=self.dim)


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return [reduce_dim]
