"""Prompt size per agent role as the search tree deepens: it stays bounded.

    python benchmarks/prompt_size.py [--depths 1 10 30] [--budget TOKENS] [--json OUT] [--transcript DIR]

A tree is grown to the given depth: every level has a correct node (the line goes on from it) and
a sibling that failed to compile (with a long build log and a dozen diagnostics), and at the
bottom a failed candidate with a repair chain of ``max_repairs`` repairs. The prompts the agents
receive are then recorded (a ScriptedLLM answers): the planner and the coder expanding the
deepest correct node, the debugger repairing the deepest failure. Characters are summed over the
messages (system + user); tokens are the 4-characters-per-token estimate the client uses when a
server reports no usage. The first request of each role is measured (no corrective round-trip).
Depth 0 is the first step of a run: the planner and the coder expanding the root (the reference,
no IMPROVE spans: the planner describes the new module, the coder writes it whole), the debugger
repairing a child of the root.

Why bounded: each role sees at most ``search.context_nodes`` other nodes, each as one line (plus
mechanism and a capped diagnosis); only the focal node's code is shown; build logs and mismatch
reports are cut to their last 2000 characters; the repair chain is at most ``max_repairs`` long.
What still grows is the planner's "already tried from this node" list (one line per plan child of
the focal node) — bounded in practice by ``root_children`` for the root and by ``close_after``
for nodes whose children all fail; ``--budget`` caps every role's prompt at that many tokens (the
``agents.prompt_tokens`` setting) and shows what the cap cut. The agents are told this machine's
profile (``evaluate.machine``), as in a run. ``--transcript DIR`` writes the planner's and the
coder's first prompt at the deepest depth there. Prints a markdown table; docs/optimizer.md
quotes it.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "optimizer"))

ROLES = ("planner", "coder", "debugger")

FAILED_RESULT = {
    "status": "compile_error", "message": "build failed: 12 errors",
    "compile": {"ok": False, "backend": "cpp", "log_tail": "g++ ... error: expected ';' before 'return'\n" * 200,
                "diagnostics": [{"file": "candidate", "line": 9 + i, "column": 5, "severity": "error",
                                 "message": f"expected ';' before 'return' (error {i})", "origin": "cpp",
                                 "source_line": "    return y;"} for i in range(20)]},
}


def grow(depth: int, root_result, max_repairs: int = 3):
    """The tree described above; returns (tree, deepest correct node, deepest failed node).
    ``root_result``: the reference's EvalResult (or its ``to_dict()``: a Node parses it)."""
    from kernelskill.trajectory import Node, Trajectory
    from scenario import BUGGY, GOOD, REF
    tree = Trajectory()
    parent = tree.add(Node(id="n0", parent=None, kind="root", code=REF, code_hash="h0", result=root_result,
                           status="ok", speedup=1.0))
    for d in range(1, depth + 1):
        tree.add(Node(id=tree.new_id(), parent=parent.id, kind="plan", code=BUGGY, code_hash=f"f{d}",
                      skill_id="cpu-fused-single-pass", mechanism=f"level {d}: fused pass with a typo",
                      plan="fuse relu and scale " * 20, result=FAILED_RESULT, status="compile_error",
                      message="build failed: 12 errors"))
        res = copy.deepcopy(root_result)
        parent = tree.add(Node(id=tree.new_id(), parent=parent.id, kind="plan", code=GOOD, code_hash=f"g{d}",
                               skill_id="simd-vectorization", mechanism=f"level {d}: vectorized single pass",
                               plan="vectorize " * 40, result=res, status="ok", speedup=1.0 + 0.1 * d))
    failed = tree.add(Node(id=tree.new_id(), parent=parent.id, kind="plan", code=BUGGY, code_hash="fx",
                           skill_id="openmp-parallel-for", mechanism="parallel for over rows", plan="openmp " * 40,
                           result=FAILED_RESULT, status="compile_error", message="build failed"))
    for r in range(max_repairs - 1):
        failed = tree.add(Node(id=tree.new_id(), parent=failed.id, kind="repair", code=BUGGY, code_hash=f"r{r}",
                               skill_id=failed.skill_id, mechanism=failed.mechanism, plan=failed.plan,
                               diagnosis="the pragma needs <omp.h> and -fopenmp " * 10, result=FAILED_RESULT,
                               status="compile_error", message="build failed"))
    return tree, parent, failed


