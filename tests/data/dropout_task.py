# KernelBench level2 66_Matmul_Dropout_Softmax, small: the module is never put in eval(), so the
# dropout draws a fresh mask on every call; only the seed set before the call fixes it.
import torch
import torch.nn as nn

batch_size = 16
in_features = 32
out_features = 24
dropout_p = 0.5


class Model(nn.Module):
    def __init__(self, in_features, out_features, dropout_p):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, x):
        return torch.softmax(self.dropout(self.matmul(x)), dim=1)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, dropout_p]
