import torch
import torch.nn as nn

batch_size = 256
in_features = 1024
out_features = 512
scale = 1.5


class Model(nn.Module):
    """Linear layer, then SiLU (x * sigmoid(x)), a scalar scale and a learned per-feature bias."""

    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(out_features) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        y = y * torch.sigmoid(y)
        return y * self.scale + self.bias


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale]
