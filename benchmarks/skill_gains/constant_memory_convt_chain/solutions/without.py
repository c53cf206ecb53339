"""Without the skill's constant memory: the same whole-chain kernel as with_skill.py, with the filter,
bias and subtrahend read from global memory (__ldg, through L1) instead of __constant__ memory.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <math_constants.h>

// ConvTranspose2d(CI -> CO, k 3, s 2, p 1, op 1) -> MaxPool2d(2) -> softmax(dim 1) -> - sub -> swish -> max over
// channels, one thread per pooled output; x [N, CI, H, W] -> out [N, 1, H, W]. Weight layout [CI][CO][3][3].
template <int CI, int CO>
__global__ void __launch_bounds__(128) convt_chain(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b, const float* __restrict__ sub, float* __restrict__ out,
                                                   int N, int H, int W) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)N * H * W) return;
    const int px = (int)(i % W), py = (int)(i / W % H), n = (int)(i / ((long long)W * H));
    float pooled[CO], m = -CUDART_INF_F, s = 0.f, best = -CUDART_INF_F;
    #pragma unroll
    for (int co = 0; co < CO; ++co) pooled[co] = -CUDART_INF_F;
    for (int d = 0; d < 4; ++d) {
        const int oy = 2 * py + (d >> 1), ox = 2 * px + (d & 1);
        float acc[CO];
        #pragma unroll
        for (int co = 0; co < CO; ++co) acc[co] = __ldg(b + co);
        for (int t = 0; t < 9; ++t) {
            const int ty = oy + 1 - t / 3, tx = ox + 1 - t % 3;
            if (ty < 0 || (ty & 1) || (ty >> 1) >= H || tx < 0 || (tx & 1) || (tx >> 1) >= W) continue;
            #pragma unroll
            for (int ci = 0; ci < CI; ++ci) {
                const float v = x[(((size_t)n * CI + ci) * H + (ty >> 1)) * W + (tx >> 1)];
                #pragma unroll
                for (int co = 0; co < CO; ++co) acc[co] = fmaf(v, __ldg(w + (ci * CO + co) * 9 + t), acc[co]);
            }
        }
        #pragma unroll
        for (int co = 0; co < CO; ++co) pooled[co] = fmaxf(pooled[co], acc[co]);
    }
    #pragma unroll
    for (int co = 0; co < CO; ++co) m = fmaxf(m, pooled[co]);
    #pragma unroll
    for (int co = 0; co < CO; ++co) s += expf(pooled[co] - m);
    #pragma unroll
    for (int co = 0; co < CO; ++co) {
        const float p = expf(pooled[co] - m) / s - __ldg(sub + co);
        best = fmaxf(best, p / (1.f + expf(-p)));
    }
    out[i] = best;
}

torch::Tensor forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, torch::Tensor sub) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() == 4, "float32 CUDA NCHW input expected");
    TORCH_CHECK(x.size(1) == 3 && w.size(0) == 3 && w.size(1) == 16 && w.size(2) == 3 && w.size(3) == 3,
                "this kernel is instantiated for 3 -> 16 channels, 3x3");
    x = x.contiguous(); w = w.contiguous(); b = b.contiguous(); sub = sub.contiguous();
    const int N = (int)x.size(0), H = (int)x.size(2), W = (int)x.size(3);
    auto out = torch::empty({N, 1, H, W}, x.options());
    const long long total = out.numel();
    if (total == 0) return out;
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();

    convt_chain<3, 16><<<(unsigned)((total + 127) / 128), 128, 0, stream>>>(x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), sub.data_ptr<float>(), out.data_ptr<float>(), N, H, W);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

_module = load_inline(
    name="skill_gain_convt_chain_global",
    cpp_sources="torch::Tensor forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, torch::Tensor sub);",
    cuda_sources=_cuda_source,
    functions=["forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.ConvTranspose2d(in_channels, out_channels, kernel_size=3, stride=2, padding=1, output_padding=1)
        self.pool = nn.MaxPool2d(2)
        self.sub = nn.Parameter(0.05 * torch.randn(out_channels))

    def forward(self, x):
        return _module.forward(x, self.conv.weight, self.conv.bias, self.sub)
