# expect: incorrect -- reduces over the last dim only (per-sample losses of shape (batch,)) instead of over every element (0-dim)
"""WRONG C++ CPU candidate (kept on purpose for the evaluator's tests).

A fused, vectorized squared-error kernel with the wrong reduction axis: it returns the
per-row mean mean((pred - target)^2, dim=-1) -- the per-sample loss a training loop might
want -- instead of the single mean over all elements that the reference returns.  The
values are each close to the right answer (every row mean estimates the same quantity),
which is exactly why the evaluator must compare shapes before values.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cpp_source = r"""
#include <torch/extension.h>
#include <omp.h>

torch::Tensor mse_forward(torch::Tensor pred, torch::Tensor target) {
    TORCH_CHECK(!pred.is_cuda() && pred.scalar_type() == torch::kFloat32 && pred.sizes() == target.sizes() &&
                pred.is_contiguous() && target.is_contiguous(), "contiguous float32 CPU tensors expected");
    const int64_t D = pred.size(-1);
    const int64_t rows = pred.numel() / D;
    auto out = torch::empty({rows}, pred.options());                 // BUG: one value per row
    const float* a = pred.data_ptr<float>();
    const float* b = target.data_ptr<float>();
    float* o = out.data_ptr<float>();
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        float acc = 0.f;
        #pragma omp simd reduction(+:acc)
        for (int64_t j = 0; j < D; ++j) { const float d = a[r * D + j] - b[r * D + j]; acc += d * d; }
        o[r] = acc / (float)D;
    }
    return out;
}
"""

_module = load_inline(
    name="mse_loss_chain_cpp_wrong_per_row",
    cpp_sources=_cpp_source,
    functions=["mse_forward"],
    extra_cflags=["-O3", "-march=native", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return _module.mse_forward(predictions.contiguous(), targets.contiguous())
