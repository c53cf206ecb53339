import torch
import torch.nn as nn

batch_size = 512
in_features = 1024
out_features = 2048
scale = 0.5


class Model(nn.Module):
    """Linear layer whose outputs are immediately summed over the feature dimension and scaled:
    one number per sample."""

    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        return torch.sum(y, dim=1, keepdim=True) * self.scale


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale]
