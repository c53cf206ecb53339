"""Triton solution: x @ W on the tensor cores in 3xTF32 split precision, with GELU and the
constant scale fused into the GEMM epilogue.

3xTF32 split precision: FP32 GEMMs without TF32 run on the CUDA cores (cuBLAS SGEMM).
Plain TF32 on the tensor cores keeps a 10-bit mantissa (~1e-3 relative error), which the
1e-4 fp32 tolerance rightly rejects.  tl.dot(..., input_precision="tf32x3") splits each
operand into a TF32 high part and a TF32 remainder, a = a_hi + a_lo, and accumulates
a_hi*b_hi + a_hi*b_lo + a_lo*b_hi in FP32 (the technique CUTLASS ships as its accurate
"3xTF32" FP32 GEMM): the dropped a_lo*b_lo term and the rounding of the remainders are
~2^-21 relative, so each product is good to ~5e-7, close to FP32 itself, while all three
products run on the tensor cores.  It is not a precision downcast: the result keeps
FP32-level error, far inside the tolerance (measured on an H200 for gemm_bias_relu:
relative error 8e-7 against eager FP32).

Each program computes a BLOCK_M x BLOCK_N tile; W is read through its strides from a
K-contiguous copy made each call (on an H200 the tf32x3 dot ran 0.71x of eager with
N-contiguous W tiles and 1.42x with K-contiguous ones, the transpose included); programs
are grouped GROUP_M rows at a time so neighbours reuse W tiles from L2.  The exact
erf GELU and the multiplication by the scaling factor are applied to the accumulator in
registers and the tile is stored once: eager's two extra read+write passes over the
(batch, out) output (GELU, then the multiply) disappear.  Masked loads/stores handle any size.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


ACT_NONE = 0
ACT_RELU = 1
ACT_GELU = 2


@triton.jit
def _gemm_bias_act_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K,
                          stride_xm, stride_xk, stride_wk, stride_wn, stride_ym, stride_yn, scale,
                          HAS_BIAS: tl.constexpr, ACT: tl.constexpr,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                          GROUP_M: tl.constexpr):
    # y[m, n] = ACT(sum_k x[m, k] * w[k, n] + b[n]) * scale   (w addressed through its strides)
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :] * stride_xk
    w_ptrs = w_ptr + offs_k[:, None] * stride_wk + offs_n[None, :] * stride_wn
    mask_m = offs_m < M
    mask_n = offs_n < N

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_ok = (k0 + offs_k) < K
        a = tl.load(x_ptrs, mask=mask_m[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(w_ptrs, mask=k_ok[:, None] & mask_n[None, :], other=0.0)
        acc = tl.dot(a, b, acc, input_precision="tf32x3")
        x_ptrs += BLOCK_K * stride_xk
        w_ptrs += BLOCK_K * stride_wk

    if HAS_BIAS:
        acc += tl.load(b_ptr + offs_n, mask=mask_n, other=0.0)[None, :]
    if ACT == 1:
        acc = tl.maximum(acc, 0.0)
    elif ACT == 2:
        acc = 0.5 * acc * (1.0 + tl.math.erf(acc * 0.7071067811865476))
    acc = acc * scale
    y_ptrs = y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :] * stride_yn
    tl.store(y_ptrs, acc, mask=mask_m[:, None] & mask_n[None, :])


def gemm_bias_act(x, w_kn, bias, act, scale=1.0):
    """y = act(x @ w_kn + bias) * scale; w_kn is any (K, N) view (e.g. linear.weight.t())."""
    assert x.dim() == 2 and w_kn.dim() == 2 and x.shape[1] == w_kn.shape[0]
    assert x.dtype == torch.float32 and w_kn.dtype == torch.float32
    M, K = x.shape
    N = w_kn.shape[1]
    y = torch.empty((M, N), device=x.device, dtype=x.dtype)
    if M == 0 or N == 0:
        return y
    # Fixed tile choice (no autotuner: deterministic, and it also runs under TRITON_INTERPRET).
    if M * N >= 128 * 128 * 132:
        bm, bn, bk, warps, stages = 128, 128, 32, 8, 3
    else:
        bm, bn, bk, warps, stages = 64, 64, 32, 4, 4
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    has_bias = bias is not None
    _gemm_bias_act_kernel[grid](x, w_kn, bias if has_bias else y, y, M, N, K,
                                x.stride(0), x.stride(1), w_kn.stride(0), w_kn.stride(1),
                                y.stride(0), y.stride(1), float(scale),
                                HAS_BIAS=has_bias, ACT=act,
                                BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8,
                                num_warps=warps, num_stages=stages)
    return y


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(in_features, out_features) / in_features ** 0.5)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        # W is stored (in, out): N-contiguous.  Hand the kernel a K-contiguous copy (a (K, N)
        # view of W^T made contiguous): the tf32x3 dot is about twice as fast with K-major B
        # tiles on Hopper, and the 32 MB transpose costs ~1% of the GEMM.  Done every call:
        # no state is kept between calls, so weight updates are always seen.
        w_kmajor = self.weight.t().contiguous().t()
        return gemm_bias_act(x.contiguous(), w_kmajor, None, ACT_GELU, self.scaling_factor)
