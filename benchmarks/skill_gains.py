"""The measured gain of each skill added for issue 44 (item 2), on a GPU.

    python3 benchmarks/skill_gains.py --device cuda [--tasks a,b] [--preset NAME] [--no-race] [--json OUT]

Each task under benchmarks/skill_gains/ (KernelBench format: task.toml, reference.py) is the
project's own, in a shape that needs one skill, with two CUDA solutions: solutions/with_skill.py
(a ModelNew that applies the skill) and solutions/without.py (the same kernel without it: 1xFFMA
instead of 3xTF32, the tail before the max, the conv bias kept, the filter in global memory, one
output per thread, one block per group). A shipped example whose solutions already hold such a twin
pair is a row too (EXAMPLE_PAIRS: gemm_bias_relu's two Triton GEMMs, tl.dot in "tf32x3" and "ieee"). Both go through the project's evaluator
(``kernelskill.evaluate.evaluate``: compile, the correctness trials, timing interleaved with eager),
then, when both are correct, head to head (``kernelskill.evaluate.race``: the two candidates timed
in one process, interleaved, their ratio of medians with a 95 % interval).

Printed: a Markdown table with, per skill, the task, each solution's verdict, eager's median ms (from
the with-skill run), the with-skill and without medians in ms, and the gain = without / with, with
its 95 % interval: head to head where the race ran, else the ratio of the two speedups over eager
with the conservative interval [with_lo / without_hi, with_hi / without_lo]. ``--json OUT`` writes
the rows. A timing whose quality is not good (noisy, contended) says so in the "from" column.
Needs a CUDA GPU (the skills are CUDA kernels; the cluster one needs sm_90): elsewhere the script
says so and exits 2.
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TASKS_DIR = Path(__file__).resolve().parent / "skill_gains"
sys.path.insert(0, str(ROOT))

# task directory -> the skill its with_skill.py solution applies (skills/<id>.toml)
SKILLS = {
    "tf32x3_short_k_gemm": "tf32x3-split-precision",
    "monotone_tail_maxpool": "monotone-tail-through-max",
    "bias_cancels_batchnorm": "bias-before-batchnorm-cancels",
    "constant_memory_convt_chain": "small-conv-constant-memory-chain",
    "register_window_small_conv": "direct-conv-register-window",
    "cluster_groupnorm": "cluster-dsmem-group-statistics",
}
# A shipped example whose solutions hold a twin pair (examples/<task>/solutions/): the skill, the
# solution with it, the one without. Measured here rather than copied into skill_gains/.
EXAMPLE_PAIRS = {
    "gemm_bias_relu": ("tf32x3-split-precision", "triton_tf32x3_fused_epilogue.py", "triton_fused_epilogue.py"),
}
SOLUTIONS = ("with_skill", "without")


@dataclass(frozen=True)
class Pair:
    """One row of the benchmark: a task directory and its two solutions."""
    name: str
    skill: str
    task: Path
    with_skill: Path
    without: Path

    def path(self, sol: str) -> Path:
        return self.with_skill if sol == "with_skill" else self.without


def pairs(names: str | None = None) -> list[Pair]:
    """The benchmark's rows (all, or the comma-separated ``names``): the skill_gains/ tasks in SKILLS
    order, then the shipped examples' twin pairs."""
    every = [Pair(n, k, TASKS_DIR / n, TASKS_DIR / n / "solutions" / "with_skill.py",
                  TASKS_DIR / n / "solutions" / "without.py") for n, k in SKILLS.items()]
    every += [Pair(n, k, ROOT / "examples" / n, ROOT / "examples" / n / "solutions" / w,
                   ROOT / "examples" / n / "solutions" / wo) for n, (k, w, wo) in EXAMPLE_PAIRS.items()]
    if not names:
        return every
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    known = {p.name: p for p in every}
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise SystemExit(f"skill_gains.py: unknown task(s) {', '.join(unknown)}; the tasks are {', '.join(known)}")
    return [known[n] for n in wanted]


