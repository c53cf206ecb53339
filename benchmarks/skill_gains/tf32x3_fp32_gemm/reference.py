import torch
import torch.nn as nn

# A compute-bound float32 GEMM (2 x 4096 x 4096 x 1024 = 34 GFLOP) at the default tolerance: eager
# runs cuBLAS's fp32 SGEMM on the CUDA cores (TF32 is off by default for matmuls), and TF32 tensor
# cores alone (10-bit mantissa, ~5e-4 per product) miss 1e-4 on outputs of magnitude ~30.
M = 4096
K = 1024
N = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return A @ B


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
