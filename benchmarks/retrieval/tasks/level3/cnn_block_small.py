import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8
in_channels = 3
width1 = 32
width2 = 64
image_size = 64
num_classes = 10


class ConvBNReLU(nn.Module):
    """3x3 convolution, inference-mode batch norm (running statistics), ReLU."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel_size=3, padding=1, bias=False)
        self.gamma = nn.Parameter(1.0 + 0.1 * torch.randn(cout))
        self.beta = nn.Parameter(0.1 * torch.randn(cout))
        self.register_buffer("mean", 0.1 * torch.randn(cout))
        self.register_buffer("var", 1.0 + 0.1 * torch.rand(cout))

    def forward(self, x):
        y = F.batch_norm(self.conv(x), self.mean, self.var, self.gamma, self.beta, training=False)
        return F.relu(y)


class Model(nn.Module):
    """A small image classifier: two (conv-BN-ReLU, 2x2 max pool) stages, global average pooling,
    a linear classifier."""

    def __init__(self, in_channels: int, width1: int, width2: int, num_classes: int):
        super().__init__()
        self.stage1 = ConvBNReLU(in_channels, width1)
        self.stage2 = ConvBNReLU(width1, width2)
        self.fc = nn.Linear(width2, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(self.stage1(x), 2)
        x = F.max_pool2d(self.stage2(x), 2)
        x = x.mean(dim=(2, 3))
        return self.fc(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, image_size, image_size)]


def get_init_inputs():
    return [in_channels, width1, width2, num_classes]
