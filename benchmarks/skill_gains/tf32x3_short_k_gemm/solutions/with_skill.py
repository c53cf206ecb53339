"""With the skill (tf32x3-split-precision): a 128 x 128 tile of C per block, 8 warps, each warp a
32 x 64 sub-tile (2 x 4 WMMA m16n16k8 accumulators), K staged 32 at a time in padded shared memory.
Each A and B fragment is split once into TF32 big + small and reused across the warp's other
fragments, then acc += a_small*b_big + a_big*b_small + a_big*b_big (fp32 accumulate).
Same tiling, staging and store as without.py; only the inner product differs (3 MMAs per fragment
pair instead of 8 x 8 FFMAs per thread). The first version (32 x 32 tiles, a k-step of 8, two
barriers per step) was bound by staging and barriers and lost to FFMA (0.83x on an H100,
docs/skills.md): the split pays only where the multiply is the bottleneck.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <mma.h>
using namespace nvcuda;

constexpr int BM = 128, BN = 128, BK = 32;
constexpr int LDA = BK + 4, LDB = BN + 4;       // padding: rows fall on different banks; still 16-byte multiples

// A[bm:bm+128, k0:k0+32] and B[k0:k0+32, bn:bn+128] into shared memory (zeros past the edges), 256 threads.
__device__ __forceinline__ void stage(const float* __restrict__ A, const float* __restrict__ B, float* sa, float* sb,
                                      int M, int N, int K, int bm, int bn, int k0) {
    #pragma unroll 4
    for (int i = threadIdx.x; i < BM * BK; i += 256) {
        const int r = i / BK, c = i % BK;                       // consecutive threads: consecutive k of one row
        sa[r * LDA + c] = bm + r < M && k0 + c < K ? A[(size_t)(bm + r) * K + k0 + c] : 0.f;
    }
    #pragma unroll 4
    for (int i = threadIdx.x; i < BK * BN; i += 256) {
        const int r = i / BN, c = i % BN;                       // consecutive threads: consecutive n of one row
        sb[r * LDB + c] = k0 + r < K && bn + c < N ? B[(size_t)(k0 + r) * N + bn + c] : 0.f;
    }
}

template <typename Frag>
__device__ __forceinline__ void split(Frag& big, Frag& small) {
    #pragma unroll
    for (int t = 0; t < big.num_elements; ++t) {
        const float v = big.x[t];
        big.x[t] = wmma::__float_to_tf32(v);
        small.x[t] = wmma::__float_to_tf32(v - big.x[t]);
    }
}

__global__ void __launch_bounds__(256) gemm_3xtf32(const float* __restrict__ A, const float* __restrict__ B,
                                                   float* __restrict__ C, int M, int N, int K) {
    __shared__ __align__(32) float sa[BM * LDA];
    __shared__ __align__(32) float sb[BK * LDB];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    const int wm = (warp >> 1) * 32, wn = (warp & 1) * 64;     // 4 x 2 warps of 32 x 64
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc[2][4];
    #pragma unroll
    for (int i = 0; i < 2; ++i)
        #pragma unroll
        for (int j = 0; j < 4; ++j) wmma::fill_fragment(acc[i][j], 0.f);
    wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> a_big[2], a_small[2];
    wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> b_big, b_small;
    for (int k0 = 0; k0 < K; k0 += BK) {
        stage(A, B, sa, sb, M, N, K, bm, bn, k0);
        __syncthreads();
        #pragma unroll
        for (int kk = 0; kk < BK; kk += 8) {
            #pragma unroll
            for (int i = 0; i < 2; ++i) {
                wmma::load_matrix_sync(a_big[i], sa + (wm + i * 16) * LDA + kk, LDA);
                split(a_big[i], a_small[i]);
            }
            #pragma unroll
            for (int j = 0; j < 4; ++j) {
                wmma::load_matrix_sync(b_big, sb + kk * LDB + wn + j * 16, LDB);
                split(b_big, b_small);
                #pragma unroll
                for (int i = 0; i < 2; ++i) {
                    wmma::mma_sync(acc[i][j], a_small[i], b_big, acc[i][j]);
                    wmma::mma_sync(acc[i][j], a_big[i], b_small, acc[i][j]);
                    wmma::mma_sync(acc[i][j], a_big[i], b_big, acc[i][j]);
                }
            }
        }
        __syncthreads();                                        // the tiles are read before the next stage
    }
    const bool whole = bm + BM <= M && bn + BN <= N && N % 4 == 0;
    float* scratch = sa + warp * 16 * 16;                       // 8 warps x 256 floats fit in sa after the loop
    #pragma unroll
    for (int i = 0; i < 2; ++i)
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int r0 = bm + wm + i * 16, c0 = bn + wn + j * 16;
            if (whole) {
                wmma::store_matrix_sync(C + (size_t)r0 * N + c0, acc[i][j], N, wmma::mem_row_major);
            } else {                                            // an edge tile: through shared memory, bounded
                wmma::store_matrix_sync(scratch, acc[i][j], 16, wmma::mem_row_major);
                __syncwarp();
                for (int e = lane; e < 256; e += 32) {
                    const int r = r0 + (e >> 4), c = c0 + (e & 15);
                    if (r < M && c < N) C[(size_t)r * N + c] = scratch[e];
                }
                __syncwarp();
            }
        }
}

torch::Tensor gemm(torch::Tensor A, torch::Tensor B) {
    TORCH_CHECK(A.is_cuda() && B.is_cuda() && A.scalar_type() == torch::kFloat32 && B.scalar_type() == torch::kFloat32,
                "float32 CUDA tensors expected");
    TORCH_CHECK(A.dim() == 2 && B.dim() == 2 && A.size(1) == B.size(0), "A [M, K] @ B [K, N] expected");
    A = A.contiguous(); B = B.contiguous();
    const int M = (int)A.size(0), K = (int)A.size(1), N = (int)B.size(1);
    auto C = torch::empty({M, N}, A.options());
    if (M == 0 || N == 0) return C;
    if (K == 0) return C.zero_();
    dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
    gemm_3xtf32<<<grid, 256, 0, at::cuda::getCurrentCUDAStream()>>>(A.data_ptr<float>(), B.data_ptr<float>(),
                                                                   C.data_ptr<float>(), M, N, K);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return C;
}
"""

_module = load_inline(
    name="skill_gain_gemm_3xtf32_t128",
    cpp_sources="torch::Tensor gemm(torch::Tensor A, torch::Tensor B);",
    cuda_sources=_cuda_source,
    functions=["gemm"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return _module.gemm(A, B)
