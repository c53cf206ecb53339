"""Where an evaluation's seconds go, over a bench run's rows: each step's median, mean, 90th
percentile and share of the total, from the ``phases`` every EvalResult carries (the parent's
steps — plan, reference, start, judge — and the worker's phases — setup, build, run, await, time,
timed, profile, done — each summed over its spans).

    python benchmarks/evaluation_phases.py                       # the shipped H100 KernelBench files
    python benchmarks/evaluation_phases.py RESULTS.jsonl [...] [--kind reference|eval] [--json OUT]

Each file is a ``results.jsonl`` of ``kernelskill bench``; its rows' own settings (baseline eager
or both) are named in the table's title, one table per file. ``--warm`` also prints what an
evaluation costs once the task's reference is cached (its ``reference`` step left out), which is
what every candidate after the first pays in an optimizer run. Exit 0, or 2 for usage errors.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelskill.bench.store import ResultStore  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
SHIPPED = (RESULTS / "kernelbench_h100_compile" / "results.jsonl",)
# The steps that depend only on the task: an optimizer run pays them once (the reference is cached
# on disk, keyed by the task), every later candidate does not.
TASK_ONLY = ("reference",)


def _p90(values: list[float]) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(0.9 * len(s)))]


def phases_table(path: Path, kind: str | None = None) -> dict:
    """The per-step figures of one results file: {"file", "rows", "baseline", "total", "steps"}."""
    rows = [r for r in ResultStore(path).load().values()
            if r.result is not None and r.result.phases and (kind is None or r.kind == kind)]
    if not rows:
        raise SystemExit(f"evaluation_phases: {path}: no rows with phases" + (f" of kind {kind}" if kind else ""))
    totals = [sum(r.result.phases.values()) for r in rows]
    warm = [sum(v for k, v in r.result.phases.items() if k not in TASK_ONLY) for r in rows]
    names = sorted({k for r in rows for k in r.result.phases})
    steps = []
    for name in names:
        vals = [r.result.phases.get(name, 0.0) for r in rows]
        steps.append({"step": name, "median_s": statistics.median(vals), "mean_s": statistics.fmean(vals),
                      "p90_s": _p90(vals), "share": sum(vals) / sum(totals) if sum(totals) else 0.0})
    steps.sort(key=lambda s: -s["share"])
    baselines = sorted({(r.result.profile.compile_baseline is not None) for r in rows if r.result.profile})
    baseline = "eager and torch.compile" if baselines == [True] else "eager" if baselines == [False] else "mixed"
    gpus = sorted({r.result.env.gpu for r in rows if r.result.env and r.result.env.gpu})
    return {"file": str(path), "rows": len(rows), "baseline": baseline, "gpu": ", ".join(gpus) or "cpu",
            "total": {"median_s": statistics.median(totals), "mean_s": statistics.fmean(totals), "p90_s": _p90(totals)},
            "warm": {"median_s": statistics.median(warm), "mean_s": statistics.fmean(warm), "p90_s": _p90(warm)},
            "steps": steps}


def render(t: dict, warm: bool) -> str:
    lines = [f"{t['file']}: {t['rows']} evaluations on {t['gpu']}, baseline {t['baseline']}",
             f"| step | median s | mean s | p90 s | share of all seconds |", "|---|---:|---:|---:|---:|"]
    for s in t["steps"]:
        lines.append(f"| {s['step']} | {s['median_s']:.2f} | {s['mean_s']:.2f} | {s['p90_s']:.2f} | {100 * s['share']:.1f} % |")
    tot = t["total"]
    lines.append(f"| **whole evaluation** | {tot['median_s']:.2f} | {tot['mean_s']:.2f} | {tot['p90_s']:.2f} | 100 % |")
    if warm:
        w = t["warm"]
        lines.append(f"| **reference cached** (every later candidate) | {w['median_s']:.2f} | {w['mean_s']:.2f} | "
                     f"{w['p90_s']:.2f} | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", type=Path, help="results.jsonl files (default: the shipped H100 ones)")
    ap.add_argument("--kind", choices=["reference", "eval"], help="only rows of this kind")
    ap.add_argument("--warm", action="store_true", help="also the cost once the task's reference is cached")
    ap.add_argument("--json", type=Path, help="write the tables as JSON here")
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0
    files = args.files or list(SHIPPED)
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        print(f"evaluation_phases: no such results file: {', '.join(missing)}", file=sys.stderr)
        return 2
    tables = [phases_table(f, args.kind) for f in files]
    print("\n\n".join(render(t, args.warm) for t in tables))
    if args.json:
        args.json.write_text(json.dumps(tables, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
