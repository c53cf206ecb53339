"""GELU (tanh approximation) as one vectorized, streaming CUDA kernel.

The op is memory-bound (8 bytes of traffic per element), so the kernel is built to move bytes:
every thread moves one float4 (128-bit load and store), and the grid has one thread per float4,
so each SM holds thousands of independent 16-byte loads in flight, enough to cover HBM latency
(measured on an H200: the same time as a device-to-device copy of the tensor; more float4s per
thread or streaming cache hints were slower). The math uses 0.5*x*(1 + tanh(u)) =
x / (1 + exp(-2u)): one `__expf` (ex2.approx) and one fast division instead of a libm tanhf,
accurate to ~1e-6 relative, so the ALU work hides under the memory time. Unaligned inputs and
the n % 4 tail take a scalar path.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_DECL = "torch::Tensor gelu_tanh_forward(torch::Tensor x);"

_CUDA_SRC = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cstdint>

__device__ __forceinline__ float gelu_tanh(float v) {
    const float k0 = 0.7978845608028654f;   // sqrt(2/pi)
    const float k1 = 0.044715f;
    const float u = k0 * fmaf(k1 * v, v * v, v);
    return __fdividef(v, 1.0f + __expf(-2.0f * u));
}

__device__ __forceinline__ float4 gelu4(float4 v) {
    return make_float4(gelu_tanh(v.x), gelu_tanh(v.y), gelu_tanh(v.z), gelu_tanh(v.w));
}

constexpr int kThreads = 256;
constexpr int kVecPerThread = 1;

// n4 float4s in the body, then `tail` scalars starting at 4*n4 (handled by block 0).
__global__ void __launch_bounds__(kThreads)
gelu_vec4_kernel(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4,
                 const float* __restrict__ xs, float* __restrict__ ys, int tail) {
    const int64_t base = (int64_t)blockIdx.x * (kThreads * kVecPerThread) + threadIdx.x;
    float4 v[kVecPerThread];
    #pragma unroll
    for (int j = 0; j < kVecPerThread; ++j) {
        const int64_t i = base + j * kThreads;
        if (i < n4) v[j] = x[i];
    }
    #pragma unroll
    for (int j = 0; j < kVecPerThread; ++j) {
        const int64_t i = base + j * kThreads;
        if (i < n4) y[i] = gelu4(v[j]);
    }
    if (blockIdx.x == 0 && threadIdx.x < tail) {
        const int64_t i = 4 * n4 + threadIdx.x;
        ys[i] = gelu_tanh(xs[i]);
    }
}

__global__ void gelu_scalar_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = gelu_tanh(x[i]);
}

torch::Tensor gelu_tanh_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
    const c10::cuda::CUDAGuard guard(x.device());
    auto y = torch::empty_like(x);
    const int64_t n = x.numel();
    if (n == 0) return y;
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const float* xp = x.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    const bool aligned = (reinterpret_cast<uintptr_t>(xp) % 16 == 0) && (reinterpret_cast<uintptr_t>(yp) % 16 == 0);
    if (aligned) {
        const int64_t n4 = n / 4;
        const int tail = (int)(n - 4 * n4);
        const int64_t per_block = (int64_t)kThreads * kVecPerThread;
        int64_t blocks = (n4 + per_block - 1) / per_block;
        if (blocks == 0) blocks = 1;
        gelu_vec4_kernel<<<(unsigned)blocks, kThreads, 0, stream>>>(
            reinterpret_cast<const float4*>(xp), reinterpret_cast<float4*>(yp), n4, xp, yp, tail);
    } else {
        const int64_t blocks = std::min<int64_t>((n + 255) / 256, 65535);
        gelu_scalar_kernel<<<(unsigned)blocks, 256, 0, stream>>>(xp, yp, n);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

_ext = load_inline(
    name="relu_gelu_cuda_vec4",
    cpp_sources=_CPP_DECL,
    cuda_sources=_CUDA_SRC,
    functions=["gelu_tanh_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.gelu_tanh_forward(x)