def cuda_problem() -> str | None:
    """Why this machine cannot run the benchmark, or None when it can."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.version.cuda or not torch.cuda.is_available():
        return (f"this machine has no usable CUDA device (torch {torch.__version__}, CUDA {torch.version.cuda}); "
                f"the skills measured here are CUDA kernels: run it on a GPU (an H100 or newer for the cluster skill)")
    return None


def _ms(stats) -> float | None:
    return round(stats.median_ms, 4) if stats is not None else None


def _verdict(res) -> str:
    status = getattr(res.status, "value", res.status)
    return str(status)


def speedup_gain(with_p, without_p) -> tuple[float | None, list[float]]:
    """without / with from the two speedups over eager (each timed interleaved with eager), with the
    conservative interval from the two speedup intervals."""
    if not with_p or not without_p or not with_p.speedup or not without_p.speedup:
        return None, []
    gain = with_p.speedup / without_p.speedup
    if len(with_p.speedup_ci) == 2 and len(without_p.speedup_ci) == 2 and min(without_p.speedup_ci) > 0:
        return gain, [with_p.speedup_ci[0] / without_p.speedup_ci[1], with_p.speedup_ci[1] / without_p.speedup_ci[0]]
    return gain, []


def measure(pair: Pair, device: str, preset: str | None, race: bool) -> dict:
    """Both solutions of one task through the evaluator; the row of the table."""
    from kernelskill.evaluate import evaluate
    from kernelskill.evaluate.api import Options
    from kernelskill.task import Task

    t = Task.load(pair.task, preset=preset)
    opts = Options(device=device)
    row = {"skill": pair.skill, "task": pair.name, "preset": preset or "default",
           "solutions": {s: pair.path(s).name for s in SOLUTIONS}}
    results = {}
    for sol in SOLUTIONS:
        res = evaluate(t, pair.path(sol), opts=opts)
        results[sol] = res
        p = res.profile
        row[f"{sol}_verdict"] = _verdict(res)
        row[f"{sol}_message"] = (res.message or "")[:300]
        row[f"{sol}_ms"] = _ms(p.candidate) if p else None
        row[f"{sol}_speedup"] = p.speedup if p else None
        row[f"{sol}_speedup_ci"] = list(p.speedup_ci) if p else []
        row[f"{sol}_quality"] = p.quality.verdict if p and p.quality else None
        if sol == "with_skill":
            row["eager_ms"] = _ms(p.baseline) if p else None
    ok = all(results[s].ok for s in SOLUTIONS)
    gain, ci = speedup_gain(results["with_skill"].profile, results["without"].profile) if ok else (None, [])
    row.update(gain=gain, gain_ci=ci, gain_from="speedups over eager" if gain is not None else "-")
    if ok and race:
        try:
            from kernelskill.evaluate.race import race as race_fn
            sources = [pair.path(s).read_text() for s in ("without", "with_skill")]
            r = race_fn(t, sources, opts=opts)
        except Exception as e:                      # the race is a refinement: keep the speedup ratio
            row["race_error"] = f"{type(e).__name__}: {e}"[:300]
        else:
            if r.ratio is not None:                 # median(without) / median(with): > 1, the skill is faster
                row.update(gain=r.ratio, gain_ci=list(r.ratio_ci), gain_from="head to head (race)",
                           race_quality=getattr(r.quality, "verdict", None))
            else:
                row["race_error"] = r.message[:300]
    return row


def _interval(ci: list[float]) -> str:
    return f" [{ci[0]:.2f}–{ci[1]:.2f}]" if len(ci) == 2 else ""


def table(rows: list[dict]) -> str:
    lines = ["| skill | task | with_skill | without | eager ms | with-skill ms | without ms | gain (without / with) [95 % CI] | from |",
             "|---|---|---|---|---|---|---|---|---|"]

    def num(v):
        return "-" if v is None else f"{v:.4g}"
    for r in rows:
        gain = "-" if r.get("gain") is None else f"{r['gain']:.2f}×{_interval(r.get('gain_ci', []))}"
        quality = r.get("race_quality") if r.get("gain_from", "").startswith("head") else \
            next((r.get(f"{s}_quality") for s in SOLUTIONS if r.get(f"{s}_quality") not in (None, "good")), None)
        source = r.get("gain_from", "-") + (f", {quality}" if quality not in (None, "good") else "")
        lines.append(f"| `{r['skill']}` | {r['task']} | {r['with_skill_verdict']} | {r['without_verdict']} | "
                     f"{num(r.get('eager_ms'))} | {num(r.get('with_skill_ms'))} | {num(r.get('without_ms'))} | "
                     f"{gain} | {source} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", help="cuda or cuda:N (default cuda); the benchmark needs a GPU")
    ap.add_argument("--tasks", help=f"comma-separated task names (default: all: {', '.join([*SKILLS, *EXAMPLE_PAIRS])})")
    ap.add_argument("--preset", help="a preset of the tasks' task.toml (e.g. small); default: the tasks' own sizes")
    ap.add_argument("--no-race", action="store_true", help="skip the head-to-head race; the gain is then the "
                                                           "ratio of the two speedups over eager")
    ap.add_argument("--json", metavar="OUT", help="write the rows (and the machine) as JSON")
    args = ap.parse_args(argv)
    if not args.device.startswith("cuda"):
        print(f"skill_gains.py: --device {args.device}: the skills measured here are CUDA kernels; use --device cuda",
              file=sys.stderr)
        return 2
    problem = cuda_problem()
    if problem:
        print(f"skill_gains.py: {problem}", file=sys.stderr)
        return 2
    import torch
    rows = []
    for pair in pairs(args.tasks):
        print(f"… {pair.name} ({pair.skill})", file=sys.stderr, flush=True)
        rows.append(measure(pair, args.device, args.preset, race=not args.no_race))
    machine = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
               "host": platform.node()}
    print(f"\nmachine: {machine['gpu']}; torch {machine['torch']}; CUDA {machine['cuda']}\n")
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
