"""Harness costs: worker start-up, cold and cached builds per backend, a whole eval.

    python benchmarks/build_and_eval.py [--device cpu|cuda] [--json OUT]

Prints a markdown table; the figures in docs/evaluator.md come from it.
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import torch  # noqa: E402

from kernelskill import Candidate  # noqa: E402
from kernelskill.evaluate import compile, evaluate  # noqa: E402
from kernelskill.evaluate.api import Options  # noqa: E402
from kernelskill.evaluate.worker.timing import TimingConfig  # noqa: E402

from helpers import RELU_TASK, toolkit_candidate  # noqa: E402


def fresh(source: str) -> Candidate:
    """The same program with a unique token: a cold build."""
    token = uuid.uuid4().hex[:8]
    return Candidate.from_source(source.replace("#include <torch/extension.h>",
                                                f"#include <torch/extension.h>\n// {token}", 1)
                                 .replace("#include <ATen/cuda/CUDAContext.h>",
                                          f"#include <ATen/cuda/CUDAContext.h>\n// {token}", 1)
                                 .replace("import triton\n", f"import triton\n# {token}\n", 1))


def timed(fn):
    t = time.perf_counter()
    res = fn()
    return res, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = []
    plain = Candidate.from_source("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
                                  "        return torch.relu(x) * 2.0\n")
    compile(plain, device=args.device)
    starts = [timed(lambda: compile(plain, device=args.device))[1] for _ in range(3)]
    rows.append(("worker start-up (compile of a no-build candidate)", "-", min(starts)))

    sources = {"cpp": toolkit_candidate("return ext.relu2(x)")}
    if args.device == "cuda":
        from gpu.test_gpu_backends import CUDA, TRITON
        sources.update(cuda=CUDA, triton=TRITON)
    for backend, src in sources.items():
        cand = fresh(src)
        dev = "cpu" if backend == "cpp" else args.device
        cold, wall = timed(lambda: compile(cand, device=dev))
        rows.append((f"{backend}: cold build (build step / whole call)", f"{cold.seconds:.2f}", wall))
        hot, wall = timed(lambda: compile(cand, device=dev))
        rows.append((f"{backend}: cached build (build step / whole call)", f"{hot.seconds:.3f}", wall))
        v, wall = timed(lambda: evaluate(RELU_TASK, cand, opts=Options(device=dev, timing=None, profile=False)))
        rows.append((f"{backend}: verify only (6 trials; in-worker trial time in the step column)",
                     f"{v.verify.seconds:.3f}" if v.verify else v.status, wall))
        opts = Options(device=dev, timing=TimingConfig())
        res, wall = timed(lambda: evaluate(RELU_TASK, cand, opts=opts))
        if res.profile and res.profile.first_call_ms is not None:
            rows.append((f"{backend}: first call of the candidate (Triton compiles here; cached on later runs)",
                         f"{res.profile.first_call_ms / 1e3:.3f}", res.profile.first_call_ms / 1e3))
        rows.append((f"{backend}: whole eval, relu task 64×1000 ({res.status}, "
                     f"{res.profile.speedup:.2f}× vs eager)" if res.profile else f"{backend}: eval {res.status}",
                     "-", wall))
    gpu = torch.cuda.get_device_name() if args.device == "cuda" else platform.processor() or platform.machine()
    print(f"\nmachine: {gpu}; torch {torch.__version__}; {torch.get_num_threads()} threads\n")
    print("| measurement | build step (s) | wall (s) |\n|---|---|---|")
    for name, step, wall in rows:
        print(f"| {name} | {step} | {wall:.2f} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": gpu, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
