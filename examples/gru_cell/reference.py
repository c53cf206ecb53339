import torch
import torch.nn as nn

# Small architecture (level 3): one GRU cell step written with explicit Linear layers
# (the same equations and gate order r, z, n as torch.nn.GRUCell):
#   r = sigmoid(W_ir x + b_ir + W_hr h + b_hr)
#   z = sigmoid(W_iz x + b_iz + W_hz h + b_hz)
#   n = tanh(W_in x + b_in + r * (W_hn h + b_hn))
#   h' = (1 - z) * n + z * h
batch_size = 8192
input_size = 512
hidden_size = 1024


class Model(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.x2h = nn.Linear(input_size, 3 * hidden_size)
        self.h2h = nn.Linear(hidden_size, 3 * hidden_size)

    def forward(self, x, h):
        gi = self.x2h(x)
        gh = self.h2h(h)
        i_r, i_z, i_n = gi.chunk(3, dim=1)
        h_r, h_z, h_n = gh.chunk(3, dim=1)
        r = torch.sigmoid(i_r + h_r)
        z = torch.sigmoid(i_z + h_z)
        n = torch.tanh(i_n + r * h_n)
        return (1 - z) * n + z * h


def get_inputs():
    return [torch.randn(batch_size, input_size), torch.randn(batch_size, hidden_size)]


def get_init_inputs():
    return [input_size, hidden_size]
