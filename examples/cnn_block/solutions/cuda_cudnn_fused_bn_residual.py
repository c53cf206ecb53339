"""CUDA solution: cuDNN for the two 3x3 convolutions; each BatchNorm (running statistics)
is fused with what follows it into one in-place pass: BN1 + ReLU, and BN2 + identity
residual + ReLU.

The convolutions are compute-bound and stay on cuDNN (at::conv2d).  After each of them the
rest is elementwise per channel, so one kernel does it: its grid has one y-row per (n, c)
plane, each thread derives the channel's scale gamma / sqrt(var + eps) and shift
beta - mean * scale from the running statistics itself (no extra kernel or tensor), and
streams the plane with 16-byte loads/stores -- one FMA, (for the second) one residual add,
and a max per element, written in place into the fresh conv output.  Eager runs BN, ReLU,
BN, add, ReLU as five separate passes (the add reading two tensors); this runs two, so
about 40% of the non-convolution traffic disappears along with three launches.
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

torch::Tensor basic_block_forward(torch::Tensor x, torch::Tensor w1, torch::Tensor g1, torch::Tensor b1,
                                  torch::Tensor m1, torch::Tensor v1, double eps1,
                                  torch::Tensor w2, torch::Tensor g2, torch::Tensor b2,
                                  torch::Tensor m2, torch::Tensor v2, double eps2) {
    check_f32(x, "x"); check_f32(w1, "conv1 weight"); check_f32(w2, "conv2 weight");
    check_f32(g1, "bn1 weight"); check_f32(b1, "bn1 bias"); check_f32(m1, "bn1 mean"); check_f32(v1, "bn1 var");
    check_f32(g2, "bn2 weight"); check_f32(b2, "bn2 bias"); check_f32(m2, "bn2 mean"); check_f32(v2, "bn2 var");
    TORCH_CHECK(x.dim() == 4 && w1.dim() == 4 && w2.dim() == 4, "NCHW input, OIHW weights expected");
    TORCH_CHECK(w1.size(1) == x.size(1) && w2.size(1) == w1.size(0) && w2.size(0) == x.size(1),
                "identity shortcut needs in_channels == out_channels");
    auto h = at::conv2d(x, w1, {}, 1, 1);                           // cuDNN
    bn_act_inplace<false>(h, nullptr, nullptr, g1, b1, m1, v1, eps1);   // BN1 + ReLU
    auto y = at::conv2d(h, w2, {}, 1, 1);                           // cuDNN
    TORCH_CHECK(y.sizes() == x.sizes() && h.is_contiguous() && y.is_contiguous(), "unexpected conv output");
    bn_act_inplace<true>(y, &x, nullptr, g2, b2, m2, v2, eps2);     // BN2 + residual + ReLU
    return y;
}
"""

_cpp_source = ("torch::Tensor basic_block_forward(torch::Tensor x, torch::Tensor w1, torch::Tensor g1, "
               "torch::Tensor b1, torch::Tensor m1, torch::Tensor v1, double eps1, torch::Tensor w2, "
               "torch::Tensor g2, torch::Tensor b2, torch::Tensor m2, torch::Tensor v2, double eps2);")

_module = load_inline(
    name="cnn_block_cuda_fused_bn",
    cpp_sources=_cpp_source,
    cuda_sources=_cuda_source,
    functions=["basic_block_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.eval()

    def forward(self, x):
        b1, b2 = self.bn1, self.bn2
        return _module.basic_block_forward(
            x.contiguous(), self.conv1.weight, b1.weight, b1.bias, b1.running_mean, b1.running_var, b1.eps,
            self.conv2.weight, b2.weight, b2.bias, b2.running_mean, b2.running_var, b2.eps)
