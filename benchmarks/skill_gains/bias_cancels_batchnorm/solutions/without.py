"""Without the skill: cuDNN's conv with its bias (the reference's order), then the same training-mode
BatchNorm kernel as with_skill.py on the biased output (running mean from the batch mean alone).
(num_batches_tracked is not advanced: BatchNorm2d's default momentum does not read it.)
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

__device__ float block_sum(float v, float* sh) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    v = (threadIdx.x & 31) < (blockDim.x >> 5) ? sh[threadIdx.x & 31] : 0.f;   // every warp reads the partials
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Training-mode BatchNorm of z [N, C, HW], one block per channel, two passes (mean, then squared
// deviations). shift (may be null): a per-channel bias left out of z, which the output does not need
// (the batch mean absorbs it) but running_mean does.
__global__ void __launch_bounds__(1024) bn_train(const float* __restrict__ z, const float* __restrict__ shift,
        const float* __restrict__ gamma, const float* __restrict__ beta, float* __restrict__ y,
        float* __restrict__ running_mean, float* __restrict__ running_var, int N, int C, int HW, float eps, float momentum) {
    __shared__ float sh[32];
    const int c = blockIdx.x; const long long cnt = (long long)N * HW;
    float s = 0.f;
    for (int n = 0; n < N; ++n) {
        const float* zp = z + ((size_t)n * C + c) * HW;
        for (int i = threadIdx.x; i < HW; i += blockDim.x) s += zp[i];
    }
    const float mean = block_sum(s, sh) / (float)cnt;
    float q = 0.f;
    for (int n = 0; n < N; ++n) {
        const float* zp = z + ((size_t)n * C + c) * HW;
        for (int i = threadIdx.x; i < HW; i += blockDim.x) { const float d = zp[i] - mean; q += d * d; }
    }
    const float var = block_sum(q, sh) / (float)cnt;
    const float sc = gamma[c] * rsqrtf(var + eps), sf = beta[c] - mean * sc;
    for (int n = 0; n < N; ++n) {
        const size_t off = ((size_t)n * C + c) * HW;
        for (int i = threadIdx.x; i < HW; i += blockDim.x) y[off + i] = fmaf(z[off + i], sc, sf);
    }
    if (threadIdx.x == 0) {
        const float m = mean + (shift ? shift[c] : 0.f);
        running_mean[c] = (1.f - momentum) * running_mean[c] + momentum * m;
        running_var[c] = (1.f - momentum) * running_var[c] + momentum * var * (float)cnt / (float)(cnt > 1 ? cnt - 1 : 1);
    }
}

torch::Tensor forward(torch::Tensor x, torch::Tensor w, torch::Tensor cb, torch::Tensor gamma, torch::Tensor beta,
                      torch::Tensor running_mean, torch::Tensor running_var, double eps, double momentum) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "float32 CUDA input expected");
    TORCH_CHECK(running_mean.is_contiguous() && running_var.is_contiguous(), "contiguous running statistics expected");
    auto z = at::conv2d(x, w, cb, 1, 1).contiguous();
    const int N = (int)z.size(0), C = (int)z.size(1), HW = (int)(z.size(2) * z.size(3));
    auto y = torch::empty_like(z);
    if (z.numel() == 0) return y;
    bn_train<<<C, 1024, 0, at::cuda::getCurrentCUDAStream()>>>(z.data_ptr<float>(), nullptr,
        gamma.contiguous().data_ptr<float>(), beta.contiguous().data_ptr<float>(), y.data_ptr<float>(),
        running_mean.data_ptr<float>(), running_var.data_ptr<float>(), N, C, HW, (float)eps, (float)momentum);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

_module = load_inline(
    name="skill_gain_bn_bias_kept",
    cpp_sources="torch::Tensor forward(torch::Tensor x, torch::Tensor w, torch::Tensor cb, torch::Tensor gamma, "
                "torch::Tensor beta, torch::Tensor running_mean, torch::Tensor running_var, double eps, double momentum);",
    cuda_sources=_cuda_source,
    functions=["forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1, bias=True)
        self.bn = nn.BatchNorm2d(out_channels)

    def forward(self, x):
        bn = self.bn
        return _module.forward(x.contiguous(), self.conv.weight, self.conv.bias, bn.weight, bn.bias,
                               bn.running_mean, bn.running_var, bn.eps, bn.momentum)
