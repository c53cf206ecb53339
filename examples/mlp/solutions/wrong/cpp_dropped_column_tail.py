# expect: incorrect -- the column loop drops the partial last micro-tile, so output columns past the last full group of 6 are never written
"""WRONG C++ CPU candidate (kept on purpose for the evaluator's tests).

Same three-layer packed SGEMM as cpp_packed_gemm_fused_layers.py, with a classic tail bug:
the loop over output columns runs `j + NC <= j_end` instead of `j < j_end`, so when a
layer's width is not a multiple of the 6-column micro-tile (hidden2 = 200 and
output_size = 10 at the small preset) the last columns of each column block keep whatever
torch::empty left there, and ReLU/bias are never applied to them.  It compiles, runs and
is fast -- only a comparison with the reference catches it.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cpp_source = r"""
#include <torch/extension.h>
#include <omp.h>
#include <algorithm>
#include <cstring>

#if defined(__AVX512F__)
constexpr int VL = 16;
#else
constexpr int VL = 8;
#endif
typedef float vf __attribute__((vector_size(VL * sizeof(float))));
constexpr int PR = 2 * VL;   // rows of x per packed panel: two vectors
constexpr int NC = 6;        // output columns per micro-tile: 12 vector accumulators
constexpr int JB = 48;       // output columns per OpenMP work item (8 micro-tiles)

static inline vf vload(const float* p) { vf v; std::memcpy(&v, p, sizeof(vf)); return v; }
static inline void vstore(float* p, vf v) { std::memcpy(p, &v, sizeof(vf)); }

// Pack x (M, K) into row panels Xp[p][k][0..PR) = x[p*PR + r][k], zero rows past M.
static void pack_rows(const float* X, int64_t M, int64_t K, float* Xp) {
    const int64_t np = (M + PR - 1) / PR;
    #pragma omp parallel for schedule(static) if(M * K > 65536)
    for (int64_t p = 0; p < np; ++p) {
        float* dst = Xp + p * K * PR;
        const int64_t m0 = p * PR;
        const int mr = (int)std::min<int64_t>(PR, M - m0);
        for (int64_t k0 = 0; k0 < K; k0 += 64) {            // 64 x PR tiles stay in L1
            const int64_t k1 = std::min<int64_t>(K, k0 + 64);
            for (int r = 0; r < PR; ++r) {
                if (r < mr) {
                    const float* src = X + (m0 + r) * K;
                    for (int64_t k = k0; k < k1; ++k) dst[k * PR + r] = src[k];
                } else {
                    for (int64_t k = k0; k < k1; ++k) dst[k * PR + r] = 0.f;
                }
            }
        }
    }
}

// Output tile: rows [m0, m0+mr) x columns [n0, n0+nc) of C = act(x W^T + b).
// Xp: packed panel (K x PR); W rows n0.. at stride K.
static inline void micro_kernel(const float* Xp, const float* W, int64_t K, const float* bias,
                                float* C, int64_t ldc, int mr, int nc, bool relu) {
    const float* w[NC];
    for (int c = 0; c < NC; ++c) w[c] = W + (int64_t)std::min(c, nc - 1) * K;  // clamp: no over-read
    vf a0[NC], a1[NC];
    for (int c = 0; c < NC; ++c) { a0[c] = vf{}; a1[c] = vf{}; }
    for (int64_t k = 0; k < K; ++k) {
        const vf x0 = vload(Xp + k * PR);
        const vf x1 = vload(Xp + k * PR + VL);
        #pragma GCC unroll 6
        for (int c = 0; c < NC; ++c) {
            const float wv = w[c][k];
            a0[c] += wv * x0;
            a1[c] += wv * x1;
        }
    }
    const vf zero = vf{};
    for (int c = 0; c < nc; ++c) {
        vf v0 = a0[c] + bias[c], v1 = a1[c] + bias[c];
        if (relu) { v0 = v0 > zero ? v0 : zero; v1 = v1 > zero ? v1 : zero; }
        float tmp[PR];
        vstore(tmp, v0); vstore(tmp + VL, v1);
        float* col = C + c;
        for (int r = 0; r < mr; ++r) col[r * ldc] = tmp[r];   // transposed store of one column
    }
}

torch::Tensor linear_act(torch::Tensor x, torch::Tensor w, torch::Tensor b, bool relu) {
    TORCH_CHECK(!x.is_cuda() && !w.is_cuda() && !b.is_cuda(), "CPU tensors expected");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32 &&
                b.scalar_type() == torch::kFloat32, "float32 tensors expected");
    TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && b.dim() == 1, "x (M,K), w (N,K), b (N) expected");
    TORCH_CHECK(x.is_contiguous() && w.is_contiguous() && b.is_contiguous(), "contiguous tensors expected");
    const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
    TORCH_CHECK(w.size(1) == K && b.size(0) == N, "shape mismatch");

    auto out = torch::empty({M, N}, x.options());
    if (M == 0 || N == 0) return out;
    const int64_t np = (M + PR - 1) / PR;
    auto xp_t = torch::empty({np * std::max<int64_t>(K, 1) * PR}, x.options());
    float* Xp = xp_t.data_ptr<float>();
    pack_rows(x.data_ptr<float>(), M, K, Xp);

    const float* W = w.data_ptr<float>();
    const float* B = b.data_ptr<float>();
    float* Y = out.data_ptr<float>();
    const int64_t njb = (N + JB - 1) / JB;
    #pragma omp parallel for collapse(2) schedule(static) if(M * N * K > 200000)
    for (int64_t p = 0; p < np; ++p) {
        for (int64_t jb = 0; jb < njb; ++jb) {
            const int64_t m0 = p * PR;
            const int mr = (int)std::min<int64_t>(PR, M - m0);
            const int64_t j_end = std::min(N, (jb + 1) * JB);
            for (int64_t j = jb * JB; j + NC <= j_end; j += NC) {   // BUG: drops the column tail
                const int nc = (int)std::min<int64_t>(NC, j_end - j);
                micro_kernel(Xp + p * K * PR, W + j * K, K, B + j, Y + m0 * N + j, N, mr, nc, relu);
            }
        }
    }
    return out;
}

torch::Tensor mlp_forward(torch::Tensor x, torch::Tensor w1, torch::Tensor b1, torch::Tensor w2,
                          torch::Tensor b2, torch::Tensor w3, torch::Tensor b3) {
    auto h1 = linear_act(x, w1, b1, true);     // fc1 + bias + ReLU in one pass over the output
    auto h2 = linear_act(h1, w2, b2, true);    // fc2 + bias + ReLU
    return linear_act(h2, w3, b3, false);      // fc3 + bias
}
"""

_module = load_inline(
    name="mlp_cpp_wrong_column_tail",
    cpp_sources=_cpp_source,
    functions=["mlp_forward"],
    extra_cflags=["-O3", "-march=native", "-fopenmp", "-ffp-contract=fast"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden1, hidden2, output_size):
        super().__init__()
        self.fc1 = nn.Linear(input_size, hidden1)
        self.fc2 = nn.Linear(hidden1, hidden2)
        self.fc3 = nn.Linear(hidden2, output_size)

    def forward(self, x):
        return _module.mlp_forward(x.contiguous(), self.fc1.weight, self.fc1.bias,
                                   self.fc2.weight, self.fc2.bias, self.fc3.weight, self.fc3.bias)
