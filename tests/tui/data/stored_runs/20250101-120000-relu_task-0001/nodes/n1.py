"""One C++ source shared by the test candidates: built once, cached for every test that uses it."""
from torch.utils.cpp_extension import load_inline

SOURCE = r"""
#include <torch/extension.h>
#include <cstdlib>
#include <unistd.h>
#include <vector>

torch::Tensor relu2(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float* a = xc.data_ptr<float>();
    float* b = y.data_ptr<float>();
    const int64_t n = xc.numel();
    for (int64_t i = 0; i < n; ++i) b[i] = a[i] > 0.f ? 2.f * a[i] : 0.f;
    return y;
}
// An output the kernel never writes.
torch::Tensor unwritten(torch::Tensor x) { return torch::empty_like(x); }
// Writes the answer into its input and returns it (edits the inputs, aliases them).
torch::Tensor inplace_relu2(torch::Tensor x) {
    float* a = x.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) a[i] = a[i] > 0.f ? 2.f * a[i] : 0.f;
    return x;
}
// Wrong on the last element: an off-by-one tail.
torch::Tensor relu2_tail_bug(torch::Tensor x) {
    auto y = relu2(x);
    y.view(-1)[y.numel() - 1] = 123.0f;
    return y;
}
void segfault() { volatile int* p = nullptr; *p = 1; }
void spin() { volatile unsigned long i = 0; while (true) { ++i; } }
void hog() { std::vector<char*> v; while (true) { char* p = (char*)malloc(1 << 26); if (!p) throw std::bad_alloc(); for (size_t i = 0; i < (1u << 26); i += 4096) p[i] = 1; v.push_back(p); } }
void quit() { _exit(0); }
"""
FUNCTIONS = ["relu2", "unwritten", "inplace_relu2", "relu2_tail_bug", "segfault", "spin", "hog", "quit"]


def load():
    return load_inline(name="ks_test_toolkit", cpp_sources=SOURCE, functions=FUNCTIONS, extra_cflags=["-O2"])

import torch
import torch.nn as nn

ext = load()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu2_tail_bug(x)
