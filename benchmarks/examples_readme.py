"""Write examples/README.md: per task what it computes, its roofline floor on the H100, and the
measured speedups (trusted evaluator where it ran; the authoring harness otherwise, marked).

    python benchmarks/examples_readme.py

Reads benchmarks/results/: examples_cuda_h200_partial.log (evaluator, H200),
examples_h200_authoring_harness.json, examples_cpu.json (evaluator, this CPU, small preset).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from kernelskill import Task

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
# Ceilings measured on one H100 80GB HBM3 (shared/EVALUATION.md): copy ≈ 3.0 TB/s (read + write),
# fp32 matmul without TF32 ≈ 51.6 TFLOP/s.
H100_BW, H100_FLOPS = 3.0e12, 51.6e12


def gpu_rows() -> dict:
    rows: dict[str, list] = {}
    log = RESULTS / "examples_cuda_h200_partial.log"
    for line in log.read_text().splitlines() if log.exists() else []:
        m = re.match(r"(\S+)\s+(\S+\.py)\s+(\w+)\s+([\d.]+)x", line)
        if m:
            rows.setdefault(m[1], []).append((m[2], m[3], float(m[4])))
    return rows


def main() -> None:
    gpu = gpu_rows()
    harness = json.loads((RESULTS / "examples_h200_authoring_harness.json").read_text())["best"]
    cpu_path = RESULTS / "examples_cpu.json"
    cpu: dict[str, list] = {}
    if cpu_path.exists():
        for r in json.loads(cpu_path.read_text())["rows"]:
            if r["expected"] == "ok":
                cpu.setdefault(r["task"], []).append(r)
    lines = ["# Examples", "",
             "24 tasks in KernelBench format, each `reference.py` + `task.toml` (a `small` preset runs in",
             "seconds on a CPU; default sizes fill an H100) with hand-written solutions under `solutions/`",
             "(`cuda_*.py`, `cpp_*.py`, `triton_*.py`) and wrong ones under `solutions/wrong/` (first line",
             "`# expect: <verdict>`), which feed the evaluator's tests.", "",
             "Roofline floor: max(FLOPs / 51.6 TFLOP/s, compulsory bytes / 3.0 TB/s), the H100 ceilings of",
             "shared/EVALUATION.md, at default sizes. *Evaluator* columns are `kernelskill eval` verdicts and",
             "speedups (median, interleaved with eager, 95 % CI in benchmarks/results); the GPU ones ran on an",
             "**H200** (no H100 was lent this session) and stopped after 10 of 33 GPU solutions when the",
             "session's GPU time ran out. *Authoring harness* figures were measured on the H200 while the",
             "solutions were written, with the authors' own scripts, not the trusted evaluator. C++ figures:",
             "this 2-core CPU, `small` preset, 2 threads, shared with other builds (noisy).", "",
             "Regenerate: `python benchmarks/examples_table.py --device cuda --json …` on a GPU,",
             "`python benchmarks/examples_table.py --device cpu --preset small --json benchmarks/results/examples_cpu.json`",
             "here, then `python benchmarks/examples_readme.py`.", "",
             "| task | level | what it computes | H100 floor (ms) | evaluator, H200: best verified | authoring harness, H200 | evaluator, C++ on CPU (small) |",
             "|---|---|---|---|---|---|---|"]
    for d in sorted(p for p in (ROOT / "examples").iterdir() if (p / "task.toml").exists()):
        task = Task.load(d)
        info = task.summary()
        floor = max(info["flops"] / H100_FLOPS, info["bytes"] / H100_BW) * 1e3
        g = [r for r in gpu.get(task.name, []) if r[1] == "ok"]
        gbest = max(g, key=lambda r: r[2]) if g else None
        gtxt = f"{gbest[2]:.2f}× ({gbest[0].removesuffix('.py')})" if gbest else "not run"
        h = harness.get(task.name)
        htxt = f"{h[1]:.2f}× ({h[0]})" if h else "-"
        c = [r for r in cpu.get(task.name, []) if r["status"] == "ok" and r["speedup"]]
        cbest = max(c, key=lambda r: r["speedup"]) if c else None
        ctxt = f"{cbest['speedup']:.2f}× ({Path(cbest['solution']).stem})" if cbest else "-"
        lines.append(f"| {task.name} | {task.level} | {task.description} | {floor:.3f} | {gtxt} | {htxt} | {ctxt} |")
    (ROOT / "examples" / "README.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
