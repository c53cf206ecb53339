import torch, torch.nn as nn

batch_size = 8192
hidden = 4096
eps = 1e-6


class Model(nn.Module):
    """RMSNorm over the last dimension: x * rsqrt(mean(x^2) + eps) * weight (LLaMA style)."""

    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return x * rms * self.weight


def get_inputs():
    return [torch.randn(batch_size, hidden)]


def get_init_inputs():
    return [hidden, eps]
