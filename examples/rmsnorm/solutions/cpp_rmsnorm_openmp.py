"""RMSNorm on the CPU: rows split across OpenMP threads, one reduction sweep and one apply sweep.

Per row, a vectorized `omp simd` reduction computes sum(x^2) while the row streams into L1,
then one fused sweep writes y = x * (rsqrt(mean + eps)) * weight. The input is read from
memory once (the second sweep hits L1) and the output written once; the weight row stays
cache-resident across all rows a thread handles. No temporaries: eager PyTorch materializes
x^2, its mean, x * rms and the final product as separate tensors.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SRC = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor rmsnorm_forward(torch::Tensor x, torch::Tensor weight, double eps) {
    TORCH_CHECK(x.device().is_cpu() && weight.device().is_cpu(), "tensors must be on the CPU");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32,
                "tensors must be float32");
    const int64_t H = x.size(-1);
    TORCH_CHECK(weight.numel() == H, "weight must have hidden elements");
    x = x.contiguous();
    weight = weight.contiguous();
    auto y = torch::empty_like(x);
    if (x.numel() == 0) return y;
    const int64_t rows = x.numel() / H;
    const float* __restrict xp = x.data_ptr<float>();
    const float* __restrict wp = weight.data_ptr<float>();
    float* __restrict yp = y.data_ptr<float>();
    const float inv_h = 1.0f / (float)H;
    const float feps = (float)eps;
    #pragma omp parallel for schedule(static) if (rows * H > 16384)
    for (int64_t r = 0; r < rows; ++r) {
        const float* __restrict xr = xp + r * H;
        float* __restrict yr = yp + r * H;
        float q = 0.0f;
        #pragma omp simd reduction(+:q)
        for (int64_t i = 0; i < H; ++i) q += xr[i] * xr[i];
        const float rms = 1.0f / std::sqrt(q * inv_h + feps);
        #pragma omp simd
        for (int64_t i = 0; i < H; ++i) yr[i] = (xr[i] * rms) * wp[i];
    }
    return y;
}
"""

_ext = load_inline(
    name="rmsnorm_cpp_openmp",
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
        self.weight = nn.Parameter(torch.ones(hidden))   # overwritten by the reference's state dict

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.rmsnorm_forward(x, self.weight, self.eps)
