"""Budgets, controls and attribution, on runs resumed from a stored baseline (no evaluation needed:
the scripted agents' output is unusable, so no candidate reaches the evaluator)."""
from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest

import kernelskill
from kernelskill.config import Budget, load_config
from kernelskill.errors import UserError
from kernelskill.llm import LLMResponse, ScriptedLLM
from kernelskill.optimizer import Optimizer, Spend
from kernelskill.runs import load_run, read_events
from kernelskill.trajectory import Node

from helpers import RELU_TASK

BAD = "I have no code for you."
# A run committed before events carried typed objects: its events.jsonl holds nodes as plain dicts.
EARLIER_RUN = Path(__file__).resolve().parents[1] / "tui" / "data" / "stored_runs" / "20250101-120000-relu_task-0001"


def resume(path, replies, **flags):
    llm = ScriptedLLM(replies)
    return Optimizer.from_run(path, llm=llm, flags=flags), llm


def test_spend_reports_the_first_budget_reached():
    limits = Budget(attempts=3, tokens=100, usd=1.0, minutes=1.0)
    assert Spend(2, 99, 0.9, 59).exceeded(limits) is None
    assert Spend(3, 0, 0, 0).exceeded(limits) == "attempts"
    assert Spend(0, 100, 0, 0).exceeded(limits) == "tokens"
    assert Spend(0, 0, 1.0, 0).exceeded(limits) == "usd"
    assert Spend(0, 0, 0, 60).exceeded(limits) == "minutes"
    assert Spend(99, 10**9, 99.0, 10**6).exceeded(Budget(attempts=None)) is None


def test_the_config_budget_section_is_what_spend_reads(tmp_path):
    """The [budget] table of a config file becomes a Budget the loop checks spend against."""
    (tmp_path / "kernelskill.toml").write_text("[budget]\nattempts = 4\nusd = 0.5\n")
    budget = load_config(cwd=tmp_path, env={}).budget
    assert budget == Budget(attempts=4, tokens=None, usd=0.5, minutes=None)
    assert Spend(4, 0, 0, 0).exceeded(budget) == "attempts"
    assert Spend(0, 0, 0.5, 0).exceeded(budget) == "usd"
    assert kernelskill.Budget is Budget


def test_attempt_budget_and_attribution_of_every_call(run_copy):
    opt, llm = resume(run_copy, lambda role, messages: BAD, **{"budget.attempts": 2})
    out = opt.run()
    assert (out.reason, out.attempts) == ("attempts", 2)
    nodes = list(opt.tree)[1:]
    assert [n.status for n in nodes] == ["invalid", "invalid"]
    assert all(len(n.calls) == 2 and n.message.startswith("planner output unusable") for n in nodes)
    assert sum(len(n.calls) for n in nodes) == len(llm.calls)
    assert out.spend.tokens == sum(n.tokens for n in nodes) > 0
    assert load_run(run_copy).tokens == out.spend.tokens


@pytest.mark.parametrize("flag, value, reason", [("budget.tokens", 1000, "tokens"), ("budget.usd", 1.0, "usd")])
def test_token_and_money_budgets(run_copy, flag, value, reason):
    reply = LLMResponse(text=BAD, prompt_tokens=300, completion_tokens=100, cost=0.3)
    opt, _ = resume(run_copy, lambda role, messages: reply, **{flag: value, "budget.attempts": 10})
    out = opt.run()
    assert (out.reason, out.attempts) == (reason, 2)          # 800 tokens / $0.6 per attempt


def test_time_budget_and_exhausted_tree(run_copy):
    opt, _ = resume(run_copy, lambda role, messages: BAD, **{"budget.minutes": 1e-9, "budget.attempts": 5})
    assert opt.run().reason == "minutes" and len(opt.tree) == 1
    opt, _ = resume(run_copy, lambda role, messages: BAD, **{"search.root_children": 1, "budget.attempts": 5})
    out = opt.run()
    assert out.reason == "exhausted" and out.attempts == 1


