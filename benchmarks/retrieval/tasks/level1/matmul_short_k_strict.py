import torch
import torch.nn as nn

M = 6144
K = 48
N = 6144


class Model(nn.Module):
    """C = A @ B in float32 with a short reduction (K = 48 terms per output) and a large output;
    checked at the default float32 tolerance (1e-4), which TF32's 10-bit mantissa does not meet."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return A @ B


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
