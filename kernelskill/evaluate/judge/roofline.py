"""Roofline: measured ceilings per device, the floor a task cannot beat, and a bottleneck class.

Ceilings are measured once per device (in a worker, so the parent never initialises CUDA) and
cached under ``$KERNELSKILL_CACHE/ceilings``: device-to-device copy bandwidth (read + write), the
matmul FLOP rate per dtype (fp32 without TF32, TF32, bf16, fp16 on a GPU), and the per-launch
overhead of an eager op.

    floor      = max(FLOPs / peak(dtype), compulsory bytes / bandwidth)
    fraction   = floor / measured time          (1.0 = on the roof)

The bottleneck class, from the roofline position and launch counts (``classify``):
  launch-bound   launches × per-launch overhead is at least half the time, or (GPU) the device is
                 busy less than half of it with at least 2 launches per call
  latency-bound  neither roof nor launches explain the time: under 10 % of the floor's pace
  memory-bound   arithmetic intensity below the ridge point (FLOPs per byte at which both roofs meet)
  compute-bound  at or above the ridge
With Nsight Compute metrics, measured DRAM and SM throughput (≥ 60 % of peak) decide between
memory- and compute-bound instead of the compulsory-traffic estimate.

A ceiling is never below what a library kernel reaches on the device: when eager (the task's own
PyTorch reference, library kernels) runs faster than its floor, the binding ceiling is raised to
the rate eager reached (``raise_ceiling``) and stored in the cache — by at most ``RAISE_LIMIT``,
beyond which the task's counted work, not the ceiling, is the likelier error. A candidate (untrusted
code) never raises a ceiling.

Ceilings are library rates (cuBLAS fp32 without TF32 stays below the FMA peak), not hardware limits;
beside them the record holds the hardware's (``limits``, machine.gpu_limits / cpu_limits): the fp32
FMA peak and the tensor cores' per dtype (figures: docs/evaluator.md, "Measurements behind the
code"). Only a measurement taken on a quiet machine is cached (ceilings.py): one taken under load
serves, labelled, this process for 2 minutes.

A fraction above 1 (faster than the floor) always names why (``over_roof_reason``): the working set
resident in L2 or the CPU's caches, a path faster than the library within the hardware's limit, a
tensor-core path above the FMA roof, within a few percent of a measured ceiling, or FLOPs and bytes
not counted as the kernel does them; such a fraction gives no bottleneck class of its own (only the
arithmetic intensity's, or none when the counts themselves are in doubt).
"""
from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Mapping
from pathlib import Path

from kernelskill.results import Roofline
from kernelskill.vocab import Bottleneck

LAUNCH_BOUND_SHARE = 0.5
LATENCY_FRACTION = 0.10
NCU_SATURATED = 60.0      # % of peak at which Nsight Compute calls a unit saturated
# Eager above its floor raises the ceiling only up to this factor: a larger excess means the task's
# FLOPs or bytes overcount what eager does (an input it reads in part, attention it masks), and
# raising a device-wide ceiling by it would hide candidates below every other task's floor.
RAISE_LIMIT = 1.2
# 2: measured with the worker on its own device (cuda:N timed GPU 0's stream before); 3: with the
# hardware limits (fp32 FMA, tensor cores) and the cache size beside the measured rates.
CEILINGS_VERSION = 3


# ---- measuring (runs inside a worker) --------------------------------------------------------
def _time_ms(fn, device: str, reps: int) -> float:
    """Median ms of ``fn`` after a warm-up; CUDA events on a GPU, perf_counter on the CPU."""
    import torch
    cuda = device.startswith("cuda")
    fn()
    if cuda:
        torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        if cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            torch.cuda.synchronize()
            times.append(a.elapsed_time(b))
        else:
            t = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t) * 1e3)
    # A ceiling is the best the device reaches: the fastest repetition, which contention can only
    # slow down (a median under load made a CPU "ceiling" far below the device's bandwidth)
    # (figures: docs/evaluator.md, "Measurements behind the code").
    return min(times)


def _copy_ms(n: int, dev, device: str, reps: int) -> float:
    import torch
    x = torch.empty(n, dtype=torch.float32, device=dev).fill_(1.0)
    y = torch.empty_like(x)
    return _time_ms(lambda: y.copy_(x), device, reps)


