"""Outputs handed from the candidate's worker to the trusted reference worker in memory, not files.

A KernelBench level-1 task as shipped returns gigabytes per call (19_ReLU: 6.4 GB). Writing each
trial's outputs to a file and reading them back on the reference worker's device took most of an
evaluation (figures: docs/evaluator.md, "Measurements behind the code"). Here the candidate's
worker shares its output tensors instead — on a GPU through CUDA IPC (the same
device memory), on a CPU through shared memory (torch's file-system sharing) — and writes a small
JSON description (``describe``); the reference worker opens the same memory (``open_outputs``)
and compares it in place, and the candidate's worker keeps the tensors alive until the parent
acknowledges the comparison. On a GPU nothing crosses to the host.

The description comes from a process that ran candidate code, so it is plain JSON (never pickle),
every field is checked, and the tensor view is bounds-checked against the shared storage by
``Tensor.set_``. A handle that does not open is the candidate's output failing to be read: the
parent flags it as it flags outputs that are not plain tensors. Where a tensor cannot be shared
(a subclass, memory from outside torch's allocator, another device), ``describe`` returns None
and the worker writes the file as before.
"""
from __future__ import annotations

import os

import torch

# The dtypes an output may have; anything else is described by name and refused when opened.
DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
    torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128)}


def describe(tensors: list, plain=torch.Tensor, device: str = "cuda") -> list[dict] | None:
    """JSON-able descriptions of tensors shared with another process; None when any cannot be.

    ``plain``: the Tensor class as captured before candidate code was imported (a subclass is
    never shared: the parent's checks flag it from the file). ``device``: the worker's; a tensor
    on another device type goes through the file, as before."""
    out = []
    kind = torch.device(device).type
    if kind == "cpu" and not _shm_room(tensors):
        return None
    for t in tensors:
        if type(t) is not plain or t.layout != torch.strided or t.is_nested \
                or t.device.type != kind or str(t.dtype).removeprefix("torch.") not in DTYPES:
            return None
        view = {"dtype": str(t.dtype).removeprefix("torch."), "size": list(t.shape)}
        if t.numel() == 0:
            out.append({**view, "empty": True})
            continue
        view.update(stride=list(t.stride()), offset=int(t.storage_offset()))
        try:
            if t.is_cuda:
                (device, handle, size_bytes, offset_bytes, ref_handle, ref_offset,
                 event, event_sync) = t.detach().untyped_storage()._share_cuda_()
                out.append({**view, "device": int(device), "handle": bytes(handle).hex(),
                            "size_bytes": int(size_bytes), "offset_bytes": int(offset_bytes),
                            "ref_handle": bytes(ref_handle).hex() if ref_handle else None,
                            "ref_offset": int(ref_offset or 0), "event": bytes(event).hex() if event else None,
                            "event_sync": bool(event_sync)})
            else:
                t.share_memory_()          # into shared memory, in place (a copy, in memory: no file)
                manager, name, size_bytes = t.untyped_storage()._share_filename_cpu_()
                out.append({**view, "device": "cpu", "manager": _text(manager), "name": _text(name),
                            "size_bytes": int(size_bytes)})
        except Exception:  # noqa: BLE001 — memory torch cannot share (foreign allocator, …): use a file
            return None
    return out


def _shm_room(tensors: list) -> bool:
    """Whether /dev/shm has room for these CPU tensors, twice over. A tmpfs past its size does not
    fail when the memory is made but kills the process that touches the page (SIGBUS), and a
    container's /dev/shm is often 64 MB."""
    need = sum(t.untyped_storage().nbytes() for t in tensors if isinstance(t, torch.Tensor) and t.device.type == "cpu")
    try:
        st = os.statvfs("/dev/shm")
    except OSError:
        return False
    return st.f_bavail * st.f_frsize >= 2 * need


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


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
    """The tensors ``describe`` shared, opened on ``device`` (this process's GPU, or the CPU). Raises Unreadable."""
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
        if d.get("device") == "cpu" or dev.type == "cpu":
            out.append(_open_cpu(i, d, dtype, size, stride, dev))
            continue
        offset, where, size_bytes, offset_bytes, ref_offset = _counts(
            d, ("offset", "device", "size_bytes", "offset_bytes", "ref_offset"), i)
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
            raise Unreadable(_why(i, e)) from None
        out.append(t)
    return out


def _counts(d: dict, keys: tuple, i: int) -> list[int]:
    """The description's fields ``keys``, each a non-negative integer, or Unreadable."""
    values = [d.get(k) for k in keys]
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
        raise Unreadable(f"output {i}: offsets and sizes must be non-negative integers")
    return values


def _why(i: int, e: Exception) -> str:
    first = str(e).splitlines()[0] if str(e) else ""
    return f"output {i}: {type(e).__name__}: {first}"[:300]


def _open_cpu(i: int, d: dict, dtype, size: list[int], stride: list[int], dev) -> torch.Tensor:
    """A CPU output shared through torch's file-system sharing (its manager and the memory's name)."""
    if d.get("device") != "cpu" or dev.type != "cpu":
        raise Unreadable(f"output {i}: shared on {d.get('device')!r}, opened on {dev}")
    offset, size_bytes = _counts(d, ("offset", "size_bytes"), i)
    manager, name = d.get("manager"), d.get("name")
    if not (isinstance(name, str) and name.startswith("/torch_") and "/" not in name[1:]
            and isinstance(manager, str) and os.path.basename(manager) == "manager.sock"
            and os.path.basename(os.path.dirname(manager)).startswith("torch-shm-dir")):
        raise Unreadable(f"output {i}: not torch's shared memory")
    try:
        storage = torch.UntypedStorage._new_shared_filename_cpu(manager.encode(), name.encode(), size_bytes)
        return torch.empty((0,), dtype=dtype).set_(storage, offset, size, stride)
    except Exception as e:  # noqa: BLE001 — memory that does not open, a view past the storage
        raise Unreadable(_why(i, e)) from None
