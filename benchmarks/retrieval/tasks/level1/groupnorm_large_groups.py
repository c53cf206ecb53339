import torch
import torch.nn as nn

batch_size = 4
channels = 64
groups = 4
height = 128
width = 128


class Model(nn.Module):
    """GroupNorm with few, large groups: 4 groups of 16 channels x 128 x 128 = 262144 values each,
    16 (sample, group) slices in all."""

    def __init__(self, channels: int, groups: int):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels, groups]
