"""LayerNorm on the CPU: one thread per row block, two vectorized reductions and a fused apply.

A row (hidden floats, 4 KB at the small preset) stays in L1 while its thread makes two
unit-stride `omp simd` sweeps: one that accumulates sum(d) and sum(d^2) of the shifted data
d = x - x[0] (the shift keeps E[d^2] - E[d]^2 free of catastrophic cancellation, so one pass
gives the moments), and the fused output y = (x - mean) * (rstd * weight) + bias. The input is
read from memory once and the output written once; weight and bias stay cache-resident.
-mprefer-vector-width=512 lets GCC use 16-wide vectors where the CPU has AVX-512.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SRC = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
    TORCH_CHECK(x.device().is_cpu() && weight.device().is_cpu() && bias.device().is_cpu(),
                "tensors must be on the CPU");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32 &&
                bias.scalar_type() == torch::kFloat32, "tensors must be float32");
    const int64_t H = x.size(-1);
    TORCH_CHECK(weight.numel() == H && bias.numel() == H, "weight/bias must have hidden elements");
    x = x.contiguous();
    weight = weight.contiguous();
    bias = bias.contiguous();
    auto y = torch::empty_like(x);
    if (x.numel() == 0) return y;
    const int64_t rows = x.numel() / H;
    const float* __restrict xp = x.data_ptr<float>();
    const float* __restrict wp = weight.data_ptr<float>();
    const float* __restrict bp = bias.data_ptr<float>();
    float* __restrict yp = y.data_ptr<float>();
    const float inv_h = 1.0f / (float)H;
    const float feps = (float)eps;
    #pragma omp parallel for schedule(static) if (rows * H > 16384)
    for (int64_t r = 0; r < rows; ++r) {
        const float* __restrict xr = xp + r * H;
        float* __restrict yr = yp + r * H;
        // Shifted one-pass moments: with d = x - x[0], var = E[d^2] - E[d]^2 does not cancel
        // catastrophically because the shift puts the data within a few std of zero.
        const float K = xr[0];
        float s = 0.0f, q = 0.0f;
        #pragma omp simd reduction(+:s, q)
        for (int64_t i = 0; i < H; ++i) {
            const float d = xr[i] - K;
            s += d;
            q += d * d;
        }
        const float md = s * inv_h;
        float var = q * inv_h - md * md;
        var = var > 0.0f ? var : 0.0f;
        const float mean = K + md;
        const float rstd = 1.0f / std::sqrt(var + feps);
        #pragma omp simd
        for (int64_t i = 0; i < H; ++i) yr[i] = (xr[i] - mean) * (rstd * wp[i]) + bp[i];
    }
    return y;
}
"""

_ext = load_inline(
    name="layernorm_cpp_openmp",
    cpp_sources=_CPP_SRC,
    functions=["layernorm_forward"],
    extra_cflags=["-O3", "-march=native", "-mprefer-vector-width=512", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.ln = nn.LayerNorm(hidden, eps=eps)   # same parameter names as the reference
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.layernorm_forward(x, self.ln.weight, self.ln.bias, self.eps)
