import torch
import torch.nn as nn

# Fused chain (level 2): a fully connected layer followed by ReLU, y = relu(x W^T + b).
batch_size = 8192
in_features = 2048
out_features = 4096


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.linear(x))


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
