import torch
import torch.nn as nn

batch = 32
m = 128
k = 96
n = 160


class Model(nn.Module):
    """Batched matrix product: C[b] = A[b] @ B[b] for a batch of independent small GEMMs."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.bmm(A, B)


def get_inputs():
    return [torch.randn(batch, m, k), torch.randn(batch, k, n)]


def get_init_inputs():
    return []
