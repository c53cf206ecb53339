"""LayerNorm on the GPU: one block per row, the row held in registers, exact two-pass moments.

A 256-thread block loads its row once with coalesced float4 loads into registers (NV float4
per thread, a template parameter: 8 for hidden = 8192). The mean and then the variance are
two block reductions (warp shuffles + one value per warp in shared memory) over the cached
values, so the variance is the numerically exact sum of squared deviations without a second
trip to memory, and y = (x - mean) * rstd * weight + bias is written with float4 stores
(weight and bias are read through the read-only cache and stay L2-resident across rows).
HBM traffic is the minimum: one read of x, one write of y. Rows that do not fit the register
tiling (or are unaligned / not a multiple of 4) use a generic three-sweep kernel.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_DECL = "torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps);"

_CUDA_SRC = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cstdint>

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

__device__ __forceinline__ float block_sum(float v, float* red) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
    __syncthreads();
    float r = threadIdx.x < kWarps ? red[threadIdx.x] : 0.0f;
    if (threadIdx.x < 32) {
        #pragma unroll
        for (int o = 16; o > 0; o >>= 1) r += __shfl_xor_sync(0xffffffffu, r, o);
    }
    if (threadIdx.x == 0) red[kWarps] = r;
    __syncthreads();
    return red[kWarps];   // the next call writes red[0..kWarps) only after its own barrier
}

template <int NV>
__global__ void __launch_bounds__(kThreads)
layernorm_regcache_kernel(const float* __restrict__ x, const float* __restrict__ w,
                          const float* __restrict__ b, float* __restrict__ y, int H, float eps) {
    __shared__ float red[2][kWarps + 1];
    const int64_t row = blockIdx.x;
    const float4* xr = reinterpret_cast<const float4*>(x + row * H);
    float4* yr = reinterpret_cast<float4*>(y + row * H);
    const float4* w4 = reinterpret_cast<const float4*>(w);
    const float4* b4 = reinterpret_cast<const float4*>(b);
    const int H4 = H / 4;
    float4 v[NV];
    float s = 0.0f;
    #pragma unroll
    for (int j = 0; j < NV; ++j) {
        const int i = j * kThreads + threadIdx.x;
        if (i < H4) {
            v[j] = __ldcs(xr + i);
            s += (v[j].x + v[j].y) + (v[j].z + v[j].w);
        }
    }
    const float mean = block_sum(s, red[0]) / (float)H;
    float q = 0.0f;
    #pragma unroll
    for (int j = 0; j < NV; ++j) {
        const int i = j * kThreads + threadIdx.x;
        if (i < H4) {
            const float dx = v[j].x - mean, dy = v[j].y - mean, dz = v[j].z - mean, dw = v[j].w - mean;
            q += (dx * dx + dy * dy) + (dz * dz + dw * dw);
        }
    }
    const float rstd = rsqrtf(block_sum(q, red[1]) / (float)H + eps);
    #pragma unroll
    for (int j = 0; j < NV; ++j) {
        const int i = j * kThreads + threadIdx.x;
        if (i < H4) {
            const float4 ww = __ldg(w4 + i), bb = __ldg(b4 + i);
            float4 o;
            o.x = (v[j].x - mean) * rstd * ww.x + bb.x;
            o.y = (v[j].y - mean) * rstd * ww.y + bb.y;
            o.z = (v[j].z - mean) * rstd * ww.z + bb.z;
            o.w = (v[j].w - mean) * rstd * ww.w + bb.w;
            __stcs(yr + i, o);
        }
    }
}

// Any H, any alignment: mean sweep, variance sweep, write sweep (re-reads hit L2 for moderate H).
__global__ void __launch_bounds__(kThreads)
layernorm_generic_kernel(const float* __restrict__ x, const float* __restrict__ w,
                         const float* __restrict__ b, float* __restrict__ y, int64_t H, float eps) {
    __shared__ float red[2][kWarps + 1];
    const int64_t row = blockIdx.x;
    const float* xr = x + row * H;
    float* yr = y + row * H;
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < H; i += kThreads) s += xr[i];
    const float mean = block_sum(s, red[0]) / (float)H;
    float q = 0.0f;
    for (int64_t i = threadIdx.x; i < H; i += kThreads) { const float d = xr[i] - mean; q += d * d; }
    const float rstd = rsqrtf(block_sum(q, red[1]) / (float)H + eps);
    for (int64_t i = threadIdx.x; i < H; i += kThreads) yr[i] = (xr[i] - mean) * rstd * w[i] + b[i];
}

torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "tensors must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32 &&
                bias.scalar_type() == torch::kFloat32, "tensors must be float32");
    TORCH_CHECK(x.is_contiguous() && weight.is_contiguous() && bias.is_contiguous(), "tensors must be contiguous");
    const c10::cuda::CUDAGuard guard(x.device());
    const int64_t H = x.size(-1);
    TORCH_CHECK(weight.numel() == H && bias.numel() == H, "weight/bias must have hidden elements");
    auto y = torch::empty_like(x);
    if (x.numel() == 0) return y;
    const int64_t rows = x.numel() / H;
    TORCH_CHECK(rows <= 0x7fffffffLL, "too many rows");
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const float* xp = x.data_ptr<float>();
    const float* wp = weight.data_ptr<float>();
    const float* bp = bias.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    auto al = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    const bool aligned = al(xp) && al(wp) && al(bp) && al(yp);
    const int64_t need = (H / 4 + kThreads - 1) / kThreads;
    const unsigned grid = (unsigned)rows;
    const float e = (float)eps;
    if (aligned && H % 4 == 0 && need <= 16) {
        const int h = (int)H;
        if (need <= 1) layernorm_regcache_kernel<1><<<grid, kThreads, 0, stream>>>(xp, wp, bp, yp, h, e);
        else if (need <= 2) layernorm_regcache_kernel<2><<<grid, kThreads, 0, stream>>>(xp, wp, bp, yp, h, e);
        else if (need <= 4) layernorm_regcache_kernel<4><<<grid, kThreads, 0, stream>>>(xp, wp, bp, yp, h, e);
        else if (need <= 8) layernorm_regcache_kernel<8><<<grid, kThreads, 0, stream>>>(xp, wp, bp, yp, h, e);
        else layernorm_regcache_kernel<16><<<grid, kThreads, 0, stream>>>(xp, wp, bp, yp, h, e);
    } else {
        layernorm_generic_kernel<<<grid, kThreads, 0, stream>>>(xp, wp, bp, yp, H, e);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

_ext = load_inline(
    name="layernorm_cuda_regcache",
    cpp_sources=_CPP_DECL,
    cuda_sources=_CUDA_SRC,
    functions=["layernorm_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.ln = nn.LayerNorm(hidden, eps=eps)   # same parameter names as the reference
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.layernorm_forward(x, self.ln.weight, self.ln.bias, self.eps)
