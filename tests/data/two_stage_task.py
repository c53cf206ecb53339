# A model with named stages, as level-2/3 models have: which layer launched which kernel is what the
# profile's per-module table answers (issue 44, item 4).
import torch
import torch.nn as nn

batch_size = 4
channels = 8
size = 48


class Block(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.stem = Block(channels, 16)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        return self.head(self.stem(x).mean((2, 3))) * 2.0


def get_inputs():
    return [torch.randn(batch_size, channels, size, size)]


def get_init_inputs():
    return [channels]
