import torch, torch.nn as nn

batch_size = 32
dim1 = 4096
dim2 = 1024
reduce_dim = 1


class Model(nn.Module):
    """Sum over one dimension (kept as size 1) of a 3-D float32 tensor."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return [reduce_dim]