def _matmul_ms(shape: tuple[int, int, int], dt, dev, device: str, reps: int) -> float:
    """(m, k, n): an m×k by k×n product."""
    import torch
    m, k, n = shape
    a = torch.randn(m, k, device=dev).to(dt)
    b = torch.randn(k, n, device=dev).to(dt)
    c = torch.empty(m, n, device=dev, dtype=dt)
    return _time_ms(lambda: torch.mm(a, b, out=c), device, reps)


def _gemm_rate(shapes, dt, dev, device: str, reps: int) -> float:
    """The vendor GEMM's best FLOP rate over the shapes: a ceiling is the best it reaches."""
    return max(2 * m * k * n / (_matmul_ms((m, k, n), dt, dev, device, reps) / 1e3) for m, k, n in shapes)


def measure(device: str) -> dict:
    """Measure this device's ceilings (seconds on a GPU, a few seconds on a CPU)."""
    import torch
    cuda = device.startswith("cuda")
    dev = torch.device(device)
    out: dict = {"version": CEILINGS_VERSION, "device": device, "measured_at": time.strftime("%Y-%m-%d %H:%M:%S")}
    from .. import machine
    if cuda:
        props = torch.cuda.get_device_properties(dev)
        out["name"] = props.name
        mhz, where = machine.gpu_max_clock_mhz(props, str(getattr(props, "uuid", "") or "") or None)
        out["limits"] = machine.gpu_limits(props.major, props.minor, props.multi_processor_count, mhz, where)
        out["cache_bytes"], out["cache"] = getattr(props, "L2_cache_size", None), "L2"
        # 1 GiB of fp32; square matmuls at 4096, 6144 and 8192 and a wide 4096×8192 by 8192×4096
        # (cuBLAS picks its kernel by shape, and the best one can sit at any of them).
        n_copy = 1 << 28
        shapes = ((4096, 4096, 4096), (6144, 6144, 6144), (8192, 8192, 8192), (4096, 8192, 4096))
    else:
        import platform
        out["name"] = platform.processor() or platform.machine()
        out["threads"] = torch.get_num_threads()
        out["limits"] = machine.cpu_limits(out["threads"])
        out["cache_bytes"], out["cache"] = machine.llc_bytes(), "LLC"
        n_copy, shapes = (1 << 26), ((1024, 1024, 1024),)        # 256 MiB; 1024³ (2 GFLOP)
    from ..host import HostSampler
    host = HostSampler()
    host.start(os.getpid())
    ms = _copy_ms(n_copy, dev, device, 10 if cuda else 5)
    out["bandwidth"] = 2 * n_copy * 4 / (ms / 1e3)            # bytes/s, read + write
    dtypes = {"float32": torch.float32}
    if cuda:
        dtypes.update(bfloat16=torch.bfloat16, float16=torch.float16)
    peaks = {}
    # Only TF32 is switched (off for float32, on for tf32); the reduced-precision-reduction switches
    # keep the defaults eager runs with.
    old = torch.backends.cuda.matmul.allow_tf32
    try:
        for name, dt in dtypes.items():
            torch.backends.cuda.matmul.allow_tf32 = False
            peaks[name] = _gemm_rate(shapes, dt, dev, device, 10 if cuda else 3)
            if cuda and name == "float32":
                torch.backends.cuda.matmul.allow_tf32 = True
                peaks["tf32"] = _gemm_rate(shapes, dt, dev, device, 10)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    out["peak_flops"] = peaks
    out["limits"] = machine.reconcile_limits(out["limits"], peaks)
    # Per-launch overhead: many back-to-back tiny ops, timed on the host clock.
    t = torch.zeros(1, device=dev)
    for _ in range(50):
        t.add_(1.0)
    if cuda:
        torch.cuda.synchronize()
    reps = 2000
    start = time.perf_counter()
    for _ in range(reps):
        t.add_(1.0)
    if cuda:
        torch.cuda.synchronize()
    out["launch_us"] = (time.perf_counter() - start) / reps * 1e6
    # Measured while other processes competed for the CPU? Then it is not cached (ceilings.py).
    seen = host.stop() or {}
    others = seen.get("others_cores")
    out["others_cores"] = others
    busy_limit = 0.5 if not cuda else max(1.0, (seen.get("cores") or 1) - 1.5)
    out["quality"] = "contended" if others is not None and others > busy_limit else "good"
    out["measured_unix"] = time.time()
    return out


