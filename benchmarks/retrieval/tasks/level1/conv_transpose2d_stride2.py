import torch
import torch.nn as nn

batch_size = 8
in_channels = 32
out_channels = 16
height = 32
width = 32


class Model(nn.Module):
    """Transposed 2-D convolution that doubles the resolution (kernel 4, stride 2, padding 1)."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.deconv = nn.ConvTranspose2d(in_channels, out_channels, kernel_size=4, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.deconv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
