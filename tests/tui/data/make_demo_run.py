"""Write the run that ``kernelskill tui --demo`` replays (``tui/demo/run/``, shipped in the package).

A real run of the optimizer on the shipped ``relu_gelu`` example (small preset) on the cpp
backend: the real evaluator, the LLM scripted. The script makes every plot of the Run screen
have something to show: an incorrect candidate (its worst elements in the Profile tab), its
repair (an OpenMP, vectorized kernel, faster than eager), a slower scalar kernel (a control), a
compile error, and a duplicate of the repair. The candidates are short, so the shipped run stays small.
Timestamps are shifted to a fixed date but keep their gaps, so a replay moves at the run's own pace.

Every scripted reply says what its own code does: the planner's plans and span advice describe
the code the coder then writes, and the debugger names the node it repairs and quotes that node's
error from its prompt. The script checks the finished run (``check``) and refuses to write one that
contradicts itself or lacks the shape the TUI tests rely on (a busy machine can make the timings
come out in another order: run it again).

    python tests/tui/data/make_demo_run.py        # rewrites tui/demo/run/ (review the diff)

On a 2-core machine busy with other work, eager's two OpenMP threads wait for each other's time
slices, and each evaluation's eager read between 0.3 and 17 ms here. The shipped run was made with
``nice -n -10`` (as root) on such a machine: its timings are still marked noisy, but readable.
"""
from __future__ import annotations

import json
import os
import re
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

from scenario import EVAL_FLAGS, allowed_skills, at_root, current_code, fenced  # noqa: E402

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
# The coder's slip: a wrong constant in the cubic term, close to GELU, outside the tolerance on about half the elements.
WRONG = FAST.replace("0.044715f", "0.047715f")
# The control: the reference's formula with std::tanh, one thread, no SIMD, -O1: correct and slower than eager.
SCALAR = candidate("demo_gelu_scalar",
                   "b[i] = 0.5f * v * (1.0f + std::tanh(0.7978845608f * (v + 0.044715f * v * v * v)));",
                   flags='"-O1"', pragma="// one thread, no SIMD")
# FAST again, with the coder's other slip: the semicolon after empty_like is missing.
BROKEN = FAST.replace("auto y = torch::empty_like(x);", "auto y = torch::empty_like(x)")

# ---- what the planner writes: skill, mechanism, plan, and the spans with their advice ----------------
PLAN_FAST = {
    "skill": "openmp-parallel-for",
    "mechanism": "one OpenMP + SIMD C++ loop, tanh as one exp",
    "plan": "One C++ loop over the flat tensor under `#pragma omp parallel for simd`: u = 0.7978845608·(x + "
            "0.044715·x³), y = x / (1 + exp(-2u)), GELU's 0.5·x·(1 + tanh u) with one exp that vectorizes; "
            "-O3 -march=native -ffast-math -fopenmp.",
    "advice": ["one OpenMP + SIMD C++ loop: y = x / (1 + exp(-2u)), u = 0.7978845608 (x + 0.044715 x^3)"],
    "think": "F.gelu is one elementwise pass: fuse it into one threaded, vectorized loop.",
}
PLAN_CONTROL = {
    "skill": "none",
    "why_no_skill": "a control measurement, not an optimization",
    "mechanism": "control: the reference's formula with std::tanh in a scalar loop",
    "plan": "A control: the reference's formula with std::tanh in a plain loop, one thread, no SIMD, -O1. Its "
            "time against the current loop's shows what the threads and the vector exp buy.",
    "advice": ["control: std::tanh per element, one thread, no SIMD"],
    "flags_advice": ["control: -O1 only"],
    "think": "How much of the loop's speed is the threads and the vector exp?",
}
PLAN_AGAIN = {**PLAN_CONTROL, "differs": "another measurement of the same loop",
              "think": "Measure the control once more."}
PLAN_SIMD = {
    "skill": "simd-vectorization",
    "mechanism": "keep the flat loop vectorized: omp parallel for simd, one exp per element",
    "plan": "The scalar control was slower than eager: keep the flat loop under `#pragma omp parallel for simd "
            "schedule(static)` with the one-exp form and -O3 -march=native -ffast-math, vectorized and threaded.",
    "advice": ["keep: omp parallel for simd over the flat index, one exp per element"],
    "think": "The speed is in the vector exp and the threads: keep both.",
}


def _span(lines: list[str], first: int, last: int, advice: list[str], comment: str) -> list[str]:
    """``lines`` with ``lines[first:last + 1]`` inside an IMPROVE span, ``advice`` as comment lines."""
    indent = re.match(r"\s*", lines[first]).group(0)
    head = [f"{indent}{comment} <<<IMPROVE BEGIN>>>\n"] + [f"{indent}{comment} {a}\n" for a in advice]
    return lines[:first] + head + lines[first:last + 1] + [f"{indent}{comment} <<<IMPROVE END>>>\n"] + lines[last + 1:]


