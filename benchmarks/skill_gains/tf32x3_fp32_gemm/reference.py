import torch
import torch.nn as nn

# A compute-bound float32 GEMM (2 x 4096 x 4096 x 1024 = 34 GFLOP) at the default tolerance, shaped
# like a linear layer: unit-variance activations times weights at nn.Linear's scale (1/sqrt(K)), so
# outputs are of order 1. Eager runs cuBLAS's fp32 SGEMM on the CUDA cores (TF32 is off by default
# for matmuls); TF32 tensor cores alone (10-bit mantissa, ~5e-4 per product) miss 1e-4. With both
# operands unit-variance (outputs ~32) even 3xTF32 missed atol 1e-4 on 0.006 % of the outputs, the
# near-cancelling ones, on an H100 (docs/skills.md): the tensor cores' accumulation is not IEEE
# fp32's round-to-nearest.
M = 4096
K = 1024
N = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return A @ B


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N) * K ** -0.5]


def get_init_inputs():
    return []
