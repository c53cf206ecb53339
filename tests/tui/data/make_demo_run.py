"""Write the run that ``kernelskill tui --demo`` replays (``tui/demo/run/``, shipped in the package).

A real run of the optimizer on the shipped ``relu_gelu`` example (small preset) on the cpp
backend: the real evaluator, the LLM scripted. The script makes every plot of the Run screen
have something to show: an incorrect candidate (its worst elements in the Profile tab), its
repair (an OpenMP, vectorized kernel, faster than eager), a slower scalar kernel, a compile
error, and a duplicate of the repair. The candidates are short, so the shipped run stays small.
Timestamps are shifted to a fixed date but keep their gaps, so a replay moves at the run's own pace.

    python tests/tui/data/make_demo_run.py        # rewrites tui/demo/run/ (review the diff)
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import tomllib
from pathlib import Path

import tomli_w

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT / "tests" / "optimizer"))
os.environ.setdefault("KERNELSKILL_CACHE", str(ROOT / ".kernelskill-cache"))     # the tests' build cache

from scenario import EVAL_FLAGS, allowed_skills, coder_reply, current_code, debugger_reply, planner_reply  # noqa: E402

TASK = ROOT / "examples" / "relu_gelu"
OUT = ROOT / "tui" / "demo" / "run"
RUN_ID = "20250101-120000-relu_gelu-demo"
T0 = 1735732800.0                      # 2025-01-01 12:00:00 UTC


def candidate(name: str, body: str, flags: str = '"-O3", "-march=native", "-ffast-math", "-fopenmp"',
              pragma: str = "#pragma omp parallel for simd schedule(static)") -> str:
    """A ModelNew whose C++ loop computes ``b[i]`` from ``v = a[i]`` with ``body``."""
    return f'''import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <torch/extension.h>
#include <cmath>
torch::Tensor gelu(torch::Tensor x) {{
    x = x.contiguous();
    auto y = torch::empty_like(x);
    const float* a = x.data_ptr<float>();
    float* b = y.data_ptr<float>();
    const int64_t n = x.numel();
    {pragma}
    for (int64_t i = 0; i < n; ++i) {{
        const float v = a[i];
        {body}
    }}
    return y;
}}
"""
ext = load_inline("{name}", cpp_sources=SRC, functions=["gelu"], extra_cflags=[{flags}],
                  extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.gelu(x)
'''


# x / (1 + exp(-2u)) is 0.5 x (1 + tanh(u)): one exp, vectorized (libmvec) across OpenMP threads.
FAST = candidate("demo_gelu_omp", "const float u = 0.7978845608f * (v + 0.044715f * v * v * v);\n"
                 "        b[i] = v / (1.0f + std::exp(-2.0f * u));")
# A wrong constant in the cubic term: close to GELU, outside the tolerance where |x| is about 1 or more.
WRONG = FAST.replace("0.044715f", "0.047715f").replace("demo_gelu_omp", "demo_gelu_wrong")
# One thread, scalar tanh, -O1: correct and slower than eager.
SCALAR = candidate("demo_gelu_scalar",
                   "b[i] = 0.5f * v * (1.0f + std::tanh(0.7978845608f * (v + 0.044715f * v * v * v)));",
                   flags='"-O1"', pragma="// one thread, no vectors")
BROKEN = FAST.replace("auto y = torch::empty_like(x);", "auto y = torch::empty_like(x)").replace(
    "demo_gelu_omp", "demo_gelu_broken")


class DemoScript:
    """planner → the first allowed skill; coder → WRONG, SCALAR, BROKEN, FAST; debugger → FAST."""

    def __init__(self) -> None:
        self.coder = [WRONG, SCALAR, BROKEN, FAST]
        self.n = 0

    def __call__(self, role: str, messages: list[dict]) -> str:
        if role == "planner":
            self.n += 1
            skills = allowed_skills(messages)
            return planner_reply(skills[0] if skills else "none", f"one vectorized pass, try {self.n}",
                                 differs=f"variant {self.n}" if self.n > 1 else "",
                                 plan=f"fuse GELU into one C++ pass (variant {self.n})", code=current_code(messages))
        if role == "coder":
            return coder_reply(self.coder.pop(0) if self.coder else FAST)
        return debugger_reply(FAST, diagnosis="the cubic term's constant is 0.047715; GELU's is 0.044715")


def main() -> None:
    from kernelskill.config import load_config
    from kernelskill.llm import ScriptedLLM
    from kernelskill.optimizer import Optimizer
    from kernelskill.task import Task
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["KERNELSKILL_HOME"] = tmp              # skill statistics stay out of the user's store
        flags = {**EVAL_FLAGS, "eval.min_reps": 10, "eval.max_reps": 30, "eval.time_cap_s": 0.5}
        config = load_config({**flags, "budget.attempts": 5, "search.epsilon": 0.0, "search.seed": 0,
                              "runs_dir": "runs"}, cwd=Path(tmp), env={})
        opt = Optimizer(Task.load(TASK, preset="small"), llm=ScriptedLLM(DemoScript()), config=config, runs_dir=tmp)
        out = opt.run()
        shutil.rmtree(OUT, ignore_errors=True)
        shutil.copytree(out.path, OUT)
    info = tomllib.loads((OUT / "run.toml").read_text())
    info["run"].update(id=RUN_ID, created="2025-01-01T12:00:00", task="examples/relu_gelu")
    info["env"] = {"python": "3.11", "platform": "Linux", "host": "demo", "torch": "2.x"}
    (OUT / "run.toml").write_text(tomli_w.dumps(info))
    lines, start = [], None
    for line in (OUT / "events.jsonl").read_text().splitlines():
        ev = json.loads(line)
        start = ev["t"] if start is None else start
        ev["t"] = round(T0 + ev["t"] - start, 3)
        if ev["event"] == "RunStarted":
            ev["run_id"], ev["task"] = RUN_ID, "examples/relu_gelu"
        if "node" in ev:
            ev["node"]["created"] = round(T0 + ev["node"]["created"] - start, 3)
            (ev["node"]["result"] or {}).pop("env", None)          # this machine's details stay here
        lines.append(json.dumps(ev))
    (OUT / "events.jsonl").write_text("\n".join(lines) + "\n")
    (OUT / "report.md").write_text((OUT / "report.md").read_text().replace(out.path.name, RUN_ID))
    print(OUT, out.reason, [(n.id, n.status, n.speedup) for n in opt.tree])


if __name__ == "__main__":
    main()
