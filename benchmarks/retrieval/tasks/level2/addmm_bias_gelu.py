import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 256
in_features = 768
out_features = 3072


class Model(nn.Module):
    """The first half of a transformer MLP: torch.addmm(bias, x, W) followed by tanh-approximated GELU."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(in_features, out_features) / in_features ** 0.5)
        self.bias = nn.Parameter(torch.randn(out_features) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(torch.addmm(self.bias, x, self.weight), approximate="tanh")


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
