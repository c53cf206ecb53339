"""Sum over one dim on the GPU: the input viewed as (outer, R, inner), one pass over memory.

Middle dim (inner > 1, the default): a block of 32 x 8 threads owns 128 adjacent columns
(one float4 per thread along the row, so each warp reads 512 contiguous bytes per row) and
8 interleaved row phases; each thread keeps 4 independent float4 loads in flight, the 8
phases are folded through shared memory, and when outer * inner alone gives too few blocks to
fill the GPU the R axis is also split across blocks, whose partials a second tiny kernel adds
in a fixed order (deterministic, no atomics). Last dim (inner == 1): one warp per row with
float4 loads and a shuffle reduction. The input is read exactly once.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_DECL = "torch::Tensor sum_dim_forward(torch::Tensor x, int64_t dim);"

_CUDA_SRC = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <vector>
#include <cstdint>

constexpr int TX = 32;   // column lanes per block
constexpr int TY = 8;    // row phases per block

__device__ __forceinline__ float4 add4(float4 a, float4 b) {
    return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

// Column sums of a (outer, R, inner) tensor over rows [r0, r1) of each split.
// VEC = 4: each thread owns 4 adjacent columns (needs inner % 4 == 0 and 16-byte alignment).
// out[(split * outer + o) * inner + i] receives the partial sum.
template <int VEC>
__global__ void __launch_bounds__(TX * TY)
colsum_kernel(const float* __restrict__ x, float* __restrict__ out,
              int64_t outer, int64_t R, int64_t inner, int64_t col_blocks, int64_t rows_per_split) {
    int64_t b = blockIdx.x;
    const int64_t cb = b % col_blocks; b /= col_blocks;
    const int64_t o = b % outer;
    const int64_t split = b / outer;
    const int64_t r0 = split * rows_per_split;
    const int64_t r1 = min(R, r0 + rows_per_split);
    const int64_t col = (cb * TX + threadIdx.x) * VEC;
    const bool active = col < inner;
    const float* base = x + o * R * inner + col;

    float acc[VEC];
    #pragma unroll
    for (int v = 0; v < VEC; ++v) acc[v] = 0.0f;
    if (active) {
        int64_t r = r0 + threadIdx.y;
        if constexpr (VEC == 4) {
            float4 a0 = make_float4(0.f, 0.f, 0.f, 0.f), a1 = a0, a2 = a0, a3 = a0;
            for (; r + 3 * TY < r1; r += 4 * TY) {          // 4 independent loads in flight
                const float4 v0 = __ldg(reinterpret_cast<const float4*>(base + r * inner));
                const float4 v1 = __ldg(reinterpret_cast<const float4*>(base + (r + TY) * inner));
                const float4 v2 = __ldg(reinterpret_cast<const float4*>(base + (r + 2 * TY) * inner));
                const float4 v3 = __ldg(reinterpret_cast<const float4*>(base + (r + 3 * TY) * inner));
                a0 = add4(a0, v0); a1 = add4(a1, v1); a2 = add4(a2, v2); a3 = add4(a3, v3);
            }
            for (; r < r1; r += TY) a0 = add4(a0, __ldg(reinterpret_cast<const float4*>(base + r * inner)));
            const float4 s = add4(add4(a0, a1), add4(a2, a3));
            acc[0] = s.x; acc[1] = s.y; acc[2] = s.z; acc[3] = s.w;
        } else {
            float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
            for (; r + 3 * TY < r1; r += 4 * TY) {
                a0 += __ldg(base + r * inner);
                a1 += __ldg(base + (r + TY) * inner);
                a2 += __ldg(base + (r + 2 * TY) * inner);
                a3 += __ldg(base + (r + 3 * TY) * inner);
            }
            for (; r < r1; r += TY) a0 += __ldg(base + r * inner);
            acc[0] = (a0 + a1) + (a2 + a3);
        }
    }
    __shared__ float red[TY][TX * VEC + 1];
    #pragma unroll
    for (int v = 0; v < VEC; ++v) red[threadIdx.y][threadIdx.x * VEC + v] = acc[v];
    __syncthreads();
    // Fold the TY row phases: thread (x, y) finishes columns y*TX*VEC/TY ... of this block.
    const int t = threadIdx.y * TX + threadIdx.x;
    for (int c = t; c < TX * VEC; c += TX * TY) {
        float s = 0.0f;
        #pragma unroll
        for (int y = 0; y < TY; ++y) s += red[y][c];
        const int64_t gc = cb * TX * VEC + c;
        if (gc < inner) out[(split * outer + o) * inner + gc] = s;
    }
}

// out[j] = sum over s of part[s * n + j], in a fixed order.
__global__ void sum_splits_kernel(const float* __restrict__ part, float* __restrict__ out, int64_t n, int splits) {
    const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n) return;
    float s = 0.0f;
    for (int k = 0; k < splits; ++k) s += part[k * n + j];
    out[j] = s;
}

// Row sums (inner == 1): one warp per row.
template <int VEC>
__global__ void __launch_bounds__(256)
rowsum_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t rows, int64_t R) {
    const int64_t row = (int64_t)blockIdx.x * 8 + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= rows) return;
    const float* xr = x + row * R;
    float s0 = 0.f, s1 = 0.f;
    if constexpr (VEC == 4) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        const int64_t n4 = R / 4;
        int64_t i = lane;
        for (; i + 32 < n4; i += 64) {
            const float4 a = __ldg(x4 + i), b = __ldg(x4 + i + 32);
            s0 += (a.x + a.y) + (a.z + a.w);
            s1 += (b.x + b.y) + (b.z + b.w);
        }
        for (; i < n4; i += 32) {
            const float4 a = __ldg(x4 + i);
            s0 += (a.x + a.y) + (a.z + a.w);
        }
    } else {
        for (int64_t i = lane; i < R; i += 32) s0 += __ldg(xr + i);
    }
    float s = s0 + s1;
    #pragma unroll
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    if (lane == 0) out[row] = s;
}

torch::Tensor sum_dim_forward(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
    TORCH_CHECK(x.dim() >= 1, "x must have at least one dimension");
    const c10::cuda::CUDAGuard guard(x.device());
    const int64_t nd = x.dim();
    if (dim < 0) dim += nd;
    TORCH_CHECK(dim >= 0 && dim < nd, "dim out of range");
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
    for (int64_t d = dim + 1; d < nd; ++d) inner *= x.size(d);
    const int64_t R = x.size(dim);
    std::vector<int64_t> out_sizes(x.sizes().begin(), x.sizes().end());
    out_sizes[dim] = 1;
    auto y = torch::empty(out_sizes, x.options());
    if (y.numel() == 0) return y;
    if (R == 0) { y.zero_(); return y; }
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const float* xp = x.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    const bool aligned = reinterpret_cast<uintptr_t>(xp) % 16 == 0;

    if (inner == 1) {
        const int64_t blocks = (outer + 7) / 8;
        if (aligned && R % 4 == 0) rowsum_kernel<4><<<(unsigned)blocks, 256, 0, stream>>>(xp, yp, outer, R);
        else rowsum_kernel<1><<<(unsigned)blocks, 256, 0, stream>>>(xp, yp, outer, R);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
        return y;
    }

    const bool vec = aligned && inner % 4 == 0;
    const int VEC = vec ? 4 : 1;
    const int64_t col_blocks = (inner + TX * VEC - 1) / (TX * VEC);
    const int64_t base_blocks = col_blocks * outer;
    // ~8 blocks per SM (one full wave of 256-thread blocks, measured best on an H200), but keep
    // >= 64 rows per block so the partials stay tiny.
    const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    const int64_t want = 8LL * sms;
    int64_t splits = 1;
    if (base_blocks < want) splits = std::min<int64_t>((want + base_blocks - 1) / base_blocks, (R + 63) / 64);
    if (splits < 1) splits = 1;
    const int64_t rows_per_split = (R + splits - 1) / splits;
    splits = (R + rows_per_split - 1) / rows_per_split;
    const int64_t n_out = outer * inner;
    torch::Tensor part;
    float* dst = yp;
    if (splits > 1) {
        part = torch::empty({splits * n_out}, x.options());
        dst = part.data_ptr<float>();
    }
    const dim3 block(TX, TY);
    const int64_t grid = base_blocks * splits;
    if (vec) colsum_kernel<4><<<(unsigned)grid, block, 0, stream>>>(xp, dst, outer, R, inner, col_blocks, rows_per_split);
    else colsum_kernel<1><<<(unsigned)grid, block, 0, stream>>>(xp, dst, outer, R, inner, col_blocks, rows_per_split);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    if (splits > 1) {
        sum_splits_kernel<<<(unsigned)((n_out + 255) / 256), 256, 0, stream>>>(dst, yp, n_out, (int)splits);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return y;
}
"""

_ext = load_inline(
    name="sum_reduce_cuda_tiled",
    cpp_sources=_CPP_DECL,
    cuda_sources=_CUDA_SRC,
    functions=["sum_dim_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.sum_dim_forward(x, self.dim)
