import torch
import torch.nn as nn

batch_size = 2
in_channels = 8
out_channels = 16
depth = 16
height = 32
width = 32


class Model(nn.Module):
    """Volumetric (3-D) convolution with a 3x3x3 kernel and padding 1."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size=3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
