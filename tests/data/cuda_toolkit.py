"""The CUDA twin of toolkit.py: one extension shared by the GPU test candidates."""
from torch.utils.cpp_extension import load_inline

CPP = """
torch::Tensor relu2(torch::Tensor x);
torch::Tensor unwritten(torch::Tensor x);
torch::Tensor inplace_relu2(torch::Tensor x);
torch::Tensor relu2_tail_bug(torch::Tensor x);
torch::Tensor illegal(torch::Tensor x);
torch::Tensor spin(torch::Tensor x);
void segfault();
void hog();
void quit();
"""
CUDA = r"""
#include <ATen/cuda/CUDAContext.h>
#include <unistd.h>
#include <vector>

__global__ void relu2_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n, int64_t upto) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < upto && i < n) y[i] = x[i] > 0.f ? 2.f * x[i] : 0.f;
}
__global__ void spin_kernel(float* y) { while (y[0] == y[0]) { y[1] = 0.f; } }

static torch::Tensor launch(torch::Tensor x, torch::Tensor y, int64_t upto, cudaStream_t s) {
    int64_t n = x.numel();
    relu2_kernel<<<(n + 255) / 256, 256, 0, s>>>(x.data_ptr<float>(), y.data_ptr<float>(), n, upto);
    return y;
}
torch::Tensor relu2(torch::Tensor x) {
    return launch(x, torch::empty_like(x), x.numel(), at::cuda::getCurrentCUDAStream());
}
torch::Tensor unwritten(torch::Tensor x) { return torch::empty_like(x); }
torch::Tensor inplace_relu2(torch::Tensor x) { return launch(x, x, x.numel(), at::cuda::getCurrentCUDAStream()); }
torch::Tensor relu2_tail_bug(torch::Tensor x) {
    // The last element is never written: it keeps 123, as the C++ toolkit's does (a 0 there would
    // pass wherever relu of the last input is 0, in every trial of a seed: a coin toss per seed).
    return launch(x, torch::full_like(x, 123.0f), x.numel() - 1, at::cuda::getCurrentCUDAStream());
}
torch::Tensor illegal(torch::Tensor x) {
    auto y = torch::empty_like(x);
    relu2_kernel<<<1, 1, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), y.data_ptr<float>() + (1ll << 40), 1, 1);
    return y;
}
torch::Tensor spin(torch::Tensor x) {
    auto y = torch::ones({2}, x.options());
    spin_kernel<<<1, 1, 0, at::cuda::getCurrentCUDAStream()>>>(y.data_ptr<float>());
    return y;
}
void segfault() { volatile int* p = nullptr; *p = 1; }
void hog() { std::vector<torch::Tensor> v; while (true) v.push_back(torch::empty({1ll << 32}, torch::dtype(torch::kFloat).device(torch::kCUDA))); }
void quit() { _exit(0); }
"""
FUNCTIONS = ["relu2", "unwritten", "inplace_relu2", "relu2_tail_bug", "illegal", "spin",
             "segfault", "hog", "quit"]


def load():
    return load_inline(name="ks_test_cuda_toolkit", cpp_sources=CPP, cuda_sources=CUDA, functions=FUNCTIONS,
                       extra_cuda_cflags=["-O2"])
