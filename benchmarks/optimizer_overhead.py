"""Orchestration overhead of the optimizer loop per attempt, excluding LLM and evaluation time.

    python benchmarks/optimizer_overhead.py [--real 6] [--replay 50 200] [--json OUT]

What is left when the LLM answers instantly (ScriptedLLM) and evaluation time is subtracted:
selection, skill gating, prompt rendering, parsing, events appended to events.jsonl, node files,
skill statistics (an atomic, fsynced write of stats.toml per evaluated attempt), report.md.
- real: the relu task on the cpp backend with the real evaluator (small timing settings);
- replay-N: N attempts whose evaluation replays one measured EvalResult (with its speedup varied),
  to show how the overhead grows with the tree; "in-memory stats" skips the stats.toml writes.
"setup" is the once-per-run part (task tracing for op classes, run directory); the last column
is the rest divided by the attempts. Prints a markdown table; docs/optimizer.md quotes it.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "optimizer"))
os.environ.setdefault("KERNELSKILL_CACHE", str(ROOT / ".kernelskill-cache"))
HOME = os.environ["KERNELSKILL_HOME"] = tempfile.mkdtemp(prefix="ks-bench-home-")   # never touch the user's stats

from kernelskill.config import load_config  # noqa: E402
from kernelskill.evaluate.api import evaluate  # noqa: E402
from kernelskill.llm import ScriptedLLM  # noqa: E402
from kernelskill.optimizer import Optimizer  # noqa: E402
from kernelskill.results import EvalResult  # noqa: E402
from kernelskill.skills.stats import StatsStore  # noqa: E402
from kernelskill.skills import SkillBook  # noqa: E402
from kernelskill.task import Task  # noqa: E402

from scenario import EVAL_FLAGS, GOOD, RELU_TASK, allowed_skills, coder_reply, planner_reply  # noqa: E402


class Script:
    """planner: first allowed skill, a new mechanism each time; coder: distinct correct code each time."""

    def __init__(self):
        self.n = 0

    def __call__(self, role, messages):
        self.n += 1
        if role == "planner":
            skills = allowed_skills(messages)
            return planner_reply(skills[0] if skills else "none", f"variant {self.n}")
        return coder_reply(GOOD.replace("import torch\n", f"import torch\n# variant {self.n}\n", 1))


class Replay:
    """Evaluation that returns one measured result, its speedup varied per call (deterministic)."""

    def __init__(self, result: EvalResult):
        self.data, self.calls = result.to_dict(), 0

    def __call__(self, task, cand, opts=None, on_phase=None):
        self.calls += 1
        res = EvalResult.from_dict(self.data)
        res.candidate_hash = cand.hash
        if res.profile is not None:
            res.profile.speedup = 0.8 + (self.calls * 37 % 100) / 50
        return res


def run(attempts: int, runs_dir: Path, evaluator=None, memory_stats: bool = False) -> dict:
    config = load_config({**EVAL_FLAGS, "budget.attempts": attempts, "search.seed": 1, "runs_dir": str(runs_dir)})
    book = SkillBook.load()
    if memory_stats:
        book.stats = StatsStore(None)
    opt = Optimizer(Task.load(RELU_TASK), llm=ScriptedLLM(Script()), config=config, skills=book,
                    **({"evaluator": evaluator} if evaluator else {}))
    t = time.perf_counter()
    out = opt.run()
    wall = time.perf_counter() - t
    tm = opt.timers
    overhead = wall - tm["llm"] - tm["eval"] - tm["setup"]
    return {"attempts": out.attempts, "wall_s": round(wall, 3), "llm_s": round(tm["llm"], 4),
            "eval_s": round(tm["eval"], 3), "setup_s": round(tm["setup"], 3), "overhead_s": round(overhead, 4),
            "overhead_ms_per_attempt": round(1e3 * overhead / max(out.attempts, 1), 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--real", type=int, default=6, help="attempts with the real evaluator (0: skip)")
    ap.add_argument("--replay", type=int, nargs="*", default=[50, 200], help="attempts with replayed evaluations")
    ap.add_argument("--json")
    args = ap.parse_args()
    runs = Path(tempfile.mkdtemp(prefix="ks-bench-runs-"))
    try:
        rows = measure(args, runs)
    finally:
        shutil.rmtree(runs, ignore_errors=True)
        shutil.rmtree(HOME, ignore_errors=True)
    report(rows, args.json)


def measure(args, runs: Path) -> list:
    rows = []
    if args.real:
        rows.append(("real evaluator", run(args.real, runs)))
    from kernelskill.optimizer import eval_options
    measured = evaluate(RELU_TASK, GOOD, opts=eval_options(load_config(EVAL_FLAGS), "cpu"))
    for n in args.replay:
        rows.append((f"replay-{n}", run(n, runs, Replay(measured))))
        rows.append((f"replay-{n}, in-memory stats", run(n, runs, Replay(measured), memory_stats=True)))
    return rows


def report(rows: list, json_out: str | None) -> None:
    print(f"optimizer overhead per attempt (excluding LLM and evaluation) — {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, python {platform.python_version()}\n")
    print("| scenario | attempts | wall s | LLM s | eval s | setup s | loop overhead s | overhead / attempt |")
    print("|---|---|---|---|---|---|---|---|")
    for name, r in rows:
        print(f"| {name} | {r['attempts']} | {r['wall_s']:.2f} | {r['llm_s']:.3f} | {r['eval_s']:.2f} | "
              f"{r['setup_s']:.2f} | {r['overhead_s']:.3f} | {r['overhead_ms_per_attempt']:.1f} ms |")
    if json_out:
        Path(json_out).write_text(json.dumps({name: r for name, r in rows}, indent=2))


if __name__ == "__main__":
    main()
