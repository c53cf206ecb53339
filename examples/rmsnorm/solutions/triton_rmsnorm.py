"""RMSNorm in Triton: one fused program per row instead of eager's chain of five kernels.

Each program loads its row once (masked to the next power of two), reduces sum(x^2) on-chip,
and writes x * rsqrt(mean + eps) * weight: one read of x, one write of y, with the weight
vector served from L2. Rows longer than 16384 floats use a two-sweep loop (sum of squares,
then scale), still one kernel launch.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_row_kernel(x_ptr, w_ptr, y_ptr, H, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < H
    x = tl.load(x_ptr + row * H + offs, mask=mask, other=0.0, eviction_policy="evict_first")
    r = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + row * H + offs, x * r * w, mask=mask)


@triton.jit
def _rmsnorm_loop_kernel(x_ptr, w_ptr, y_ptr, H, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * H
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, H, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + base + offs, mask=offs < H, other=0.0)
        acc += x * x
    r = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / H + eps)
    for start in range(0, H, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + base + offs, mask=offs < H, other=0.0)
        w = tl.load(w_ptr + offs, mask=offs < H, other=0.0)
        tl.store(y_ptr + base + offs, x * r * w, mask=offs < H)


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden))   # overwritten by the reference's state dict

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        assert x.dtype == torch.float32
        x = x.contiguous()
        w = self.weight.contiguous()
        y = torch.empty_like(x)
        if x.numel() == 0:
            return y
        H = x.shape[-1]
        rows = x.numel() // H
        block = triton.next_power_of_2(H)
        if block <= 16384:
            warps = max(1, min(16, block // 512))
            _rmsnorm_row_kernel[(rows,)](x, w, y, H, self.eps, BLOCK=block, num_warps=warps)
        else:
            _rmsnorm_loop_kernel[(rows,)](x, w, y, H, self.eps, BLOCK=4096, num_warps=8)
        return y
