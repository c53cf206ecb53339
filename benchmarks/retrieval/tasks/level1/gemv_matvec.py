import torch
import torch.nn as nn

rows = 2048
cols = 4096


class Model(nn.Module):
    """Matrix-vector product y = A @ x with A (rows x cols) and x a column vector (cols x 1)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, x)


def get_inputs():
    return [torch.randn(rows, cols), torch.randn(cols, 1)]


def get_init_inputs():
    return []
