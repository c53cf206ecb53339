"""argmax over one dim on the GPU: a warp per row (last dim) or a thread per column (other dims).

For the last dim (the default) each warp owns one row and streams it with coalesced float4
loads, four in flight per lane; every lane keeps a running (value, index) pair over the
elements it sees in increasing index order, and five shuffle rounds merge the 32 pairs with
PyTorch's rules: the larger value wins, NaN beats any number, and on ties the smaller index
wins, so the first maximum is returned. No shared memory, no block barriers: the kernel is a
single streaming read of the input at close to memory bandwidth. For a non-last dim the input
is viewed as (outer, R, inner) and each thread scans one column down R (coalesced across the
inner columns). Indices are int64 as in torch.argmax.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_DECL = "torch::Tensor argmax_forward(torch::Tensor x, int64_t dim);"

_CUDA_SRC = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <vector>
#include <cstdint>

// Is (v, i) a better argmax candidate than (bv, bi)?  NaN is the largest value; ties -> lower index.
__device__ __forceinline__ bool better(float v, int i, float bv, int bi) {
    const bool vn = v != v, bn = bv != bv;
    if (vn | bn) return vn && (!bn || i < bi);
    return v > bv || (v == bv && i < bi);
}

__device__ __forceinline__ void take(float v, int i, float& bv, int& bi) {
    if (better(v, i, bv, bi)) { bv = v; bi = i; }
}

template <int VEC>
__global__ void __launch_bounds__(256)
argmax_rows_kernel(const float* __restrict__ x, int64_t* __restrict__ out, int64_t rows, int R) {
    const int64_t row = (int64_t)blockIdx.x * 8 + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    if (row >= rows) return;
    const float* xr = x + row * (int64_t)R;
    float bv = -INFINITY;
    int bi = 0x7fffffff;
    if constexpr (VEC == 4) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        const int n4 = R / 4;
        #pragma unroll 4
        for (int j = lane; j < n4; j += 32) {
            const float4 v = __ldcs(x4 + j);
            const int e = 4 * j;
            take(v.x, e, bv, bi); take(v.y, e + 1, bv, bi);
            take(v.z, e + 2, bv, bi); take(v.w, e + 3, bv, bi);
        }
    } else {
        for (int j = lane; j < R; j += 32) take(xr[j], j, bv, bi);
    }
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float v2 = __shfl_xor_sync(0xffffffffu, bv, o);
        const int i2 = __shfl_xor_sync(0xffffffffu, bi, o);
        take(v2, i2, bv, bi);
    }
    if (lane == 0) out[row] = bi;
}

__global__ void argmax_cols_kernel(const float* __restrict__ x, int64_t* __restrict__ out,
                                   int64_t outer, int R, int64_t inner) {
    const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= outer * inner) return;
    const int64_t o = idx / inner, i = idx % inner;
    const float* xc = x + o * (int64_t)R * inner + i;
    float bv = -INFINITY;
    int bi = 0x7fffffff;
    for (int r = 0; r < R; ++r) take(__ldg(xc + (int64_t)r * inner), r, bv, bi);
    out[idx] = bi;
}

torch::Tensor argmax_forward(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
    TORCH_CHECK(x.dim() >= 1, "x must have at least one dimension");
    const c10::cuda::CUDAGuard guard(x.device());
    const int64_t nd = x.dim();
    if (dim < 0) dim += nd;
    TORCH_CHECK(dim >= 0 && dim < nd, "dim out of range");
    const int64_t R = x.size(dim);
    TORCH_CHECK(R > 0, "argmax over an empty dimension");
    TORCH_CHECK(R < 0x7fffffffLL, "reduced dimension too long");
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
    for (int64_t d = dim + 1; d < nd; ++d) inner *= x.size(d);
    std::vector<int64_t> out_sizes;
    for (int64_t d = 0; d < nd; ++d) if (d != dim) out_sizes.push_back(x.size(d));
    auto out = torch::empty(out_sizes, x.options().dtype(torch::kInt64));
    if (out.numel() == 0) return out;
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const float* xp = x.data_ptr<float>();
    int64_t* op = out.data_ptr<int64_t>();
    if (inner == 1) {
        const int64_t blocks = (outer + 7) / 8;
        TORCH_CHECK(blocks <= 0x7fffffffLL, "too many rows");
        if (reinterpret_cast<uintptr_t>(xp) % 16 == 0 && R % 4 == 0)
            argmax_rows_kernel<4><<<(unsigned)blocks, 256, 0, stream>>>(xp, op, outer, (int)R);
        else
            argmax_rows_kernel<1><<<(unsigned)blocks, 256, 0, stream>>>(xp, op, outer, (int)R);
    } else {
        const int64_t cols = outer * inner;
        argmax_cols_kernel<<<(unsigned)((cols + 255) / 256), 256, 0, stream>>>(xp, op, outer, (int)R, inner);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

_ext = load_inline(
    name="argmax_dim_cuda_warp",
    cpp_sources=_CPP_DECL,
    cuda_sources=_CUDA_SRC,
    functions=["argmax_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.argmax_forward(x, self.dim)
