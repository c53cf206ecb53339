"""Outputs handed from the candidate's worker to the trusted reference worker on the GPU itself.

A KernelBench level-1 task as shipped returns gigabytes per call (19_ReLU: 6.4 GB). Writing each
trial's outputs to a file and reading them back on the reference worker's device took most of an
evaluation (38 s of trials and 13 s + 25 s for the timed outputs on an H100, docs/bench.md). Here
the candidate's worker shares its output tensors through CUDA IPC instead: it writes a small JSON
description (``describe``), the reference worker opens the same device memory (``open_outputs``)
and compares it in place, and the candidate's worker keeps the tensors alive until the parent
acknowledges the comparison. Nothing crosses to the host.

The description comes from a process that ran candidate code, so it is plain JSON (never pickle),
every field is checked, and the tensor view is bounds-checked against the shared storage by
``Tensor.set_``. A handle that does not open is the candidate's output failing to be read: the
parent flags it as it flags outputs that are not plain tensors. Where a tensor cannot be shared
(not a plain CUDA tensor, memory from outside torch's allocator), ``describe`` returns None and the
worker writes the file as before.
"""
from __future__ import annotations

import torch

# The dtypes an output may have; anything else is described by name and refused when opened.
DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
    torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128)}


def describe(tensors: list, plain=torch.Tensor) -> list[dict] | None:
    """JSON-able descriptions of CUDA tensors shared through IPC; None when any cannot be shared.

    ``plain``: the Tensor class as captured before candidate code was imported (a subclass is
    never shared: the parent's checks flag it from the file)."""
    out = []
    for t in tensors:
        if type(t) is not plain or not t.is_cuda or t.layout != torch.strided or t.is_nested \
                or str(t.dtype).removeprefix("torch.") not in DTYPES:
            return None
        if t.numel() == 0:
            out.append({"empty": True, "dtype": str(t.dtype).removeprefix("torch."), "size": list(t.shape)})
            continue
        try:
            (device, handle, size_bytes, offset_bytes, ref_handle, ref_offset,
             event, event_sync) = t.detach().untyped_storage()._share_cuda_()
        except Exception:  # noqa: BLE001 — memory torch cannot share (foreign allocator, …): use a file
            return None
        out.append({"dtype": str(t.dtype).removeprefix("torch."), "size": list(t.shape), "stride": list(t.stride()),
                    "offset": int(t.storage_offset()), "device": int(device), "handle": bytes(handle).hex(),
                    "size_bytes": int(size_bytes), "offset_bytes": int(offset_bytes),
                    "ref_handle": bytes(ref_handle).hex() if ref_handle else None, "ref_offset": int(ref_offset or 0),
                    "event": bytes(event).hex() if event else None, "event_sync": bool(event_sync)})
    return out


class Unreadable(Exception):
    """A description that does not open into plain tensors."""


def _ints(value, what: str) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise Unreadable(f"{what} is not a list of integers")
    return value


def _hex(value, what: str, optional: bool = False) -> bytes | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise Unreadable(f"{what} is not a hex string")
    try:
        return bytes.fromhex(value)
    except ValueError as e:
        raise Unreadable(f"{what}: {e}") from None


def open_outputs(descs, device: str) -> list[torch.Tensor]:
    """The tensors ``describe`` shared, opened on ``device`` (this process's GPU). Raises Unreadable."""
    if not isinstance(descs, list):
        raise Unreadable("the outputs' description is not a list")
    dev = torch.device(device)
    out = []
    for i, d in enumerate(descs):
        if not isinstance(d, dict) or d.get("dtype") not in DTYPES:
            raise Unreadable(f"output {i}: no known dtype")
        dtype, size = DTYPES[d["dtype"]], _ints(d.get("size"), f"output {i}: size")
        if d.get("empty"):
            if any(s < 0 for s in size) or 0 not in size:
                raise Unreadable(f"output {i}: an empty output's size must hold a 0")
            out.append(torch.empty(size, dtype=dtype, device=dev))
            continue
        stride = _ints(d.get("stride"), f"output {i}: stride")
        nums = [d.get(k) for k in ("offset", "device", "size_bytes", "offset_bytes", "ref_offset")]
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in nums):
            raise Unreadable(f"output {i}: offsets and sizes must be non-negative integers")
        offset, where, size_bytes, offset_bytes, ref_offset = nums
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        if where != index:
            raise Unreadable(f"output {i}: on cuda:{where}, not on this worker's cuda:{index}")
        handle = _hex(d.get("handle"), f"output {i}: handle")
        ref_handle = _hex(d.get("ref_handle"), f"output {i}: ref_handle", optional=True)
        event = _hex(d.get("event"), f"output {i}: event", optional=True)
        try:
            storage = torch.UntypedStorage._new_shared_cuda(where, handle, size_bytes, offset_bytes, ref_handle,
                                                            ref_offset, event, bool(d.get("event_sync")))
            t = torch.empty((0,), dtype=dtype, device=dev).set_(storage, offset, size, stride)
        except Exception as e:  # noqa: BLE001 — a handle that does not open, a view past the storage
            raise Unreadable(f"output {i}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]) from None
        out.append(t)
    return out
