"""2-D max pooling (NCHW) on the GPU: each thread produces 4 adjacent outputs of one row.

For the 3x3 / stride-2 window (compile-time K and S), a thread computing outputs ow..ow+3 needs
only 3*S + K = 9 input columns per window row instead of 4*9 = 36 loads for four separate
outputs; it keeps them in registers, takes the maxima, and writes the 4 results with one
float4 store. Neighbouring threads read neighbouring input spans, so loads coalesce and the
overlap between windows is served by L1. Unlike eager max_pool2d, which also computes and
writes an int64 index tensor (twice the size of the output in bytes), nothing but the output
is written: ~30% less HBM traffic. Padding is handled as -inf by bounds checks, NaN wins as in
PyTorch. Other window shapes use a generic one-output-per-thread kernel.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_DECL = "torch::Tensor maxpool2d_forward(torch::Tensor x, int64_t k, int64_t s, int64_t p);"

_CUDA_SRC = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cstdint>

// max that lets NaN win, like PyTorch's pooling.
__device__ __forceinline__ float nanmax(float m, float v) { return (v > m || v != v) ? v : m; }

constexpr int OPT = 4;   // outputs per thread along W

template <int K, int S>
__global__ void __launch_bounds__(256)
maxpool_rowtile_kernel(const float* __restrict__ x, float* __restrict__ y,
                       int H, int W, int Ho, int Wo, int P, int64_t total, bool vec_store) {
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= total) return;
    const int Wq = (Wo + OPT - 1) / OPT;
    const int q = (int)(t % Wq);
    const int64_t r = t / Wq;
    const int oh = (int)(r % Ho);
    const int64_t plane = r / Ho;
    const float* xp = x + plane * (int64_t)H * W;
    const int ow0 = q * OPT;
    constexpr int NC = (OPT - 1) * S + K;      // input columns this thread touches
    const int iw0 = ow0 * S - P;
    const int ih0 = oh * S - P;
    float m[OPT];
    #pragma unroll
    for (int j = 0; j < OPT; ++j) m[j] = -INFINITY;
    #pragma unroll
    for (int kh = 0; kh < K; ++kh) {
        const int ih = ih0 + kh;
        if (ih < 0 || ih >= H) continue;
        const float* xr = xp + (int64_t)ih * W;
        float c[NC];
        #pragma unroll
        for (int u = 0; u < NC; ++u) {
            const int iw = iw0 + u;
            c[u] = (iw >= 0 && iw < W) ? __ldg(xr + iw) : -INFINITY;
        }
        #pragma unroll
        for (int j = 0; j < OPT; ++j) {
            #pragma unroll
            for (int kw = 0; kw < K; ++kw) m[j] = nanmax(m[j], c[j * S + kw]);
        }
    }
    float* yr = y + (plane * Ho + oh) * (int64_t)Wo;
    if (vec_store) {   // Wo % 4 == 0 and y 16-byte aligned: the group is whole and aligned
        *reinterpret_cast<float4*>(yr + ow0) = make_float4(m[0], m[1], m[2], m[3]);
    } else {
        #pragma unroll
        for (int j = 0; j < OPT; ++j) if (ow0 + j < Wo) yr[ow0 + j] = m[j];
    }
}

__global__ void maxpool_generic_kernel(const float* __restrict__ x, float* __restrict__ y,
                                       int H, int W, int Ho, int Wo, int K, int S, int P, int64_t total) {
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= total) return;
    const int ow = (int)(t % Wo);
    const int64_t r = t / Wo;
    const int oh = (int)(r % Ho);
    const int64_t plane = r / Ho;
    const float* xp = x + plane * (int64_t)H * W;
    float m = -INFINITY;
    for (int kh = 0; kh < K; ++kh) {
        const int ih = oh * S - P + kh;
        if (ih < 0 || ih >= H) continue;
        for (int kw = 0; kw < K; ++kw) {
            const int iw = ow * S - P + kw;
            if (iw < 0 || iw >= W) continue;
            m = nanmax(m, __ldg(xp + (int64_t)ih * W + iw));
        }
    }
    y[t] = m;
}

torch::Tensor maxpool2d_forward(torch::Tensor x, int64_t k, int64_t s, int64_t p) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
    TORCH_CHECK(x.dim() == 4, "x must be NCHW");
    TORCH_CHECK(k > 0 && s > 0 && p >= 0 && 2 * p <= k, "invalid pooling parameters");
    const c10::cuda::CUDAGuard guard(x.device());
    const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    TORCH_CHECK(H < (1LL << 30) && W < (1LL << 30), "spatial size too large");
    const int64_t Ho = (H + 2 * p - k) / s + 1, Wo = (W + 2 * p - k) / s + 1;
    TORCH_CHECK(Ho > 0 && Wo > 0, "input too small for the pooling window");
    auto y = torch::empty({N, C, Ho, Wo}, x.options());
    if (y.numel() == 0) return y;
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const float* xp = x.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    const int64_t planes = N * C;
    if (k == 3 && s == 2) {
        const int64_t total = planes * Ho * ((Wo + OPT - 1) / OPT);
        const bool vec_store = Wo % 4 == 0 && reinterpret_cast<uintptr_t>(yp) % 16 == 0;
        maxpool_rowtile_kernel<3, 2><<<(unsigned)((total + 255) / 256), 256, 0, stream>>>(
            xp, yp, (int)H, (int)W, (int)Ho, (int)Wo, (int)p, total, vec_store);
    } else if (k == 2 && s == 2) {
        const int64_t total = planes * Ho * ((Wo + OPT - 1) / OPT);
        const bool vec_store = Wo % 4 == 0 && reinterpret_cast<uintptr_t>(yp) % 16 == 0;
        maxpool_rowtile_kernel<2, 2><<<(unsigned)((total + 255) / 256), 256, 0, stream>>>(
            xp, yp, (int)H, (int)W, (int)Ho, (int)Wo, (int)p, total, vec_store);
    } else {
        const int64_t total = planes * Ho * Wo;
        maxpool_generic_kernel<<<(unsigned)((total + 255) / 256), 256, 0, stream>>>(
            xp, yp, (int)H, (int)W, (int)Ho, (int)Wo, (int)k, (int)s, (int)p, total);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

_ext = load_inline(
    name="maxpool2d_cuda_rowtile",
    cpp_sources=_CPP_DECL,
    cuda_sources=_CUDA_SRC,
    functions=["maxpool2d_forward"],
    extra_cuda_cflags=["-O3"],
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
