"""CUDA solution: the three GEMMs on cuBLAS SGEMM, the bias and ReLU of the hidden layers
fused into one vectorized in-place epilogue pass each, all driven from one C++ call.

The layers are compute-bound and cuBLAS's FP32 SGEMM is near the FFMA roof, so the GEMMs
stay on it (TF32 off: its ~1e-3 error would break the fp32 tolerance); weights are passed
as transposed views, never copied.  For each hidden layer the bias add and ReLU run as one
memory-bound pass over the fresh GEMM output, in place: a 2-D grid (x: columns in float4
chunks, y: strides over rows) so each thread loads its bias once and reuses it for every
row, 16-byte coalesced accesses.  The last layer has no activation, so its bias goes into
the GEMM itself (cuBLAS beta/epilogue through addmm) and nothing else is launched.  The
whole forward is one C++ call: no Python dispatch between layers.
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

static void check_linear(const torch::Tensor& w, const torch::Tensor& b) {
    TORCH_CHECK(w.is_cuda() && b.is_cuda() && w.scalar_type() == torch::kFloat32 &&
                b.scalar_type() == torch::kFloat32 && w.dim() == 2 && b.dim() == 1 &&
                b.size(0) == w.size(0) && w.is_contiguous() && b.is_contiguous(),
                "float32 contiguous CUDA weight (N,K) and bias (N) expected");
}

torch::Tensor mlp_forward(torch::Tensor x, torch::Tensor w1, torch::Tensor b1, torch::Tensor w2,
                          torch::Tensor b2, torch::Tensor w3, torch::Tensor b3) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() == 2 && x.is_contiguous(),
                "contiguous float32 CUDA input (batch, features) expected");
    check_linear(w1, b1); check_linear(w2, b2); check_linear(w3, b3);
    TORCH_CHECK(x.size(1) == w1.size(1) && w1.size(0) == w2.size(1) && w2.size(0) == w3.size(1), "shape mismatch");
    auto h1 = at::mm(x, w1.t());                                   // cuBLAS
    bias_act_inplace<ACT_RELU, true>(h1, b1.data_ptr<float>(), 1.0f);   // custom: + b1, ReLU
    auto h2 = at::mm(h1, w2.t());
    bias_act_inplace<ACT_RELU, true>(h2, b2.data_ptr<float>(), 1.0f);
    return at::addmm(b3, h2, w3.t());                              // bias folded into the last GEMM
}
"""

_cpp_source = ("torch::Tensor mlp_forward(torch::Tensor x, torch::Tensor w1, torch::Tensor b1, torch::Tensor w2, "
               "torch::Tensor b2, torch::Tensor w3, torch::Tensor b3);")

_module = load_inline(
    name="mlp_cuda_cublas_epilogues",
    cpp_sources=_cpp_source,
    cuda_sources=_cuda_source,
    functions=["mlp_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden1, hidden2, output_size):
        super().__init__()
        self.fc1 = nn.Linear(input_size, hidden1)
        self.fc2 = nn.Linear(hidden1, hidden2)
        self.fc3 = nn.Linear(hidden2, output_size)

    def forward(self, x):
        return _module.mlp_forward(x.contiguous(), self.fc1.weight, self.fc1.bias,
                                   self.fc2.weight, self.fc2.bias, self.fc3.weight, self.fc3.bias)
