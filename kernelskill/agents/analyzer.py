"""The Analyzer: a deterministic summary of a node's profile for the planner (no LLM).

Reads a node's EvalResult — timing, speedup and its interval, the kernel breakdown, the custom
share, the roofline and bottleneck class when the evaluator measured them — and says where the
time goes and what kind of change could help.
"""
from __future__ import annotations

from typing import Any

from ..evaluate.roofline import OVER_MARGIN, fraction_text, limits_text
from ..results import EvalResult
from ..vocab import Bottleneck, covering

_BOTTLENECK_HINTS = covering(Bottleneck, {
    Bottleneck.memory_bound: "memory-bound: cut the bytes moved (fuse passes, avoid temporaries, wider loads, "
                             "reuse data in cache or shared memory)",
    Bottleneck.compute_bound: "compute-bound: raise arithmetic throughput (tensor cores, better tiling, fewer "
                              "instructions per element)",
    Bottleneck.launch_bound: "launch-bound: too many small launches (fuse kernels, persistent kernels, CUDA graphs)",
    Bottleneck.latency_bound: "latency-bound: too little parallel work in flight (more blocks or threads, more "
                              "independent work per thread)",
}, "analyzer._BOTTLENECK_HINTS")


AT_ROOF = 0.9      # fraction of the roofline floor's pace at which the planner is told it is at the roof


def _ms(x: float | None) -> str:
    if x is None:
        return "?"
    return f"{x * 1e3:.1f} µs" if x < 1 else f"{x:.3f} ms"


def analyze(result: EvalResult | None) -> str:
    """Bottleneck summary text of one evaluation."""
    if result is None:
        return "not evaluated"
    lines = [f"status {result.status}: {result.message}".rstrip(": ")]
    for note in (result.verify.notes if result.verify is not None else []):
        lines.append(f"accuracy: {note}")       # e.g. the tolerance is below the reference's own rounding
    prof = result.profile
    if prof is None:
        lines.append("no profile (the candidate failed before timing, or timing was off)")
        return "\n".join(lines)
    cand, base = prof.candidate, prof.baseline
    sp, ci = prof.speedup, prof.speedup_ci or []
    sp_text = f"{sp:.2f}×" + (f" [{ci[0]:.2f}–{ci[1]:.2f}]" if len(ci) == 2 else "") if sp else "withheld"
    lines.append(f"time: {_ms(cand.median_ms if cand else None)} (IQR {_ms(cand.iqr_ms if cand else None)}) vs "
                 f"PyTorch eager {_ms(base.median_ms if base else None)} → speedup {sp_text}")
    verdict = prof.quality.verdict if prof.quality is not None else None
    if verdict and verdict != "good":
        lines.append(f"measurement {verdict}: " + "; ".join(prof.quality.reasons[:2])
                     + " — the speedup is uncertain; do not read a small difference as progress")
    share = prof.custom_share
    if share is not None:
        lines.append(f"custom kernels: {share:.0%} of the time")
    kernels = sorted(prof.kernels or [], key=lambda k: -(k.share or 0))
    if kernels:
        lines.append("where the time goes:")
        for k in kernels[:5]:
            mark = "*" if k.custom else " "
            lines.append(f"  {k.share or 0:6.1%}  {_ms(k.time_ms):>10}  {mark} {k.name[:80]}")
    modules = prof.modules or []
    if len(modules) > 1:
        lines.append("by module (which layer of the model):")
        for m in modules[:5]:
            lines.append(f"  {m.share:6.1%}  {_ms(m.time_ms):>10}  {m.module}" + (f" ({m.type})" if m.type else "")
                         + (f": {m.top[:60]}" if m.top else ""))
    roof = {k: v for k, v in (prof.roofline or {}).items() if isinstance(v, (int, float, str))}
    if roof:
        lines.append("roofline: " + ", ".join(f"{k}={_fmt(v)}" for k, v in sorted(roof.items())))
    frac = roof.get("fraction")
    if isinstance(frac, (int, float)) and frac > 1.0 and roof.get("over_roof_reason") != OVER_MARGIN:
        # Above the floor: the floor is the library's measured rate (and DRAM bandwidth), not the hardware's limit.
        lines.append(f"ABOVE THE ROOFLINE FLOOR: this code runs at {fraction_text(roof, what='of its pace')}; the "
                     f"floor counts the measured library rate and DRAM bandwidth{limits_text(roof)}")
    elif isinstance(frac, (int, float)) and frac >= AT_ROOF and (verdict or "good") == "good":
        lines.append(f"AT THE ROOF: this code runs at {fraction_text(roof, what='of the roofline floor' + chr(39) + 's pace')} (the compulsory "
                     "bytes and FLOPs at the device's measured ceilings). Tuning this kernel further gains "
                     "at most a few percent; only an algorithm that moves fewer bytes or does fewer FLOPs "
                     "(fusion with neighbours, a cheaper formulation) can go further. Say so if none fits.")
    if prof.bottleneck:
        lines.append("bottleneck: " + _BOTTLENECK_HINTS.get(prof.bottleneck, prof.bottleneck))
    if share is not None and share < 0.5 and kernels:
        outside = [k.name for k in kernels if not k.custom][:3]
        if outside:
            lines.append(f"most time is outside the custom kernels ({', '.join(outside)}): move that work into "
                         "the kernel or fuse it")
    for note in prof.notes or []:
        lines.append(f"note: {note}")
    return "\n".join(lines)


def _fmt(v: Any) -> str:
    return f"{v:.3g}" if isinstance(v, float) else str(v)
