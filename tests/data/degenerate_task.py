import torch
import torch.nn as nn

batch_size = 64
dim = 1000


class Model(nn.Module):
    """Its output is zero whatever the input: any 'speedup' on it would mean nothing."""

    def forward(self, x):
        return torch.relu(x) * 0.0


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
