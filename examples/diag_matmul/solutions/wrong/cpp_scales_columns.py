# expect: incorrect -- scales column j by a[j] (that is B @ diag(a)) instead of row i by a[i] (diag(a) @ B); with N = M the shapes match, only the values are wrong.
"""diag(a) @ B on the CPU as an elementwise scaling (WRONG: scales columns, not rows).

Plausible bug: the right idea (no GEMM, just a broadcast multiply) with the wrong broadcast
axis, which the square default shapes do not catch at the shape check.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SRC = r"""
#include <torch/extension.h>

torch::Tensor diag_matmul_forward(torch::Tensor a, torch::Tensor B) {
    TORCH_CHECK(a.device().is_cpu() && B.device().is_cpu(), "tensors must be on the CPU");
    TORCH_CHECK(a.dim() == 1 && B.dim() == 2 && B.size(0) == a.size(0), "expected a (N,) and B (N, M)");
    TORCH_CHECK(B.size(1) <= a.size(0), "a is indexed by column");
    a = a.contiguous();
    B = B.contiguous();
    const int64_t N = B.size(0), M = B.size(1);
    auto out = torch::empty({N, M}, B.options());
    const float* ap = a.data_ptr<float>();
    const float* bp = B.data_ptr<float>();
    float* op = out.data_ptr<float>();
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < N; ++i) {
        #pragma omp simd
        for (int64_t j = 0; j < M; ++j) op[i * M + j] = ap[j] * bp[i * M + j];   // BUG: should be ap[i]
    }
    return out;
}
"""

_ext = load_inline(
    name="diag_matmul_wrong_scales_columns",
    cpp_sources=_CPP_SRC,
    functions=["diag_matmul_forward"],
    extra_cflags=["-O3", "-march=native", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return _ext.diag_matmul_forward(a, B)
