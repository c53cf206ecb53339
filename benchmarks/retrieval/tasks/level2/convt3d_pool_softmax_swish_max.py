import torch
import torch.nn as nn

batch_size = 8
in_channels = 3
out_channels = 8
depth = 8
height = 16
width = 16


class Model(nn.Module):
    """A small-channel stride-2 ConvTranspose3d (3 -> 8 channels), 2x2x2 max-pool, softmax over the
    channels, a per-channel subtract, swish, then the maximum over the channels."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.ConvTranspose3d(in_channels, out_channels, kernel_size=3, stride=2, padding=1, output_padding=1)
        self.pool = nn.MaxPool3d(2)
        self.sub = nn.Parameter(0.05 * torch.randn(out_channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.softmax(self.pool(self.conv(x)), dim=1) - self.sub.view(1, -1, 1, 1, 1)
        y = y * torch.sigmoid(y)
        return torch.amax(y, dim=1)


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
