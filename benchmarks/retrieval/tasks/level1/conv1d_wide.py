import torch
import torch.nn as nn

batch_size = 16
in_channels = 32
out_channels = 64
length = 2048
kernel_size = 7


class Model(nn.Module):
    """1-D convolution over a long sequence, 'same' padding, with bias."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, length)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
