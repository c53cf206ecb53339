import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 4
channels = 64
height = 32
width = 32


class Model(nn.Module):
    """ResNet basic block at inference: conv3x3-BN-ReLU-conv3x3-BN, identity shortcut added, ReLU.
    The batch norms use their running statistics."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.bn2 = nn.BatchNorm2d(channels)
        for bn in (self.bn1, self.bn2):
            bn.running_mean.normal_(0.0, 0.1)
            bn.running_var.uniform_(0.8, 1.2)
            bn.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(F.batch_norm(self.conv1(x), self.bn1.running_mean, self.bn1.running_var,
                                self.bn1.weight, self.bn1.bias, training=False))
        y = F.batch_norm(self.conv2(y), self.bn2.running_mean, self.bn2.running_var,
                         self.bn2.weight, self.bn2.bias, training=False)
        return F.relu(y + x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels]
