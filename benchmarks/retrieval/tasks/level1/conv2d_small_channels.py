import torch
import torch.nn as nn

batch_size = 16
in_channels = 3
out_channels = 16
height = 224
width = 224


class Model(nn.Module):
    """A dense 3x3 stride-1 convolution with few channels (an RGB stem, 3 -> 16), no bias."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
