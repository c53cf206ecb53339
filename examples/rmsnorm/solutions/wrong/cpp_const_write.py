# expect: compile_error -- the kernel normalizes in place through `const float*` pointers (it scales the input row and then copies it), which C++ rejects: assignment of read-only location.
"""RMSNorm on the CPU, in-place row scaling with OpenMP (WRONG: does not compile).

Plausible bug: the author tried to save the output allocation by scaling x's rows in place,
but x's data pointer was taken as `const float*`, so the build fails. (Writing into the input
would also be wrong: the evaluator checks that inputs are left unchanged.)
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SRC = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor rmsnorm_forward(torch::Tensor x, torch::Tensor weight, double eps) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32, "x must be a float32 CPU tensor");
    x = x.contiguous();
    const int64_t H = x.size(-1);
    const int64_t rows = x.numel() / H;
    const float* xp = x.data_ptr<float>();
    const float* wp = weight.data_ptr<float>();
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = xp + r * H;
        float q = 0.0f;
        for (int64_t i = 0; i < H; ++i) q += xr[i] * xr[i];
        const float s = 1.0f / std::sqrt(q / (float)H + (float)eps);
        for (int64_t i = 0; i < H; ++i) xr[i] = xr[i] * s * wp[i];   // BUG: write through const float*
    }
    return x.clone();
}
"""

_ext = load_inline(
    name="rmsnorm_wrong_const_write",
    cpp_sources=_CPP_SRC,
    functions=["rmsnorm_forward"],
    extra_cflags=["-O3", "-march=native", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.rmsnorm_forward(x, self.weight, self.eps)
