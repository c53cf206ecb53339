import torch
import torch.nn as nn

batch_size = 16
in_channels = 16
out_channels = 32
height = 64
width = 64


class Model(nn.Module):
    """3x3 convolution with a bias, then BatchNorm2d in training mode (batch statistics, running
    statistics updated): the batch mean subtracts the conv bias again."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1, bias=True)
        self.bn = nn.BatchNorm2d(out_channels)
        self.train()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.conv(x))


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
