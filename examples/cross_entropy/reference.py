import torch, torch.nn as nn
import torch.nn.functional as F

batch_size = 4096
num_classes = 32000


class Model(nn.Module):
    """Mean cross-entropy loss of (batch, classes) logits against int64 class targets."""

    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, targets)


def get_inputs():
    return [torch.randn(batch_size, num_classes) * 2.0, torch.randint(0, num_classes, (batch_size,))]


def get_init_inputs():
    return []
