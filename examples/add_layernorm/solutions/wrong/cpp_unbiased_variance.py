# expect: incorrect -- the variance is divided by (H - 1) (unbiased, torch.var's default) instead of H
"""WRONG C++ CPU candidate (kept on purpose for the evaluator's tests).

Same fused residual-add + LayerNorm as cpp_fused_rows.py, but the variance uses Bessel's
correction, as torch.var does by default.  LayerNorm uses the biased variance, so every
normalized value is scaled by sqrt((H - 1) / H): a relative error of about 1 / (2H)
(1.7e-3 at the small preset's H = 300), far above the 1e-4 tolerance.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cpp_source = r"""
#include <torch/extension.h>
#include <omp.h>
#include <cmath>

torch::Tensor add_layernorm_forward(torch::Tensor x, torch::Tensor res, torch::Tensor weight,
                                    torch::Tensor bias, double eps) {
    TORCH_CHECK(!x.is_cuda() && !res.is_cuda(), "CPU tensors expected");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && res.scalar_type() == torch::kFloat32 &&
                weight.scalar_type() == torch::kFloat32 && bias.scalar_type() == torch::kFloat32,
                "float32 tensors expected");
    TORCH_CHECK(x.sizes() == res.sizes(), "x and residual must have the same shape");
    TORCH_CHECK(x.is_contiguous() && res.is_contiguous() && weight.is_contiguous() && bias.is_contiguous(),
                "contiguous tensors expected");
    const int64_t H = x.size(-1);
    TORCH_CHECK(weight.numel() == H && bias.numel() == H, "weight/bias must have hidden_size elements");
    const int64_t rows = H == 0 ? 0 : x.numel() / H;

    auto out = torch::empty_like(x);
    const float* __restrict__ xp = x.data_ptr<float>();
    const float* __restrict__ rp = res.data_ptr<float>();
    const float* __restrict__ wp = weight.data_ptr<float>();
    const float* __restrict__ bp = bias.data_ptr<float>();
    float* __restrict__ op = out.data_ptr<float>();
    constexpr int L = 16;
    const float inv_h = 1.0f / (float)H;

    #pragma omp parallel for schedule(static) if(rows * H > 32768)
    for (int64_t row = 0; row < rows; ++row) {
        const float* a = xp + row * H;
        const float* b = rp + row * H;
        float* o = op + row * H;
        // pass 1: s = x + residual (stored in the output row), and its sum
        float acc[L] = {0.f};
        int64_t i = 0;
        for (; i + L <= H; i += L) {
            #pragma omp simd
            for (int l = 0; l < L; ++l) { const float s = a[i + l] + b[i + l]; o[i + l] = s; acc[l] += s; }
        }
        float tail = 0.f;
        for (; i < H; ++i) { const float s = a[i] + b[i]; o[i] = s; tail += s; }
        float sum = tail;
        for (int l = 0; l < L; ++l) sum += acc[l];
        const float mean = sum * inv_h;
        // pass 2: biased variance around the mean, from the L1-resident row
        float vacc[L] = {0.f};
        i = 0;
        for (; i + L <= H; i += L) {
            #pragma omp simd
            for (int l = 0; l < L; ++l) { const float d = o[i + l] - mean; vacc[l] += d * d; }
        }
        float var = 0.f;
        for (; i < H; ++i) { const float d = o[i] - mean; var += d * d; }
        for (int l = 0; l < L; ++l) var += vacc[l];
        const float rstd = 1.0f / std::sqrt(var / (float)(H - 1) + (float)eps);  // BUG: unbiased
        // pass 3: normalize + affine, in place
        #pragma omp simd
        for (int64_t j = 0; j < H; ++j) o[j] = (o[j] - mean) * rstd * wp[j] + bp[j];
    }
    return out;
}
"""

_module = load_inline(
    name="add_layernorm_cpp_wrong_unbiased_var",
    cpp_sources=_cpp_source,
    functions=["add_layernorm_forward"],
    extra_cflags=["-O3", "-march=native", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.norm = nn.LayerNorm(hidden_size, eps=1e-5)

    def forward(self, x, residual):
        return _module.add_layernorm_forward(x.contiguous(), residual.contiguous(),
                                             self.norm.weight, self.norm.bias, self.norm.eps)
