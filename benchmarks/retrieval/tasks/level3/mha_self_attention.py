import torch
import torch.nn as nn

batch_size = 4
seq_len = 128
embed_dim = 256
num_heads = 8


class Model(nn.Module):
    """Self-attention through nn.MultiheadAttention (input projection, 8 heads, output projection);
    only the attended output is returned."""

    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        self.attn = nn.MultiheadAttention(embed_dim, num_heads, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.attn(x, x, x, need_weights=False)
        return out


def get_inputs():
    return [torch.randn(batch_size, seq_len, embed_dim)]


def get_init_inputs():
    return [embed_dim, num_heads]
