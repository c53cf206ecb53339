import torch
import torch.nn as nn

batch_size = 8
in_channels = 32
out_channels = 64
height = 32
width = 32


class Model(nn.Module):
    """3x3 convolution, ReLU, a learned per-channel bias added after the activation, then a
    learned per-channel scale."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)
        self.post_bias = nn.Parameter(0.1 * torch.randn(out_channels, 1, 1))
        self.post_scale = nn.Parameter(1.0 + 0.1 * torch.randn(out_channels, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv(x))
        return (y + self.post_bias) * self.post_scale


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