def test_a_run_stored_by_an_earlier_version_resumes(tmp_path):
    """Nodes stored as dicts (the format events.jsonl has always had) rebuild a tree of Nodes, the run
    goes on from it, and what the resumed run appends reads back beside them."""
    run = tmp_path / "runs" / EARLIER_RUN.name
    shutil.copytree(EARLIER_RUN, run)
    toml = run / "run.toml"                   # the task is named relative to the repository: name it absolutely
    toml.write_text(toml.read_text().replace('task = "tests/data/relu_task.py"', f"task = {json.dumps(str(RELU_TASK))}"))
    before = (run / "events.jsonl").read_text()

    def no_evaluation(*args, **kw):
        raise AssertionError("nothing here should reach the evaluator")
    opt = Optimizer.from_run(run, llm=ScriptedLLM(lambda role, messages: BAD), flags={"budget.attempts": 5},
                             evaluator=no_evaluation)
    assert [n.id for n in opt.tree] == ["n0", "n1", "n2", "n3", "n4"] and all(isinstance(n, Node) for n in opt.tree)
    assert opt.tree.get("n2").ok and opt.tree.get("n2").result.profile is not None and opt.spend.attempts == 4
    seen = []
    opt.bus.subscribe(seen.append)
    out = opt.run()
    assert (out.reason, out.attempts) == ("attempts", 5)
    assert [(n.id, n.status) for n in opt.tree][-1] == ("n5", "invalid")
    new = [e for e in seen if e.name == "CandidateEvaluated"]
    assert len(new) == 1 and isinstance(new[0].node, Node) and new[0].node.id == "n5"
    text = (run / "events.jsonl").read_text()
    assert text.startswith(before)            # appended after the earlier version's lines, which stay as they were
    appended = [json.loads(line) for line in text[len(before):].splitlines()]
    assert [d["node"]["id"] for d in appended if d["event"] == "CandidateEvaluated"] == ["n5"]
    assert all(isinstance(d["node"], dict) for d in appended if "node" in d)
    state = load_run(run)
    assert [n.id for n in state.tree] == ["n0", "n1", "n2", "n3", "n4", "n5"] and state.attempts == 5
    assert [n.status for n in state.tree] == [n.status for n in opt.tree]
    assert [e.resumed for e in read_events(run) if e.name == "RunStarted"] == [False, True]


def test_stop_and_pause_controls(run_copy):
    opt, _ = resume(run_copy, lambda role, messages: BAD, **{"budget.attempts": 5})
    opt.bus.subscribe(lambda ev: opt.stop() if ev.name == "CandidateEvaluated" else None)
    out = opt.run()
    assert (out.reason, out.attempts) == ("stopped", 1)

    opt, _ = resume(run_copy, lambda role, messages: BAD, **{"budget.attempts": 3})
    seen = []

    def on_event(ev):
        if ev.name == "NodeSelected" and not seen:
            opt.pause()
            threading.Timer(0.3, opt.resume).start()
        if ev.name == "CandidateEvaluated":
            seen.append(opt.paused)
    opt.bus.subscribe(on_event)
    out = opt.run()
    assert out.attempts == 3 and seen[0] is True and not opt.paused


def test_llm_failure_is_stored_and_the_run_resumes(run_copy):
    def fail_on_third(role, messages, n=[0]):
        n[0] += 1
        if n[0] == 3:
            raise UserError("LLM endpoint http://x/v1 is unreachable")
        return BAD
    opt, _ = resume(run_copy, fail_on_third, **{"budget.attempts": 4})
    with pytest.raises(UserError, match="unreachable"):
        opt.run()
    state = load_run(run_copy)
    assert state.errors == ["LLM endpoint http://x/v1 is unreachable"] and state.attempts == 1
    assert "stopped by an error" in (run_copy / "report.md").read_text()
    opt, _ = resume(run_copy, lambda role, messages: BAD, **{"budget.attempts": 2})
    out = opt.run()
    assert out.attempts == 2 and [n.id for n in opt.tree] == ["n0", "n1", "n2"]


def test_a_prompt_budget_is_kept_and_reported(run_copy):
    """Issue 21: no prompt budget; the planner's prompt held every offered skill in full."""
    opt, llm = resume(run_copy, lambda role, messages: BAD, **{"budget.attempts": 1, "agents.prompt_tokens": 900,
                                                               "llm.roles.coder.prompt_tokens": 5000})
    opt.run()
    assert opt.team.budgets == {"planner": 900, "coder": 5000, "debugger": 900}
    first = llm.calls[0][1]
    assert sum(len(m["content"]) for m in first) // 4 <= 900 or "still" in opt.tree.get("n1").calls[0].trimmed
    call = opt.tree.get("n1").calls[0]
    assert call.role == "planner" and call.trimmed and "prompt budget" in first[-1]["content"]
    report = (run_copy / "report.md").read_text()
    assert "## Prompts cut to fit their budget" in report and f"- n1, planner: {call.trimmed}" in report
    assert load_run(run_copy).tree.get("n1").calls[0].trimmed == call.trimmed      # stored with the node
