import torch, torch.nn as nn

batch_size = 4096
hidden = 8192
eps = 1e-5


class Model(nn.Module):
    """LayerNorm over the last dimension of a (batch, hidden) tensor, with affine weight and bias."""

    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.ln = nn.LayerNorm(hidden, eps=eps)
        # Non-trivial affine parameters, so a kernel that ignores them cannot pass.
        with torch.no_grad():
            self.ln.weight.normal_(1.0, 0.5)
            self.ln.bias.normal_(0.0, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


def get_inputs():
    return [torch.randn(batch_size, hidden) * 2.0 + 0.5]


def get_init_inputs():
    return [hidden, eps]
