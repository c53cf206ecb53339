import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16
channels = 64
height = 32
width = 32


class Model(nn.Module):
    """Two consecutive per-channel affine transforms ((x * a + b) * c + d, broadcast over the
    feature map), then GELU."""

    def __init__(self, channels: int):
        super().__init__()
        self.a = nn.Parameter(1.0 + 0.1 * torch.randn(channels, 1, 1))
        self.b = nn.Parameter(0.1 * torch.randn(channels, 1, 1))
        self.c = nn.Parameter(1.0 + 0.1 * torch.randn(channels, 1, 1))
        self.d = nn.Parameter(0.1 * torch.randn(channels, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * self.a + self.b
        y = y * self.c + self.d
        return F.gelu(y)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels]