def anchored(code: str, plan: dict) -> str:
    """``code`` as the planner echoes it: the spans its plan changes marked, with its advice inside.
    The reference: the forward's return. A C++ candidate: the loop (and, for the control, the build flags)."""
    lines = code.splitlines(keepends=True)
    if "load_inline" not in code:
        fwd = next(i for i, ln in enumerate(lines) if ln.strip().startswith("def forward"))
        ret = next(i for i in range(fwd, len(lines)) if lines[i].strip().startswith("return "))
        return "".join(_span(lines, ret, ret, plan["advice"], "#"))
    if "flags_advice" in plan:                   # the build line first: the loop's line numbers stay put
        build = next(i for i, ln in enumerate(lines) if ln.startswith("ext = load_inline("))
        lines = _span(lines, build, build + 1, plan["flags_advice"], "#")
    top = next(i for i, ln in enumerate(lines) if ln.strip().startswith(("#pragma omp", "// one thread")))
    end = next(i for i in range(top, len(lines)) if lines[i].rstrip() == "    }")
    return "".join(_span(lines, top, end, plan["advice"], "//"))


def planner_reply(plan: dict, code: str, root: bool = False) -> str:
    """The planner's JSON object (its plan a list of steps, as the schema says) and, except at the root
    (the reference: nothing to mark, the plan describes the new module), the code with its spans."""
    head = {"skill": plan["skill"], "mechanism": plan["mechanism"], "differs": plan.get("differs", ""),
            "plan": [plan["plan"]]}
    if plan.get("why_no_skill"):
        head["why_no_skill"] = plan["why_no_skill"]
    text = f"<think>{plan['think']}</think>Here is my plan.\n{json.dumps(head, ensure_ascii=False)}\n"
    return text if root else text + "The marked spans:\n" + fenced(anchored(code, plan))


def coder_reply(code: str, what: str) -> str:
    return f"Here is the module: {what}.\n" + fenced(code)


def section(prompt: str, title: str) -> str:
    """The text of a ``## title`` section of a prompt."""
    return prompt.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def debugger_reply(node_id: str, prompt: str) -> str:
    """The debugger's reply to ``node_id``'s failure, quoting the evaluator's report from its prompt."""
    failed = section(prompt, "The failed candidate").split("```python\n", 1)[1].rsplit("```", 1)[0]
    status, _, message = section(prompt, "The evaluator's report").splitlines()[0].partition(" — ")
    message = message.removesuffix("; worst:").removesuffix(" worst:").strip()
    status = status.removeprefix("status: ")
    if "0.047715f" in failed:
        diagnosis = (f"{node_id} is {status}: {message}. Its cubic term's constant is 0.047715f; GELU's tanh "
                     f"approximation uses 0.044715")
        fix = "0.044715f in the cubic term"
    elif "torch::empty_like(x)\n" in failed:
        diagnosis = (f"{node_id} does not compile: {message}. The statement before that line, "
                     f"`auto y = torch::empty_like(x)`, has no semicolon")
        fix = "the ';' after torch::empty_like(x)"
    else:
        raise SystemExit(f"the demo script has no diagnosis for {node_id}'s failure: {message}")
    code = failed.replace("0.047715f", "0.044715f").replace("torch::empty_like(x)\n", "torch::empty_like(x);\n")
    return json.dumps({"diagnosis": diagnosis, "fix": fix}, ensure_ascii=False) + "\n" + fenced(code)


class DemoScript:
    """planner → PLAN_FAST, PLAN_CONTROL, PLAN_AGAIN (refused: it repeats the control) then PLAN_SIMD;
    coder → WRONG, SCALAR, BROKEN; debugger → the node it repairs, fixed.

    Node ids follow the calls that make nodes (each coder and debugger call makes the next one), so the
    debugger can name the node whose code it was given."""

    def __init__(self) -> None:
        self.plans = [PLAN_FAST, PLAN_CONTROL, PLAN_AGAIN]
        self.coder = [(WRONG, "one OpenMP + SIMD loop, tanh as one exp"),
                      (SCALAR, "the control, std::tanh on one thread at -O1"),
                      (BROKEN, "the OpenMP + SIMD loop, one exp per element")]
        self.made = 0                                    # nodes made so far (n1, n2, …)
        self.ids: dict[str, str] = {}                    # a node's code → its id

    def __call__(self, role: str, messages: list[dict]) -> str:
        prompt = next(m["content"] for m in messages if m["role"] == "user")
        if role == "planner":
            refused = "could not be used" in messages[-1]["content"]
            plan = PLAN_SIMD if refused else self.plans.pop(0)
            skills = allowed_skills(messages)
            if plan["skill"] != "none" and plan["skill"] not in skills:
                raise SystemExit(f"the demo's plan needs skill {plan['skill']}, not offered ({skills})")
            return planner_reply(plan, current_code(messages), root=at_root(messages))
        self.made += 1
        node_id = f"n{self.made}"
        if role == "coder":
            code, what = self.coder.pop(0)
            self.ids[code.strip()] = node_id
            return coder_reply(code, what)
        failed = section(prompt, "The failed candidate").split("```python\n", 1)[1].rsplit("```", 1)[0]
        return debugger_reply(self.ids[failed.strip()], prompt)


