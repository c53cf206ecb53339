# expect: incorrect -- reduces the last axis (contiguous rows) and writes the result into the keepdim shape of dim 1; with dim1 == dim2 at the small preset the shape matches, the values do not.
"""Sum over dim 1 on the CPU with OpenMP (WRONG: sums the contiguous last axis instead).

Plausible bug: the author wrote the easy, cache-friendly row reduction (stride 1) and
reshaped its output to what the reference returns, mixing up which axis is contiguous.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SRC = r"""
#include <torch/extension.h>
#include <vector>

torch::Tensor sum_dim_forward(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32 && x.dim() == 3, "x must be a 3-D float32 CPU tensor");
    x = x.contiguous();
    const int64_t B = x.size(0), D1 = x.size(1), D2 = x.size(2);
    std::vector<int64_t> out_sizes = {B, D1, D2};
    out_sizes[dim] = 1;
    auto y = torch::empty(out_sizes, x.options());
    TORCH_CHECK(y.numel() == B * D1, "output size mismatch");
    const float* xp = x.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < B * D1; ++r) {       // BUG: rows of the last axis, not columns of dim 1
        double acc = 0.0;
        #pragma omp simd reduction(+:acc)
        for (int64_t i = 0; i < D2; ++i) acc += (double)xp[r * D2 + i];
        yp[r] = (float)acc;
    }
    return y;
}
"""

_ext = load_inline(
    name="sum_reduce_wrong_axis",
    cpp_sources=_CPP_SRC,
    functions=["sum_dim_forward"],
    extra_cflags=["-O3", "-march=native", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.sum_dim_forward(x, self.dim)
