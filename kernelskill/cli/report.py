"""Human-readable summaries of results for the terminal (the CLI's default output)."""
from __future__ import annotations

from kernelskill.evaluate.judge.roofline import fraction_text, limits_text
from ..results import CompileResult, EvalResult
from ..vocab import RUN_FAILURES, Status, covering

_MARK = covering(Status, {Status.ok: "✓", Status.incorrect: "✗", Status.flagged: "⚑", Status.compile_error: "✗",
                          Status.runtime_error: "✗", Status.timeout: "⏱", Status.crashed: "✗",
                          Status.stochastic: "⚠"}, "report._MARK")


def _ms(x: float) -> str:
    return f"{x * 1e3:.1f} µs" if x < 1 else f"{x:.3f} ms"


def print_compile(res: CompileResult, out=print) -> None:
    state = "ok" if res.ok else "FAILED"
    extra = " (compile-only: no device here to run it)" if res.compile_only else ""
    cache = ", cached" if res.cache_hit else ""
    out(f"compile {state}: backend {res.backend}, {res.seconds:.2f} s{cache}{extra}")
    for d in res.diagnostics[:20]:
        out(f"  {d}")
    if not res.ok and not res.diagnostics and res.log_tail:
        out(res.log_tail)


def print_eval(r: EvalResult, out=print) -> None:
    out(f"{_MARK.get(r.status, '?')} {r.status}: {r.message}")
    out(f"  task {r.task} · candidate {r.candidate_hash[:8]} · backend {r.compile.backend} · device "
        f"{r.env.gpu or r.env.device} · {r.seconds:.1f} s")
    steps = [(k, v) for k, v in r.phases.items() if v >= 0.05]
    if steps:       # where those seconds went (EvalResult.phases), the largest first
        out("  seconds: " + " · ".join(f"{k} {v:.1f}" for k, v in sorted(steps, key=lambda kv: -kv[1])))
    if r.compile.diagnostics or (not r.compile.ok and r.status != Status.stochastic):   # stochastic: never built
        print_compile(r.compile, out=lambda s: out("  " + s))
    v = r.verify
    if v:
        errs = f"max abs err {v.max_abs_err:.3g}, rel err {v.max_rel_err:.3g}" if v.max_abs_err is not None else ""
        out(f"  verify: {'correct' if v.correct else 'INCORRECT'} on {sum(t.ok for t in v.trials)}/{len(v.trials)} "
            f"trials (atol {v.atol:g}, rtol {v.rtol:g}) {errs}")
        if v.mismatch:
            for line in v.mismatch.splitlines()[:12]:
                out(f"    {line}")
        plan = v.memory_plan or {}
        if plan.get("inputs") == "seeds" or plan.get("outputs") == "recompute":
            via = " — outputs compared on the GPU, shared through CUDA IPC" if plan.get("handoff") == "cuda-ipc" else ""
            out(f"  {plan.get('summary', '')}{via}")
    p = r.profile
    if p and p.candidate and p.baseline:
        out(f"  time: candidate {_ms(p.candidate.median_ms)} (IQR {_ms(p.candidate.iqr_ms)}, n={p.candidate.n}) · "
            f"eager {_ms(p.baseline.median_ms)} · speedup {p.speedup_text()}")
        _print_quality(p, out)
        if p.compile_baseline and p.speedup_vs_compile:
            ci = f" [{p.speedup_vs_compile_ci[0]:.2f}–{p.speedup_vs_compile_ci[1]:.2f}]" if p.speedup_vs_compile_ci else ""
            out(f"  torch.compile {_ms(p.compile_baseline.median_ms)} · speedup vs compile {p.speedup_vs_compile:.2f}×{ci}")
        if p.custom_share is not None:
            out(f"  custom share {p.custom_share:.0%} · timer {p.timer}" + (f" · {p.threads} threads" if p.threads else ""))
        for k in p.kernels[:6]:
            out(f"    {k.share:6.1%}  {_ms(k.time_ms):>10}  {'*' if k.custom else ' '} {k.name[:90]}")
        _print_roofline(p, out)
    if r.shapes is not None:
        _print_shapes(r.shapes, out)
    for f in r.flags:
        out(f"  flag {f}")
    if r.log_tail and r.status in RUN_FAILURES:
        out("  log tail:")
        for line in r.log_tail.splitlines()[-12:]:
            out(f"    {line}")


