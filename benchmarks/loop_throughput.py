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

With `--kernelbench FILE,FILE,…` it measures the loop at KernelBench's sizes instead (issue 48,
item 5): for each problem, `--candidates N` candidates as an optimizer run would hand them over,
each a source never built before — the reference's own module with one custom kernel over its
output (a copy: correct by construction, built for real) — evaluated with workers started ahead;
the first pays the task's reference, the rest are the warm per-candidate cost. `--set NAME=VALUE`
shrinks every problem's sizes (a CPU's tests), `--baseline both` adds torch.compile. The table
gives each problem's first and warm seconds and where a warm evaluation's seconds went.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
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


COPY_CPP = r"""
#include <torch/extension.h>
// TOKEN
torch::Tensor copy_out(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float* a = xc.data_ptr<float>();
    float* b = y.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) b[i] = a[i];
    return y;
}
"""
COPY_CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
__global__ void copy_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    // TOKEN
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}
torch::Tensor copy_out(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    int64_t n = xc.numel();
    copy_kernel<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""


def wrapped_candidate(reference: str, backend: str, token: str) -> str:
    """A candidate for a KernelBench problem: its reference module, subclassed, with one custom
    kernel over the (fp32, single tensor) output. Correct by construction; a new ``token`` is a
    source never built before, so every candidate pays a real build."""
    if backend == "cpp":
        ext = (f"SRC = {COPY_CPP.replace('TOKEN', token)!r}\n"
               f"_ks_ext = load_inline(name='ks_loop_{token}', cpp_sources=SRC, functions=['copy_out'], "
               f"extra_cflags=['-O3'])\n")
    else:
        ext = (f"SRC = {COPY_CUDA.replace('TOKEN', token)!r}\n"
               f"_ks_ext = load_inline(name='ks_loop_{token}', cpp_sources='torch::Tensor copy_out(torch::Tensor x);', "
               f"cuda_sources=SRC, functions=['copy_out'])\n")
    return (reference.rstrip() + "\n\nfrom torch.utils.cpp_extension import load_inline\n" + ext +
            "\n\nclass ModelNew(Model):\n    def forward(self, *args):\n"
            "        return _ks_ext.copy_out(super().forward(*args))\n")


def kernelbench_loop(files: list[Path], device: str, n: int, baseline: str, overrides: dict, on_row=None) -> list[dict]:
    """Each problem's candidates, evaluated as the optimizer runs them (workers started ahead):
    [{"task", "rows": [{"label", "status", "seconds", "build_s", "phases"}]}]."""
    backend = "cpp" if device == "cpu" else "cuda"
    out = []
    with isolation.prestarting(True):
        for f in files:
            # a size applies to the problems that have it (one --set list serves them all)
            own = {k: v for k, v in overrides.items() if k in Task.load(f).constants} if overrides else None
            task = Task.load(f, overrides=own or None)
            entry = {"task": f"{f.parent.name}/{f.stem}", "rows": []}
            out.append(entry)
            for i in range(n):
                isolation.wait_for_spares()      # ready, as between an agent's calls
                src = wrapped_candidate(task.source, backend, uuid.uuid4().hex[:10])
                t = time.perf_counter()
                r = evaluate(task, Candidate.from_source(src), opts=Options(device=device, baseline=baseline))
                seconds = time.perf_counter() - t
                entry["rows"].append({"label": "first" if i == 0 else f"warm {i}", "status": str(r.status),
                                      "message": r.message[:300], "seconds": round(seconds, 3),
                                      "build_s": r.compile.seconds, "phases": r.phases})
                print(f"  {entry['task']:<40} {entry['rows'][-1]['label']:<7} {r.status:<10} "
                      f"build {r.compile.seconds:6.2f} s  whole {seconds:6.2f} s", file=sys.stderr, flush=True)
                if on_row:
                    on_row(out)
    return out


def kernelbench_table(results: list[dict]) -> str:
    """Per problem: the first evaluation, the warm ones' median, and a warm one's largest steps."""
    lines = ["| problem | candidates ok | first (s) | warm median (s) | warm build median (s) | warm: largest steps (median s) |",
             "|---|---|---|---|---|---|"]
    for e in results:
        rows = e["rows"]
        warm = rows[1:]
        ok = sum(r["status"] == "ok" for r in rows)
        med = (lambda xs: statistics.median(xs) if xs else float("nan"))
        steps = {k: med([r["phases"].get(k, 0.0) for r in warm]) for r in warm for k in r["phases"]}
        top = ", ".join(f"{k} {v:.2f}" for k, v in sorted(steps.items(), key=lambda kv: -kv[1])[:4])
        lines.append(f"| {e['task']} | {ok}/{len(rows)} | {rows[0]['seconds']:.1f} | {med([r['seconds'] for r in warm]):.1f} "
                     f"| {med([r['build_s'] for r in warm]):.1f} | {top} |")
    return "\n".join(lines)


def _overrides(pairs: list[str]) -> dict:
    out = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"loop_throughput: --set {pair!r}: expected NAME=VALUE")
        out[name] = int(value) if value.lstrip("-").isdigit() else value
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--paths", default="torch,direct", help="torch (load_inline's build) and/or direct (the split "
                    "build); comma-separated")
    ap.add_argument("--workers", default="cold,ahead", help="cold (each evaluation starts its workers) and/or ahead "
                    "(workers started ahead, as the optimizer, MCP server and TUI run); comma-separated")
    ap.add_argument("--json", help="write the results here (rewritten after every candidate: a run cut off keeps "
                    "what it replayed)")
    ap.add_argument("--kernelbench", help="KernelBench problem files, comma-separated: measure the loop at their "
                    "sizes (each problem's candidates wrap its reference with one custom kernel)")
    ap.add_argument("--candidates", type=int, default=4, help="with --kernelbench: candidates per problem (default 4: "
                    "one first, three warm)")
    ap.add_argument("--baseline", default="eager", choices=["eager", "both"], help="with --kernelbench: the baselines "
                    "timed (both: torch.compile too)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="with --kernelbench: a size the problems that have that constant are run at (e.g. "
                    "batch_size=2 on a CPU)")
    args = ap.parse_args()
    stop_on_sigterm()
    if args.kernelbench:
        return kernelbench_main(args)
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


def kernelbench_main(args) -> None:
    files = [Path(f) for f in args.kernelbench.split(",") if f]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise SystemExit(f"loop_throughput: no such KernelBench file: {', '.join(missing)}")
    host = HostWatch()
    where = torch.cuda.get_device_name() if args.device.startswith("cuda") else (platform.processor()
                                                                                 or platform.machine())
    results: list[dict] = []

    def save(partial: list[dict]) -> None:
        results[:] = partial
        if args.json:
            write_json(args.json, where, host, results, complete=False, key="results")
    done = False
    try:
        kernelbench_loop(files, args.device, args.candidates, args.baseline, _overrides(args.set), on_row=save)
        done = True
    except KeyboardInterrupt:
        print("  interrupted: the candidates evaluated so far follow", file=sys.stderr, flush=True)
    isolation.stop_spares()
    host_lines = host.end()
    print(f"\nmachine: {where}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; torch {torch.__version__}; "
          f"baseline {args.baseline}; sizes {'shipped' if not args.set else ', '.join(args.set)}"
          f"{'' if done else ' (cut off)'}\n")
    print("\n".join(host_lines) + "\n")
    print(kernelbench_table(results))
    if args.json:
        write_json(args.json, where, host, results, complete=done, key="results")


if __name__ == "__main__":
    main()
