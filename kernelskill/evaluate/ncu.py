"""Nsight Compute metrics of a verified candidate (``--ncu``): throughputs, occupancy, stall reasons.

The candidate runs once more in a worker under ``ncu --profile-from-start off``; the worker
brackets one forward (after two warm-up calls) with cudaProfilerStart/Stop, so only the
candidate's kernels are replayed. When ncu is missing or cannot read the counters, the profile
carries a note that says why, and nothing else changes.
"""
from __future__ import annotations

import csv
import dataclasses
import io
import re
import shutil

from .judge import roofline
from .launch.isolation import run_worker
from .options import request, workdir

SECTIONS = ("SpeedOfLight", "Occupancy", "WarpStateStats", "LaunchStats")
_STALL = re.compile(r"smsp__average_warps?_issue_stalled_(\w+?)_per_issue_active\.ratio$")
# Column → field, first match wins (names differ a little across ncu versions).
_FIELDS = {
    "duration_ms": ("gpu__time_duration.sum",),
    "sm_pct": ("sm__throughput.avg.pct_of_peak_sustained_elapsed",),
    "memory_pct": ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",),
    "dram_pct": ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
                 "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
    "achieved_occupancy_pct": ("sm__warps_active.avg.pct_of_peak_sustained_active",),
    "theoretical_occupancy_pct": ("sm__maximum_warps_per_active_cycle_pct",),
    "registers_per_thread": ("launch__registers_per_thread",),
    "block_size": ("launch__block_size",),
    "grid_size": ("launch__grid_size",),
}
_PERMISSION = "ERR_NVGPUCTRPERM"


def _num(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except (AttributeError, ValueError):
        return None


def parse(text: str) -> list[dict]:
    """Per-kernel metrics from ``ncu --csv --page raw`` output (a header row, a units row, data rows)."""
    start = text.find('"ID"')
    if start < 0:
        return []
    rows = list(csv.reader(io.StringIO(text[start:])))
    if len(rows) < 2:
        return []
    header, units, data = rows[0], rows[1], rows[2:]
    col = {name: i for i, name in enumerate(header)}
    kernels = []
    for row in data:
        if len(row) != len(header):
            continue
        k = {"name": row[col["Kernel Name"]] if "Kernel Name" in col else "?"}
        for field, names in _FIELDS.items():
            for n in names:
                if n in col and (v := _num(row[col[n]])) is not None:
                    if field == "duration_ms":   # ncu reports ns, us or ms by its own choice
                        v *= {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0,
                              "ms": 1.0, "second": 1e3}.get(units[col[n]].strip(), 1e-6)
                    k[field] = v
                    break
        stalls = {}
        for name, i in col.items():
            m = _STALL.match(name)
            if m and not m.group(1).endswith("_pred_on") and (v := _num(row[i])) is not None:
                stalls[m.group(1)] = v
        if stalls:
            total = sum(stalls.values()) or 1.0
            top = sorted(stalls.items(), key=lambda kv: -kv[1])[:4]
            k["stalls"] = {r: round(v / total, 3) for r, v in top}
        kernels.append(k)
    return kernels


def summarize(kernels: list[dict]) -> dict:
    """Duration-weighted totals over the profiled kernels, and the kernels themselves."""
    if not kernels:
        return {}
    weights = [k.get("duration_ms") or 0.0 for k in kernels]
    total = sum(weights) or float(len(kernels))
    weights = weights if sum(weights) else [1.0] * len(kernels)
    out: dict = {"kernels": kernels, "launches": len(kernels), "duration_ms": round(sum(k.get("duration_ms") or 0 for k in kernels), 6)}
    for field in ("sm_pct", "memory_pct", "dram_pct", "achieved_occupancy_pct", "theoretical_occupancy_pct"):
        vals = [(w, k[field]) for w, k in zip(weights, kernels) if field in k]
        if vals:
            out[field] = round(sum(w * v for w, v in vals) / (sum(w for w, _ in vals) or total), 2)
    stalls: dict[str, float] = {}
    for w, k in zip(weights, kernels):
        for r, v in (k.get("stalls") or {}).items():
            stalls[r] = stalls.get(r, 0.0) + w * v
    if stalls:
        s = sum(stalls.values()) or 1.0
        out["top_stalls"] = {r: round(v / s, 3) for r, v in sorted(stalls.items(), key=lambda kv: -kv[1])[:4]}
    return out


def ncu_binary() -> str | None:
    return shutil.which("ncu") or next((p for p in ("/usr/local/cuda/bin/ncu",) if shutil.which(p)), None)


def run_ncu(result, task, cand, device: str, ref_dir, opts) -> None:
    """Fill ``result.profile.ncu`` (and refine the bottleneck), or add a note saying why not."""
    prof = result.profile
    if not device.startswith("cuda"):
        prof.notes.append("ncu: Nsight Compute profiles CUDA devices only (this run was on the CPU)")
        return
    exe = ncu_binary()
    if exe is None:
        prof.notes.append("ncu: Nsight Compute (ncu) is not on PATH; install it with the CUDA toolkit")
        return
    base = workdir(opts)
    req = request("ncu", task, cand, device, opts, base, ref_dir=str(ref_dir))
    report = base / "ncu.csv"
    launcher = [exe, "--profile-from-start", "off", "--target-processes", "all", "--csv", "--page", "raw",
                *[a for s in SECTIONS for a in ("--section", s)], "--log-file", str(report)]
    out = run_worker(req, dataclasses.replace(opts, run_timeout=max(opts.run_timeout, 600)), keep=base,
                     launcher=launcher)
    text = report.read_text(errors="replace") if report.exists() else ""
    if _PERMISSION in text + out.log_tail:
        prof.notes.append("ncu: the GPU's performance counters are not readable by this user "
                          "(ERR_NVGPUCTRPERM); run as root or set NVreg_RestrictProfilingToAdminUsers=0")
    elif (summary := summarize(parse(text))):
        prof.ncu = summary
        if prof.roofline is not None:
            prof.bottleneck = roofline.classify(prof.roofline, prof.candidate.median_ms,
                                                gpu=True, ncu=summary)
    else:
        why = out.failure() or "no kernels were profiled"
        prof.notes.append(f"ncu: no metrics ({why}); ncu said: {(text or out.log_tail)[-300:].strip()}")
    shutil.rmtree(base, ignore_errors=True)
