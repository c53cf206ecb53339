import torch
import torch.nn as nn

batch_size = 4
in_channels = 64
out_channels = 128
groups = 4
height = 32
width = 32


class Model(nn.Module):
    """Grouped 3x3 convolution: channels split into 4 groups, each convolved independently."""

    def __init__(self, in_channels: int, out_channels: int, groups: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1, groups=groups)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, groups]
