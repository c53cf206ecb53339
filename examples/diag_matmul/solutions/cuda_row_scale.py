"""diag(a) @ B on the GPU as a row scaling: out[i, :] = a[i] * B[i, :], no GEMM.

The reference materializes the N x N diagonal matrix and runs an N x N x M fp32 GEMM
(~137 GFLOP at N = M = 4096) whose terms are all zero but one per output. The same result is
a memory-bound elementwise pass: each block takes one row segment of 2048 floats, reads a[i]
once, and streams B with float4 loads and stores (`__ldcs`/`__stcs`: one-touch data). Traffic
is one read of B and one write of the output, ~128 MB, which an H100 moves in ~45 us. The result
is bit-identical to the GEMM, since adding exact zeros changes nothing. Unaligned or odd-width
matrices take a scalar path.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_DECL = "torch::Tensor diag_matmul_forward(torch::Tensor a, torch::Tensor B);"

_CUDA_SRC = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cstdint>

constexpr int kThreads = 256;
constexpr int kVecPerThread = 2;
constexpr int kSeg4 = kThreads * kVecPerThread;   // float4s per block segment

// grid = N * segs_per_row blocks; block b scales float4s [seg*kSeg4, (seg+1)*kSeg4) of row b / segs.
__global__ void __launch_bounds__(kThreads)
row_scale_vec4_kernel(const float* __restrict__ a, const float4* __restrict__ B, float4* __restrict__ out,
                      int64_t M4, int64_t segs_per_row) {
    const int64_t row = blockIdx.x / segs_per_row;
    const int64_t seg = blockIdx.x % segs_per_row;
    const float s = __ldg(a + row);
    const float4* br = B + row * M4;
    float4* orow = out + row * M4;
    float4 v[kVecPerThread];
    #pragma unroll
    for (int j = 0; j < kVecPerThread; ++j) {
        const int64_t c = seg * kSeg4 + j * kThreads + threadIdx.x;
        if (c < M4) v[j] = __ldcs(br + c);
    }
    #pragma unroll
    for (int j = 0; j < kVecPerThread; ++j) {
        const int64_t c = seg * kSeg4 + j * kThreads + threadIdx.x;
        if (c < M4) __stcs(orow + c, make_float4(s * v[j].x, s * v[j].y, s * v[j].z, s * v[j].w));
    }
}

__global__ void row_scale_scalar_kernel(const float* __restrict__ a, const float* __restrict__ B,
                                        float* __restrict__ out, int64_t N, int64_t M) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < N * M; t += stride)
        out[t] = a[t / M] * B[t];
}

torch::Tensor diag_matmul_forward(torch::Tensor a, torch::Tensor B) {
    TORCH_CHECK(a.is_cuda() && B.is_cuda(), "tensors must be CUDA tensors");
    TORCH_CHECK(a.scalar_type() == torch::kFloat32 && B.scalar_type() == torch::kFloat32, "tensors must be float32");
    TORCH_CHECK(a.dim() == 1 && B.dim() == 2 && B.size(0) == a.size(0), "expected a (N,) and B (N, M)");
    TORCH_CHECK(a.is_contiguous() && B.is_contiguous(), "tensors must be contiguous");
    const c10::cuda::CUDAGuard guard(B.device());
    const int64_t N = B.size(0), M = B.size(1);
    auto out = torch::empty({N, M}, B.options());
    if (out.numel() == 0) return out;
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const float* bp = B.data_ptr<float>();
    float* op = out.data_ptr<float>();
    const bool aligned = reinterpret_cast<uintptr_t>(bp) % 16 == 0 && reinterpret_cast<uintptr_t>(op) % 16 == 0;
    if (aligned && M % 4 == 0) {
        const int64_t M4 = M / 4;
        const int64_t segs = (M4 + kSeg4 - 1) / kSeg4;
        TORCH_CHECK(N * segs <= 0x7fffffffLL, "matrix too large");
        row_scale_vec4_kernel<<<(unsigned)(N * segs), kThreads, 0, stream>>>(
            a.data_ptr<float>(), reinterpret_cast<const float4*>(bp), reinterpret_cast<float4*>(op), M4, segs);
    } else {
        const int64_t blocks = std::min<int64_t>((N * M + 255) / 256, 1 << 20);
        row_scale_scalar_kernel<<<(unsigned)blocks, 256, 0, stream>>>(a.data_ptr<float>(), bp, op, N, M);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

_ext = load_inline(
    name="diag_matmul_cuda_row_scale",
    cpp_sources=_CPP_DECL,
    cuda_sources=_CUDA_SRC,
    functions=["diag_matmul_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return _ext.diag_matmul_forward(a, B)
