import torch
import torch.nn as nn
import torch.nn.functional as F

tokens = 1024
d_model = 1024
d_hidden = 4096


class Model(nn.Module):
    """An MLP's expansion layer on a batch of tokens: nn.Linear (with bias) followed by the exact
    (erf) GELU."""

    def __init__(self, d_model: int, d_hidden: int):
        super().__init__()
        self.fc = nn.Linear(d_model, d_hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.fc(x))


def get_inputs():
    return [torch.randn(tokens, d_model)]


def get_init_inputs():
    return [d_model, d_hidden]
