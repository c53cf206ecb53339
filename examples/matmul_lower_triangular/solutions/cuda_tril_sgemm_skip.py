"""tril(A) @ tril(B) with a tiled SGEMM that only visits the non-zero blocks.

For lower-triangular A and B, C[i, j] = sum_{k=j..i} A[i, k] * B[k, j]: C is lower-triangular
and each output tile needs only the K range between its column start and its row end. The
kernel is a 128x128-tile, 8x8-per-thread, double-buffered fp32 SGEMM (no tensor cores, exact
fp32) with three changes: (1) blocks above the diagonal only write zeros; (2) a block on tile
(by, bx) with by >= bx loops k over [128*bx, 128*(by+1)) instead of [0, N), and applies the
tril masks (k <= i for A, j <= k for B) while loading, so the inputs are never tril-ed in
memory; (3) the lower tiles are launched longest-first (by diagonal distance) to balance the
uneven per-tile work. Total work is ~N^3/6 multiply-adds plus a zero fill, versus eager's
two tril copies and a full N^3 GEMM.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_DECL = "torch::Tensor tril_matmul_forward(torch::Tensor A, torch::Tensor B);"

_CUDA_SRC = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cstdint>

constexpr int BM = 128, BN = 128, BK = 8, NT = 256;

// C = tril(A) @ tril(B) for N x N row-major A, B, C. T = ceil(N / 128) tiles per side.
template <bool GUARD>
__global__ void __launch_bounds__(NT, 2)
tril_sgemm_kernel(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int N, int T) {
    __shared__ __align__(16) float As[2][BK][BM];
    __shared__ __align__(16) float Bs[2][BK][BN];
    const int tid = threadIdx.x;
    const int tx = tid & 15, ty = tid >> 4;

    // Block -> tile. The first T(T+1)/2 blocks take the lower tiles, longest (largest by - bx) first.
    const int lower = T * (T + 1) / 2;
    int b = blockIdx.x;
    int by, bx;
    if (b < lower) {
        int d = T - 1;                        // diagonal distance by - bx, T - d tiles on it
        while (b >= T - d) { b -= T - d; --d; }
        bx = b;
        by = b + d;
    } else {
        b -= lower;                           // strictly upper tile: fill with zeros
        by = 0;
        while (b >= T - 1 - by) { b -= T - 1 - by; ++by; }
        bx = by + 1 + b;
        const int r = tid >> 1, c0 = (tid & 1) * 64;
        const int row = by * BM + r;
        if (row < N) {
            float* cr = C + (size_t)row * N + bx * BN + c0;
            if constexpr (!GUARD) {
                #pragma unroll
                for (int j = 0; j < 64; j += 4) *reinterpret_cast<float4*>(cr + j) = make_float4(0.f, 0.f, 0.f, 0.f);
            } else {
                for (int j = 0; j < 64; ++j) if (bx * BN + c0 + j < N) cr[j] = 0.0f;
            }
        }
        return;
    }
    const int bm = by * BM, bn = bx * BN;
    const int k_begin = bn;                    // k >= j >= bn
    const int k_end = min(N, bm + BM);         // k <= i < bm + BM
    const int a_r = tid >> 1, a_c = (tid & 1) << 2;
    const int b_r = tid >> 5, b_c = (tid & 31) << 2;

    auto load_a = [&](int k0) {                // tril(A)[row, col..col+3]
        const int row = bm + a_r, col = k0 + a_c;
        float v[4];
        if constexpr (!GUARD) {
            const float4 t = __ldg(reinterpret_cast<const float4*>(A + (size_t)row * N + col));
            v[0] = t.x; v[1] = t.y; v[2] = t.z; v[3] = t.w;
        } else {
            #pragma unroll
            for (int i = 0; i < 4; ++i) v[i] = (row < N && col + i < N) ? __ldg(A + (size_t)row * N + col + i) : 0.0f;
        }
        #pragma unroll
        for (int i = 0; i < 4; ++i) v[i] = (col + i <= row) ? v[i] : 0.0f;
        return make_float4(v[0], v[1], v[2], v[3]);
    };
    auto load_b = [&](int k0) {                // tril(B)[row, col..col+3]
        const int row = k0 + b_r, col = bn + b_c;
        float v[4];
        if constexpr (!GUARD) {
            const float4 t = __ldg(reinterpret_cast<const float4*>(B + (size_t)row * N + col));
            v[0] = t.x; v[1] = t.y; v[2] = t.z; v[3] = t.w;
        } else {
            #pragma unroll
            for (int i = 0; i < 4; ++i) v[i] = (row < N && col + i < N) ? __ldg(B + (size_t)row * N + col + i) : 0.0f;
        }
        #pragma unroll
        for (int i = 0; i < 4; ++i) v[i] = (col + i <= row) ? v[i] : 0.0f;
        return make_float4(v[0], v[1], v[2], v[3]);
    };
    auto store_tiles = [&](int buf, float4 ra, float4 rb) {
        As[buf][a_c + 0][a_r] = ra.x;
        As[buf][a_c + 1][a_r] = ra.y;
        As[buf][a_c + 2][a_r] = ra.z;
        As[buf][a_c + 3][a_r] = ra.w;
        *reinterpret_cast<float4*>(&Bs[buf][b_r][b_c]) = rb;
    };

    float acc[8][8];
    #pragma unroll
    for (int i = 0; i < 8; ++i) {
        #pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;
    }

    store_tiles(0, load_a(k_begin), load_b(k_begin));
    __syncthreads();
    int buf = 0;
    for (int k0 = k_begin; k0 < k_end; k0 += BK) {
        const bool has_next = k0 + BK < k_end;
        float4 ra, rb;
        if (has_next) { ra = load_a(k0 + BK); rb = load_b(k0 + BK); }
        #pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            const float4 a0 = *reinterpret_cast<const float4*>(&As[buf][kk][ty * 4]);
            const float4 a1 = *reinterpret_cast<const float4*>(&As[buf][kk][ty * 4 + 64]);
            const float4 b0 = *reinterpret_cast<const float4*>(&Bs[buf][kk][tx * 4]);
            const float4 b1 = *reinterpret_cast<const float4*>(&Bs[buf][kk][tx * 4 + 64]);
            const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
            #pragma unroll
            for (int i = 0; i < 8; ++i) {
                #pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
            }
        }
        if (has_next) {
            store_tiles(buf ^ 1, ra, rb);
            __syncthreads();
            buf ^= 1;
        }
    }

    #pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int row = bm + (i < 4 ? ty * 4 + i : 64 + ty * 4 + (i - 4));
        #pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int col = bn + h * 64 + tx * 4;
            const float4 v = make_float4(acc[i][h * 4 + 0], acc[i][h * 4 + 1], acc[i][h * 4 + 2], acc[i][h * 4 + 3]);
            if constexpr (!GUARD) {
                *reinterpret_cast<float4*>(C + (size_t)row * N + col) = v;
            } else if (row < N) {
                const float vv[4] = {v.x, v.y, v.z, v.w};
                #pragma unroll
                for (int j = 0; j < 4; ++j) if (col + j < N) C[(size_t)row * N + col + j] = vv[j];
            }
        }
    }
}

torch::Tensor tril_matmul_forward(torch::Tensor A, torch::Tensor B) {
    TORCH_CHECK(A.is_cuda() && B.is_cuda(), "tensors must be CUDA tensors");
    TORCH_CHECK(A.scalar_type() == torch::kFloat32 && B.scalar_type() == torch::kFloat32, "tensors must be float32");
    TORCH_CHECK(A.dim() == 2 && B.dim() == 2 && A.size(0) == A.size(1) && B.sizes() == A.sizes(),
                "expected square A and B of the same size");
    TORCH_CHECK(A.is_contiguous() && B.is_contiguous(), "tensors must be contiguous");
    TORCH_CHECK(A.size(0) < (1LL << 31), "matrix too large");
    const c10::cuda::CUDAGuard guard(A.device());
    const int N = (int)A.size(0);
    auto C = torch::empty({N, N}, A.options());
    if (N == 0) return C;
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const float* ap = A.data_ptr<float>();
    const float* bp = B.data_ptr<float>();
    float* cp = C.data_ptr<float>();
    auto al = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    const int T = (N + BM - 1) / BM;
    const int64_t blocks = (int64_t)T * T;
    TORCH_CHECK(blocks <= 0x7fffffffLL, "matrix too large");
    if (N % BM == 0 && al(ap) && al(bp) && al(cp))
        tril_sgemm_kernel<false><<<(unsigned)blocks, NT, 0, stream>>>(ap, bp, cp, N, T);
    else
        tril_sgemm_kernel<true><<<(unsigned)blocks, NT, 0, stream>>>(ap, bp, cp, N, T);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return C;
}
"""

_ext = load_inline(
    name="matmul_lower_triangular_cuda_skip",
    cpp_sources=_CPP_DECL,
    cuda_sources=_CUDA_SRC,
    functions=["tril_matmul_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return _ext.tril_matmul_forward(A, B)
