import torch
import torch.nn as nn

# A conv with a bias feeding a training-mode BatchNorm: the batch mean subtracts the bias again.
batch_size = 32
in_channels = 16
out_channels = 64
height = 64
width = 64


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1, bias=True)
        self.bn = nn.BatchNorm2d(out_channels)
        with torch.no_grad():
            self.conv.bias.uniform_(-2.0, 2.0)          # a bias large enough to matter
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.5, 0.5)
        self.train()

    def forward(self, x):
        return self.bn(self.conv(x))


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
