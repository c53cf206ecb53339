import torch, torch.nn as nn

N = 4096
M = 4096


class Model(nn.Module):
    """diag(a) @ B, written the naive way: materialize the (N, N) diagonal matrix, then a GEMM."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.diag(a) @ B


def get_inputs():
    return [torch.randn(N), torch.randn(N, M)]


def get_init_inputs():
    return []
