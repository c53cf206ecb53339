"""Trial inputs and the memory plan (worker side; no candidate code is involved here).

A KernelBench task as shipped moves gigabytes per forward (level1/19_ReLU: 6.4 GB per tensor),
so the evaluator plans its trials from the task's measured footprint instead of holding and
storing everything:

- **inputs**: ``stored`` (one file per trial in the reference cache, memory-mapped by each worker)
  when they are small (on a GPU at most ``DEVICE_COMPARE_BYTES`` per trial), else ``seeds``: every
  worker regenerates trial i from its seed, on the device (``torch.device(device)`` around
  ``get_inputs()``), so nothing is written; the reference worker checks that a second draw of
  trial 0 is identical (a get_inputs() drawing from numpy or the clock is refused). On a GPU the
  reference draws every trial there, stored or not;
- **outputs**: ``stored`` (one file per trial) when they fit the disk budget (and, on a GPU, are
  at most ``DEVICE_COMPARE_BYTES`` per trial), else ``recompute``: a trusted reference worker
  recomputes trial i's output and compares the candidate's with it on its device — shared there by
  the candidate's worker through CUDA IPC (handoff.py), or, on a CPU, read from the file it wrote;
- **rotate**: how many input sets the timed calls rotate through, as many as fit the device.

The plan, the footprint and the budgets it was made from are in the reference's ``meta.json``
(``plan``) and in every result's notes.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import torch

from kernelskill.evaluate.launch.reply import ReferenceMeta

GB = 1 << 30
STORE_INPUTS_MAX = 8 * GB       # at most this much of trial inputs is written to the cache
STORE_OUTPUTS_MAX = 16 * GB     # ... and of reference outputs
DISK_SHARE = 0.25               # of the free disk, at most, for either
HOST_SHARE = 0.25               # of the host's available memory, at most, for stored inputs
MARGIN_BYTES = 2 * GB           # CUDA contexts, the L2 flush buffer, the profiler: kept free on the GPU
MARGIN_SHARE = 0.05             # ... and this share of the free memory (allocator fragmentation)
# On a GPU, outputs above this per trial are compared on the device (handoff.py) rather than written,
# read back and compared on the host: a reference worker recomputes them, which costs one forward.
# Inputs above it are drawn again from their seeds on the device by each worker (milliseconds)
# rather than written by the reference and read back by every worker.
DEVICE_COMPARE_BYTES = 64 << 20


def input_seed(seed: int, i: int) -> int:
    """The seed trial i's inputs are drawn with (task distribution)."""
    return seed + 1000 * (i + 1)


SIGNED_OFFSET = 7


def signed_variant(inputs: list, seed: int, device: str | None = None, consume: bool = False) -> list:
    """Same shapes and dtypes, another distribution: signed where the task draws non-negative.
    Drawn on ``device`` (the CPU when None) from a generator of its own, in place (a level-1 input
    is up to 16 GB: no temporaries beside the result). ``consume``: each input is dropped from
    ``inputs`` before its variant is drawn, so the two never sit on the device together."""
    dev = torch.device(device or "cpu")
    g = torch.Generator(device=dev).manual_seed(seed)
    out = []
    for k, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel():
            nonneg, shape, dtype = bool(x.min() >= 0), x.shape, x.dtype
            if consume:
                inputs[k] = x = None
            # Always the uniform draw first, then the normal one where it is used: the numbers each
            # seed gives stay what they have been (a task's trials are part of what its tests saw).
            y = torch.rand(shape, generator=g, dtype=torch.float32, device=dev)
            if nonneg:
                y.mul_(2).sub_(1)
            else:
                del y
                y = torch.randn(shape, generator=g, device=dev).mul_(2.0)
            out.append(y.to(dtype))
        else:
            out.append(x.clone() if isinstance(x, torch.Tensor) else x)
    return out


def generate(task, mod, seed: int, i: int, on_device: str | None) -> list:
    """Trial i's inputs of the task distribution, drawn under its seed (on ``on_device`` if given)."""
    torch.manual_seed(input_seed(seed, i))
    if on_device:
        with torch.device(on_device):
            return task.inputs(mod)
    return task.inputs(mod)


def nbytes(xs) -> int:
    return sum(x.numel() * x.element_size() for x in xs if isinstance(x, torch.Tensor))


