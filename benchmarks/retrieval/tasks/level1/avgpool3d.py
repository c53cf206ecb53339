import torch
import torch.nn as nn

batch_size = 4
channels = 16
depth = 16
height = 32
width = 32


class Model(nn.Module):
    """3-D average pooling over non-overlapping 2x2x2 windows."""

    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool3d(kernel_size=2, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(batch_size, channels, depth, height, width)]


def get_init_inputs():
    return []
