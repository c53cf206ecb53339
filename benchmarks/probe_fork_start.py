"""What a worker forked from a process that has imported torch already would save over one started
fresh (docs/testing.md, "Where the CPU goes": half of the test suite's CPU is `import torch` in
worker processes, 2.2 s of a core each on the project's 2-core container).

    python benchmarks/probe_fork_start.py [--runs N] [--size N] [--json OUT]

Each run starts one child that does a worker's first real work (a matmul on the intra-op thread
pool, then a sum) and reports its result, two ways:

- spawn: ``python -c`` (what the evaluator does today: every worker imports torch itself);
- fork: a zygote that imported torch once and did nothing else (no tensor op, so no thread pool
  exists to be broken by the fork) forks a child per request.

The table gives the wall time from the request to the child's answer, the CPU seconds the child
used (its own, from ``os.wait4``'s rusage), whether its result equals the parent's and how many
intra-op threads it ran with. The probe that led to the evaluator's forked CPU workers
(kernelskill/evaluate/launch/forkserver.py); it measures the bare mechanism, not the product path.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CHILD = """
import json, sys, torch
torch.manual_seed(0)
x = torch.randn({n}, {n})
y = x @ x
print(json.dumps({{"sum": float(y.double().sum()), "threads": torch.get_num_threads()}}), flush=True)
"""

ZYGOTE = r"""
import json, os, resource, sys, time
import torch                                   # the one import every child shares
print("ready", flush=True)
for line in sys.stdin:
    code = line.strip()
    if not code:
        break
    code = json.loads(code)
    t0 = time.perf_counter()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.dup2(w, 1)
        try:
            exec(code, {"__name__": "__child__"})
        finally:
            sys.stdout.flush()
            os._exit(0)
    os.close(w)
    out = os.read(r, 1 << 16).decode()
    os.close(r)
    _, status, usage = os.wait4(pid, 0)
    print(json.dumps({"out": out, "status": status, "wall": time.perf_counter() - t0,
                      "cpu": usage.ru_utime + usage.ru_stime}), flush=True)
"""


def spawn_once(code: str) -> dict:
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)      # reaped here for its rusage: Popen must not wait again
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {"out": out, "status": status, "wall": time.perf_counter() - t0, "cpu": usage.ru_utime + usage.ru_stime}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--size", type=int, default=512, help="the matmul's side (default 512)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    import torch
    torch.manual_seed(0)
    x = torch.randn(args.size, args.size)
    want = float((x @ x).double().sum())
    code = CHILD.format(n=args.size)

    zygote = subprocess.Popen([sys.executable, "-c", ZYGOTE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert zygote.stdout.readline().strip() == "ready", "the zygote did not start"
    rows = {"spawn": [], "fork": []}
    try:
        for _ in range(args.runs):
            rows["spawn"].append(spawn_once(code))
            t0 = time.perf_counter()
            zygote.stdin.write(json.dumps(code) + "\n")
            zygote.stdin.flush()
            got = json.loads(zygote.stdout.readline())
            got["wall"] = time.perf_counter() - t0          # the request's whole round trip
            rows["fork"].append(got)
    finally:
        zygote.stdin.close()
        zygote.wait(timeout=60)

    print(f"{args.runs} runs each, a {args.size}x{args.size} matmul in the child; torch {torch.__version__}, "
          f"{os.cpu_count()} CPUs")
    print("| start | wall ms (median) | child CPU s (median) | results equal | threads | exit statuses |")
    print("|---|---:|---:|---|---|---|")
    summary = {}
    for how, rs in rows.items():
        outs = [json.loads(r["out"]) if r["out"].strip() else {} for r in rs]
        equal = all(o.get("sum") is not None and abs(o["sum"] - want) <= 1e-6 * max(1.0, abs(want)) for o in outs)
        threads = sorted({o.get("threads") for o in outs}, key=str)
        wall = statistics.median(r["wall"] for r in rs) * 1e3
        cpu = statistics.median(r["cpu"] for r in rs)
        summary[how] = {"wall_ms": wall, "child_cpu_s": cpu, "equal": equal, "threads": threads,
                        "statuses": sorted({r["status"] for r in rs})}
        print(f"| {how} | {wall:.0f} | {cpu:.2f} | {'yes' if equal else 'NO'} | {threads} | "
              f"{summary[how]['statuses']} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": args.runs, "size": args.size, "torch": torch.__version__, "summary": summary,
                       "rows": rows}, f, indent=1)
    return 0 if all(s["equal"] for s in summary.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