def merge(old: dict, new: dict) -> dict:
    """Two measurements of one device's ceilings: the higher of each (a ceiling is a peak, and
    load only lowers it); the newer one's quality and time."""
    out = dict(new)
    out["bandwidth"] = max(old.get("bandwidth") or 0.0, new.get("bandwidth") or 0.0)
    peaks = dict(old.get("peak_flops") or {})
    for k, v in (new.get("peak_flops") or {}).items():
        peaks[k] = max(peaks.get(k, 0.0), v)
    out["peak_flops"] = peaks
    if old.get("launch_us") and new.get("launch_us"):
        out["launch_us"] = min(old["launch_us"], new["launch_us"])
    if old.get("quality") == "good" and new.get("quality") != "good":
        out["quality"] = "good"         # the higher values came from a quiet measurement
    if old.get("raised") or new.get("raised"):
        out["raised"] = {**(old.get("raised") or {}), **(new.get("raised") or {})}
    return out


# ---- the cache (parent side) -----------------------------------------------------------------
def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")[:80] or "device"


def cache_key(name: str, device: str, threads: int | None, torch_version: str) -> str:
    kind = "cuda" if device.startswith("cuda") else f"cpu-{threads or 0}t"
    return f"{_slug(name)}-{kind}-torch{_slug(torch_version)}"


def cached(root: Path, key: str) -> dict | None:
    path = root / "ceilings" / f"{key}.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if data.get("version") == CEILINGS_VERSION else None


def store(root: Path, key: str, data: dict) -> Path:
    from ..cache import store_json
    return store_json(root / "ceilings" / f"{key}.json", data)


# ---- the model -------------------------------------------------------------------------------
def peak_key(ceilings: dict, dtype: str, allow_tf32: bool = False) -> str:
    """The peak_flops entry a task of this dtype runs under: "tf32" for float32 with TF32 allowed
    (when measured), else the dtype's own (``peak_for`` falls back to float32 while it is absent)."""
    if dtype == "float32" and allow_tf32 and "tf32" in (ceilings.get("peak_flops") or {}):
        return "tf32"
    return dtype


def peak_for(ceilings: dict, dtype: str, allow_tf32: bool = False) -> float:
    return ceiling_value(ceilings, f"peak_flops.{peak_key(ceilings, dtype, allow_tf32)}")


def binding_ceiling(flops: int, nbytes: int, ceilings: dict, dtype: str, allow_tf32: bool = False) -> str:
    """Which ceiling sets the floor: "bandwidth" or "peak_flops.<key>" (the slower of the two roofs)."""
    peak, bw = peak_for(ceilings, dtype, allow_tf32), ceilings.get("bandwidth") or 0.0
    if bw > 0 and (peak <= 0 or nbytes / bw >= flops / peak):
        return "bandwidth"
    return f"peak_flops.{peak_key(ceilings, dtype, allow_tf32)}"


def ceiling_value(ceilings: dict, which: str) -> float:
    """The value a ``binding_ceiling`` name reads (a peak absent for its dtype: the float32 one)."""
    if which == "bandwidth":
        return ceilings.get("bandwidth") or 0.0
    peaks = ceilings.get("peak_flops") or {}
    return peaks.get(which.split(".", 1)[1]) or peaks.get("float32") or 0.0


def raise_ceiling(data: dict, which: str, rate: float) -> dict:
    """``data`` with the ceiling ``which`` ("bandwidth" or "peak_flops.<key>") raised to ``rate``
    (never lowered), and a record of the raise under "raised"; ``data`` itself is left as it was."""
    out = dict(data)
    old = ceiling_value(data, which)
    if rate <= old:
        return out
    if which == "bandwidth":
        out["bandwidth"] = rate
    else:
        out["peak_flops"] = {**(data.get("peak_flops") or {}), which.split(".", 1)[1]: rate}
    out["raised"] = {**(data.get("raised") or {}),
                     which: {"from": old, "to": rate, "at": time.strftime("%Y-%m-%d %H:%M:%S"),
                             "by": "eager above its floor"}}
    return out


