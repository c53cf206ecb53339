import torch
import torch.nn as nn

batch_size = 8
seq_len = 64
input_size = 64
hidden_size = 128
num_layers = 2


class Model(nn.Module):
    """Two-layer LSTM over a sequence (zero initial state); returns the top layer's last hidden
    output."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int):
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers=num_layers, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x)
        return out[:, -1, :]


def get_inputs():
    return [torch.randn(batch_size, seq_len, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, num_layers]
