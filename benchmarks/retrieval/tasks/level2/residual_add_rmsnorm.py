import torch
import torch.nn as nn

batch_size = 16
seq_len = 128
hidden = 1024
eps = 1e-6


class Model(nn.Module):
    """Residual add followed by RMSNorm with a learned weight, over the hidden dimension (the
    pre-norm step of a transformer layer)."""

    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))
        self.eps = eps

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        h = x + residual
        inv = torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return h * inv * self.weight


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden), torch.randn(batch_size, seq_len, hidden)]


def get_init_inputs():
    return [hidden, eps]
