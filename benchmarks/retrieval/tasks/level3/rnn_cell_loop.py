import torch
import torch.nn as nn

batch_size = 32
seq_len = 48
input_size = 128
hidden_size = 256


class Model(nn.Module):
    """An Elman RNN written as a Python loop over time: h = tanh(W_ih x_t + W_hh h + b) at each
    step; returns the final hidden state."""

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.input_proj = nn.Linear(input_size, hidden_size)
        self.hidden_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.hidden_size = hidden_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.zeros(x.size(0), self.hidden_size, dtype=x.dtype, device=x.device)
        for t in range(x.size(1)):
            h = torch.tanh(self.input_proj(x[:, t, :]) + self.hidden_proj(h))
        return h


def get_inputs():
    return [torch.randn(batch_size, seq_len, input_size)]


def get_init_inputs():
    return [input_size, hidden_size]
