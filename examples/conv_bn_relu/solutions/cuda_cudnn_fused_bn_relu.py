"""CUDA solution: cuDNN for the convolution, then one fused kernel for conv bias +
BatchNorm (running statistics) + ReLU, in place.

The convolution is compute-bound and stays on cuDNN (at::conv2d, no bias).  Everything
after it is elementwise per channel, so it collapses into one memory-bound pass: the
kernel's grid has one y-row per (n, c) plane, each thread derives the channel's scale
gamma / sqrt(var + eps) and shift beta + (conv_bias - mean) * scale from the running
statistics itself (a few loads, no extra kernel or tensor), then streams the plane with
16-byte loads/stores, applying one FMA and a max per element, in place on the fresh conv
output.  Eager runs conv, a bias add, the BatchNorm kernel and ReLU: three extra read+write
passes over the (batch, out_channels, H, W) activation where this does one.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

// Inference BatchNorm (+ optional per-channel conv bias, + optional residual) + ReLU, in place
// on an NCHW tensor.  blockIdx.y = one (n, c) plane, so the per-channel scale/shift are computed
// once per thread from the running statistics (no extra kernel, no extra tensor);
// blockIdx.x strides over the plane with 16-byte accesses when HW % 4 == 0.
template <bool HAS_RES>
__global__ void __launch_bounds__(256)
bn_act_plane_kernel(float* __restrict__ y, const float* __restrict__ res,
                    const float* __restrict__ conv_bias, const float* __restrict__ gamma,
                    const float* __restrict__ beta, const float* __restrict__ mean,
                    const float* __restrict__ var, float eps, int C, int64_t HW, int64_t plane0, bool vec) {
    const int64_t plane = plane0 + blockIdx.y;
    const int c = (int)(plane % C);
    const float sc = gamma[c] * rsqrtf(var[c] + eps);
    const float sh = beta[c] + ((conv_bias ? conv_bias[c] : 0.f) - mean[c]) * sc;
    float* yp = y + plane * HW;
    const float* rp = HAS_RES ? res + plane * HW : nullptr;
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    if (vec) {
        float4* y4 = reinterpret_cast<float4*>(yp);
        const float4* r4 = reinterpret_cast<const float4*>(rp);
        for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < HW / 4; i += step) {
            float4 v = y4[i];
            v.x = fmaf(v.x, sc, sh); v.y = fmaf(v.y, sc, sh); v.z = fmaf(v.z, sc, sh); v.w = fmaf(v.w, sc, sh);
            if (HAS_RES) {
                const float4 r = __ldcs(r4 + i);
                v.x += r.x; v.y += r.y; v.z += r.z; v.w += r.w;
            }
            v.x = fmaxf(v.x, 0.f); v.y = fmaxf(v.y, 0.f); v.z = fmaxf(v.z, 0.f); v.w = fmaxf(v.w, 0.f);
            y4[i] = v;
        }
    } else {
        for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < HW; i += step) {
            float v = fmaf(yp[i], sc, sh);
            if (HAS_RES) v += rp[i];
            yp[i] = fmaxf(v, 0.f);
        }
    }
}

template <bool HAS_RES>
static void bn_act_inplace(torch::Tensor y, const torch::Tensor* res, const float* conv_bias,
                           const torch::Tensor& gamma, const torch::Tensor& beta,
                           const torch::Tensor& mean, const torch::Tensor& var, double eps) {
    const int64_t N = y.size(0), C = y.size(1), HW = y.size(2) * y.size(3);
    if (N * C == 0 || HW == 0) return;
    float* yp = y.data_ptr<float>();
    const float* rp = HAS_RES ? res->data_ptr<float>() : nullptr;
    const bool vec = HW % 4 == 0 && ((reinterpret_cast<uintptr_t>(yp) | reinterpret_cast<uintptr_t>(rp)) & 15) == 0;
    const int64_t work = vec ? HW / 4 : HW;
    // about 4 elements (or float4s) per thread, at most 64 blocks per plane
    const unsigned gx = (unsigned)std::max<int64_t>(1, std::min<int64_t>(64, (work + 1023) / 1024));
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const int64_t planes = N * C;
    for (int64_t p0 = 0; p0 < planes; p0 += 65535) {      // grid.y limit
        const int64_t np = std::min<int64_t>(65535, planes - p0);
        dim3 grid(gx, (unsigned)np);
        bn_act_plane_kernel<HAS_RES><<<grid, 256, 0, stream>>>(
            yp, rp, conv_bias,
            gamma.data_ptr<float>(), beta.data_ptr<float>(), mean.data_ptr<float>(), var.data_ptr<float>(),
            (float)eps, (int)C, HW, p0, vec);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
}

static void check_f32(const torch::Tensor& t, const char* what) {
    TORCH_CHECK(t.is_cuda() && t.scalar_type() == torch::kFloat32 && t.is_contiguous(),
                what, " must be a contiguous float32 CUDA tensor");
}

torch::Tensor conv_bn_relu_forward(torch::Tensor x, torch::Tensor w, torch::Tensor conv_bias,
                                   torch::Tensor gamma, torch::Tensor beta, torch::Tensor mean,
                                   torch::Tensor var, double eps, int64_t padding) {
    check_f32(x, "x"); check_f32(w, "weight"); check_f32(conv_bias, "conv bias");
    check_f32(gamma, "bn weight"); check_f32(beta, "bn bias"); check_f32(mean, "running_mean");
    check_f32(var, "running_var");
    TORCH_CHECK(x.dim() == 4 && w.dim() == 4 && x.size(1) == w.size(1), "NCHW input and OIHW weight expected");
    const int64_t C = w.size(0);
    TORCH_CHECK(conv_bias.numel() == C && gamma.numel() == C && beta.numel() == C && mean.numel() == C &&
                var.numel() == C, "per-channel parameters must have out_channels elements");
    auto y = at::conv2d(x, w, {}, /*stride=*/1, /*padding=*/padding);   // cuDNN, fresh tensor
    TORCH_CHECK(y.is_contiguous(), "unexpected conv output layout");
    bn_act_inplace<false>(y, nullptr, conv_bias.data_ptr<float>(), gamma, beta, mean, var, eps);
    return y;
}
"""

_cpp_source = ("torch::Tensor conv_bn_relu_forward(torch::Tensor x, torch::Tensor w, torch::Tensor conv_bias, "
               "torch::Tensor gamma, torch::Tensor beta, torch::Tensor mean, torch::Tensor var, double eps, "
               "int64_t padding);")

_module = load_inline(
    name="conv_bn_relu_cuda_fused_bn",
    cpp_sources=_cpp_source,
    cuda_sources=_cuda_source,
    functions=["conv_bn_relu_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.bn = nn.BatchNorm2d(out_channels)
        self.eval()

    def forward(self, x):
        bn = self.bn
        return _module.conv_bn_relu_forward(x.contiguous(), self.conv.weight, self.conv.bias, bn.weight, bn.bias,
                                            bn.running_mean, bn.running_var, bn.eps, self.conv.padding[0])
