import torch
import torch.nn as nn

M = 8192
K = 128
N = 4096


class Model(nn.Module):
    """C = A @ B in float32 with K = 128 terms per output, checked at the default float32 tolerance
    (1e-4): TF32 tensor cores alone miss it, the FFMA path is slow."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return A @ B


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
