"""One-line summaries and next steps for an agent reading a result (deterministic, from the data)."""
from __future__ import annotations

from kernelskill.evaluate.judge.roofline import fraction_text
from kernelskill.results import CompileResult, EvalResult
from kernelskill.vocab import Status, covering

# What to do after each failing verdict (ok's next step depends on the timing: see evaluation()).
_NEXT = covering(Status, {
    Status.compile_error: "Fix the errors in result.compile.diagnostics (line numbers point into your "
                          "source), then call compile(source) until it builds before evaluating again.",
    Status.runtime_error: "ModelNew raised while running: read result.message and result.log_tail (candidate "
                          "line numbers are given), fix it, then call verify.",
    Status.incorrect: "Outputs differ from the reference: read result.verify.mismatch (worst elements, expected "
                      "vs got, which trial). Check indexing, the tail when sizes are not a multiple of the block, "
                      "dtype, and accumulation order; then call verify again.",
    Status.flagged: "The evaluator flagged a construct that invalidates the result (result.flags, each with the "
                    "reason). Remove it: results with these flags never count.",
    Status.timeout: "The run exceeded its time limit: look for an infinite loop, a deadlock or a very slow "
                    "kernel; on a CPU server use a small preset.",
    Status.stochastic: "The task's reference differs from itself on the same inputs under the same seed "
                       "(result.message says how), so no candidate can be verified against it: make the "
                       "reference deterministic (or widen its tolerance) before writing kernels for it.",
    Status.crashed: "The worker process died (result.message says how, result.log_tail shows the end of its "
                    "output): usually an out-of-bounds memory access or a bad launch configuration.",
}, "advice._NEXT", but=(Status.ok,))


def _speed(r: EvalResult) -> str:
    p = r.profile
    if not (p and p.candidate and p.baseline):
        return ""
    sp = f"{p.speedup_text()} vs eager" if p.speedup is not None else "speedup withheld"
    # The verdict's message says the speedup already (``correct on 6 trials; 1.36× […] vs eager``).
    said = sp in r.message or (p.speedup is not None and "vs eager" in r.message)
    return (f"; candidate {p.candidate.median_ms:.4g} ms, eager {p.baseline.median_ms:.4g} ms"
            + ("" if said else f", {sp}") + _roof(p))


def _roof(p) -> str:
    """The roofline position and bottleneck class, when the evaluator measured them."""
    if p.roofline is None:
        return ""
    return (f"; {fraction_text(p.roofline, what='of the roofline floor' + chr(39) + 's pace')} "
            f"(floor {p.roofline.floor_ms:.4g} ms)"
            + (f", {p.bottleneck}" if p.bottleneck else ""))


def _lookup(p) -> str:
    return f"lookup_skills(task, bottleneck='{p.bottleneck}')" if p and p.bottleneck else "lookup_skills(task, bottleneck=...)"


def evaluation(r: EvalResult, timed: bool = True) -> tuple[str, str]:
    """(summary, next_step) for an evaluation result."""
    summary = f"{r.status}: {r.message}".rstrip(": ") + _speed(r)
    if r.verify is not None and r.verify.notes:
        # The task's tolerance is below the reference's own rounding: a client must know before it
        # chases a mismatch no kernel that rounds differently can fix.
        summary += " | note: " + " | note: ".join(r.verify.notes)
    if r.shapes is not None and r.status == Status.ok:
        summary += f" | shapes: {r.shapes.summary} (result.shapes)"
    if r.status != Status.ok:
        return summary, _NEXT.get(r.status, "Read result.message and result.log_tail.")
    if not timed:
        return summary, ("Correct on every trial. Call evaluate(task, source) to time it against the "
                         "reference, then read result.profile.")
    p = r.profile
    if p and p.quality is not None and not p.quality.good:
        return summary, (f"Correct, but the timing was {p.quality.verdict} ({'; '.join(p.quality.reasons[:2])}): "
                         "the speedup is uncertain and was not recorded as a result. Evaluate again when the "
                         "machine is quieter (result.profile.quality says what competed), or compare two "
                         "versions head to head with profile(task, source, baseline=other_source).")
    if p and p.speedup is not None and p.speedup < 1.0:
        return summary, ("Correct but slower than PyTorch eager: read result.profile.kernels for where the "
                         f"time goes and result.profile.roofline, then {_lookup(p)} for a better strategy.")
    return summary, ("Correct and timed. Read result.profile.kernels (share of time per kernel, * = yours) "
                     "to find the next bottleneck, call lookup_skills for it, and record_attempt(...) with "
                     "the skill you applied so its statistics improve.")


def compilation(r: CompileResult) -> tuple[str, str]:
    """(summary, next_step) for a compile result."""
    errors = [d for d in r.diagnostics if d.severity == "error"]
    if r.ok:
        how = " (compile-only: this server has no GPU to load it)" if r.compile_only else ""
        cached = ", from the build cache" if r.cache_hit else ""
        return (f"compiled ({r.backend}, {r.seconds:.1f} s{cached}){how}",
                "Call verify(task, source) to check correctness on seeded trials.")
    first = str(errors[0]).splitlines()[0] if errors else "build failed (see result.log_tail)"
    return (f"compile failed ({r.backend}, {len(errors)} error(s)): {first}",
            _NEXT[Status.compile_error])


def reference_profile(r: EvalResult) -> tuple[str, str]:
    """(summary, next_step) when the reference itself was profiled: the baseline to beat."""
    p = r.profile
    if r.status != Status.ok or not (p and p.baseline):
        return evaluation(r)
    top = ", ".join(f"{k.name} {k.share:.0%}" for k in p.kernels[:3]) or "no kernel breakdown"
    mods = "; by module: " + ", ".join(f"{m.module} ({m.type}) {m.share:.0%}" if m.type else f"{m.module} {m.share:.0%}"
                                       for m in p.modules[:3]) if len(p.modules) > 1 else ""
    where = r.env.gpu or r.env.device
    return (f"reference: eager median {p.baseline.median_ms:.4g} ms on {where}; time goes to {top}{mods}" + _roof(p),
            f"This is the time to beat. Call {_lookup(p)} for strategies that fit the dominant ops and the "
            "bottleneck, write ModelNew, then evaluate it.")
