import torch
import torch.nn as nn

batch_size = 16
in_channels = 24
out_channels = 64
height = 48
width = 48
scale = 1.5


class Model(nn.Module):
    """5x5 convolution, tanh, a constant scale and a learned per-channel shift, then the maximum
    over the channels at every pixel (one value per pixel)."""

    def __init__(self, in_channels: int, out_channels: int, scale: float):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=5, padding=2)
        self.scale = scale
        self.shift = nn.Parameter(0.05 * torch.randn(out_channels, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.tanh(self.conv(x)) * self.scale + self.shift
        return torch.amax(y, dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, scale]
