"""Write examples/README.md: per task what it computes, its roofline floor on the H100, eager's
time and roofline fraction on the GPU, and the best verified speedup — all measured.

    python benchmarks/examples_readme.py

Reads benchmarks/results/: bench_examples_cuda_h100.json (`kernelskill bench examples
--include-wrong --device cuda` on an H100, its report.json), timing_quality_h100.json (the H100's
ceilings, measured by the evaluator) and examples_cpu.json (C++ solutions under the evaluator on this CPU, small preset).
"""
from __future__ import annotations

import json
from pathlib import Path

from kernelskill import Task
from kernelskill.evaluate.judge.roofline import floor_ms

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
def main() -> None:
    bench = json.loads((RESULTS / "bench_examples_cuda_h100.json").read_text())
    gpu = {t["task"]: t for t in bench["tasks"]}
    ceil = json.loads((RESULTS / "timing_quality_h100.json").read_text())["ceilings"]
    cpu: dict[str, list] = {}
    for r in json.loads((RESULTS / "examples_cpu.json").read_text())["rows"]:
        if r["expected"] == "ok":
            cpu.setdefault(r["task"], []).append(r)
    s, v = bench["summary"], bench["summary"]["verdicts"]
    honest_cuda = [[x["speedup"] or 0 for x in t["solutions"]
                    if Path(x["solution"]).name.startswith("cuda_") and x["expected"] == "ok"] for t in bench["tasks"]]
    cuda_best = [max(sp) for sp in honest_cuda if sp]
    cuda_faster, cuda_tasks = sum(b > 1 for b in cuda_best), len(cuda_best)
    lines = ["# Examples", "",
             "24 tasks in KernelBench format, each `reference.py` + `task.toml` (a `small` preset runs in",
             "seconds on a CPU; default sizes fill an H100) with hand-written solutions under `solutions/`",
             "(`cuda_*.py`, `cpp_*.py`, `triton_*.py`) and wrong ones under `solutions/wrong/` (first line",
             "`# expect: <verdict>`), which feed the evaluator's tests.", "",
             "GPU columns: `kernelskill bench examples --include-wrong --device cuda` on an **NVIDIA H100**",
             f"80GB HBM3, {bench['finished'][:10]}, torch {bench['machine']['torch']}: every",
             "solution through the trusted evaluator (5 seeded trials + a second input distribution, timing",
             "interleaved with eager, 95 % bootstrap interval). "
             f"{v['as_expected']}/{v['solutions']} verdicts as expected; "
             f"{v['honest_rejected']} of {v['honest']} honest solutions rejected (false positives); "
             f"n {s['n']} · correct {s['correct_rate']:.0%} · fast_1 {s['fast_1']:.0%} · fast_1.5 "
             f"{s['fast_1_5']:.0%} · fast_2 {s['fast_2']:.0%} · geomean {s['geomean_speedup']:.2f}×. "
             f"The best CUDA solution is faster than eager on {cuda_faster} of {cuda_tasks} tasks.", "",
             "Floors: max(FLOPs / peak, compulsory bytes / bandwidth) at default sizes, FLOPs from",
             "`torch.utils.flop_counter` (matmul/conv work only), at the H100's ceilings measured by the",
             f"evaluator ({ceil['bandwidth'] / 1e9:.0f} GB/s copy, {ceil['peak_flops']['float32'] / 1e12:.1f} TFLOP/s "
             f"fp32, {ceil['peak_flops']['tf32'] / 1e12:.0f} TF32). Eager's fraction = floor / eager time.",
             "C++ column: the evaluator on this 2-core CPU, `small` preset (noisy, shared machine).", "",
             "Regenerate: the bench above on a GPU (copy its `report.json` to",
             "`benchmarks/results/bench_examples_cuda_h100.json`), `python benchmarks/examples_table.py",
             "--device cpu --preset small --json benchmarks/results/examples_cpu.json` here, then",
             "`python benchmarks/examples_readme.py`.", "",
             "| task | level | what it computes | H100 floor (ms) | eager, H100 (ms) | eager's roofline fraction "
             "| best verified speedup, H100 [95 % CI] | C++ on CPU (small) |",
             "|---|---|---|---|---|---|---|---|"]
    for d in sorted(p for p in (ROOT / "examples").iterdir() if (p / "task.toml").exists()):
        task = Task.load(d)
        info = task.summary()
        h100 = floor_ms(info["flops"], info["bytes"], ceil, task.dtype, task.allow_tf32)
        g = gpu.get(task.name) or {}
        best = next((x for x in g.get("solutions", []) if x["solution"] == g.get("solution")), None)
        eager = g.get("eager_ms")
        frac = h100 / eager if eager else None
        if best and best["status"] == "ok":
            ci = best.get("ci") or [None, None]
            gtxt = f"{best['speedup']:.2f}× [{ci[0]:.2f}–{ci[1]:.2f}] ({Path(best['solution']).stem})"
        else:
            gtxt = g.get("status", "not run")
        c = [r for r in cpu.get(task.name, []) if r["status"] == "ok" and r["speedup"]]
        cbest = max(c, key=lambda r: r["speedup"]) if c else None
        ctxt = f"{cbest['speedup']:.2f}× ({Path(cbest['solution']).stem})" if cbest else "-"
        lines.append(f"| {task.name} | {task.level} | {task.description} | {h100:.3f} | "
                     f"{eager:.3f} | {frac:.0%} | {gtxt} | {ctxt} |" if eager else
                     f"| {task.name} | {task.level} | {task.description} | {h100:.3f} | - | - | {gtxt} | {ctxt} |")
    (ROOT / "examples" / "README.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
