"""With the skill (cluster-dsmem-group-statistics): each (sample, group) slice of 262144 values is split
over a cluster of 8 blocks (__cluster_dims__, sm_90) that exchange their partial sums through
distributed shared memory (cluster.map_shared_rank, cluster.sync): 128 blocks instead of 16, one
launch, the same two-round statistics and normalization as without.py.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
constexpr int CL = 8;                    // blocks per (sample, group)

__device__ float block_sum(float v, float* sh) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    v = (threadIdx.x & 31) < (blockDim.x >> 5) ? sh[threadIdx.x & 31] : 0.f;   // every warp reads the partials
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// The cluster's CL blocks exchange their partial sums through distributed shared memory.
__device__ float combine(float mine, float* slot) {
    cg::cluster_group cl = cg::this_cluster();
    if (threadIdx.x == 0) *slot = mine;
    cl.sync();                                             // every rank's partial is written
    float total = 0.f;
    for (int r = 0; r < CL; ++r) total += *cl.map_shared_rank(slot, r);   // the same order in every block
    cl.sync();                                             // remote reads done before the slot is reused or freed
    return total;
}

// GroupNorm over x [N, C, HW], G groups: the (n, g) slice of S = (C / G) * HW values is split over CL blocks;
// two rounds (mean, then squared deviations around it), then the normalization of the block's part.
__global__ void __cluster_dims__(CL, 1, 1) __launch_bounds__(512)
groupnorm(const float* __restrict__ x, const float* __restrict__ gamma, const float* __restrict__ beta,
          float* __restrict__ y, int C, int HW, int G, float eps) {
    __shared__ float sh[32];
    __shared__ float slot;
    const int grp = blockIdx.x / CL, rank = blockIdx.x % CL, cpg = C / G;
    const long long S = (long long)cpg * HW, lo = S * rank / CL, hi = S * (rank + 1) / CL;
    const float* xg = x + (size_t)grp * S;
    float s = 0.f;
    for (long long i = lo + threadIdx.x; i < hi; i += blockDim.x) s += xg[i];
    const float mean = combine(block_sum(s, sh), &slot) / (float)S;
    float q = 0.f;
    for (long long i = lo + threadIdx.x; i < hi; i += blockDim.x) { const float d = xg[i] - mean; q += d * d; }
    const float rstd = rsqrtf(combine(block_sum(q, sh), &slot) / (float)S + eps);
    const int c0 = (grp % G) * cpg;
    for (long long i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        const int c = c0 + (int)(i / HW);
        y[(size_t)grp * S + i] = (xg[i] - mean) * rstd * gamma[c] + beta[c];
    }
}

torch::Tensor forward(torch::Tensor x, torch::Tensor gamma, torch::Tensor beta, int64_t G, double eps) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() >= 2, "float32 CUDA input expected");
    x = x.contiguous(); gamma = gamma.contiguous(); beta = beta.contiguous();
    const int N = (int)x.size(0), C = (int)x.size(1);
    const int HW = (int)(x.numel() / ((long long)N * C));
    TORCH_CHECK(C % G == 0, "channels must divide into groups");
    auto y = torch::empty_like(x);
    if (y.numel() == 0) return y;
    groupnorm<<<(unsigned)(N * G * CL), 512, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), gamma.data_ptr<float>(), beta.data_ptr<float>(), y.data_ptr<float>(), C, HW, (int)G, (float)eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

_module = load_inline(
    name="skill_gain_groupnorm_cluster",
    cpp_sources="torch::Tensor forward(torch::Tensor x, torch::Tensor gamma, torch::Tensor beta, int64_t G, double eps);",
    cuda_sources=_cuda_source,
    functions=["forward"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90,code=sm_90"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, channels, groups):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels)

    def forward(self, x):
        return _module.forward(x, self.norm.weight, self.norm.bias, self.norm.num_groups, self.norm.eps)