def floor_ms(flops: int | None, nbytes: int | None, ceilings: dict, dtype: str, allow_tf32: bool = False) -> float | None:
    """The roofline floor in ms: the time the compulsory work needs at the measured ceilings."""
    if not ceilings or flops is None or nbytes is None:
        return None
    peak, bw = peak_for(ceilings, dtype, allow_tf32), ceilings.get("bandwidth") or 0.0
    if peak <= 0 or bw <= 0:
        return None
    return max(flops / peak, nbytes / bw) * 1e3


def _sig(x: float, digits: int = 4) -> float:
    """x to `digits` significant figures: a slow candidate's 0.00004 of the floor stays 4e-05, not 0.0."""
    return float(f"{x:.{digits}g}")


def analyse(flops: int | None, nbytes: int | None, ceilings: dict, dtype: str, allow_tf32: bool, measured_ms: float,
            launches: int | None = None, busy_ms: float | None = None, gpu: bool = True,
            ncu: dict | None = None, flushed: bool = True) -> tuple[Roofline | None, str | None]:
    """The roofline record of one measured model, and its bottleneck class (None, None: no ceilings,
    no counted work or no time). ``flushed``: a GPU's L2 was flushed before each timed call. A
    fraction above 1 gets its ``over_roof_reason``."""
    if not ceilings or flops is None or nbytes is None or measured_ms <= 0:
        return None, None
    peak, bw = peak_for(ceilings, dtype, allow_tf32), ceilings["bandwidth"]
    floor = floor_ms(flops, nbytes, ceilings, dtype, allow_tf32)
    intensity = flops / nbytes if nbytes else float("inf")
    ridge = peak / bw
    lim = limits_for(ceilings, dtype, allow_tf32)
    roof = Roofline(flops=int(flops), bytes=int(nbytes), intensity=round(intensity, 3), ridge=round(ridge, 3),
                    peak_tflops=round(peak / 1e12, 3), bandwidth_gbs=round(bw / 1e9, 1),
                    floor_ms=floor, fraction=_sig(floor / measured_ms),
                    achieved_gbs=_sig(nbytes / (measured_ms / 1e3) / 1e9),
                    achieved_tflops=_sig(flops / (measured_ms / 1e3) / 1e12),
                    roof="memory" if intensity < ridge else "compute",
                    ceilings=f"{ceilings.get('name', '?')} (measured {ceilings.get('measured_at', '?')})",
                    fma_peak_tflops=lim["fma_peak_tflops"], tensor_peak_tflops=lim["tensor_peak_tflops"],
                    dtype=dtype, tf32_allowed=bool(allow_tf32))
    if launches is not None:
        roof.launches = int(launches)
        roof.launch_us = round(ceilings.get("launch_us", 0.0), 2)
    if busy_ms is not None:
        roof.busy = round(min(busy_ms / measured_ms, 1.0), 3)
    hw = hardware_floor_ms(flops, nbytes, ceilings, dtype, allow_tf32)
    if hw is not None:
        roof.hw_floor_ms, roof.hw_fraction = hw, _sig(hw / measured_ms)
        roof.hw_peak_tflops = round(hardware_peak(ceilings, dtype, allow_tf32) / 1e12, 3)
    if roof.fraction > 1.0:
        roof.over_roof_reason, roof.over_roof_detail = over_roof_reason(
            flops, nbytes, ceilings, dtype, allow_tf32, measured_ms, roof.fraction, roof.roof, gpu, flushed)
    return roof, classify(roof, measured_ms, gpu=gpu, ncu=ncu)


# ---- above the floor: why -------------------------------------------------------------------------
OVER_L2 = "working set resident in L2"
OVER_CPU_CACHE = "working set resident in the CPU's caches"
OVER_WITHIN_LIMIT = "faster than the library's measured rate, within the hardware's limit"
OVER_TENSOR = "a tensor-core path above the FMA roof"
OVER_MARGIN = "within 5 % of a measured ceiling (a benchmark's best, not a hardware limit)"
OVER_MISCOUNT = "FLOPs or bytes not counted as the kernel does them"
# Reasons that explain a time below the floor: such a candidate gets a note, not a review flag.
EXPLAINED = (OVER_L2, OVER_CPU_CACHE, OVER_WITHIN_LIMIT, OVER_TENSOR, OVER_MARGIN)
MARGIN = 1.05


