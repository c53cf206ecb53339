import torch
import torch.nn as nn

batch_size = 32
in_channels = 8
out_channels = 32
height = 96
width = 96
scale = -1.25
pool = 4


class Model(nn.Module):
    """3x3 convolution, tanh, a negative constant scale and a per-channel bias, then a 4x4 max-pool:
    the tail is monotone (decreasing, for the negative scale) and constant over each pooling window."""

    def __init__(self, in_channels: int, out_channels: int, scale: float, pool: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)
        self.scale = scale
        self.bias = nn.Parameter(0.1 * torch.randn(out_channels, 1, 1))
        self.pool = nn.MaxPool2d(pool)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(torch.tanh(self.conv(x)) * self.scale + self.bias)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, scale, pool]
