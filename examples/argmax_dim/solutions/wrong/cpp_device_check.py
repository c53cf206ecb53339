# expect: runtime_error -- the CPU kernel guards its input with TORCH_CHECK(x.is_cuda()) copied from a CUDA version, so every call on the CPU backend raises before any work is done.
"""argmax over one dim on the CPU with OpenMP (WRONG: rejects CPU tensors).

Plausible bug: the input checks were copied from the CUDA launcher. The kernel body itself
(first maximum wins, NaN wins) would be correct.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SRC = r"""
#include <torch/extension.h>
#include <vector>

torch::Tensor argmax_forward(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");          // BUG: this is the CPU backend
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    x = x.contiguous();
    const int64_t nd = x.dim();
    if (dim < 0) dim += nd;
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
    for (int64_t d = dim + 1; d < nd; ++d) inner *= x.size(d);
    const int64_t R = x.size(dim);
    std::vector<int64_t> out_sizes;
    for (int64_t d = 0; d < nd; ++d) if (d != dim) out_sizes.push_back(x.size(d));
    auto out = torch::empty(out_sizes, x.options().dtype(torch::kInt64));
    const float* xp = x.data_ptr<float>();
    int64_t* op = out.data_ptr<int64_t>();
    #pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < outer * inner; ++t) {
        const int64_t o = t / inner, i = t % inner;
        const float* col = xp + o * R * inner + i;
        float best = col[0];
        int64_t bi = 0;
        for (int64_t r = 1; r < R; ++r) {
            const float v = col[r * inner];
            if (v > best || (v != v && best == best)) { best = v; bi = r; }
        }
        op[t] = bi;
    }
    return out;
}
"""

_ext = load_inline(
    name="argmax_dim_wrong_device_check",
    cpp_sources=_CPP_SRC,
    functions=["argmax_forward"],
    extra_cflags=["-O3", "-march=native", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.argmax_forward(x, self.dim)
