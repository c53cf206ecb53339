"""CUDA solution: cuBLAS SGEMM for x @ W, then one vectorized epilogue kernel computing
GELU(y) * scale in place.

The GEMM is compute-bound and cuBLAS's FP32 SGEMM is near the FFMA roof, so it stays
(TF32 off: its ~1e-3 error would break the fp32 tolerance); W is already (in, out), so the
call is a plain row-major product.  Eager then runs GELU and the multiplication as two more
kernels, each reading and writing the full (batch, out) output and allocating a new one.
Here one pass does both: a 2-D grid (x: columns in float4 chunks, y: strides over rows),
16-byte coalesced loads and stores, the exact erf GELU 0.5 v (1 + erf(v / sqrt 2)) with
CUDA's accurate erff, the scale multiplied in registers, written back in place into the
fresh tensor the GEMM produced: two output passes saved, and one allocation.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

enum { ACT_NONE = 0, ACT_RELU = 1, ACT_GELU = 2 };

// In-place epilogue on a row-major (M, N) matrix: y = ACT(y + bias[col]) * scale.
// Grid: x covers the columns (float4 or scalar), y strides over rows; each thread loads its
// bias once and reuses it for every row it visits; 16-byte loads/stores when N % 4 == 0.
template <int ACT>
__device__ __forceinline__ float act_fn(float v) {
    if (ACT == ACT_RELU) return fmaxf(v, 0.f);
    if (ACT == ACT_GELU) return 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
    return v;
}

template <int ACT, bool HAS_BIAS>
__global__ void __launch_bounds__(256)
bias_act_vec4_kernel(float* __restrict__ y, const float* __restrict__ bias, int64_t M, int N4, float scale) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= N4) return;
    float4 b = make_float4(0.f, 0.f, 0.f, 0.f);
    if (HAS_BIAS) b = __ldg(reinterpret_cast<const float4*>(bias) + c);
    float4* y4 = reinterpret_cast<float4*>(y);
    for (int64_t r = blockIdx.y; r < M; r += gridDim.y) {
        float4 v = y4[r * N4 + c];
        v.x = act_fn<ACT>(v.x + b.x) * scale;
        v.y = act_fn<ACT>(v.y + b.y) * scale;
        v.z = act_fn<ACT>(v.z + b.z) * scale;
        v.w = act_fn<ACT>(v.w + b.w) * scale;
        y4[r * N4 + c] = v;
    }
}

template <int ACT, bool HAS_BIAS>
__global__ void __launch_bounds__(256)
bias_act_scalar_kernel(float* __restrict__ y, const float* __restrict__ bias, int64_t M, int N, float scale) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= N) return;
    const float b = HAS_BIAS ? __ldg(bias + c) : 0.f;
    for (int64_t r = blockIdx.y; r < M; r += gridDim.y)
        y[r * N + c] = act_fn<ACT>(y[r * N + c] + b) * scale;
}

template <int ACT, bool HAS_BIAS>
static void bias_act_inplace(torch::Tensor y, const float* bias, float scale) {
    const int64_t M = y.size(0), N = y.size(1);
    if (M == 0 || N == 0) return;
    TORCH_CHECK(N <= INT_MAX, "too many columns");
    float* yp = y.data_ptr<float>();
    const bool vec = (N % 4 == 0) && ((reinterpret_cast<uintptr_t>(yp) |
                                       reinterpret_cast<uintptr_t>(bias)) & 15) == 0;
    const int cols = vec ? (int)(N / 4) : (int)N;
    dim3 grid((cols + 255) / 256, (unsigned)std::min<int64_t>(M, 4096));
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    if (vec) bias_act_vec4_kernel<ACT, HAS_BIAS><<<grid, 256, 0, stream>>>(yp, bias, M, cols, scale);
    else bias_act_scalar_kernel<ACT, HAS_BIAS><<<grid, 256, 0, stream>>>(yp, bias, M, cols, scale);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

torch::Tensor matmul_gelu_scale(torch::Tensor x, torch::Tensor w, double scale) {
    TORCH_CHECK(x.is_cuda() && w.is_cuda(), "CUDA tensors expected");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32, "float32 expected");
    TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(0), "x (M,K), w (K,N) expected");
    TORCH_CHECK(x.is_contiguous() && w.is_contiguous(), "contiguous tensors expected");
    auto y = at::mm(x, w);                         // cuBLAS SGEMM into a fresh (M, N) tensor
    bias_act_inplace<ACT_GELU, false>(y, nullptr, (float)scale);
    return y;
}
"""

_cpp_source = "torch::Tensor matmul_gelu_scale(torch::Tensor x, torch::Tensor w, double scale);"

_module = load_inline(
    name="gemm_gelu_scale_cuda_epilogue",
    cpp_sources=_cpp_source,
    cuda_sources=_cuda_source,
    functions=["matmul_gelu_scale"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(in_features, out_features) / in_features ** 0.5)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        return _module.matmul_gelu_scale(x.contiguous(), self.weight.contiguous(), float(self.scaling_factor))
