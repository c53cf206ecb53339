import torch
import torch.nn as nn

batch_size = 8
features = 64
height = 64
width = 64
eps = 1e-5


class Model(nn.Module):
    """RMS normalization across the channel dimension (dim 1) of an image batch, without weights:
    every pixel's feature vector is divided by its root mean square."""

    def __init__(self, eps: float):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.sqrt(torch.mean(x * x, dim=1, keepdim=True) + self.eps)
        return x / rms


def get_inputs():
    return [torch.randn(batch_size, features, height, width)]


def get_init_inputs():
    return [eps]
