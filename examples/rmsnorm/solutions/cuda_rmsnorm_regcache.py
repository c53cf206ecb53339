"""RMSNorm on the GPU: one fused kernel, one block per row, the row held in registers.

Eager PyTorch runs x.pow(2), mean, +eps, rsqrt, and two broadcasts as separate kernels, moving
the (batch, hidden) tensor through HBM about five times. Here a 256-thread block loads its row
once with coalesced float4 loads into registers (NV float4 per thread, a template parameter:
4 for hidden = 4096), reduces sum(x^2) with warp shuffles and one shared-memory step, and writes
y = x * rsqrt(mean + eps) * weight with float4 stores: one read of x, one write of y.
Rows that do not fit the register tiling (or are unaligned / not a multiple of 4) use a
generic two-sweep kernel.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_DECL = "torch::Tensor rmsnorm_forward(torch::Tensor x, torch::Tensor weight, double eps);"

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
    return red[kWarps];
}

template <int NV>
__global__ void __launch_bounds__(kThreads)
rmsnorm_regcache_kernel(const float* __restrict__ x, const float* __restrict__ w,
                        float* __restrict__ y, int H, float eps) {
    __shared__ float red[kWarps + 1];
    const int64_t row = blockIdx.x;
    const float4* xr = reinterpret_cast<const float4*>(x + row * H);
    float4* yr = reinterpret_cast<float4*>(y + row * H);
    const float4* w4 = reinterpret_cast<const float4*>(w);
    const int H4 = H / 4;
    float4 v[NV];
    float q = 0.0f;
    #pragma unroll
    for (int j = 0; j < NV; ++j) {
        const int i = j * kThreads + threadIdx.x;
        if (i < H4) {
            v[j] = __ldcs(xr + i);
            q += (v[j].x * v[j].x + v[j].y * v[j].y) + (v[j].z * v[j].z + v[j].w * v[j].w);
        }
    }
    const float r = rsqrtf(block_sum(q, red) / (float)H + eps);
    #pragma unroll
    for (int j = 0; j < NV; ++j) {
        const int i = j * kThreads + threadIdx.x;
        if (i < H4) {
            const float4 ww = __ldg(w4 + i);
            __stcs(yr + i, make_float4(v[j].x * r * ww.x, v[j].y * r * ww.y, v[j].z * r * ww.z, v[j].w * r * ww.w));
        }
    }
}

__global__ void __launch_bounds__(kThreads)
rmsnorm_generic_kernel(const float* __restrict__ x, const float* __restrict__ w,
                       float* __restrict__ y, int64_t H, float eps) {
    __shared__ float red[kWarps + 1];
    const int64_t row = blockIdx.x;
    const float* xr = x + row * H;
    float* yr = y + row * H;
    float q = 0.0f;
    for (int64_t i = threadIdx.x; i < H; i += kThreads) q += xr[i] * xr[i];
    const float r = rsqrtf(block_sum(q, red) / (float)H + eps);
    for (int64_t i = threadIdx.x; i < H; i += kThreads) yr[i] = xr[i] * r * w[i];
}

torch::Tensor rmsnorm_forward(torch::Tensor x, torch::Tensor weight, double eps) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda(), "tensors must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32,
                "tensors must be float32");
    TORCH_CHECK(x.is_contiguous() && weight.is_contiguous(), "tensors must be contiguous");
    const c10::cuda::CUDAGuard guard(x.device());
    const int64_t H = x.size(-1);
    TORCH_CHECK(weight.numel() == H, "weight must have hidden elements");
    auto y = torch::empty_like(x);
    if (x.numel() == 0) return y;
    const int64_t rows = x.numel() / H;
    TORCH_CHECK(rows <= 0x7fffffffLL, "too many rows");
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const float* xp = x.data_ptr<float>();
    const float* wp = weight.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    auto al = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    const bool aligned = al(xp) && al(wp) && al(yp);
    const int64_t need = (H / 4 + kThreads - 1) / kThreads;
    const unsigned grid = (unsigned)rows;
    const float e = (float)eps;
    if (aligned && H % 4 == 0 && need <= 16) {
        const int h = (int)H;
        if (need <= 1) rmsnorm_regcache_kernel<1><<<grid, kThreads, 0, stream>>>(xp, wp, yp, h, e);
        else if (need <= 2) rmsnorm_regcache_kernel<2><<<grid, kThreads, 0, stream>>>(xp, wp, yp, h, e);
        else if (need <= 4) rmsnorm_regcache_kernel<4><<<grid, kThreads, 0, stream>>>(xp, wp, yp, h, e);
        else if (need <= 8) rmsnorm_regcache_kernel<8><<<grid, kThreads, 0, stream>>>(xp, wp, yp, h, e);
        else rmsnorm_regcache_kernel<16><<<grid, kThreads, 0, stream>>>(xp, wp, yp, h, e);
    } else {
        rmsnorm_generic_kernel<<<grid, kThreads, 0, stream>>>(xp, wp, yp, H, e);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

_ext = load_inline(
    name="rmsnorm_cuda_regcache",
    cpp_sources=_CPP_DECL,
    cuda_sources=_CUDA_SRC,
    functions=["rmsnorm_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden))   # overwritten by the reference's state dict

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.rmsnorm_forward(x, self.weight, self.eps)
