"""CUDA solution: cuBLAS for the two batched matrix products, and one custom kernel that
applies the 1/sqrt(d) scale and the softmax in place on the score matrix.

The score matrix (batch*heads x seq x seq floats, 512 MB at the default size) dominates the
memory traffic.  Eager PyTorch writes it (QK^T), reads and writes it for the division,
reads and writes it again for the softmax, then reads it for the second product: 6 passes.
Here QK^T is produced by one strided-batched cuBLAS SGEMM straight from the (B*H, S, D)
views (K^T is a transposed view, no copy), the scale is folded into the softmax kernel
(exp((s - max) * scale) -- scale > 0, so the max commutes), and the softmax runs in place
with one warp per row: each lane keeps its slice of the row in registers (16-byte loads),
the max and the sum of exponentials are reduced with __shfl_xor_sync only, and the row is
written back once.  The second product reads the probabilities with cuBLAS again: 4 passes
over the scores instead of 6, and two kernels fewer.  Rows longer than 1024 take a
block-per-row online-softmax kernel, so any sequence length works.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cmath>

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

// In-place softmax(scale * s) over rows of length K; one warp per row, EPL elements per lane.
template <int EPL, bool VEC>
__global__ void __launch_bounds__(256)
scaled_softmax_warp_kernel(float* __restrict__ s, int64_t rows, int K, float scale) {
    const int lane = threadIdx.x & 31;
    const int64_t row = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= rows) return;
    float* sr = s + row * K;
    float v[EPL];
    if (VEC) {
        #pragma unroll
        for (int j = 0; j < EPL / 4; ++j) {
            const int c = 4 * (lane + 32 * j);
            if (c < K) {
                const float4 a = *reinterpret_cast<const float4*>(sr + c);
                v[4 * j] = a.x; v[4 * j + 1] = a.y; v[4 * j + 2] = a.z; v[4 * j + 3] = a.w;
            } else {
                v[4 * j] = v[4 * j + 1] = v[4 * j + 2] = v[4 * j + 3] = -INFINITY;
            }
        }
    } else {
        #pragma unroll
        for (int j = 0; j < EPL; ++j) {
            const int c = lane + 32 * j;
            v[j] = c < K ? sr[c] : -INFINITY;
        }
    }
    float mx = -INFINITY;
    #pragma unroll
    for (int j = 0; j < EPL; ++j) mx = fmaxf(mx, v[j]);
    mx = warp_max(mx);
    const float ms = mx * scale;
    float sum = 0.f;
    #pragma unroll
    for (int j = 0; j < EPL; ++j) { v[j] = __expf(fmaf(v[j], scale, -ms)); sum += v[j]; }
    const float inv = 1.0f / warp_sum(sum);
    if (VEC) {
        #pragma unroll
        for (int j = 0; j < EPL / 4; ++j) {
            const int c = 4 * (lane + 32 * j);
            if (c < K)
                *reinterpret_cast<float4*>(sr + c) =
                    make_float4(v[4 * j] * inv, v[4 * j + 1] * inv, v[4 * j + 2] * inv, v[4 * j + 3] * inv);
        }
    } else {
        #pragma unroll
        for (int j = 0; j < EPL; ++j) {
            const int c = lane + 32 * j;
            if (c < K) sr[c] = v[j] * inv;
        }
    }
}

__device__ __forceinline__ void combine(float& m, float& s, float om, float os) {
    const float nm = fmaxf(m, om);
    s = (nm == -INFINITY) ? 0.f : s * __expf(m - nm) + os * __expf(om - nm);
    m = nm;
}

// Long rows: one block per row, online (max, rescaled sum) pass then the write pass.
__global__ void __launch_bounds__(512)
scaled_softmax_block_kernel(float* __restrict__ s, int K, float scale) {
    __shared__ float sh_m[32], sh_s[32];
    float* sr = s + (int64_t)blockIdx.x * K;
    float mx = -INFINITY, sum = 0.f;
    for (int c = threadIdx.x; c < K; c += blockDim.x) {
        const float t = sr[c] * scale;
        if (t > mx) { sum = sum * __expf(mx - t) + 1.f; mx = t; } else sum += __expf(t - mx);
    }
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        combine(mx, sum, __shfl_xor_sync(0xffffffffu, mx, o), __shfl_xor_sync(0xffffffffu, sum, o));
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    if (lane == 0) { sh_m[wid] = mx; sh_s[wid] = sum; }
    __syncthreads();
    mx = lane < nw ? sh_m[lane] : -INFINITY;
    sum = lane < nw ? sh_s[lane] : 0.f;
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        combine(mx, sum, __shfl_xor_sync(0xffffffffu, mx, o), __shfl_xor_sync(0xffffffffu, sum, o));
    const float inv = 1.0f / sum;
    for (int c = threadIdx.x; c < K; c += blockDim.x) sr[c] = __expf(sr[c] * scale - mx) * inv;
}

static void softmax_rows_inplace(torch::Tensor s, float scale) {
    const int64_t K64 = s.size(-1);
    TORCH_CHECK(K64 <= INT_MAX, "row too long");
    const int K = (int)K64;
    const int64_t rows = K == 0 ? 0 : s.numel() / K;
    if (rows == 0) return;
    float* sp = s.data_ptr<float>();
    const bool vec = (K % 4 == 0) && (reinterpret_cast<uintptr_t>(sp) & 15) == 0;
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    if (K <= 1024) {
        const int64_t blocks = (rows + 7) / 8;
        const int epl = (K + 31) / 32;
        #define LAUNCH(E) do { if (vec) scaled_softmax_warp_kernel<E, true><<<blocks, 256, 0, stream>>>(sp, rows, K, scale); \
                               else scaled_softmax_warp_kernel<E, false><<<blocks, 256, 0, stream>>>(sp, rows, K, scale); } while (0)
        if (epl <= 4) LAUNCH(4);
        else if (epl <= 8) LAUNCH(8);
        else if (epl <= 16) LAUNCH(16);
        else LAUNCH(32);
        #undef LAUNCH
    } else {
        scaled_softmax_block_kernel<<<rows, 512, 0, stream>>>(sp, K, scale);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

torch::Tensor attention_forward(torch::Tensor q, torch::Tensor k, torch::Tensor v) {
    TORCH_CHECK(q.is_cuda() && k.is_cuda() && v.is_cuda(), "CUDA tensors expected");
    TORCH_CHECK(q.scalar_type() == torch::kFloat32 && k.scalar_type() == torch::kFloat32 &&
                v.scalar_type() == torch::kFloat32, "float32 expected");
    TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, "(batch, heads, seq, dim) tensors expected");
    TORCH_CHECK(q.is_contiguous() && k.is_contiguous() && v.is_contiguous(), "contiguous tensors expected");
    const int64_t B = q.size(0), H = q.size(1), Sq = q.size(2), D = q.size(3), Sk = k.size(2);
    TORCH_CHECK(k.size(0) == B && k.size(1) == H && k.size(3) == D && v.size(0) == B && v.size(1) == H &&
                v.size(2) == Sk, "shape mismatch");
    const float scale = (float)(1.0 / std::sqrt((double)D));
    auto q3 = q.view({B * H, Sq, D});
    auto k3 = k.view({B * H, Sk, D});
    auto v3 = v.view({B * H, Sk, v.size(3)});
    auto scores = at::bmm(q3, k3.transpose(1, 2));          // cuBLAS strided-batched SGEMM, fresh tensor
    softmax_rows_inplace(scores, scale);                    // custom kernel: scale + softmax, in place
    return at::bmm(scores, v3).view({B, H, Sq, v.size(3)});
}
"""

_cpp_source = "torch::Tensor attention_forward(torch::Tensor q, torch::Tensor k, torch::Tensor v);"

_module = load_inline(
    name="attention_cuda_cublas_softmax",
    cpp_sources=_cpp_source,
    cuda_sources=_cuda_source,
    functions=["attention_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k, v):
        return _module.attention_forward(q.contiguous(), k.contiguous(), v.contiguous())