def hardware_peak(ceilings: dict, dtype: str, allow_tf32: bool = False) -> float:
    """FLOP/s of the fastest path the hardware gives this dtype at the task's accuracy: fp32 the
    FMA peak, or TF32 tensor cores where TF32 is allowed, or else 3xTF32 split precision (fp32's
    accuracy at a third of TF32's rate); other dtypes their tensor-core peak. Never below the
    library's measured rate; 0 when no hardware limit is known."""
    lim = ceilings.get("limits") or {}
    tensor = lim.get("tensor") or {}
    if dtype == "float32":
        paths = [lim.get("fp32_fma_tflops"), tensor.get("tf32") if allow_tf32 else tensor.get("tf32x3")]
    else:
        paths = [tensor.get(dtype)]
    best = max((p for p in paths if isinstance(p, (int, float)) and p > 0), default=0.0) * 1e12
    return max(best, peak_for(ceilings, dtype, allow_tf32)) if best else 0.0


def hardware_floor_ms(flops: int | None, nbytes: int | None, ceilings: dict, dtype: str,
                      allow_tf32: bool = False) -> float | None:
    """The floor at the hardware's limits (``hardware_peak``; the measured bandwidth, a copy's, is
    the memory side): what "at the roof" is judged against, never the library's rate alone."""
    peak, bw = hardware_peak(ceilings, dtype, allow_tf32), ceilings.get("bandwidth") or 0.0
    if not peak or bw <= 0 or flops is None or nbytes is None:
        return None
    return max(flops / peak, nbytes / bw) * 1e3


def limits_for(ceilings: dict, dtype: str, allow_tf32: bool = False) -> dict:
    """The hardware limits that bound a task of this dtype (TFLOP/s): the fp32 FMA peak (float32),
    and the tensor-core peak of the path it may take (float32: TF32, the loosest; else the dtype's)."""
    lim = ceilings.get("limits") or {}
    tensor = lim.get("tensor") or {}
    return {"fma_peak_tflops": lim.get("fp32_fma_tflops") if dtype == "float32" else None,
            "tensor_peak_tflops": tensor.get("tf32" if dtype == "float32" else dtype)}


def _cache_bytes(ceilings: dict, gpu: bool) -> int | None:
    """The cache a working set can sit in: the GPU's L2 as measured with the ceilings; the CPU's
    last-level cache (read here when the ceilings predate it: the parent runs on that CPU)."""
    if ceilings.get("cache_bytes"):
        return int(ceilings["cache_bytes"])
    if gpu:
        return None
    from ..machine import llc_bytes
    return llc_bytes()


def over_roof_reason(flops: int, nbytes: int, ceilings: dict, dtype: str, allow_tf32: bool, measured_ms: float,
                     fraction: float, roof: str, gpu: bool, flushed: bool = True) -> tuple[str, str]:
    """Why a model ran faster than its floor: (one of the OVER_* names, the numbers behind it)."""
    cache = _cache_bytes(ceilings, gpu)
    cache_name = "L2" if gpu else "last-level cache"
    if roof == "memory":
        if gpu and not flushed:
            return OVER_L2, "the L2 was not flushed before each timed call"
        if cache and nbytes <= cache:
            return (OVER_L2 if gpu else OVER_CPU_CACHE,
                    f"{nbytes / 2**20:.3g} MiB of compulsory bytes fit the {cache / 2**20:.4g} MiB {cache_name}")
    else:
        rate = flops / (measured_ms / 1e3) / 1e12
        lim = limits_for(ceilings, dtype, allow_tf32)
        fma, tensor = lim["fma_peak_tflops"], lim["tensor_peak_tflops"]
        path = peak_key(ceilings, dtype, allow_tf32)
        if path == "float32" and fma and rate <= fma:
            return OVER_WITHIN_LIMIT, (f"{rate:.4g} TFLOP/s: above the measured float32 matmul rate, below the "
                                       f"fp32 FMA peak {fma:.4g} TFLOP/s")
        if path == "float32" and tensor and rate <= tensor:
            return OVER_TENSOR, (f"{rate:.4g} TFLOP/s: above the fp32 FMA peak {fma or '?'} TFLOP/s, below the "
                                 f"TF32 tensor-core peak {tensor:.4g} TFLOP/s (3xTF32 split precision: "
                                 f"{(ceilings.get('limits') or {}).get('tensor', {}).get('tf32x3', '?')})")
        if path != "float32" and tensor and rate <= tensor:
            return OVER_WITHIN_LIMIT, (f"{rate:.4g} TFLOP/s: above the measured {path} matmul rate, below the "
                                       f"{path} tensor-core peak {tensor:.4g} TFLOP/s")
    if fraction <= MARGIN:
        return OVER_MARGIN, f"{fraction:.3f} of the floor's pace"
    return OVER_MISCOUNT, (f"{fraction:.3g}× the floor's pace, beyond what the "
                           + ("caches" if roof == "memory" else "hardware limits") + " explain")