def _print_shapes(s, out) -> None:
    """--shapes: the verdict at each derived shape, and whether it generalizes."""
    out(f"  shapes: {s.summary}")
    for c in s.shapes:
        sp = f" · {c.speedup:.2f}×" if c.speedup else ""
        out(f"    {c.verdict:<10} {c.label}{sp}" + (f" — {c.message[:110]}" if c.message else ""))


def _rounds_text(q) -> str:
    """"timed 3×, rounds 2 and 3 reported" (rounds counted from 1; each on fresh allocations)."""
    used = [r + 1 for r in (q.chosen_rounds or [q.chosen_round])]
    names = " and ".join(str(r) for r in used) if len(used) <= 2 else ", ".join(str(r) for r in used)
    return f"timed {q.rounds}× on fresh allocations, round{'s' if len(used) > 1 else ''} {names} reported"


def _print_quality(p, out=print) -> None:
    """The measurement's quality: one line when good, the reasons and the rounds when not."""
    q = p.quality
    if q is None:
        return
    if q.good:
        out("  measurement: good" + (f" ({_rounds_text(q)})" if q.rounds > 1 else ""))
        return
    out(f"  measurement: {q.verdict.upper()} — the speedup is uncertain; do not act on it"
        + (f" ({_rounds_text(q)})" if q.rounds > 1 else ""))
    for why in q.reasons[:4]:
        out(f"    {why}")


def print_task(info: dict, out=print) -> None:
    out(f"task {info['name']}" + (f" (level {info['level']})" if info.get("level") else "") + f" — {info['file']}")
    if info.get("description"):
        out(f"  {info['description']}")
    if info.get("preset") or info.get("overrides"):
        values = ", ".join(f"{k}={v}" for k, v in (info.get("overrides") or {}).items()) or "-"
        out(f"  preset {info.get('preset') or '-'} · overrides {values}")
    fmt = lambda s: (f"{s['dtype']}{s['shape']}" if "shape" in s else repr(s.get("value")))
    out("  inputs:  " + ", ".join(fmt(s) for s in info["inputs"]))
    out("  outputs: " + ", ".join(fmt(s) for s in info["outputs"]))
    # Parameters are learned weights; buffers (register_buffer: running stats, masks, constants) are not.
    for key in ("parameters", "buffers"):
        items = info[key]
        more = f"\n    … {len(items) - 12} more" if len(items) > 12 else ""
        out(f"  {key}: {len(items)}" + "".join(f"\n    {p['name']}: {fmt(p)}" for p in items[:12]) + more)
    out(f"  op classes: {', '.join(info['op_classes']) or '-'}  (aten: {', '.join(info['aten_ops'][:12])})")
    if "features" in info:
        out(f"  features: {', '.join(info['features']) or '-'}")
        out(f"  modules: {', '.join(info.get('modules') or []) or '-'}")
        st = info.get("structure") or {}
        for r in st.get("reductions", [])[:6]:
            out(f"    {r['op']} over dims {r['dims']} of {r['shape']} ({r['size']} values each)")
        for m in st.get("gemms", [])[:6]:
            out(f"    {m['op']} batch {m['batch']} M {m['m']} N {m['n']} K {m['k']}")
        for c in st.get("convolutions", [])[:6]:
            out(f"    conv {c['dims']}-D{' transposed' if c['transposed'] else ''} kernel {c['kernel']} stride "
                f"{c['stride']} groups {c['groups']} channels {c['in_channels']}->{c['out_channels']}")
    out(f"  FLOPs {info['flops']:.3g} (counts {info['flops_counted']})")
    out(f"  compulsory bytes {info['bytes']:.3g} (inputs, outputs, parameters) · tolerance atol "
        f"{info['tolerance']['atol']:g} rtol {info['tolerance']['rtol']:g}")
    if info.get("traced_on") == "cpu":
        out(f"  traced on the CPU at the task's sizes: {info.get('meta_failure') or 'the meta device was not used'}")


