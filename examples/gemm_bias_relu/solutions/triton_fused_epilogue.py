"""Triton solution: one tiled GEMM kernel with the bias add and ReLU fused into its epilogue,
in true FP32 (input_precision="ieee").

Each program computes a BLOCK_M x BLOCK_N tile of y = relu(x W^T + b): it walks K in
BLOCK_K steps, loading a tile of x and the matching tile of W straight from nn.Linear's
(N, K) layout (the transpose is only index arithmetic), and accumulates with tl.dot in
float32.  input_precision="ieee" keeps exact fp32 products (Triton's default for an fp32
dot is TF32, whose ~1e-3 relative error breaks the 1e-4 tolerance).  Programs are ordered
in GROUP_M-row super-groups so neighbouring programs reuse the same W tiles from L2.  The
bias and ReLU are applied to the accumulator in registers and the tile is stored once, so
the output never makes the extra HBM round trip of eager's separate ReLU kernel.  Masks on
every load and store handle sizes that are not tile multiples.  Caveat: an ieee fp32 dot
runs on the CUDA cores, where Triton's code is well behind cuBLAS SGEMM, so this version
is the portable, exact baseline; triton_tf32x3_fused_epilogue.py is the fast variant
(FP32-level accuracy on the tensor cores).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _linear_bias_relu_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K,
                             stride_xm, stride_xk, stride_wn, stride_wk, stride_ym, stride_yn,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                             GROUP_M: tl.constexpr):
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
    w_ptrs = w_ptr + offs_n[None, :] * stride_wn + offs_k[:, None] * stride_wk   # (BLOCK_K, BLOCK_N) view of W^T
    mask_m = offs_m < M
    mask_n = offs_n < N

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_ok = (k0 + offs_k) < K
        a = tl.load(x_ptrs, mask=mask_m[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(w_ptrs, mask=k_ok[:, None] & mask_n[None, :], other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
        x_ptrs += BLOCK_K * stride_xk
        w_ptrs += BLOCK_K * stride_wk

    bias = tl.load(b_ptr + offs_n, mask=mask_n, other=0.0)
    acc = tl.maximum(acc + bias[None, :], 0.0)
    y_ptrs = y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :] * stride_yn
    tl.store(y_ptrs, acc, mask=mask_m[:, None] & mask_n[None, :])


def linear_bias_relu(x, weight, bias):
    assert x.dim() == 2 and weight.dim() == 2 and x.shape[1] == weight.shape[1]
    assert x.dtype == torch.float32 and weight.dtype == torch.float32 and bias.dtype == torch.float32
    M, K = x.shape
    N = weight.shape[0]
    y = torch.empty((M, N), device=x.device, dtype=x.dtype)
    # Fixed tile choice (no autotuner: deterministic, and it also runs under TRITON_INTERPRET).
    # 128x128 tiles with 8 warps for large problems; 64x64 when the grid would not fill the GPU.
    if M * N >= 128 * 128 * 132:
        bm, bn, bk, warps, stages = 128, 128, 32, 8, 3
    else:
        bm, bn, bk, warps, stages = 64, 64, 32, 4, 4
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    _linear_bias_relu_kernel[grid](x, weight, bias, y, M, N, K,
                                   x.stride(0), x.stride(1), weight.stride(0), weight.stride(1),
                                   y.stride(0), y.stride(1),
                                   BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8,
                                   num_warps=warps, num_stages=stages)
    return y


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return linear_bias_relu(x, self.linear.weight, self.linear.bias.contiguous())
