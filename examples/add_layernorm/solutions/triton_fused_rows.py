"""Triton solution: residual add + LayerNorm fused in one kernel, one program per row.

Eager PyTorch writes x + residual to HBM and LayerNorm reads it back; here each program
loads its row of x and of the residual once, forms the sum in registers, reduces the mean
and then the variance around it (two-pass, as robust as PyTorch) with tl.sum, applies the
affine weight and bias and stores the row: 2 reads + 1 write per element instead of
3 reads + 2 writes.  When the row fits one block (hidden <= MAX_BLOCK) everything stays in
registers; wider rows take a chunked path that streams the row three times (L2-resident).
Masked loads/stores handle any hidden size.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

MAX_BLOCK = 8192


@triton.jit
def _add_layernorm_kernel(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, H, eps,
                          BLOCK: tl.constexpr, ONE_BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * H
    r_row = r_ptr + row * H
    y_row = y_ptr + row * H
    cols = tl.arange(0, BLOCK)
    if ONE_BLOCK:
        mask = cols < H
        s = tl.load(x_row + cols, mask=mask, other=0.0) + tl.load(r_row + cols, mask=mask, other=0.0)
        mean = tl.sum(s, axis=0) / H
        d = tl.where(mask, s - mean, 0.0)
        var = tl.sum(d * d, axis=0) / H
        rstd = 1.0 / tl.sqrt(var + eps)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0)
        tl.store(y_row + cols, d * rstd * w + b, mask=mask)
    else:
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for off in range(0, H, BLOCK):
            c = off + cols
            m = c < H
            acc += tl.load(x_row + c, mask=m, other=0.0) + tl.load(r_row + c, mask=m, other=0.0)
        mean = tl.sum(acc, axis=0) / H
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for off in range(0, H, BLOCK):
            c = off + cols
            m = c < H
            s = tl.load(x_row + c, mask=m, other=0.0) + tl.load(r_row + c, mask=m, other=0.0)
            d = tl.where(m, s - mean, 0.0)
            acc += d * d
        rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / H + eps)
        for off in range(0, H, BLOCK):
            c = off + cols
            m = c < H
            s = tl.load(x_row + c, mask=m, other=0.0) + tl.load(r_row + c, mask=m, other=0.0)
            w = tl.load(w_ptr + c, mask=m, other=0.0)
            b = tl.load(b_ptr + c, mask=m, other=0.0)
            tl.store(y_row + c, (s - mean) * rstd * w + b, mask=m)


def add_layernorm(x, residual, weight, bias, eps):
    assert x.shape == residual.shape and x.dtype == torch.float32 and residual.dtype == torch.float32
    x = x.contiguous()
    residual = residual.contiguous()
    H = x.shape[-1]
    assert weight.numel() == H and bias.numel() == H
    rows = x.numel() // H if H > 0 else 0
    y = torch.empty_like(x)
    if rows == 0:
        return y
    one_block = H <= MAX_BLOCK
    block = triton.next_power_of_2(H) if one_block else 4096
    warps = 4 if block <= 1024 else (8 if block <= 4096 else 16)
    _add_layernorm_kernel[(rows,)](x, residual, weight, bias, y, H, eps,
                                   BLOCK=block, ONE_BLOCK=one_block, num_warps=warps)
    return y


class ModelNew(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.norm = nn.LayerNorm(hidden_size, eps=1e-5)

    def forward(self, x, residual):
        return add_layernorm(x, residual, self.norm.weight.contiguous(), self.norm.bias.contiguous(),
                             self.norm.eps)