def _print_roofline(p, out=print) -> None:
    roof = p.roofline
    if roof is not None:
        out(f"  roofline: {roof.flops:.3g} FLOP, {roof.bytes:.3g} B (intensity {roof.intensity:.3g} FLOP/B, "
            f"ridge {roof.ridge:.3g}) · floor {_ms(roof.floor_ms)} · achieved {roof.achieved_gbs:.1f} GB/s, "
            f"{roof.achieved_tflops * 1e3:.1f} GFLOP/s: {fraction_text(roof, 'fraction', 1)}"
            + (f" · eager {fraction_text(roof, 'eager_fraction', 1, what='')}" if roof.eager_fraction is not None else ""))
        out(f"  ceilings: {roof.bandwidth_gbs:.0f} GB/s, {roof.peak_tflops:.1f} TFLOP/s, "
            f"launch {roof.launch_us or 0:.1f} µs — {roof.ceilings}{limits_text(roof)}")
    if p.bottleneck:
        launches = roof.launches if roof is not None else None
        extra = f" ({launches} launch{'es' if launches != 1 else ''} per call" + (f", device busy {roof.busy:.0%}" if roof.busy is not None else "") \
            + ")" if launches is not None else ""
        out(f"  bottleneck: {p.bottleneck}{extra}")
    n = p.ncu
    if n:
        parts = [f"{label} {n[key]:.0f}%" for key, label in (("sm_pct", "SM"), ("memory_pct", "memory"), ("dram_pct", "DRAM"),
                 ("achieved_occupancy_pct", "occupancy")) if key in n]
        out(f"  ncu ({n.get('launches', 0)} kernels): " + ", ".join(parts))
        if n.get("top_stalls"):
            out("    stalls: " + ", ".join(f"{r} {v:.0%}" for r, v in n["top_stalls"].items()))
    for note in p.notes:
        out(f"  note: {note}")


def _print_modules(p, out, limit: int = 12) -> None:
    """The same time by the module that ran it: which of the model's layers is the slow one."""
    if len(p.modules) < 2:
        return
    out(f"  by module ({p.launches} {'kernel launches' if p.device.startswith('cuda') else 'ops'} a call):"
        if p.launches else "  by module:")
    for m in p.modules[:limit]:
        what = f"{m.module} ({m.type})" if m.type else m.module
        out(f"    {m.share:6.1%}  {_ms(m.time_ms):>10}  ×{m.launches:<3}  {what[:48]:<48}  {m.top[:40]}")
    if len(p.modules) > limit:
        rest = p.modules[limit:]
        out(f"    {sum(m.share for m in rest):6.1%}  {_ms(sum(m.time_ms for m in rest)):>10}        "
            f"{len(rest)} more modules")


def print_profile(r: EvalResult, reference: bool = False, out=print) -> None:
    """``kernelskill profile``: where the time goes and what bounds it."""
    p = r.profile
    who = "reference (PyTorch eager)" if reference else f"candidate {r.candidate_hash[:8]}"
    if p is None or p.candidate is None:
        print_eval(r, out=out)
        return
    out(f"profile of {who} · task {r.task} · device {r.env.gpu or r.env.device}")
    out(f"  time {_ms(p.candidate.median_ms)} (IQR {_ms(p.candidate.iqr_ms)}, n={p.candidate.n}, {p.timer})"
        + ("" if reference else f" · eager {_ms(p.baseline.median_ms)} · speedup {p.speedup_text()}" if p.speedup else ""))
    _print_quality(p, out)
    if p.compile_baseline:
        out(f"  torch.compile {_ms(p.compile_baseline.median_ms)}"
            + (f" (the reference is {p.speedup_vs_compile:.2f}× of it)" if reference and p.speedup_vs_compile else
               f" · speedup vs compile {p.speedup_vs_compile:.2f}×" if p.speedup_vs_compile else ""))
    out(f"  kernels per call ({'all library' if reference else f'custom share {p.custom_share:.0%}' if p.custom_share is not None else '?'}):")
    for k in p.kernels[:12]:
        out(f"    {k.share:6.1%}  {_ms(k.time_ms):>10}  ×{k.calls:<3} {'*' if k.custom else ' '} {k.name[:90]}")
    _print_modules(p, out)
    _print_roofline(p, out)
    for f in r.flags:
        if not (reference and f.startswith("no-custom-kernel")):
            out(f"  flag {f}")
