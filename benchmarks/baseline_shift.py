"""How far did the baselines move when the flags changed? Two KernelBench result files of the same
card side by side — the suite under the user's flags (PyTorch's defaults: TF32 on in cuDNN) against
the suite under the old strict flags — and every task whose eager or torch.compile median moved by
more than a threshold (5 % by default), with the ratio new/old and its op classes.

    python benchmarks/baseline_shift.py                                   # the shipped files
    python benchmarks/baseline_shift.py NEW.jsonl OLD.jsonl --old-compile a56ad23:benchmarks/results/kernelbench_h100_compile/results.jsonl
    python benchmarks/baseline_shift.py --threshold 10 --json shift.json

NEW and OLD are `results.jsonl` files of `kernelskill bench --reference` (each reference timed
against itself: its eager median is the task's baseline). `--old-compile` names the old
torch.compile rows where they lie in another file; `REV:PATH` reads a file from git history (the
strict-flag compile rows were replaced in place). Only tasks both files measured on the same kind of
GPU are compared; the rest are counted. Exit 0, or 2 for usage errors.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelskill.bench.store import ResultStore, Row  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
NEW = RESULTS / "kernelbench_h100_compile" / "results.jsonl"
# The strict-flag eager rows (the 4xH100 pool's run), retired from the tree when NEW was complete.
OLD = "47fd578:benchmarks/results/kernelbench_h100x4/results.jsonl"
# The strict-flag torch.compile rows, before the suite ran again under the user's flags.
OLD_COMPILE = "a56ad23:benchmarks/results/kernelbench_h100_compile/results.jsonl"


def load(spec: str) -> dict[str, Row]:
    """Rows by task from a results file, or from ``REV:PATH`` in this repository's history."""
    path = Path(spec)
    if not path.is_file() and ":" in spec:
        rev, _, rel = spec.partition(":")
        r = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{rel}"], capture_output=True, text=True)
        if r.returncode:
            raise SystemExit(f"baseline_shift: cannot read {spec} from git: {r.stderr.strip()}")
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "results.jsonl"
            path.write_text(r.stdout)
            rows = ResultStore(path).load().values()
    elif path.is_file():
        rows = ResultStore(path).load().values()
    else:
        raise SystemExit(f"baseline_shift: {spec}: no such results file")
    return {r.task: r for r in rows if r.kind == "reference" and r.result is not None and r.result.profile}


def _gpu(row: Row) -> str:
    return (row.result.env.gpu if row.result.env else "") or ""


def _median(stats) -> float | None:
    return stats.median_ms if stats is not None and stats.median_ms > 0 else None


def compare(new: dict[str, Row], old: dict[str, Row], old_compile: dict[str, Row], threshold: float) -> dict:
    """Per common task: eager and compile medians old/new and their ratio; the moved ones flagged."""
    rows, skipped = [], {"other_gpu": 0, "only_new": 0, "only_old": 0}
    skipped["only_old"] = len(set(old) - set(new))
    for task in sorted(new, key=_order):
        n = new[task]
        o, oc = old.get(task), old_compile.get(task)
        if o is None and oc is None:
            skipped["only_new"] += 1
            continue
        if any(x is not None and _gpu(x) != _gpu(n) for x in (o, oc)):
            skipped["other_gpu"] += 1
            continue
        row = {"task": task, "op_classes": n.op_classes or []}
        for kind, before, attr in (("eager", o, "baseline"), ("compile", oc, "compile_baseline")):
            a = _median(getattr(before.result.profile, attr)) if before is not None else None
            b = _median(getattr(n.result.profile, attr))
            row[f"{kind}_old_ms"], row[f"{kind}_new_ms"] = a, b
            row[f"{kind}_ratio"] = b / a if a and b else None
        row["moved"] = [k for k in ("eager", "compile")
                        if row[f"{k}_ratio"] is not None and abs(row[f"{k}_ratio"] - 1) * 100 > threshold]
        rows.append(row)
    return {"threshold_pct": threshold, "rows": rows, "skipped": skipped}


def _order(task: str) -> tuple:
    level, _, name = task.partition("/")
    num = name.split("_", 1)[0]
    return (level, int(num) if num.isdigit() else 0, name)


def _is_conv(row: dict) -> bool:
    return any("conv" in c for c in row["op_classes"]) or "conv" in row["task"].lower()


def summary(cmp: dict) -> list[str]:
    rows = cmp["rows"]
    out = []
    for kind in ("eager", "compile"):
        have = [r for r in rows if r[f"{kind}_ratio"] is not None]
        if not have:
            continue
        moved = [r for r in have if kind in r["moved"]]
        conv = [r[f"{kind}_ratio"] for r in have if _is_conv(r)]
        other = [r[f"{kind}_ratio"] for r in have if not _is_conv(r)]
        line = (f"{kind}: {len(have)} tasks compared, {len(moved)} moved by more than "
                f"{cmp['threshold_pct']:g} % ({sum(r[f'{kind}_ratio'] < 1 for r in moved)} faster, "
                f"{sum(r[f'{kind}_ratio'] > 1 for r in moved)} slower)")
        if conv:
            line += f"; median new/old {statistics.median(conv):.3f} on {len(conv)} convolution tasks"
        if other:
            line += f", {statistics.median(other):.3f} on the {len(other)} others"
        out.append(line)
    s = cmp["skipped"]
    out.append(f"not compared: {s['only_new']} tasks only in the new file, {s['only_old']} only in the old, "
               f"{s['other_gpu']} measured on another GPU")
    return out


def table(cmp: dict) -> list[str]:
    def f(x, spec=".3f"):
        return "—" if x is None else format(x, spec)
    lines = ["| task | op classes | eager old → new ms | new/old | compile old → new ms | new/old |",
             "|---|---|---|---|---|---|"]
    for r in cmp["rows"]:
        if not r["moved"]:
            continue
        e = f"**{f(r['eager_ratio'])}**" if "eager" in r["moved"] else f(r["eager_ratio"])
        c = f"**{f(r['compile_ratio'])}**" if "compile" in r["moved"] else f(r["compile_ratio"])
        lines.append(f"| {r['task']} | {', '.join(r['op_classes']) or '—'} | {f(r['eager_old_ms'])} → "
                     f"{f(r['eager_new_ms'])} | {e} | {f(r['compile_old_ms'])} → {f(r['compile_new_ms'])} | {c} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    ap.add_argument("new", nargs="?", default=str(NEW), help=f"results under the user's flags (default: {NEW.relative_to(ROOT)})")
    ap.add_argument("old", nargs="?", default=str(OLD), help=f"results under the old flags (default: {OLD})")
    ap.add_argument("--old-compile", default=OLD_COMPILE, metavar="FILE|REV:PATH",
                    help=f"the old torch.compile rows (default: {OLD_COMPILE}); '' for those of OLD")
    ap.add_argument("--threshold", type=float, default=5.0, metavar="PCT", help="moved means |new/old - 1| above this (default 5)")
    ap.add_argument("--json", type=Path, metavar="OUT", help="write every compared task to OUT")
    a = ap.parse_args(argv)
    if a.threshold < 0:
        ap.error("--threshold must be >= 0")
    new, old = load(a.new), load(a.old)
    old_compile = load(a.old_compile) if a.old_compile else old
    cmp = compare(new, old, old_compile, a.threshold)
    print("\n".join(summary(cmp)))
    print()
    print("\n".join(table(cmp)))
    if a.json:
        a.json.write_text(json.dumps(cmp, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
