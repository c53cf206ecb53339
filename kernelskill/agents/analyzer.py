"""The Analyzer: a deterministic summary of a node's profile for the planner (no LLM).

Reads a node's EvalResult — timing, speedup and its interval, the kernel breakdown, the custom
share, the roofline and bottleneck class when the evaluator measured them — and says where the
time goes and what kind of change could help.
"""
from __future__ import annotations

from typing import Any

from kernelskill.evaluate.judge.roofline import OVER_MARGIN, fraction_text, limits_text
from ..results import EvalResult, Roofline
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


# On a CPU: no shared memory, no tensor cores, no CUDA graphs; the units are SIMD lanes, caches and cores.
_CPU_HINTS = covering(Bottleneck, {
    Bottleneck.memory_bound: "memory-bound: cut the bytes moved (fuse passes into one loop nest, avoid "
                             "temporaries, block for the L1/L2 caches, stream each byte once)",
    Bottleneck.compute_bound: "compute-bound: raise arithmetic throughput on the CPU's cores (SIMD FMA with "
                              "-march=native: AVX2/AVX-512, register blocking, cache tiling, every core with "
                              "OpenMP); there are no tensor cores on a CPU",
    Bottleneck.launch_bound: "launch-bound: too many small ops per call (fuse them into one loop nest, one "
                             "parallel region instead of many)",
    Bottleneck.latency_bound: "latency-bound: too little independent work (parallelise the outer loop across "
                              "cores, unroll so several accumulators are in flight)",
}, "analyzer._CPU_HINTS")


def bottleneck_hint(b: Bottleneck | str, gpu: bool, roof: Roofline | None) -> str:
    """The advice for a bottleneck class on this device, for this dtype at the task's accuracy."""
    if not gpu:
        return _CPU_HINTS.get(b, str(b))
    text = _BOTTLENECK_HINTS.get(b, str(b))
    if b == Bottleneck.compute_bound:
        dtype = roof.dtype if roof is not None else None
        if dtype == "float32" and not roof.tf32_allowed:
            text = ("compute-bound: raise arithmetic throughput (better tiling, fewer instructions per element). "
                    "fp32 here: plain TF32 tensor cores (~1e-3 relative error) miss this task's accuracy; "
                    "3xTF32 split precision keeps fp32's accuracy on tensor cores at a third of TF32's rate"
                    + (f" ({roof.hw_peak_tflops:.4g} TFLOP/s here, against the fp32 FMA peak's "
                       f"{roof.fma_peak_tflops:.4g})" if isinstance(roof.hw_peak_tflops, (int, float))
                       and isinstance(roof.fma_peak_tflops, (int, float)) else ""))
        elif dtype == "float32":
            text = ("compute-bound: raise arithmetic throughput: TF32 tensor cores are allowed by this task's "
                    "flags; better tiling, fewer instructions per element")
        elif dtype:
            text = f"compute-bound: raise arithmetic throughput ({dtype} tensor cores, better tiling)"
    return text


AT_ROOF = 0.9      # fraction of the hardware floor's pace at which the planner is told it is at the roof


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
    roof = prof.roofline
    # Every number and word of the record as written (its nested limits and raise left out).
    scalars = {k: v for k, v in (roof.to_dict() if roof is not None else {}).items() if isinstance(v, (int, float, str))}
    if scalars:
        lines.append("roofline: " + ", ".join(f"{k}={_fmt(v)}" for k, v in sorted(scalars.items())))
    frac, hw = (roof.fraction, roof.hw_fraction) if roof is not None else (None, None)
    hw = hw if isinstance(hw, (int, float)) else None
    good = (verdict or "good") == "good"
    # The roof is the hardware's (its FMA or tensor-core peak for this dtype, the measured bandwidth),
    # never the library's measured rate alone: a CPU's conv ran above its measured matmul rate with
    # much of the FMA peak left, and "at the roof" sent the planner away from the same algorithm
    # (figures: docs/optimizer.md, "Measurements behind the code").
    hw_text = (f"{hw:.0%} of the hardware's limits ({_or_unknown(roof.hw_peak_tflops)} TFLOP/s, "
               f"{_or_unknown(roof.bandwidth_gbs)} GB/s)") if hw is not None else ""
    if isinstance(frac, (int, float)) and frac > 1.0 and roof.over_roof_reason != OVER_MARGIN:
        lines.append(f"faster than the measured library rate: this code runs at {fraction_text(roof, what='of its pace')}; "
                     f"the floor counts the library's rate and DRAM bandwidth{limits_text(roof)}"
                     + (f"; against the hardware it runs at {hw_text}" if hw is not None and hw <= 1.0 else ""))
    if hw is not None and AT_ROOF <= hw <= 1.0 and good:
        lines.append(f"AT THE ROOF: this code runs at {hw_text} (the compulsory bytes and FLOPs at the hardware's "
                     "limits). Tuning this kernel further gains at most a few percent; only an algorithm that "
                     "moves fewer bytes or does fewer FLOPs (fusion with neighbours, a cheaper formulation) can "
                     "go further. Say so if none fits.")
    elif isinstance(frac, (int, float)) and AT_ROOF <= frac <= 1.0 and good:
        lines.append(f"near the library's measured rate ({fraction_text(roof)}), "
                     + (f"at {hw_text}: the same algorithm can still go faster than the library (tiling, "
                        "vectorization, the units below)" if hw is not None else
                        "and the hardware's limit is not known here: no roof to stop at"))
    if prof.bottleneck:
        lines.append("bottleneck: " + bottleneck_hint(prof.bottleneck, (prof.device or "").startswith("cuda"), roof))
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


def _or_unknown(v: Any) -> Any:
    return "?" if v is None else v
