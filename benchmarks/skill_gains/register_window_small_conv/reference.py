import torch
import torch.nn as nn

# A dense stride-1 3x3 convolution with few channels: K = C_in * taps = 27 per output.
batch_size = 32
in_channels = 3
out_channels = 16
height = 224
width = 224


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
