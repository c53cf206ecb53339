"""diag(a) @ B on the CPU without the GEMM: out[i, :] = a[i] * B[i, :].

The reference materializes an N x N diagonal matrix and runs an O(N^2 M) matrix product whose
every term but one per output is a multiplication by zero. Row i of the product is just row i
of B scaled by a[i], so this kernel is a single O(N M) streaming pass: rows are split across
OpenMP threads and each row is one unit-stride, auto-vectorized multiply by a broadcast scalar.
The result is bit-identical to the GEMM (the zero terms add exactly nothing).
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SRC = r"""
#include <torch/extension.h>

torch::Tensor diag_matmul_forward(torch::Tensor a, torch::Tensor B) {
    TORCH_CHECK(a.device().is_cpu() && B.device().is_cpu(), "tensors must be on the CPU");
    TORCH_CHECK(a.scalar_type() == torch::kFloat32 && B.scalar_type() == torch::kFloat32,
                "tensors must be float32");
    TORCH_CHECK(a.dim() == 1 && B.dim() == 2 && B.size(0) == a.size(0),
                "expected a of shape (N,) and B of shape (N, M)");
    a = a.contiguous();
    B = B.contiguous();
    const int64_t N = B.size(0), M = B.size(1);
    auto out = torch::empty({N, M}, B.options());
    const float* __restrict ap = a.data_ptr<float>();
    const float* __restrict bp = B.data_ptr<float>();
    float* __restrict op = out.data_ptr<float>();
    #pragma omp parallel for schedule(static) if (N * M > 32768)
    for (int64_t i = 0; i < N; ++i) {
        const float s = ap[i];
        const float* __restrict br = bp + i * M;
        float* __restrict orow = op + i * M;
        #pragma omp simd
        for (int64_t j = 0; j < M; ++j) orow[j] = s * br[j];
    }
    return out;
}
"""

_ext = load_inline(
    name="diag_matmul_cpp_row_scale",
    cpp_sources=_CPP_SRC,
    functions=["diag_matmul_forward"],
    extra_cflags=["-O3", "-march=native", "-mprefer-vector-width=512", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return _ext.diag_matmul_forward(a, B)
