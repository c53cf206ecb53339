"""CUDA solution: scale, mask add and softmax fused into one pass, one warp per row.

Eager PyTorch runs three kernels (x * scale, + mask, softmax) and writes two full-size
temporaries.  Here each warp owns one row of the (batch, heads, seq_q) x seq_k problem:
lanes load their slices of x with 16-byte streaming loads and of the broadcast mask row
(shared by every head and query of a batch entry, so it stays in L1/L2), form
x * scale + mask in registers, reduce the row max and the sum of exponentials with
__shfl_xor_sync only (no shared memory, no block barriers), and write the normalized row
once: one read and one write of x per element, the floor.  The row length is a template
parameter (elements per lane) chosen from {4..32}; a vectorized variant is used when
seq_k % 4 == 0 and pointers are 16-byte aligned, a scalar one otherwise.  Rows longer than
1024 take a block-per-row kernel with an online (running max / rescaled sum) first pass,
so any size and any mask broadcast (via strides) is handled.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

__device__ __forceinline__ float warp_sum(float v) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

struct MaskIdx {            // mask element (b, h, q, k) = m[b*s0 + h*s1 + q*s2 + k*s3]
    int64_t s0, s1, s2, s3;
    int H, Q;
    __device__ __forceinline__ int64_t row_offset(int64_t row) const {
        const int64_t q = row % Q, bh = row / Q;
        const int64_t h = bh % H, b = bh / H;
        return b * s0 + h * s1 + q * s2;
    }
};

// One warp per row; EPL = elements per lane; VEC: float4 slices (requires K % 4 == 0, mask s3 == 1).
template <int EPL, bool VEC>
__global__ void __launch_bounds__(256)
softmax_warp_kernel(const float* __restrict__ x, const float* __restrict__ m, MaskIdx mi,
                    float* __restrict__ y, int64_t rows, int K, float scale) {
    const int lane = threadIdx.x & 31;
    const int64_t row = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= rows) return;
    const float* xr = x + row * K;
    const float* mr = m + mi.row_offset(row);
    float v[EPL];
    float mx = -INFINITY;
    if (VEC) {
        #pragma unroll
        for (int j = 0; j < EPL / 4; ++j) {
            const int c = 4 * (lane + 32 * j);
            if (c < K) {
                const float4 a = __ldcs(reinterpret_cast<const float4*>(xr + c));
                const float4 b = __ldg(reinterpret_cast<const float4*>(mr + c));
                v[4 * j + 0] = fmaf(a.x, scale, b.x);
                v[4 * j + 1] = fmaf(a.y, scale, b.y);
                v[4 * j + 2] = fmaf(a.z, scale, b.z);
                v[4 * j + 3] = fmaf(a.w, scale, b.w);
            } else {
                v[4 * j + 0] = v[4 * j + 1] = v[4 * j + 2] = v[4 * j + 3] = -INFINITY;
            }
        }
    } else {
        #pragma unroll
        for (int j = 0; j < EPL; ++j) {
            const int c = lane + 32 * j;
            v[j] = c < K ? fmaf(__ldcs(xr + c), scale, __ldg(mr + (int64_t)c * mi.s3)) : -INFINITY;
        }
    }
    #pragma unroll
    for (int j = 0; j < EPL; ++j) mx = fmaxf(mx, v[j]);
    mx = warp_max(mx);
    float sum = 0.f;
    #pragma unroll
    for (int j = 0; j < EPL; ++j) { v[j] = __expf(v[j] - mx); sum += v[j]; }   // padding: exp(-inf) = 0
    const float inv = 1.0f / warp_sum(sum);
    float* yr = y + row * K;
    if (VEC) {
        #pragma unroll
        for (int j = 0; j < EPL / 4; ++j) {
            const int c = 4 * (lane + 32 * j);
            if (c < K)
                __stcs(reinterpret_cast<float4*>(yr + c),
                       make_float4(v[4 * j] * inv, v[4 * j + 1] * inv, v[4 * j + 2] * inv, v[4 * j + 3] * inv));
        }
    } else {
        #pragma unroll
        for (int j = 0; j < EPL; ++j) {
            const int c = lane + 32 * j;
            if (c < K) __stcs(yr + c, v[j] * inv);
        }
    }
}

// Long rows: one block per row. Pass 1: per-thread online max and rescaled sum; pass 2: write.
__global__ void __launch_bounds__(512)
softmax_block_kernel(const float* __restrict__ x, const float* __restrict__ m, MaskIdx mi,
                     float* __restrict__ y, int K, float scale) {
    __shared__ float sh_m[32], sh_s[32];
    const int64_t row = blockIdx.x;
    const float* xr = x + row * K;
    const float* mr = m + mi.row_offset(row);
    float mx = -INFINITY, s = 0.f;
    for (int c = threadIdx.x; c < K; c += blockDim.x) {
        const float t = fmaf(xr[c], scale, mr[(int64_t)c * mi.s3]);
        if (t > mx) { s = s * __expf(mx - t) + 1.f; mx = t; }
        else s += __expf(t - mx);
    }
    // combine (max, sum) pairs: warp level, then across warps
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float om = __shfl_xor_sync(0xffffffffu, mx, o), os = __shfl_xor_sync(0xffffffffu, s, o);
        const float nm = fmaxf(mx, om);
        s = (nm == -INFINITY) ? 0.f : s * __expf(mx - nm) + os * __expf(om - nm);
        mx = nm;
    }
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    if (lane == 0) { sh_m[wid] = mx; sh_s[wid] = s; }
    __syncthreads();
    mx = lane < nw ? sh_m[lane] : -INFINITY;
    s = lane < nw ? sh_s[lane] : 0.f;
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float om = __shfl_xor_sync(0xffffffffu, mx, o), os = __shfl_xor_sync(0xffffffffu, s, o);
        const float nm = fmaxf(mx, om);
        s = (nm == -INFINITY) ? 0.f : s * __expf(mx - nm) + os * __expf(om - nm);
        mx = nm;
    }
    const float inv = 1.0f / s;
    float* yr = y + row * K;
    for (int c = threadIdx.x; c < K; c += blockDim.x)
        yr[c] = __expf(fmaf(xr[c], scale, mr[(int64_t)c * mi.s3]) - mx) * inv;
}

torch::Tensor scale_mask_softmax(torch::Tensor x, torch::Tensor mask, double scale) {
    TORCH_CHECK(x.is_cuda() && mask.is_cuda(), "CUDA tensors expected");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && mask.scalar_type() == torch::kFloat32, "float32 expected");
    TORCH_CHECK(x.dim() == 4 && x.is_contiguous(), "x must be a contiguous 4-D tensor");
    TORCH_CHECK(mask.dim() <= 4, "mask must broadcast to x");
    auto me = mask.expand_as(x);                   // a view: broadcast dims get stride 0
    const int64_t B = x.size(0), Hh = x.size(1), Q = x.size(2), K64 = x.size(3);
    TORCH_CHECK(K64 <= INT_MAX && Hh <= INT_MAX && Q <= INT_MAX, "dims too large");
    const int K = (int)K64;
    auto y = torch::empty_like(x);
    const int64_t rows = B * Hh * Q;
    if (rows == 0 || K == 0) return y;
    MaskIdx mi{me.stride(0), me.stride(1), me.stride(2), me.stride(3), (int)Hh, (int)Q};
    const float* xp = x.data_ptr<float>();
    const float* mp = me.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    const float sc = (float)scale;
    const bool vec = (K % 4 == 0) && mi.s3 == 1 &&
                     ((mi.s0 | mi.s1 | mi.s2) % 4 == 0) &&
                     ((reinterpret_cast<uintptr_t>(xp) | reinterpret_cast<uintptr_t>(mp) |
                       reinterpret_cast<uintptr_t>(yp)) & 15) == 0;
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    if (K <= 1024) {
        const int warps = 8;
        const int64_t blocks = (rows + warps - 1) / warps;
        const int epl = (K + 31) / 32;
        #define LAUNCH(E) do { if (vec) softmax_warp_kernel<E, true><<<blocks, 256, 0, stream>>>(xp, mp, mi, yp, rows, K, sc); \
                               else softmax_warp_kernel<E, false><<<blocks, 256, 0, stream>>>(xp, mp, mi, yp, rows, K, sc); } while (0)
        if (epl <= 4) LAUNCH(4);
        else if (epl <= 8) LAUNCH(8);
        else if (epl <= 16) LAUNCH(16);
        else LAUNCH(32);
        #undef LAUNCH
    } else {
        softmax_block_kernel<<<rows, 512, 0, stream>>>(xp, mp, mi, yp, K, sc);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

_cpp_source = "torch::Tensor scale_mask_softmax(torch::Tensor x, torch::Tensor mask, double scale);"

_module = load_inline(
    name="scale_softmax_cuda_warp",
    cpp_sources=_cpp_source,
    cuda_sources=_cuda_source,
    functions=["scale_mask_softmax"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, mask):
        return _module.scale_mask_softmax(x.contiguous(), mask, float(self.scale))
