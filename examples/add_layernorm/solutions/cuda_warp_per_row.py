"""CUDA solution: residual add + LayerNorm fused, one warp per row, the row held in registers.

Eager PyTorch writes x + residual to HBM and LayerNorm reads it back (3 reads + 2 writes
per element); this kernel does 2 reads + 1 write, the floor.  Each warp owns one row: every
lane loads its float4 slices of x and residual (16-byte coalesced loads), keeps the sums
in registers, and the mean and then the variance around it (two-pass: no catastrophic
cancellation) are reduced with __shfl_xor_sync alone -- no shared memory, no
__syncthreads.  Rows are independent; 4 warps (rows) per block and up to 8 float4 loads per
lane per input keep plenty of bytes in flight.  The row length is a template parameter
(float4s per lane), chosen at run time from {1, 2, 4, 8, 16}; rows wider than 2048 or not
16-byte aligned take a general block-per-row kernel that works for any size.
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

// Fast path: one warp per row, row (H floats, H % 4 == 0, H <= 128 * V4) kept in registers.
template <int V4>
__global__ void __launch_bounds__(256)
add_ln_warp_kernel(const float* __restrict__ x, const float* __restrict__ r,
                   const float* __restrict__ w, const float* __restrict__ b,
                   float* __restrict__ y, int64_t rows, int H, float eps) {
    const int lane = threadIdx.x & 31;
    const int64_t row = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= rows) return;                       // whole warp exits together
    const int H4 = H >> 2;
    const float4* x4 = reinterpret_cast<const float4*>(x + row * H);
    const float4* r4 = reinterpret_cast<const float4*>(r + row * H);
    float4 v[V4];
    float sum = 0.f;
    #pragma unroll
    for (int j = 0; j < V4; ++j) {
        const int c = lane + 32 * j;
        if (c < H4) {
            const float4 a = x4[c], q = r4[c];
            v[j] = make_float4(a.x + q.x, a.y + q.y, a.z + q.z, a.w + q.w);
            sum += (v[j].x + v[j].y) + (v[j].z + v[j].w);
        } else {
            v[j] = make_float4(0.f, 0.f, 0.f, 0.f);
        }
    }
    const float inv_h = 1.0f / (float)H;
    const float mean = warp_sum(sum) * inv_h;
    float sq = 0.f;
    #pragma unroll
    for (int j = 0; j < V4; ++j) {
        if (lane + 32 * j < H4) {
            const float dx = v[j].x - mean, dy = v[j].y - mean, dz = v[j].z - mean, dw = v[j].w - mean;
            sq += (dx * dx + dy * dy) + (dz * dz + dw * dw);
        }
    }
    const float rstd = rsqrtf(warp_sum(sq) * inv_h + eps);
    const float4* w4 = reinterpret_cast<const float4*>(w);
    const float4* b4 = reinterpret_cast<const float4*>(b);
    float4* y4 = reinterpret_cast<float4*>(y + row * H);
    #pragma unroll
    for (int j = 0; j < V4; ++j) {
        const int c = lane + 32 * j;
        if (c < H4) {
            const float4 g = __ldg(w4 + c), be = __ldg(b4 + c);
            float4 o;
            o.x = (v[j].x - mean) * rstd * g.x + be.x;
            o.y = (v[j].y - mean) * rstd * g.y + be.y;
            o.z = (v[j].z - mean) * rstd * g.z + be.z;
            o.w = (v[j].w - mean) * rstd * g.w + be.w;
            y4[c] = o;
        }
    }
}

// General path: one block per row, any H and alignment; three passes over the row (L1/L2-resident).
__device__ __forceinline__ float block_sum(float v, float* sh) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();                               // sh may still be read from a previous call
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    v = lane < nw ? sh[lane] : 0.f;
    return warp_sum(v);                            // every warp computes the total
}

__global__ void __launch_bounds__(512)
add_ln_block_kernel(const float* __restrict__ x, const float* __restrict__ r,
                    const float* __restrict__ w, const float* __restrict__ b,
                    float* __restrict__ y, int H, float eps) {
    __shared__ float sh[32];
    const int64_t base = (int64_t)blockIdx.x * H;
    float s = 0.f;
    for (int c = threadIdx.x; c < H; c += blockDim.x) s += x[base + c] + r[base + c];
    const float mean = block_sum(s, sh) / (float)H;
    float q = 0.f;
    for (int c = threadIdx.x; c < H; c += blockDim.x) {
        const float d = x[base + c] + r[base + c] - mean;
        q += d * d;
    }
    const float rstd = rsqrtf(block_sum(q, sh) / (float)H + eps);
    for (int c = threadIdx.x; c < H; c += blockDim.x)
        y[base + c] = (x[base + c] + r[base + c] - mean) * rstd * w[c] + b[c];
}

torch::Tensor add_layernorm_forward(torch::Tensor x, torch::Tensor res, torch::Tensor weight,
                                    torch::Tensor bias, double eps) {
    TORCH_CHECK(x.is_cuda() && res.is_cuda() && weight.is_cuda() && bias.is_cuda(), "CUDA tensors expected");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && res.scalar_type() == torch::kFloat32 &&
                weight.scalar_type() == torch::kFloat32 && bias.scalar_type() == torch::kFloat32,
                "float32 tensors expected");
    TORCH_CHECK(x.sizes() == res.sizes(), "x and residual must have the same shape");
    TORCH_CHECK(x.is_contiguous() && res.is_contiguous() && weight.is_contiguous() && bias.is_contiguous(),
                "contiguous tensors expected");
    const int64_t H64 = x.size(-1);
    TORCH_CHECK(H64 > 0 && H64 <= INT_MAX, "bad hidden size");
    const int H = (int)H64;
    TORCH_CHECK(weight.numel() == H && bias.numel() == H, "weight/bias must have hidden_size elements");
    const int64_t rows = x.numel() / H;
    auto y = torch::empty_like(x);
    if (rows == 0) return y;

    const float* xp = x.data_ptr<float>(); const float* rp = res.data_ptr<float>();
    const float* wp = weight.data_ptr<float>(); const float* bp = bias.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    const bool aligned = ((reinterpret_cast<uintptr_t>(xp) | reinterpret_cast<uintptr_t>(rp) |
                           reinterpret_cast<uintptr_t>(wp) | reinterpret_cast<uintptr_t>(bp) |
                           reinterpret_cast<uintptr_t>(yp)) & 15) == 0;
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const float e = (float)eps;
    if (aligned && H % 4 == 0 && H <= 2048) {
        const int warps = 4;
        const int64_t blocks = (rows + warps - 1) / warps;
        const int v4 = (H / 4 + 31) / 32;
        #define LAUNCH(V) add_ln_warp_kernel<V><<<blocks, warps * 32, 0, stream>>>(xp, rp, wp, bp, yp, rows, H, e)
        if (v4 <= 1) LAUNCH(1);
        else if (v4 <= 2) LAUNCH(2);
        else if (v4 <= 4) LAUNCH(4);
        else if (v4 <= 8) LAUNCH(8);
        else LAUNCH(16);
        #undef LAUNCH
    } else {
        const int threads = H >= 4096 ? 512 : 256;
        add_ln_block_kernel<<<rows, threads, 0, stream>>>(xp, rp, wp, bp, yp, H, e);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

_cpp_source = ("torch::Tensor add_layernorm_forward(torch::Tensor x, torch::Tensor res, torch::Tensor weight, "
               "torch::Tensor bias, double eps);")

_module = load_inline(
    name="add_layernorm_cuda_warp_rows",
    cpp_sources=_cpp_source,
    cuda_sources=_cuda_source,
    functions=["add_layernorm_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.norm = nn.LayerNorm(hidden_size, eps=1e-5)

    def forward(self, x, residual):
        return _module.add_layernorm_forward(x.contiguous(), residual.contiguous(),
                                             self.norm.weight.contiguous(), self.norm.bias.contiguous(),
                                             self.norm.eps)
