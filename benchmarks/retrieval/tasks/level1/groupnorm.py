import torch
import torch.nn as nn

batch_size = 8
channels = 64
groups = 8
height = 64
width = 64


class Model(nn.Module):
    """Group normalization: statistics over each group of 8 channels and the whole feature map."""

    def __init__(self, groups: int, channels: int):
        super().__init__()
        self.gn = nn.GroupNorm(groups, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gn(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [groups, channels]
