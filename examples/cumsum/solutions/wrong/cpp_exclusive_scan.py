# expect: incorrect -- an off-by-one: each output gets the running sum before its own element is added (an exclusive scan), so y[i] = x[0] + ... + x[i-1] instead of torch.cumsum's inclusive x[0] + ... + x[i].
"""Prefix sum along the last dim on the CPU, one row per OpenMP task (WRONG: exclusive scan).

Plausible bug: the store and the accumulate are in the wrong order inside the loop, a classic
scan off-by-one (y[0] comes out 0 and every element lags by one).
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SRC = r"""
#include <torch/extension.h>

torch::Tensor cumsum_forward(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32, "x must be a float32 CPU tensor");
    TORCH_CHECK(dim == -1 || dim == x.dim() - 1, "only the last dim is supported");
    x = x.contiguous();
    auto y = torch::empty_like(x);
    const int64_t D = x.size(-1);
    const int64_t rows = x.numel() / D;
    const float* xp = x.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        double acc = 0.0;
        for (int64_t i = 0; i < D; ++i) {
            yp[r * D + i] = (float)acc;      // BUG: stored before adding x[i]
            acc += (double)xp[r * D + i];
        }
    }
    return y;
}
"""

_ext = load_inline(
    name="cumsum_wrong_exclusive_scan",
    cpp_sources=_CPP_SRC,
    functions=["cumsum_forward"],
    extra_cflags=["-O3", "-march=native", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.cumsum_forward(x, self.dim)
