import torch, torch.nn as nn

N = 4096


class Model(nn.Module):
    """C = tril(A) @ tril(B): the product of two lower-triangular matrices (itself lower-triangular).

    Only the lower triangles of A and B are read, so the result is defined for any inputs;
    get_inputs hands over matrices that are already lower-triangular.
    """

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(torch.tril(A), torch.tril(B))


def get_inputs():
    return [torch.tril(torch.randn(N, N)), torch.tril(torch.randn(N, N))]


def get_init_inputs():
    return []
