import torch
import torch.nn as nn

batch_size = 512
dim = 1024
margin = 1.0


class Model(nn.Module):
    """Triplet margin loss: mean over the batch of max(d(a, p) - d(a, n) + margin, 0), with d the
    Euclidean distance between embedding rows."""

    def __init__(self, margin: float):
        super().__init__()
        self.loss = nn.TripletMarginLoss(margin=margin)

    def forward(self, anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor) -> torch.Tensor:
        return self.loss(anchor, positive, negative)


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return [margin]
