"""LayerNorm over the last three dims of KernelBench level1/40_LayerNorm: an honest CUDA candidate.

The task normalizes each of 16 rows of 64·256·256 = 4,194,304 floats (16 MB per row), so one
block per row (PyTorch's own kernel: 8.1 ms on an H100) leaves 116 of 132 SMs idle. Here every
row is cut into chunks of 4096 floats and the grid has one block per (row, chunk):

1. ``chunk_moments``: each block loads its chunk once into registers (float4 loads) and writes the
   chunk's exact two-pass moments (mean, sum of squared deviations), fp32 over 4096 values;
2. ``row_stats``: one block per row merges its chunks' moments in fp64 (Chan's formula, as two
   sums: the mean, then M2 = Σ M2_c + Σ n_c (mean_c − mean)²) into (mean, rstd);
3. ``normalize``: one block per (row, chunk) reads x again and writes (x − mean)·rstd·w + b.

HBM traffic is two reads of x and one write of y (805 MB; ~0.28 ms at 2.9 TB/s). Block b handles
row b % rows, chunk b / rows: the rows' blocks that read one chunk of weight and bias run side by
side, so w and b (16 MB each) are read from HBM about once. Rows whose length is not a multiple
of 4, or tensors not 16-byte aligned, take the same kernels' scalar path.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_DECL = "torch::Tensor layernorm_rows_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps);"

_CUDA_SRC = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cstdint>

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kVec = 4;                         // float4s per thread per chunk
constexpr int kPer = kVec * 4;                  // floats per thread per chunk
constexpr int kChunk = kThreads * kPer;         // 4096 floats per block

template <typename T>
__device__ __forceinline__ T block_sum(T v, T* red) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
    __syncthreads();
    T r = threadIdx.x < kWarps ? red[threadIdx.x] : T(0);
    if (threadIdx.x < 32) {
        #pragma unroll
        for (int o = 16; o > 0; o >>= 1) r += __shfl_xor_sync(0xffffffffu, r, o);
    }
    if (threadIdx.x == 0) red[kWarps] = r;
    __syncthreads();
    return red[kWarps];   // each call gets its own `red`: no barrier needed before the next one
}

// Whether value k of this thread's kPer lies inside a chunk of n floats.
template <bool VEC>
__device__ __forceinline__ bool inside(int k, int n) {
    return VEC ? 4 * ((k / 4) * kThreads + (int)threadIdx.x) < n : k * kThreads + (int)threadIdx.x < n;
}

template <bool VEC>
__global__ void __launch_bounds__(kThreads)
chunk_moments(const float* __restrict__ x, int64_t H, int64_t rows, int64_t chunks, float2* __restrict__ part) {
    __shared__ float red[2][kWarps + 1];
    const int64_t blk = blockIdx.x;
    const int64_t row = blk % rows, c = blk / rows;
    const int64_t base = c * kChunk;
    const int n = (int)min((int64_t)kChunk, H - base);
    const float* xc = x + row * H + base;
    float v[kPer];
    float s = 0.0f;
    if (VEC) {
        const float4* x4 = reinterpret_cast<const float4*>(xc);
        #pragma unroll
        for (int j = 0; j < kVec; ++j) {
            const int i = j * kThreads + threadIdx.x;
            float4 t = make_float4(0.f, 0.f, 0.f, 0.f);
            if (4 * i < n) t = x4[i];
            v[4 * j] = t.x; v[4 * j + 1] = t.y; v[4 * j + 2] = t.z; v[4 * j + 3] = t.w;
            s += (t.x + t.y) + (t.z + t.w);
        }
    } else {
        #pragma unroll
        for (int k = 0; k < kPer; ++k) {
            const int i = k * kThreads + threadIdx.x;
            v[k] = i < n ? xc[i] : 0.0f;
            s += v[k];
        }
    }
    const float mean = block_sum(s, red[0]) / (float)n;
    float q = 0.0f;
    #pragma unroll
    for (int k = 0; k < kPer; ++k) {
        if (inside<VEC>(k, n)) { const float d = v[k] - mean; q = fmaf(d, d, q); }
    }
    const float m2 = block_sum(q, red[1]);
    if (threadIdx.x == 0) part[row * chunks + c] = make_float2(mean, m2);
}

__global__ void __launch_bounds__(kThreads)
row_stats(const float2* __restrict__ part, int64_t H, int64_t chunks, double eps, float2* __restrict__ stats) {
    __shared__ double red[2][kWarps + 1];
    const int64_t row = blockIdx.x;
    const float2* p = part + row * chunks;
    double s = 0.0;
    for (int64_t c = threadIdx.x; c < chunks; c += kThreads) {
        const double n = (double)min((int64_t)kChunk, H - c * kChunk);
        s += n * (double)p[c].x;
    }
    const double mean = block_sum(s, red[0]) / (double)H;
    double m2 = 0.0;
    for (int64_t c = threadIdx.x; c < chunks; c += kThreads) {
        const double n = (double)min((int64_t)kChunk, H - c * kChunk);
        const double d = (double)p[c].x - mean;
        m2 += (double)p[c].y + n * d * d;
    }
    const double var = block_sum(m2, red[1]) / (double)H;     // biased, as nn.LayerNorm
    if (threadIdx.x == 0) stats[row] = make_float2((float)mean, (float)(1.0 / sqrt(var + eps)));
}

template <bool VEC>
__global__ void __launch_bounds__(kThreads)
normalize(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
          const float2* __restrict__ stats, float* __restrict__ y, int64_t H, int64_t rows) {
    const int64_t blk = blockIdx.x;
    const int64_t row = blk % rows, c = blk / rows;
    const int64_t base = c * kChunk;
    const int n = (int)min((int64_t)kChunk, H - base);
    const float2 st = stats[row];
    const float mean = st.x, rstd = st.y;
    const float* xc = x + row * H + base;
    float* yc = y + row * H + base;
    if (VEC) {
        const float4* x4 = reinterpret_cast<const float4*>(xc);
        const float4* w4 = reinterpret_cast<const float4*>(w + base);
        const float4* b4 = reinterpret_cast<const float4*>(b + base);
        float4* y4 = reinterpret_cast<float4*>(yc);
        #pragma unroll
        for (int j = 0; j < kVec; ++j) {
            const int i = j * kThreads + threadIdx.x;
            if (4 * i < n) {
                const float4 t = __ldcs(x4 + i), ww = __ldg(w4 + i), bb = __ldg(b4 + i);
                float4 o;
                o.x = fmaf((t.x - mean) * rstd, ww.x, bb.x);
                o.y = fmaf((t.y - mean) * rstd, ww.y, bb.y);
                o.z = fmaf((t.z - mean) * rstd, ww.z, bb.z);
                o.w = fmaf((t.w - mean) * rstd, ww.w, bb.w);
                __stcs(y4 + i, o);
            }
        }
    } else {
        #pragma unroll
        for (int k = 0; k < kPer; ++k) {
            const int i = k * kThreads + threadIdx.x;
            if (i < n) yc[i] = fmaf((xc[i] - mean) * rstd, w[base + i], b[base + i]);
        }
    }
}

torch::Tensor layernorm_rows_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "tensors must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32 &&
                bias.scalar_type() == torch::kFloat32, "tensors must be float32");
    TORCH_CHECK(weight.sizes() == bias.sizes(), "weight and bias must have the same shape");
    const int64_t nd = weight.dim();
    TORCH_CHECK(x.dim() >= nd, "the input has fewer dims than normalized_shape");
    for (int64_t i = 0; i < nd; ++i)
        TORCH_CHECK(x.size(x.dim() - nd + i) == weight.size(i), "the input's trailing dims must be normalized_shape");
    const c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto w = weight.contiguous();
    auto b = bias.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t H = w.numel();
    if (xc.numel() == 0 || H == 0) return y;
    const int64_t rows = xc.numel() / H;
    const int64_t chunks = (H + kChunk - 1) / kChunk;
    TORCH_CHECK(rows * chunks <= 0x7fffffffLL, "too many blocks");
    auto part = torch::empty({rows * chunks * 2}, xc.options());
    auto stats = torch::empty({rows * 2}, xc.options());
    const float* xp = xc.data_ptr<float>();
    const float* wp = w.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    float2* pp = reinterpret_cast<float2*>(part.data_ptr<float>());
    float2* sp = reinterpret_cast<float2*>(stats.data_ptr<float>());
    auto al = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    const bool vec = H % 4 == 0 && al(xp) && al(wp) && al(bp) && al(yp);
    const unsigned grid = (unsigned)(rows * chunks);
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    if (vec) chunk_moments<true><<<grid, kThreads, 0, stream>>>(xp, H, rows, chunks, pp);
    else chunk_moments<false><<<grid, kThreads, 0, stream>>>(xp, H, rows, chunks, pp);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    row_stats<<<(unsigned)rows, kThreads, 0, stream>>>(pp, H, chunks, eps, sp);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    if (vec) normalize<true><<<grid, kThreads, 0, stream>>>(xp, wp, bp, sp, yp, H, rows);
    else normalize<false><<<grid, kThreads, 0, stream>>>(xp, wp, bp, sp, yp, H, rows);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

_ext = load_inline(
    name="layernorm_kb40_rows",
    cpp_sources=_CPP_DECL,
    cuda_sources=_CUDA_SRC,
    functions=["layernorm_rows_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)   # the reference's parameter names

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.layernorm_rows_forward(x, self.ln.weight, self.ln.bias, self.ln.eps)
