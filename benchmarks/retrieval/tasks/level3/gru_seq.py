import torch
import torch.nn as nn

batch_size = 16
seq_len = 32
input_size = 128
hidden_size = 256


class Model(nn.Module):
    """Single-layer GRU over a sequence with a given initial hidden state; returns every step's
    output."""

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.gru = nn.GRU(input_size, hidden_size, batch_first=True)

    def forward(self, x: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
        out, _ = self.gru(x, h0)
        return out


def get_inputs():
    return [torch.randn(batch_size, seq_len, input_size), torch.randn(1, batch_size, hidden_size)]


def get_init_inputs():
    return [input_size, hidden_size]
