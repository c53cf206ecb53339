"""Sum over one dimension on the CPU: view the input as (outer, R, inner) and stream it once.

For a middle dimension (inner > 1) each OpenMP task owns one outer index and a strip of up to
256 inner columns; it walks the R rows top to bottom, adding four contiguous row strips at a
time into a float partial held in L1 (unit-stride loads, auto-vectorized, about one add per
element), and folds the partial into a double total every 64 rows. That two-level scheme keeps
the rounding error of a 4096-long sum near that of a pairwise sum, unlike a float running sum.
For the last dimension (inner == 1) each task reduces whole rows with an `omp simd` reduction
in double.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SRC = r"""
#include <torch/extension.h>
#include <vector>

torch::Tensor sum_dim_forward(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.device().is_cpu(), "x must be a CPU tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(x.dim() >= 1, "x must have at least one dimension");
    const int64_t nd = x.dim();
    if (dim < 0) dim += nd;
    TORCH_CHECK(dim >= 0 && dim < nd, "dim out of range");
    x = x.contiguous();
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
    for (int64_t d = dim + 1; d < nd; ++d) inner *= x.size(d);
    const int64_t R = x.size(dim);
    std::vector<int64_t> out_sizes(x.sizes().begin(), x.sizes().end());
    out_sizes[dim] = 1;
    auto y = torch::empty(out_sizes, x.options());
    const float* __restrict xp = x.data_ptr<float>();
    float* __restrict yp = y.data_ptr<float>();

    if (inner == 1) {
        #pragma omp parallel for schedule(static) if (outer * R > 32768)
        for (int64_t o = 0; o < outer; ++o) {
            const float* row = xp + o * R;
            double acc = 0.0;
            #pragma omp simd reduction(+:acc)
            for (int64_t r = 0; r < R; ++r) acc += (double)row[r];
            yp[o] = (float)acc;
        }
        return y;
    }

    // Strips of IB columns; rows are added four at a time into a float partial (a short
    // pairwise tree per element), and every RB rows the partial is folded into a double total.
    constexpr int64_t IB = 256;
    constexpr int64_t RB = 64;
    const int64_t nstrips = (inner + IB - 1) / IB;
    const int64_t ntasks = outer * nstrips;
    #pragma omp parallel for schedule(static) if (outer * R * inner > 32768)
    for (int64_t t = 0; t < ntasks; ++t) {
        const int64_t o = t / nstrips;
        const int64_t i0 = (t % nstrips) * IB;
        const int64_t w = inner - i0 < IB ? inner - i0 : IB;
        double acc[IB];
        float part[IB];
        for (int64_t i = 0; i < w; ++i) acc[i] = 0.0;
        const float* base = xp + o * R * inner + i0;
        for (int64_t r0 = 0; r0 < R; r0 += RB) {
            const int64_t r1 = r0 + RB < R ? r0 + RB : R;
            for (int64_t i = 0; i < w; ++i) part[i] = 0.0f;
            int64_t r = r0;
            for (; r + 4 <= r1; r += 4) {
                const float* __restrict a = base + r * inner;
                const float* __restrict b = a + inner;
                const float* __restrict c = b + inner;
                const float* __restrict d = c + inner;
                #pragma omp simd
                for (int64_t i = 0; i < w; ++i) part[i] += (a[i] + b[i]) + (c[i] + d[i]);
            }
            for (; r < r1; ++r) {
                const float* __restrict a = base + r * inner;
                #pragma omp simd
                for (int64_t i = 0; i < w; ++i) part[i] += a[i];
            }
            #pragma omp simd
            for (int64_t i = 0; i < w; ++i) acc[i] += (double)part[i];
        }
        float* __restrict dst = yp + o * inner + i0;
        for (int64_t i = 0; i < w; ++i) dst[i] = (float)acc[i];
    }
    return y;
}
"""

_ext = load_inline(
    name="sum_reduce_cpp_openmp",
    cpp_sources=_CPP_SRC,
    functions=["sum_dim_forward"],
    extra_cflags=["-O3", "-march=native", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.sum_dim_forward(x, self.dim)