def prompt_sizes(depth: int, root_result, task=None, budget: int | None = None,
                 machine: str = "(not measured)") -> dict[str, dict]:
    """{role: {"chars": …, "tokens": …, "messages": …, "trimmed": …, "prompt": …}} for a tree of
    ``depth`` levels; ``budget``: every role's prompt-token cap."""
    from kernelskill.agents.team import Team
    from kernelskill.agents.templates import load_prompts
    from kernelskill.llm import ScriptedLLM, estimate_tokens
    from kernelskill.skills import SkillBook
    from kernelskill.task import Task
    from kernelskill.trajectory import Node
    from scenario import (GOOD, RELU_TASK, allowed_skills, at_root, coder_reply, current_code, debugger_reply,
                          planner_reply)
    task = task or Task.load(RELU_TASK)

    def reply(role, messages):
        if role == "planner":
            return planner_reply(allowed_skills(messages)[0], "fused single pass", plan="write relu2 in C++ " * 10,
                                 code=current_code(messages), echo=not at_root(messages))
        return coder_reply(GOOD) if role == "coder" else debugger_reply(GOOD)
    llm = ScriptedLLM(reply)
    team = Team(llm, load_prompts(None), "cpp", task, task.summary(), SkillBook.load(), emit=lambda ev: None,
                machine=machine, budgets={role: budget for role in ROLES})
    tree, deepest, failed = grow(depth, root_result)
    planned = Node(id=tree.new_id(), parent=deepest.id, kind="plan", code="")
    assert team.expand(tree, deepest, planned, 1)
    repaired = Node(id=tree.new_id(), parent=failed.id, kind="repair", code="")
    assert team.repair(tree, failed, repaired, 1)
    out = {}
    for role in ROLES:
        messages = next(m for r, m in llm.calls if r == role)
        text = [m["content"] for m in messages]
        call = next(c for c in (planned.calls + repaired.calls) if c.role == role)
        out[role] = {"chars": sum(map(len, text)), "tokens": sum(map(estimate_tokens, text)),
                     "messages": len(messages), "trimmed": call.trimmed, "prompt": text[-1]}
    out["_nodes"] = len(tree)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--depths", type=int, nargs="*", default=[0, 1, 10, 30])
    ap.add_argument("--budget", type=int, help="cap every role's prompt at this many tokens")
    ap.add_argument("--json")
    ap.add_argument("--transcript", help="write the planner's and coder's prompts at the deepest depth here")
    args = ap.parse_args()
    os.environ.setdefault("KERNELSKILL_CACHE", str(ROOT / ".kernelskill-cache"))
    os.environ["KERNELSKILL_HOME"] = tempfile.mkdtemp(prefix="ks-bench-home-")       # never touch the user's stats
    from kernelskill.config import load_config
    from kernelskill.evaluate.api import evaluate
    from kernelskill.optimizer import eval_options
    from kernelskill.candidate import Candidate
    from scenario import EVAL_FLAGS, REF, RELU_TASK
    # the root's result is a real measurement of the reference (the Analyzer's summary reads it)
    root = evaluate(RELU_TASK, Candidate.from_source(REF + "\n\nModelNew = Model\n"),
                    opts=eval_options(load_config(EVAL_FLAGS), "cpu")).to_dict()
    from kernelskill.evaluate.api import machine
    from kernelskill.evaluate.machine import render
    profile = render(machine("cpu", eval_options(load_config(EVAL_FLAGS), "cpu")), "cpp")
    rows = {d: prompt_sizes(d, root, budget=args.budget, machine=profile) for d in args.depths}
    cap = f"; budget {args.budget} tokens per role" if args.budget else ""
    print(f"prompt size per role (first request; chars / estimated tokens at 4 chars per token{cap})\n")
    print("| depth | nodes | " + " | ".join(f"{r} chars | {r} tokens" for r in ROLES) + " |")
    print("|---|---|" + "---|---|" * len(ROLES))
    for d, r in rows.items():
        print(f"| {d} | {r['_nodes']} | " + " | ".join(f"{r[x]['chars']} | {r[x]['tokens']}" for x in ROLES) + " |")
    cuts = [(d, role, r[role]["trimmed"]) for d, r in rows.items() for role in ROLES if r[role]["trimmed"]]
    for d, role, what in cuts:
        print(f"\ndepth {d}, {role}: the budget cut {what}", end="")
    if cuts:
        print()
    if args.transcript:
        out = Path(args.transcript)
        out.mkdir(parents=True, exist_ok=True)
        deepest = rows[max(rows)]
        for role in ("planner", "coder"):
            (out / f"{role}.txt").write_text(deepest[role]["prompt"])
    if args.json:
        Path(args.json).write_text(json.dumps({d: {k: ({kk: vv for kk, vv in v.items() if kk != "prompt"}
                                                       if isinstance(v, dict) else v) for k, v in r.items()}
                                                for d, r in rows.items()}, indent=2))


if __name__ == "__main__":
    main()
