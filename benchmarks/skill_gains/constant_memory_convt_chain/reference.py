import torch
import torch.nn as nn

# A small-channel transposed conv and its whole tail: pool, softmax over the 16 channels, subtract,
# swish, max over the channels. Output [N, 1, H, W]: the 16-channel 2H x 2W conv output is the
# largest tensor of the chain.
batch_size = 64
in_channels = 3
out_channels = 16
height = 128
width = 128


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.ConvTranspose2d(in_channels, out_channels, kernel_size=3, stride=2, padding=1, output_padding=1)
        self.pool = nn.MaxPool2d(2)
        self.sub = nn.Parameter(0.05 * torch.randn(out_channels))

    def forward(self, x):
        y = torch.softmax(self.pool(self.conv(x)), dim=1) - self.sub.view(1, -1, 1, 1)
        y = y * torch.sigmoid(y)
        return torch.amax(y, dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