def check(state) -> list[str]:
    """What would make the shipped run contradict itself or miss the shape the TUI tests and docs
    describe; empty when none."""
    nodes = {n.id: n for n in state.tree}
    problems = []
    if [n.status for n in state.tree] != ["ok", "incorrect", "ok", "ok", "compile_error", "ok"]:
        problems.append(f"statuses {[n.status for n in state.tree]}")
    if not (nodes.get("n5") and nodes["n5"].duplicate_of == "n2"):
        problems.append("n5 is not a duplicate of n2")
    if problems:
        return problems
    if not (nodes["n2"].speedup or 0) > 1.0 > (nodes["n3"].speedup or 0):
        problems.append(f"speedups n2 {nodes['n2'].speedup}, n3 {nodes['n3'].speedup}: the repair must beat eager, "
                        "the control lose to it (the plans say so)")
    if state.tree.best() is None or state.tree.best().id != "n2":
        problems.append("the best node is not n2")
    for ev in state.events:
        if ev.name == "AgentFinished" and ev.role == "debugger":
            node = nodes[ev.node_id]
            said = json.loads(ev.text.split("\n", 1)[0])["diagnosis"]
            named = set(re.findall(r"\bn\d+\b", said))
            if node.message.removesuffix("; worst:").strip() not in said or named != {node.id}:
                problems.append(f"the debugger's reply on {node.id} does not name it and its error: {said}")
    for n in state.tree:
        text = " ".join([n.code, n.plan, n.mechanism, n.anchored_code, n.diagnosis]
                        + [c.reply for c in n.calls]).lower()
        if "relu" in text:
            problems.append(f"{n.id} mentions relu in a GELU task")
        roof = n.profile.roofline if n.profile is not None else None
        if roof is not None and (roof.fraction or 0) > 1 and not roof.over_roof_reason:
            problems.append(f"{n.id} is above its roof with no reason recorded")
    return problems


def main() -> None:
    from kernelskill.config import load_config
    from kernelskill.llm import ScriptedLLM
    from kernelskill.optimizer import Optimizer
    from kernelskill.runs import load_run
    from kernelskill.task import Task
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["KERNELSKILL_HOME"] = tmp              # skill statistics stay out of the user's store
        flags = {**EVAL_FLAGS, "eval.min_reps": 10, "eval.max_reps": 30, "eval.time_cap_s": 0.5}
        config = load_config({**flags, "budget.attempts": 5, "search.epsilon": 0.0, "search.seed": 0,
                              "runs_dir": "runs"}, cwd=Path(tmp), env={})
        opt = Optimizer(Task.load(TASK, preset="small"), llm=ScriptedLLM(DemoScript()), config=config, runs_dir=tmp)
        out = opt.run()
        problems = check(load_run(out.path))
        if problems:
            raise SystemExit("the run came out unlike the demo (run it again; on a busy machine the timings can "
                             "change order):\n  " + "\n  ".join(problems))
        shutil.rmtree(OUT, ignore_errors=True)
        shutil.copytree(out.path, OUT)
    info = tomllib.loads((OUT / "run.toml").read_text())
    task_path = info["run"]["task"]                                # this machine's absolute path
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
            result = ev["node"]["result"] or {}
            result.pop("env", None)                                 # this machine's details stay here:
            (result.get("verify") or {}).pop("memory_plan", None)   # its disk and memory,
            ((result.get("profile") or {}).get("roofline") or {}).pop("limits", None)   # its cores and clock
        lines.append(json.dumps(ev))
    (OUT / "events.jsonl").write_text("\n".join(lines) + "\n")
    report = (OUT / "report.md").read_text().replace(out.path.name, RUN_ID)
    (OUT / "report.md").write_text(report.replace(f"`{task_path}`", "`examples/relu_gelu`"))
    print(OUT, out.reason, [(n.id, n.status, n.speedup) for n in opt.tree])


if __name__ == "__main__":
    main()
