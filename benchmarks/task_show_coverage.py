"""Does `kernelskill task show` (the task's facts: op classes, features, FLOPs, bytes) work on every
KernelBench problem as shipped? (issue 44, item 1)

Traces every level-1/2/3 file of a KernelBench checkout the way `task show`, `skills search --task`
and MCP's get_task do (``Task.load(path).summary()``), on this machine's CPU (the meta device first;
real CPU tensors where the meta device cannot run the reference), and prints one row per problem
that failed or was traced on the CPU, then the counts.

    python benchmarks/task_show_coverage.py --kernelbench .kb          # .kb/KernelBench/level{1,2,3}
    python benchmarks/task_show_coverage.py --kernelbench .kb --json out.json

KernelBench is never vendored: lay it out as benchmarks/kernelbench_chunk.sh's header says.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernelbench", required=True, help="a folder holding KernelBench/level1..3 (or the levels)")
    ap.add_argument("--json", help="write every row here")
    args = ap.parse_args(argv)
    from kernelskill.task import Task
    base = Path(args.kernelbench)
    base = base / "KernelBench" if (base / "KernelBench").is_dir() else base
    files = sorted(base.glob("level[123]/*.py"))
    if not files:
        ap.error(f"--kernelbench {args.kernelbench}: no level1/2/3 *.py files under {base}")
    rows = []
    for f in files:
        t0 = time.perf_counter()
        row = {"task": f"{f.parent.name}/{f.stem}"}
        try:
            info = Task.load(f).summary()
            row.update(ok=True, traced_on=info["traced_on"], meta_failure=info.get("meta_failure"))
        except Exception as e:  # noqa: BLE001 — a failure is a row
            row.update(ok=False, error=f"{type(e).__name__}: {str(e).splitlines()[0][:300]}")
        row["seconds"] = round(time.perf_counter() - t0, 2)
        rows.append(row)
    print("| task | result | seconds |\n|---|---|---|")
    for r in rows:
        if not r["ok"] or r["traced_on"] != "meta":
            what = r.get("error") or f"traced on the CPU: {r['meta_failure']}"
            print(f"| {r['task']} | {what} | {r['seconds']} |")
    ok = sum(r["ok"] for r in rows)
    cpu = sum(1 for r in rows if r["ok"] and r["traced_on"] == "cpu")
    print(f"\n{ok} of {len(rows)} problems give their facts ({len(rows) - ok} fail); {cpu} traced on the CPU, "
          f"{ok - cpu} on the meta device; {sum(r['seconds'] for r in rows):.0f} s in all")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0 if ok == len(rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