def limits_text(roof: Roofline) -> str:
    """The hardware limits beside the library rate in a roofline record, as a clause ("" when unknown)."""
    parts = [f"{name} {value:.4g} TFLOP/s" for value, name in ((roof.fma_peak_tflops, "fp32 FMA peak"),
                                                               (roof.tensor_peak_tflops, "tensor-core peak"))
             if isinstance(value, (int, float))]
    return ("; hardware limits (computed): " + ", ".join(parts)) if parts else ""


def fraction_text(roof: Roofline | Mapping, key: str = "fraction", digits: int = 0,
                  what: str = "of the floor's pace") -> str:
    """A fraction as a person reads it: "81% of the floor's pace", and above 1 never a bare number:
    "222% of the floor's pace (above the roof: working set resident in the CPU's caches)".
    ``key``: "fraction", "eager_fraction" or "hw_fraction"; ``roof`` a roofline record, or a row
    that copies its keys (bench/score.py's rows: eager_fraction and eager_over_roof_reason)."""
    read = roof.get if isinstance(roof, Mapping) else (lambda name: getattr(roof, name, None))
    v = read(key)
    if not isinstance(v, (int, float)):
        return "?"
    text = f"{v:.{digits}%}" + (f" {what}" if what else "")
    if v > 1.0:
        why = read("eager_over_roof_reason" if key == "eager_fraction" else "over_roof_reason")
        text += f" (above the roof: {why or 'no reason recorded; do not trust it'})"
    return text


def classify(roof: Roofline, measured_ms: float, *, gpu: bool = True, ncu: dict | None = None) -> Bottleneck | None:
    """The bottleneck class (rules in the module docstring). Faster than the floor, the roofline
    position classifies nothing: the class is the arithmetic intensity's (or Nsight Compute's), and
    none when the reason is a count in doubt (the intensity comes from the same counts);
    ``roof.bottleneck_note`` says so."""
    if (roof.fraction or 0.0) > 1.0:
        dram, sm = (ncu or {}).get("dram_pct"), (ncu or {}).get("sm_pct")
        if dram is not None and sm is not None and max(dram, sm) >= NCU_SATURATED:
            return Bottleneck.memory_bound if dram >= sm else Bottleneck.compute_bound
        why = roof.over_roof_reason or OVER_MISCOUNT
        if why == OVER_MISCOUNT:
            roof.bottleneck_note = f"no bottleneck class: faster than the floor ({why})"
            return None
        cls = Bottleneck.memory_bound if roof.roof == "memory" else Bottleneck.compute_bound
        roof.bottleneck_note = f"bottleneck from the arithmetic intensity only ({cls}): faster than the floor ({why})"
        return cls
    launches = roof.launches or 0
    launch_ms = launches * (roof.launch_us if roof.launch_us is not None else 0.0) / 1e3
    if launch_ms >= LAUNCH_BOUND_SHARE * measured_ms:
        return Bottleneck.launch_bound
    if gpu and launches >= 2 and roof.busy is not None and roof.busy < LAUNCH_BOUND_SHARE:
        return Bottleneck.launch_bound
    if ncu:
        dram, sm = ncu.get("dram_pct"), ncu.get("sm_pct")
        if dram is not None and sm is not None and max(dram, sm) >= NCU_SATURATED:
            return Bottleneck.memory_bound if dram >= sm else Bottleneck.compute_bound
    if roof.fraction < LATENCY_FRACTION:
        return Bottleneck.latency_bound
    return Bottleneck.memory_bound if roof.roof == "memory" else Bottleneck.compute_bound
