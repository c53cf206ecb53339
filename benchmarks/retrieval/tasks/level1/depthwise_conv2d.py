import torch
import torch.nn as nn

batch_size = 8
channels = 64
height = 56
width = 56


class Model(nn.Module):
    """Depthwise 3x3 convolution: one filter per channel (groups == channels), padding 1."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size=3, padding=1, groups=channels, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels]
