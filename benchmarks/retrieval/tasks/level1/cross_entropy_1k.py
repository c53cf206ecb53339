import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 512
num_classes = 1000


class Model(nn.Module):
    """Mean cross-entropy loss of logits over 1000 classes against integer targets."""

    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, targets)


def get_inputs():
    return [torch.randn(batch_size, num_classes), torch.randint(0, num_classes, (batch_size,))]


def get_init_inputs():
    return []
