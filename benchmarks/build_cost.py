"""What a build costs, the direct build (evaluate/build/direct.py) against torch's own (load_inline's ninja
build, Options(build="torch")), measured in one run on one machine:

- compile error: a one-token typo (`flot` for `float`) until its diagnostic is back;
- cold, new signature: a source never built, whose bindings object was never built either (the
  bindings are keyed by the functions' types: the row gives the call an include path of its own,
  which makes their object new without a new type);
- cold, renamed function: a source never built, its function under a new name, same types;
- cold: a source never built, same signatures as an earlier one (an optimizer's children);
- one-line change: the cold source with one line of its kernel changed;
- cached: the same source again.

Each row is `kernelskill.evaluate.compile` of a candidate file: the worker's build step and the whole
call. With `--workers cold` the call starts its worker (Python and torch imported: a one-shot
command); with `ahead` a worker started ahead serves it, as in the MCP server, the optimizer and the
TUI, which keep one ready while the agent thinks (the benchmark waits for it to be ready between
calls, as an agent's next candidate would). Headers are made first (`kernelskill warm` for the flag
set), so the direct rows show builds after set-up, as on any machine after its first builds.

    python benchmarks/build_cost.py [--device cpu|cuda] [--backends cpp,cuda] [--paths torch,direct]
                                    [--workers cold,ahead] [--repeat N] [--rows typo,cold,...] [--json OUT]

On a machine without a CUDA torch, `--backends cuda --device cpu --paths direct` times the
compile-only check of the CUDA candidate (nvcc -c, the same units the GPU's build compiles).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from kernelskill import Candidate  # noqa: E402
from kernelskill.evaluate import compile  # noqa: E402
from kernelskill.evaluate.options import Options  # noqa: E402
from kernelskill.evaluate import host as hostinfo  # noqa: E402
from kernelskill.evaluate.launch import isolation
from kernelskill.evaluate.build import direct as toolchain  # noqa: E402
from kernelskill.evaluate.build.extensions import build_root  # noqa: E402

CPP_FLAGS = ["-O3"]
CPP = r'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = """
#include <torch/extension.h>
// TOKEN
torch::Tensor FN(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float* a = xc.data_ptr<float>();
    float* b = y.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) b[i] = a[i] > 0.f ? 2.f * a[i] : 0.f;   // BODY
    return y;
}
"""
ext = load_inline(name="ks_cost", cpp_sources=SRC, functions=["FN"], extra_cflags=FLAGS)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.FN(x)
'''.replace("FLAGS", json.dumps(CPP_FLAGS))

CUDA = r'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = "torch::Tensor FN(torch::Tensor x);"
CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
__global__ void FN_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    // TOKEN (in each function: the split's units keep no top-level comment, and a unit seen before is cached)
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? 2.f * x[i] : 0.f;   // BODY
}
torch::Tensor FN(torch::Tensor x) {
    // TOKEN
    auto y = torch::empty_like(x);
    int64_t n = x.numel();
    FN_kernel<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
ext = load_inline(name="ks_cost_cuda", cpp_sources=CPP, cuda_sources=CUDA_SRC, functions=["FN"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.FN(x)
'''

CHANGED = {"cpp": ("2.f * a[i] : 0.f;   // BODY", "a[i] + a[i] : 0.f;   // BODY"),
           "cuda": ("2.f * x[i] : 0.f;   // BODY", "x[i] + x[i] : 0.f;   // BODY")}
TYPO = {"cpp": ("const float* a", "const flot* a"), "cuda": ("int64_t n = x.numel();", "int64_t n = x.numel(); flot q;")}


def source(backend: str, token: str, fn: str = "relu2", change: str | None = None, new_bindings: bool = False) -> str:
    text = (CPP if backend == "cpp" else CUDA).replace("TOKEN", token).replace("FN", fn)
    if new_bindings:        # an include path never seen: the bindings' object is built, as for a new type
        text = text.replace('functions=["', f'extra_include_paths=["/tmp/ks-cost-{token}"], functions=["', 1)
    if change:
        old, new = (CHANGED if change == "line" else TYPO)[backend]
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


def timed(src: str, device: str, build: str = "direct"):
    isolation.wait_for_spares()           # with workers started ahead: ready, as between an agent's calls
    t = time.perf_counter()
    res = compile(Candidate.from_source(src), device=device, opts=Options(build=build))
    return res, time.perf_counter() - t


def measure(backend: str, device: str, path: str,
            only: set[str] | None = None) -> Iterator[tuple[str, tuple[float, float, str, list]]]:
    """One round of the builds under one build path, each as it is measured: (row, (build step s,
    whole call s, note, the build's timeline)). ``only``: the rows to measure (keys of ROW_KEYS)."""
    want = (lambda key: only is None or key in only)
    token = uuid.uuid4().hex[:10]
    if want("typo"):
        res, wall = timed(source(backend, token, change="typo"), device, path)
        assert not res.ok and any("flot" in d.message for d in res.diagnostics), res.to_dict()
        yield "compile error (a typo)", (res.seconds, wall, res.path, res.steps)
    # (The compile-only CUDA check builds no bindings, and keys its header by the include paths.)
    compile_only = backend == "cuda" and not device.startswith("cuda")
    if want("new-signature"):
        res, wall = timed(source(backend, token, fn=f"relu2_{token}", new_bindings=not compile_only), device, path)
        assert res.ok, res.to_dict()
        yield "cold, new signature", (res.seconds, wall, _units(res), res.steps)
    if want("renamed"):
        res, wall = timed(source(backend, token, fn=f"relu2_renamed_{token}"), device, path)
        assert res.ok, res.to_dict()
        yield "cold, renamed function", (res.seconds, wall, _units(res), res.steps)
    if want("cold"):
        res, wall = timed(source(backend, token), device, path)
        assert res.ok, res.to_dict()
        yield "cold", (res.seconds, wall, _units(res), res.steps)
    if want("line") or want("cached"):        # the cached row is this source again
        res, wall = timed(source(backend, token, change="line"), device, path)
        assert res.ok, res.to_dict()
        if want("line"):
            yield "one-line kernel change", (res.seconds, wall, _units(res), res.steps)
    if want("cached"):
        res, wall = timed(source(backend, token, change="line"), device, path)
        assert res.ok and res.cache_hit, res.to_dict()
        yield "cached", (res.seconds, wall, "hit", res.steps)


def _wait_for_header_makers(limit_s: float = 300.0) -> None:
    """The precompiled headers the warm-up builds asked for (made by detached processes) are ready:
    the rows measure builds after set-up."""
    import subprocess
    t = time.monotonic()
    while time.monotonic() - t < limit_s and subprocess.run(
            ["pgrep", "-f", "kernelskill.evaluate.build.pch"], capture_output=True).returncode == 0:
        time.sleep(1.0)


def _units(res) -> str:
    return (res.path or ("compile-only" if res.compile_only else "")) + (": " + ", ".join(f"{k} {v:.1f}s" for k, v in res.units.items()) if res.units else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--repeat", type=int, default=2, help="rounds per path (the median is shown)")
    ap.add_argument("--paths", default="torch,direct", help="torch (load_inline's build) and/or direct (the split build: "
                    "toolchain.py, cuda_split.py); comma-separated")
    ap.add_argument("--workers", default="cold,ahead", help="cold (each call starts its worker: a one-shot command) "
                    "and/or ahead (a worker started ahead serves it: the MCP server, optimizer, TUI); comma-separated")
    ap.add_argument("--backends", default=None, help="cpp and/or cuda (default: cpp, and cuda on a GPU)")
    ap.add_argument("--rows", default=",".join(ROW_KEYS), help="which builds to measure, comma-separated: "
                    + ", ".join(ROW_KEYS) + " (default: all)")
    ap.add_argument("--json", help="write the results here (rewritten after every build: a run cut off keeps "
                    "what it measured)")
    args = ap.parse_args()
    only = set(args.rows.split(","))
    if only - set(ROW_KEYS):
        ap.error(f"--rows: unknown {', '.join(sorted(only - set(ROW_KEYS)))}; choose from {', '.join(ROW_KEYS)}")
    stop_on_sigterm()
    host = HostWatch()          # the host before any of this run's work
    backends = (args.backends or ("cpp,cuda" if args.device.startswith("cuda") else "cpp")).split(",")
    print(f"headers for {CPP_FLAGS} (and the bindings'):", flush=True)
    toolchain.warm(build_root(), [CPP_FLAGS], say=lambda t: print("  " + t, flush=True))
    # One build of each backend first: worker start-up, torch's import and the bindings of the
    # benchmark's signature warm, as in any run after its first candidate.
    warmups = {b: source(b, "warmup-" + uuid.uuid4().hex[:6]) for b in backends}
    for b in backends:
        compile(Candidate.from_source(warmups[b]), device="cpu" if b == "cpp" else args.device)
    _wait_for_header_makers()
    table: dict[tuple, list[tuple[float, float, str, list]]] = {}
    modes = [(p, w) for w in args.workers.split(",") for p in args.paths.split(",")]
    where = torch.cuda.get_device_name() if args.device.startswith("cuda") else (platform.processor()
                                                                                 or platform.machine())
    done = False
    try:
        for b in backends:
            dev = "cpu" if b == "cpp" else args.device
            for r in range(args.repeat):
                for path, workers in modes:
                    with isolation.prestarting(workers.startswith("ahead")):
                        if workers.startswith("ahead"):      # a cached call starts the spares the timed calls take
                            compile(Candidate.from_source(warmups[b]), device=dev)
                        for row, value in measure(b, dev, path, only):
                            table.setdefault((b, row, path, workers), []).append(value)
                            print(f"    {row}: build {value[0]:.2f} s, call {value[1]:.2f} s", file=sys.stderr,
                                  flush=True)
                            if args.json:       # what is measured so far, should the run be cut off
                                write_json(args.json, where, host, summarize(table, backends, modes)[1],
                                           complete=False)
                    print(f"  {b} {path} ({workers} workers) round {r + 1} done", file=sys.stderr, flush=True)
        done = True
    except KeyboardInterrupt:           # Ctrl-C, or `timeout`'s SIGTERM (stop_on_sigterm): keep what was measured
        print("  interrupted: the rounds finished so far follow", file=sys.stderr, flush=True)
    isolation.stop_spares()
    host_lines = host.end()
    print(f"\nmachine: {where}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; torch {torch.__version__}; "
          f"median of {args.repeat}{'' if done else ' (cut off: the rounds that finished)'}\n")
    print("\n".join(host_lines) + "\n")
    lines, out = summarize(table, backends, modes)
    print("\n".join(lines))
    if args.json:
        write_json(args.json, where, host, out, complete=done)


ROWS = ("compile error (a typo)", "cold, new signature", "cold, renamed function", "cold", "one-line kernel change",
        "cached")
ROW_KEYS = ("typo", "new-signature", "renamed", "cold", "line", "cached")     # --rows, in ROWS' order


def summarize(table: dict, backends: list[str], modes: list[tuple[str, str]]) -> tuple[list[str], list[dict]]:
    """The table's markdown lines and its JSON rows (medians, every sample and its build's timeline,
    the last build's units), from the rounds measured so far."""
    cols = " | ".join(f"{p} ({w}): step / call (s)" for p, w in modes)
    lines = [f"| backend | build | {cols} | direct: units |", "|---|---|" + "---|" * len(modes) + "---|"]
    out = []
    for b in backends:
        for row in ROWS:
            cells, note = [], ""
            for p, w in modes:
                vals = table.get((b, row, p, w), [])
                if not vals:
                    cells.append("-")
                    continue
                step = statistics.median(v[0] for v in vals)
                call = statistics.median(v[1] for v in vals)
                cells.append(f"{step:.2f} / {call:.2f}")
                out.append({"backend": b, "build": row, "path": p, "workers": w, "step_s": step, "call_s": call,
                            "samples": [[round(v[0], 3), round(v[1], 3)] for v in vals], "units": vals[-1][2],
                            "timelines": [v[3] for v in vals]})
                if p == "direct":
                    note = vals[-1][2]
            if any(c != "-" for c in cells):
                lines.append(f"| {b} | {row} | " + " | ".join(cells) + f" | {note} |")
    return lines, out


class HostWatch:
    """The host around a benchmark run: its busy cores before (at construction) and after (``end``),
    and how long the cgroup's CPU quota held the run back in between."""

    def __init__(self) -> None:
        self.busy = [hostinfo.host_busy_cores(), None]
        self._throttled0 = hostinfo.cpu_throttled_s()
        self.throttled_s: float | None = None

    def end(self) -> list[str]:
        """Sample the host after the run; the lines that say how it was."""
        self.busy[1] = hostinfo.host_busy_cores()
        throttled = hostinfo.cpu_throttled_s()
        if throttled is not None and self._throttled0 is not None:
            self.throttled_s = round(throttled - self._throttled0, 3)
        lines = [hostinfo.host_line(self.busy[0], "before the run"), hostinfo.host_line(self.busy[1], "after it")]
        if self.throttled_s:
            lines.append(f"the cgroup's CPU quota held this run back for {self.throttled_s:.1f} s")
        return lines


def write_json(path: str, machine: str, host: HostWatch, rows: list[dict], complete: bool, key: str = "rows") -> None:
    """The results file, rewritten whole (atomically) each time: a run cut off leaves its rounds.
    ``rows`` go under ``key`` (loop_throughput's are "results")."""
    data = {"machine": machine, "complete": complete, "host_busy_cores": host.busy,
            "cpu_quota": hostinfo.cpu_quota(), "cpu_throttled_s": host.throttled_s, key: rows}
    tmp = Path(path).with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2))
    os.replace(tmp, path)


def stop_on_sigterm() -> None:
    """`timeout` ends a run with SIGTERM: make it a KeyboardInterrupt, so that what was measured is
    printed and written before the process goes."""
    def interrupt(*_):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, interrupt)

if __name__ == "__main__":
    main()
