# expect: incorrect -- divides the sum of squared deviations by H - 1 (unbiased, torch.var's default) instead of H as LayerNorm does; every output is off by a factor ~sqrt((H-1)/H), ~5e-4 relative at H = 1024.
"""LayerNorm on the CPU, two-pass moments per row with OpenMP (WRONG: unbiased variance).

Plausible bug: the author reached for the sample variance. The structure is otherwise the
same as a correct kernel: per row a mean sweep, a squared-deviation sweep, and a fused
apply sweep, rows split across OpenMP threads.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SRC = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32, "x must be a float32 CPU tensor");
    const int64_t H = x.size(-1);
    x = x.contiguous();
    weight = weight.contiguous();
    bias = bias.contiguous();
    auto y = torch::empty_like(x);
    const int64_t rows = x.numel() / H;
    const float* xp = x.data_ptr<float>();
    const float* wp = weight.data_ptr<float>();
    const float* bp = bias.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = xp + r * H;
        float* yr = yp + r * H;
        float s = 0.0f;
        #pragma omp simd reduction(+:s)
        for (int64_t i = 0; i < H; ++i) s += xr[i];
        const float mean = s / (float)H;
        float q = 0.0f;
        #pragma omp simd reduction(+:q)
        for (int64_t i = 0; i < H; ++i) { const float d = xr[i] - mean; q += d * d; }
        const float var = q / (float)(H - 1);          // BUG: LayerNorm uses the biased variance (/ H)
        const float rstd = 1.0f / std::sqrt(var + (float)eps);
        #pragma omp simd
        for (int64_t i = 0; i < H; ++i) yr[i] = (xr[i] - mean) * rstd * wp[i] + bp[i];
    }
    return y;
}
"""

_ext = load_inline(
    name="layernorm_wrong_unbiased_variance",
    cpp_sources=_CPP_SRC,
    functions=["layernorm_forward"],
    extra_cflags=["-O3", "-march=native", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.ln = nn.LayerNorm(hidden, eps=eps)
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.layernorm_forward(x, self.ln.weight, self.ln.bias, self.eps)
