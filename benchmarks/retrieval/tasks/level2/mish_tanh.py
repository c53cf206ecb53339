import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16
channels = 64
height = 32
width = 32


class Model(nn.Module):
    """Mish activation (x * tanh(softplus(x))) followed by tanh, on an image batch."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * torch.tanh(F.softplus(x))
        return torch.tanh(y)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return []
