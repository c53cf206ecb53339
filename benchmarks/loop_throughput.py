"""Throughput of the agent loop's evaluator: candidates verified and timed per minute, builds included.

Replays a fixed list of candidate sources through the trusted evaluator (compile → verify → time →
profile), as an optimizer run would hand them over: one with a compile error, one incorrect, four
correct variants, each a source never built before (a fresh token per run). It does so once with
torch's own build (Options(build="torch"): before) and once with the direct build (after), in one
run on one machine.

With `--workers ahead` (as the optimizer, the MCP server and the TUI run the evaluator) a worker
started ahead serves each evaluation; the benchmark waits for the spares to be ready between
candidates, as an agent's next candidate comes seconds after the last verdict, and counts only the
evaluator's own time. `cold`: every worker starts with its evaluation (one-shot commands).

    python benchmarks/loop_throughput.py [--device cpu|cuda] [--paths torch,direct]
                                         [--workers cold,ahead] [--json OUT]
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import torch  # noqa: E402

from build_cost import HostWatch, source, stop_on_sigterm, write_json  # noqa: E402
from kernelskill import Candidate, Task  # noqa: E402
from kernelskill.evaluate import compile, evaluate
from kernelskill.evaluate.launch import isolation  # noqa: E402
from kernelskill.evaluate.api import Options  # noqa: E402

TASK = '''import torch
import torch.nn as nn

batch_size = {rows}
dim = {cols}


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
'''
# the CPU case is the L1 task at a size a 2-core machine times in seconds; the GPU one an L1 size
SIZES = {"cpu": (256, 4096), "cuda": (4096, 16384)}
BODIES = {"cpp": ["2.f * a[i] : 0.f;   // BODY", "a[i] + a[i] : 0.f;   // BODY", "a[i] * 2.f : 0.f;   // BODY",
                  "2.f * a[i] : 0.f * a[i];   // BODY"],
          "cuda": ["2.f * x[i] : 0.f;   // BODY", "x[i] + x[i] : 0.f;   // BODY", "x[i] * 2.f : 0.f;   // BODY",
                   "2.f * x[i] : 0.f * x[i];   // BODY"]}
WRONG = {"cpp": "3.f * a[i] : 0.f;   // BODY", "cuda": "3.f * x[i] : 0.f;   // BODY"}


def candidates(backend: str) -> list[tuple[str, str, str]]:
    """(label, expected status, source): the fixed list, with a token of this run (cold builds)."""
    token = uuid.uuid4().hex[:10]
    base = source(backend, token)
    body = BODIES[backend][0]
    out = [("typo", "compile_error", source(backend, token, change="typo")),
           ("incorrect", "incorrect", base.replace(body, WRONG[backend]))]
    out += [(f"correct {i + 1}", "ok", base.replace(body, b)) for i, b in enumerate(BODIES[backend])]
    return out


def run(task: Task, backend: str, device: str, path: str, workers: str, warm: str, on_row=None) -> dict:
    """One replay of the fixed list under one build path and worker mode; ``on_row(result so far)``
    after each candidate."""
    rows = []
    result = {"path": path, "workers": workers, "rows": rows, "total_s": 0.0, "per_minute": 0.0}
    with isolation.prestarting(workers.startswith("ahead")):
        if workers.startswith("ahead"):        # the loop's first evaluation starts the spares the rest take
            evaluate(task, Candidate.from_source(warm), opts=Options(device=device, build=path))
        for label, expected, src in candidates(backend):
            isolation.wait_for_spares()       # workers started ahead are ready, as between an agent's calls
            t = time.perf_counter()
            r = evaluate(task, Candidate.from_source(src), opts=Options(device=device, build=path))
            seconds = time.perf_counter() - t
            assert r.status == expected, (label, r.status, r.message)
            # the evaluation's own steps (reference, the worker's start-up, set-up, build, …): where
            # an evaluation's seconds beyond its build went
            rows.append((label, r.status, r.compile.seconds, seconds, r.compile.steps, r.phases))
            result["total_s"] = sum(row[3] for row in rows)
            result["per_minute"] = len(rows) / result["total_s"] * 60
            print(f"  {path:>6} {workers:>5} {label:<10} {r.status:<14} build {r.compile.seconds:6.2f} s  "
                  f"whole {seconds:6.2f} s", file=sys.stderr, flush=True)
            if on_row:
                on_row(result)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--paths", default="torch,direct", help="torch (load_inline's build) and/or direct (the split "
                    "build); comma-separated")
    ap.add_argument("--workers", default="cold,ahead", help="cold (each evaluation starts its workers) and/or ahead "
                    "(workers started ahead, as the optimizer, MCP server and TUI run); comma-separated")
    ap.add_argument("--json", help="write the results here (rewritten after every candidate: a run cut off keeps "
                    "what it replayed)")
    args = ap.parse_args()
    stop_on_sigterm()
    host = HostWatch()          # the host before any of this run's work
    where = torch.cuda.get_device_name() if args.device.startswith("cuda") else (platform.processor()
                                                                                 or platform.machine())
    backend = "cpp" if args.device == "cpu" else "cuda"
    rows, cols = SIZES["cpu" if args.device == "cpu" else "cuda"]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "relu2_task.py"
        path.write_text(TASK.format(rows=rows, cols=cols))
        task = Task.load(path)
        # The reference's outputs and the worker's first import are cached after one evaluation: a
        # loop pays them once, so the replay starts after them.
        warm = source(backend, "warm-" + uuid.uuid4().hex[:6])
        compile(Candidate.from_source(warm), device=args.device)
        evaluate(task, Candidate.from_source(warm), opts=Options(device=args.device))
        results: list[dict] = []
        current: list[dict] = []          # the replay under way (its rows so far)

        def save(partial: dict) -> None:       # after every candidate: a run cut off keeps them
            current[:] = [partial]
            if args.json:
                write_json(args.json, where, host, results + current, complete=False, key="results")
        done = False
        try:
            for w in args.workers.split(","):
                for p in args.paths.split(","):
                    results.append(run(task, backend, args.device, p, w, warm, on_row=save))
            done = True
        except KeyboardInterrupt:       # Ctrl-C, or `timeout`'s SIGTERM: what was replayed follows
            print("  interrupted: the candidates replayed so far follow", file=sys.stderr, flush=True)
            results += [r for r in current if all(r is not done_r for done_r in results)]
    isolation.stop_spares()
    host_lines = host.end()
    print(f"\nmachine: {where}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; torch {torch.__version__}; "
          f"task relu×2 {rows}×{cols} fp32, {backend} candidates{'' if done else ' (cut off)'}\n")
    print("\n".join(host_lines) + "\n")
    print("| build | workers | candidates | evaluator time (s) | candidates per minute | build steps (s) | "
          "evaluations (s) |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        builds = " / ".join(f"{row[2]:.1f}" for row in r["rows"])
        calls = " / ".join(f"{row[3]:.1f}" for row in r["rows"])
        print(f"| {r['path']} | {r['workers']} | {len(r['rows'])} | {r['total_s']:.1f} | {r['per_minute']:.1f} | "
              f"{builds} | {calls} |")
    if args.json:
        write_json(args.json, where, host, results, complete=done, key="results")


if __name__ == "__main__":
    main()
