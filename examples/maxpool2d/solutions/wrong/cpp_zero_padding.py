# expect: incorrect -- treats the padding as zeros instead of -inf, so every border window whose real inputs are all negative returns 0 instead of its (negative) maximum; with randn inputs that is a few percent of the border outputs.
"""2-D max pooling on the CPU, one output per iteration, planes across OpenMP (WRONG: zero pad).

Plausible bug: the window max starts from 0.0f (the "padded value" of a zero-padded conv)
instead of -inf, so padding positions effectively contribute 0 to every max.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SRC = r"""
#include <torch/extension.h>

torch::Tensor maxpool2d_forward(torch::Tensor x, int64_t k, int64_t s, int64_t p) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32 && x.dim() == 4, "x must be float32 NCHW on the CPU");
    x = x.contiguous();
    const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    const int64_t Ho = (H + 2 * p - k) / s + 1, Wo = (W + 2 * p - k) / s + 1;
    auto y = torch::empty({N, C, Ho, Wo}, x.options());
    const float* xp = x.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    #pragma omp parallel for schedule(static)
    for (int64_t pl = 0; pl < N * C; ++pl) {
        for (int64_t oh = 0; oh < Ho; ++oh) {
            for (int64_t ow = 0; ow < Wo; ++ow) {
                float m = 0.0f;                  // BUG: padding must act as -inf, not 0
                for (int64_t kh = 0; kh < k; ++kh) {
                    const int64_t ih = oh * s - p + kh;
                    if (ih < 0 || ih >= H) continue;
                    for (int64_t kw = 0; kw < k; ++kw) {
                        const int64_t iw = ow * s - p + kw;
                        if (iw < 0 || iw >= W) continue;
                        const float v = xp[(pl * H + ih) * W + iw];
                        m = v > m ? v : m;
                    }
                }
                yp[(pl * Ho + oh) * Wo + ow] = m;
            }
        }
    }
    return y;
}
"""

_ext = load_inline(
    name="maxpool2d_wrong_zero_padding",
    cpp_sources=_CPP_SRC,
    functions=["maxpool2d_forward"],
    extra_cflags=["-O3", "-march=native", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.maxpool2d_forward(x, self.kernel_size, self.stride, self.padding)
