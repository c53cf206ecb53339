import torch
import torch.nn as nn

batch_size = 8
in_channels = 32
out_channels = 64
height = 48
width = 48


class Model(nn.Module):
    """Standard 2-D convolution, 3x3 kernel, stride 1, padding 1, no bias."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