class TrialInputs:
    """Every trial's inputs, as the reference cache holds them: stored files (memory-mapped) or
    regenerated from their seeds. ``get(i, device)`` puts trial i on the device."""

    def __init__(self, ref_dir: Path, meta: ReferenceMeta, task, mod, device: str):
        self.ref_dir, self.meta, self.task, self.mod, self.device = Path(ref_dir), meta, task, mod, device
        self.dists = meta.distributions
        self.seed = int(meta.seed)
        self.plan = meta.plan or {"inputs": "stored"}
        self._first = None

    def __len__(self) -> int:
        return len(self.dists)

    def get(self, i: int, device: str | None = None) -> list:
        device = device or self.device
        if self.plan["inputs"] == "stored":
            xs = torch.load(self.ref_dir / f"inputs_{i}.pt", weights_only=True, mmap=True)
            return [x.to(device) if isinstance(x, torch.Tensor) else x for x in xs]
        where = self.plan.get("generated_on")
        if self.dists[i] == "task":
            xs = generate(self.task, self.mod, self.seed, i, where)
        else:
            xs = signed_variant(generate(self.task, self.mod, self.seed, 0, where), self.seed + SIGNED_OFFSET,
                                where, consume=True)
        return [x.to(device) if isinstance(x, torch.Tensor) else x for x in xs]


# ---- the plan ------------------------------------------------------------------------------------
def _host_available() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def make_plan(*, input_bytes: int, output_bytes: int, param_bytes: int, peak_bytes: int, trials: int,
              device: str, out_dir: Path, rotate: int = 3, store_limit: int | None = None) -> dict:
    """How one task's trials are held: see the module docstring. ``store_limit`` (tests, or a user
    short of disk) caps what is written, in bytes."""
    disk_free = shutil.disk_usage(out_dir).free
    host = _host_available()
    gpu_free = None
    if device.startswith("cuda"):
        # What the evaluation's workers will find: free now, plus what this process holds (it exits).
        gpu_free = torch.cuda.mem_get_info(torch.device(device))[0] + torch.cuda.memory_reserved(torch.device(device))
    in_cap = min(STORE_INPUTS_MAX, int(disk_free * DISK_SHARE), int((host or 1 << 62) * HOST_SHARE))
    out_cap = min(STORE_OUTPUTS_MAX, int(disk_free * DISK_SHARE))
    if store_limit is not None:
        in_cap, out_cap = min(in_cap, store_limit), min(out_cap, store_limit)
    plan = {"input_bytes": input_bytes, "output_bytes": output_bytes, "param_bytes": param_bytes,
            "peak_bytes": peak_bytes, "trials": trials, "disk_free": disk_free, "host_available": host,
            "gpu_free": gpu_free,
            "inputs": "stored" if trials * input_bytes <= in_cap and not (
                device.startswith("cuda") and input_bytes > DEVICE_COMPARE_BYTES) else "seeds",
            "outputs": "stored" if trials * output_bytes <= out_cap and not (
                device.startswith("cuda") and output_bytes > DEVICE_COMPARE_BYTES) else "recompute"}
    plan["generated_on"] = device if (plan["inputs"] == "seeds" and device.startswith("cuda")) else None
    # The candidate's worker holds both models, a trial's inputs, their clones and its outputs, and
    # a forward's working set; the recomputing reference worker beside it its model, one trial and
    # a forward. What is left holds the timed input sets.
    # ``peak_bytes``: one forward's allocations beyond its inputs (its outputs included). The
    # candidate's worker: both models, a trial's inputs and their clones, then the poisoned buffers
    # (twice the outputs, kept by the allocator for the candidate's own) or a forward.
    need = 2 * param_bytes + 2 * input_bytes + max(peak_bytes, 2 * output_bytes)
    if plan["outputs"] == "recompute":
        # its model, one trial, and a forward or the comparison (reference, candidate's copy, temporaries)
        need += param_bytes + input_bytes + max(peak_bytes, 3 * output_bytes)
    need += MARGIN_BYTES
    plan["needs_bytes"] = need
    if gpu_free is not None:
        spare = gpu_free * (1 - MARGIN_SHARE) - need
        per_set = input_bytes + output_bytes
        plan["rotate"] = max(1, min(rotate, int(spare // per_set) if per_set else rotate))
        plan["fits"] = spare >= 0
    else:
        plan["rotate"] = rotate
        plan["fits"] = True
    plan["stored_bytes"] = ((trials * input_bytes) if plan["inputs"] == "stored" else 0) + \
        ((trials * output_bytes) if plan["outputs"] == "stored" else 0)
    return plan


def describe(plan: dict) -> str:
    """One line for a person: where inputs and outputs live, and how much is stored."""
    g = lambda b: "?" if b is None else f"{b / 1e9:.2f} GB" if b >= 1e8 else f"{b / 1e6:.2f} MB"  # noqa: E731
    where = {"stored": "stored in the reference cache", "seeds": "regenerated from seeds"
             + (" on the device" if plan.get("generated_on") else ""),
             "recompute": "recomputed by a reference worker when compared"}
    return (f"memory plan: {plan['trials']} trials; inputs {g(plan['input_bytes'])} per trial, "
            f"{where[plan['inputs']]}; outputs {g(plan['output_bytes'])} per trial, {where[plan['outputs']]}; "
            f"{plan['rotate']} timed input set(s); {g(plan['stored_bytes'])} written")
