import torch
import torch.nn as nn

# Fused chain (level 2): residual add followed by LayerNorm over the hidden dimension.
batch_size = 32
seq_len = 512
hidden_size = 1024


class Model(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.norm = nn.LayerNorm(hidden_size, eps=1e-5)
        # Non-trivial affine parameters, so a kernel that skips them fails.
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x, residual):
        return self.norm(x + residual)


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden_size),
            torch.randn(batch_size, seq_len, hidden_size)]


def get_init_inputs():
    return [hidden_size]
