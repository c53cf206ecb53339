import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# Small architecture (level 3): one pre-norm transformer encoder block.
#   h = x + Proj(MHSA(LN1(x)))      (self-attention written with explicit matmuls)
#   y = h + FC2(GELU(FC1(LN2(h))))
batch_size = 8
seq_len = 512
embed_dim = 768
num_heads = 12
mlp_ratio = 4


class Model(nn.Module):
    def __init__(self, embed_dim, num_heads, mlp_ratio):
        super().__init__()
        assert embed_dim % num_heads == 0
        self.num_heads = num_heads
        self.ln1 = nn.LayerNorm(embed_dim)
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.proj = nn.Linear(embed_dim, embed_dim)
        self.ln2 = nn.LayerNorm(embed_dim)
        self.fc1 = nn.Linear(embed_dim, mlp_ratio * embed_dim)
        self.fc2 = nn.Linear(mlp_ratio * embed_dim, embed_dim)

    def forward(self, x):
        B, S, E = x.shape
        H = self.num_heads
        D = E // H
        qkv = self.qkv(self.ln1(x)).reshape(B, S, 3, H, D).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]                      # (B, H, S, D)
        att = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(D)
        att = torch.softmax(att, dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(B, S, E)
        x = x + self.proj(y)
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
        return x


def get_inputs():
    return [torch.randn(batch_size, seq_len, embed_dim)]


def get_init_inputs():
    return [embed_dim, num_heads, mlp_ratio]
