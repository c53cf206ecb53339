import torch
import torch.nn as nn

batch_size = 2
in_channels = 16
out_channels = 8
depth = 8
height = 16
width = 16


class Model(nn.Module):
    """Transposed 3-D convolution (kernel 3, stride 2, padding 1, output padding 1): upsamples a
    volume by two in every spatial dimension."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.deconv = nn.ConvTranspose3d(in_channels, out_channels, kernel_size=3, stride=2,
                                         padding=1, output_padding=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.deconv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
