import torch
import torch.nn as nn

batch_size = 16
channels = 64
height = 32
width = 32


class Model(nn.Module):
    """Batch normalization in training mode: per-channel mean and variance over the batch and both
    spatial dimensions, then the affine transform."""

    def __init__(self, channels: int):
        super().__init__()
        self.bn = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels]
