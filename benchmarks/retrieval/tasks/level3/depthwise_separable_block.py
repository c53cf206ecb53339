import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8
in_channels = 32
out_channels = 64
height = 56
width = 56


def frozen_bn(channels: int) -> nn.BatchNorm2d:
    bn = nn.BatchNorm2d(channels)
    bn.running_mean.normal_(0.0, 0.1)
    bn.running_var.uniform_(0.8, 1.2)
    return bn


class Model(nn.Module):
    """MobileNet-style depthwise-separable block at inference: depthwise 3x3 conv, BN, ReLU6,
    pointwise 1x1 conv, BN, ReLU6 (batch norms with running statistics)."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.dw = nn.Conv2d(in_channels, in_channels, 3, padding=1, groups=in_channels, bias=False)
        self.pw = nn.Conv2d(in_channels, out_channels, 1, bias=False)
        self.bn1 = frozen_bn(in_channels)
        self.bn2 = frozen_bn(out_channels)

    def _bn(self, x, bn):
        return F.batch_norm(x, bn.running_mean, bn.running_var, bn.weight, bn.bias, training=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu6(self._bn(self.dw(x), self.bn1))
        return F.relu6(self._bn(self.pw(x), self.bn2))


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
