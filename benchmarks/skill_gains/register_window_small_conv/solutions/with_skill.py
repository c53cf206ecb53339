"""With the skill (direct-conv-register-window): a direct conv where each thread computes 4 adjacent
outputs of a row for all 16 output channels, loading the 6-value input window of each (ci, kh) once
into registers and reusing it for 3 taps x 16 channels; weights are warp-uniform loads (broadcast).
without.py is the same direct conv with one output per thread.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

// y = conv2d(x [N, C, H, W], w [CO, C, 3, 3], b [CO]), stride 1, padding 1.
// Each thread: VW = 4 adjacent outputs of one row for all CO = 16 channels; the input row segment
// (VW + 2 values) is loaded once per (ci, kh) into registers and reused 3 x 16 times.
template <int K, int VW, int CO>
__global__ void __launch_bounds__(128) conv_kernel(const float* __restrict__ x, const float* __restrict__ w,
        const float* __restrict__ b, float* __restrict__ y, int N, int C, int H, int W, int P) {
    const int OH = H + 2 * P - K + 1, OW = W + 2 * P - K + 1, SEG = (OW + VW - 1) / VW;
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= (long long)N * OH * SEG) return;
    const int seg = (int)(t % SEG), oh = (int)(t / SEG % OH), n = (int)(t / ((long long)SEG * OH));
    const int ow0 = seg * VW;
    float acc[CO][VW];
    #pragma unroll
    for (int co = 0; co < CO; ++co)
        #pragma unroll
        for (int v = 0; v < VW; ++v) acc[co][v] = __ldg(b + co);
    for (int ci = 0; ci < C; ++ci)
        #pragma unroll
        for (int kh = 0; kh < K; ++kh) {
            const int ih = oh + kh - P;
            if (ih < 0 || ih >= H) continue;
            const float* row = x + (((size_t)n * C + ci) * H + ih) * W;
            float win[VW + K - 1];
            #pragma unroll
            for (int j = 0; j < VW + K - 1; ++j) {
                const int iw = ow0 + j - P;
                win[j] = iw >= 0 && iw < W ? __ldg(row + iw) : 0.f;
            }
            #pragma unroll
            for (int co = 0; co < CO; ++co)
                #pragma unroll
                for (int kw = 0; kw < K; ++kw) {
                    const float wv = __ldg(w + ((co * C + ci) * K + kh) * K + kw);
                    #pragma unroll
                    for (int v = 0; v < VW; ++v) acc[co][v] = fmaf(win[v + kw], wv, acc[co][v]);
                }
        }
    #pragma unroll
    for (int co = 0; co < CO; ++co)
        #pragma unroll
        for (int v = 0; v < VW; ++v)
            if (ow0 + v < OW) y[(((size_t)n * CO + co) * OH + oh) * OW + ow0 + v] = acc[co][v];
}

torch::Tensor forward(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() == 4, "float32 CUDA NCHW input expected");
    TORCH_CHECK(w.size(0) == 16 && w.size(2) == 3 && w.size(3) == 3 && w.size(1) == x.size(1),
                "this kernel is instantiated for 16 output channels, 3x3");
    x = x.contiguous(); w = w.contiguous(); b = b.contiguous();
    const int N = (int)x.size(0), C = (int)x.size(1), H = (int)x.size(2), W = (int)x.size(3);
    auto y = torch::empty({N, 16, H, W}, x.options());
    if (y.numel() == 0) return y;
    const long long threads = (long long)N * H * ((W + 3) / 4);
    conv_kernel<3, 4, 16><<<(unsigned)((threads + 127) / 128), 128, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(), N, C, H, W, 1);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

_module = load_inline(
    name="skill_gain_conv_regwin",
    cpp_sources="torch::Tensor forward(torch::Tensor x, torch::Tensor w, torch::Tensor b);",
    cuda_sources=_cuda_source,
    functions=["forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)

    def forward(self, x):
        return _module.forward(x, self.conv.weight, self.conv.bias)
