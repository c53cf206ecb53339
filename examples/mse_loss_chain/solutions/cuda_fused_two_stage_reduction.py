"""CUDA solution: the whole loss in one streaming pass plus a tiny deterministic finish.

Eager PyTorch launches subtract, multiply and mean, writing and re-reading two full-size
temporaries (~6 tensor-sized memory passes).  Here stage 1 reads `predictions` and `targets`
exactly once with 16-byte vector loads marked streaming (__ldcs: read-once data should not
evict L2), two independent float4 pairs in flight per thread per iteration, and a
grid-stride loop over a grid sized to fill every SM; each block reduces its per-thread sums
with warp shuffles (__shfl_xor_sync) and one shared-memory hop into a single partial.
Stage 2, one block, adds the partials in double, in a fixed order, and writes the mean into
a fresh 0-dim tensor, so the result is deterministic run to run and accurate for any size.
The kernel moves the compulsory 2 x 4 bytes per element and nothing else: it runs at HBM
bandwidth.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

constexpr int THREADS = 256;

__device__ __forceinline__ float warp_sum(float v) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ double warp_sum_d(double v) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float sq4(float4 a, float4 b) {
    const float dx = a.x - b.x, dy = a.y - b.y, dz = a.z - b.z, dw = a.w - b.w;
    return dx * dx + dy * dy + dz * dz + dw * dw;
}

// Stage 1: per-block partial sums of (a - b)^2.
__global__ void __launch_bounds__(THREADS)
sq_diff_partials_kernel(const float* __restrict__ a, const float* __restrict__ b, int64_t n,
                        bool vec, float* __restrict__ partials) {
    float acc0 = 0.f, acc1 = 0.f;
    const int64_t tid = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * THREADS;
    int64_t done = 0;
    if (vec) {
        const float4* a4 = reinterpret_cast<const float4*>(a);
        const float4* b4 = reinterpret_cast<const float4*>(b);
        const int64_t n4 = n >> 2;
        int64_t i = tid;
        for (; i + stride < n4; i += 2 * stride) {          // two independent loads in flight
            const float4 xa = __ldcs(a4 + i), xb = __ldcs(b4 + i);
            const float4 ya = __ldcs(a4 + i + stride), yb = __ldcs(b4 + i + stride);
            acc0 += sq4(xa, xb);
            acc1 += sq4(ya, yb);
        }
        if (i < n4) acc0 += sq4(__ldcs(a4 + i), __ldcs(b4 + i));
        done = n4 << 2;
    }
    for (int64_t i = done + tid; i < n; i += stride) {     // tail (or everything, if unaligned)
        const float d = __ldcs(a + i) - __ldcs(b + i);
        acc0 += d * d;
    }
    float v = warp_sum(acc0 + acc1);
    __shared__ float warp_part[THREADS / 32];
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    if (lane == 0) warp_part[wid] = v;
    __syncthreads();
    if (wid == 0) {
        v = lane < THREADS / 32 ? warp_part[lane] : 0.f;
        v = warp_sum(v);
        if (lane == 0) partials[blockIdx.x] = v;
    }
}

// Stage 2: one block adds the partials in double (fixed order) and writes the mean.
__global__ void __launch_bounds__(THREADS)
finalize_mean_kernel(const float* __restrict__ partials, int nparts, int64_t n, float* __restrict__ out) {
    double acc = 0.0;
    for (int i = threadIdx.x; i < nparts; i += THREADS) acc += (double)partials[i];
    acc = warp_sum_d(acc);
    __shared__ double warp_part[THREADS / 32];
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    if (lane == 0) warp_part[wid] = acc;
    __syncthreads();
    if (wid == 0) {
        acc = lane < THREADS / 32 ? warp_part[lane] : 0.0;
        acc = warp_sum_d(acc);
        if (lane == 0) out[0] = (float)(acc / (double)n);   // n == 0 -> NaN, like torch.mean
    }
}

torch::Tensor mse_forward(torch::Tensor pred, torch::Tensor target) {
    TORCH_CHECK(pred.is_cuda() && target.is_cuda(), "CUDA tensors expected");
    TORCH_CHECK(pred.scalar_type() == torch::kFloat32 && target.scalar_type() == torch::kFloat32,
                "float32 tensors expected");
    TORCH_CHECK(pred.sizes() == target.sizes(), "predictions and targets must have the same shape");
    TORCH_CHECK(pred.is_contiguous() && target.is_contiguous(), "contiguous tensors expected");
    const int64_t n = pred.numel();
    const float* a = pred.data_ptr<float>();
    const float* b = target.data_ptr<float>();
    const bool vec = ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b)) & 15) == 0;

    const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    const int64_t want = (n / 4 + THREADS - 1) / THREADS;             // one float4 per thread at most
    const int blocks = (int)std::max<int64_t>(1, std::min<int64_t>(want, (int64_t)sms * 8));
    auto partials = torch::empty({blocks}, pred.options());
    auto out = torch::empty({}, pred.options());
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    sq_diff_partials_kernel<<<blocks, THREADS, 0, stream>>>(a, b, n, vec, partials.data_ptr<float>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    finalize_mean_kernel<<<1, THREADS, 0, stream>>>(partials.data_ptr<float>(), blocks, n, out.data_ptr<float>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

_cpp_source = "torch::Tensor mse_forward(torch::Tensor pred, torch::Tensor target);"

_module = load_inline(
    name="mse_loss_chain_cuda_two_stage",
    cpp_sources=_cpp_source,
    cuda_sources=_cuda_source,
    functions=["mse_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return _module.mse_forward(predictions.contiguous(), targets.contiguous())
