import torch
import torch.nn as nn

batch_size = 256
dim = 4096


class Model(nn.Module):
    """Hinge loss mean(max(0, 1 - y * s)) of scores s against labels y in {-1, +1}."""

    def __init__(self):
        super().__init__()

    def forward(self, scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return torch.mean(torch.clamp(1 - scores * labels, min=0))


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randint(0, 2, (batch_size, dim)).float() * 2 - 1]


def get_init_inputs():
    return []
