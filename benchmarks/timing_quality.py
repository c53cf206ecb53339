"""How good is the timer? Precision, agreement with triton's do_bench, and what it costs.

    python benchmarks/timing_quality.py [--device cuda|cpu] [--json OUT]

- precision: the same kernel measured 10 times with the evaluator's protocol (timing.time_pair:
  warm-up, L2 flush, rotating inputs, adaptive repetitions); spread = (max − min) / median of the
  10 medians. Goal ≤ 1 %.
- agreement: the evaluator's median against ``triton.testing.do_bench(return_mode="median")`` on
  the same kernel and inputs (GPU only). Goal within 3 %.
- cost: wall time of one measurement of a ~1 ms kernel (alone, and paired with a second model as
  in an evaluation), and of a whole evaluate() of a level-1 example with its build cached.
- ceilings: the device's measured ceilings (what the roofline uses).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from kernelskill.evaluate.worker.timing import TimingConfig, time_pair  # noqa: E402


def kernels(device: str) -> dict:
    """name → (callable, input sets); sized for ~0.3–3 ms on an H100, much smaller on a CPU."""
    gpu = device.startswith("cuda")
    n_el, rows, n_mm = ((1 << 28), 16384, 3072) if gpu else ((1 << 22), 512, 384)
    g = torch.Generator(device="cpu").manual_seed(0)
    mk = lambda *shape: torch.randn(*shape, generator=g).to(device)
    return {
        f"relu×2, {n_el:,} fp32": (lambda x: torch.relu(x) * 2.0, [[mk(n_el)] for _ in range(2)]),
        f"softmax {rows}×{rows} fp32": (lambda x: torch.softmax(x, dim=-1), [[mk(rows, rows)] for _ in range(2)]),
        f"matmul {n_mm}³ fp32 (no TF32)": (lambda a, b: a @ b, [[mk(n_mm, n_mm), mk(n_mm, n_mm)] for _ in range(2)]),
    }


def measure(fn, sets, device: str, cfg: TimingConfig, pair: bool = False, ratio: bool = False):
    """(median ms, wall s, reps) of one evaluator-protocol measurement; with ``ratio``, the ratio of
    the kernel's median to an interleaved twin's (what a speedup measures)."""
    import numpy as np
    models = {"k": fn, "twin": (lambda *a: fn(*a))} if pair or ratio else {"k": fn}
    t = time.perf_counter()
    res = time_pair(models, sets, device, cfg)
    med = float(np.median(res["times"]["k"]["ms"]))
    if ratio:
        return med / float(np.median(res["times"]["twin"]["ms"]))
    return med, time.perf_counter() - t, res["reps"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--json")
    ap.add_argument("--only-timer", action="store_true", help="precision and agreement only")
    ap.add_argument("--only-evaluate", action="store_true", help="the whole-evaluate() cost only")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    cfg = TimingConfig()
    gpu = args.device.startswith("cuda")
    machine = torch.cuda.get_device_name() if gpu else f"CPU, {torch.get_num_threads()} threads"
    out: dict = {"machine": machine, "torch": torch.__version__, "kernels": []}
    print(f"machine: {machine}; torch {torch.__version__}; protocol {cfg}\n")
    print("| kernel | median (ms) | spread of 10 medians | do_bench median (ms) | difference | "
          "wall per measurement (s) | reps |")
    print("|---|---|---|---|---|---|---|")
    for name, (fn, sets) in ({} if args.only_evaluate else kernels(args.device)).items():
        with torch.no_grad():
            runs = [measure(fn, sets, args.device, cfg) for _ in range(args.repeats)]
            meds = [m for m, _, _ in runs]
            med = sorted(meds)[len(meds) // 2]
            spread = (max(meds) - min(meds)) / med
            ratios = [measure(fn, sets, args.device, cfg, ratio=True) for _ in range(args.repeats)]
            db = None
            if gpu:
                import triton.testing
                db = triton.testing.do_bench(lambda: fn(*sets[0]), return_mode="median")
        row = {"kernel": name, "median_ms": med, "spread": spread, "medians": meds, "ratios": ratios,
               "ratio_spread": max(ratios) - min(ratios), "do_bench_ms": db,
               "difference": (med - db) / db if db else None,
               "wall_s": sum(w for _, w, _ in runs) / len(runs), "reps": [r for _, _, r in runs]}
        out["kernels"].append(row)
        diff = f"{row['difference']:+.1%}" if db else "-"
        print(f"| {name} | {med:.4f} | {spread:.2%} | {row['ratio_spread']:.2%} ({min(ratios):.3f}–{max(ratios):.3f}) | "
              f"{f'{db:.4f}' if db else '-'} | {diff} | "
              f"{row['wall_s']:.2f} | {min(row['reps'])}–{max(row['reps'])} |", flush=True)
    if args.only_timer:
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=2, default=str))
        return
    if not args.only_evaluate:
        # The ~1 ms kernel, paired as in an evaluation (candidate and eager interleaved).
        name, (fn, sets) = list(kernels(args.device).items())[-1]
        with torch.no_grad():
            med, wall, reps = measure(fn, sets, args.device, cfg, pair=True)
        out["pair"] = {"kernel": name, "median_ms": med, "wall_s": wall, "reps": reps}
        print(f"\npaired measurement (two models interleaved) of {name}: {wall:.2f} s wall, {reps} reps, "
              f"median {med:.4f} ms")
    out["evaluate"] = whole_evaluate(args.device)
    e = out["evaluate"]
    print(f"whole evaluate() of {e['task']} ({e['solution']}): first {e['first_s']:.1f} s (reference outputs "
          f"computed); build and reference cached: {e['warm_s']:.1f} s one-shot, {e['session_s']:.1f} s in a "
          f"session with workers started ahead ({e['status']}, {e['speedup']:.2f}× vs eager)"
          if e["speedup"] else f"whole evaluate(): {e}")
    print("  one-shot by phase (s): " + ", ".join(f"{k} {v}" for k, v in e["phases_s"].items()))
    print("  in a session by phase (s): " + ", ".join(f"{k} {v}" for k, v in e["session_phases_s"].items()))
    from kernelskill.evaluate.api import Options, ceilings
    c = ceilings(args.device, {"gpu": machine} if gpu else {"threads": torch.get_num_threads()}, Options())
    out["ceilings"] = c
    peaks = ", ".join(f"{k} {v / 1e12:.1f} TFLOP/s" for k, v in c.get("peak_flops", {}).items())
    print(f"ceilings: copy {c.get('bandwidth', 0) / 1e9:.0f} GB/s (read + write); matmul {peaks}; "
          f"launch {c.get('launch_us', 0):.1f} µs per eager op")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2, default=str))


def whole_evaluate(device: str, gap_s: float = 15.0) -> dict:
    """A whole evaluate() of a level-1 example, build cached: the first (reference computed), a
    one-shot call (a fresh worker), and one in a session (workers started ahead, as in the
    optimizer, the bench or the MCP server; ``gap_s`` stands for the agents' turn between two)."""
    from kernelskill import Candidate, Task
    from kernelskill.evaluate import compile, evaluate
    from kernelskill.evaluate.launch import isolation
    from kernelskill.evaluate.api import Options
    task_dir = ROOT / "examples" / "softmax_rows"
    gpu = device.startswith("cuda")
    sol = task_dir / "solutions" / ("cuda_softmax_regcache.py" if gpu else "cpp_softmax_openmp.py")
    task = Task.load(task_dir, preset=None if gpu else "small")
    cand = Candidate.from_file(sol)
    compile(cand, device=device)

    def once() -> tuple[float, dict, object]:
        phases = [("start", time.perf_counter())]
        r = evaluate(task, cand, opts=Options(device=device), on_phase=lambda p: phases.append((p, time.perf_counter())))
        phases.append(("end", time.perf_counter()))
        # Where the time went: each phase until the next one began (await = the parent's
        # verification of the outputs that were not compared while the trials ran).
        split = {a: round(t2 - t1, 2) for (a, t1), (_, t2) in zip(phases, phases[1:])}
        split.update({f"worker: {k}": v for k, v in (r.profile.cost_s if r.profile else {}).items()})
        return phases[-1][1] - phases[0][1], split, r

    first, _, _ = once()
    warm, warm_split, r = once()
    with isolation.prestarting():
        once()                       # its workers end by starting the next ones
        time.sleep(gap_s)
        session, session_split, r2 = once()
    return {"task": task.name, "solution": sol.name, "first_s": first, "warm_s": warm, "session_s": session,
            "status": r.status, "speedup": r.speedup, "session_speedup": r2.speedup,
            "phases_s": warm_split, "session_phases_s": session_split}


if __name__ == "__main__":
    main()
