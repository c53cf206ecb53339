import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16
in_channels = 48
out_channels = 96
groups = 12
height = 24
width = 24


class Model(nn.Module):
    """A stride-2 transposed convolution (4x4 kernel) that doubles the resolution, exact GELU,
    then GroupNorm: the upsampling conv does the arithmetic, the rest is a pointwise op and a
    per-group normalization over its output."""

    def __init__(self, in_channels: int, out_channels: int, groups: int):
        super().__init__()
        self.up = nn.ConvTranspose2d(in_channels, out_channels, kernel_size=4, stride=2, padding=1)
        self.norm = nn.GroupNorm(groups, out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(F.gelu(self.up(x)))


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, groups]
