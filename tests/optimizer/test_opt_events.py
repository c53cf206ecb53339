"""Events round-trip through JSON; the run store appends them and survives torn writes."""
from __future__ import annotations

import json

import pytest

from kernelskill.errors import UserError
from kernelskill.events import (EVENTS, AgentDelta, AgentFinished, AgentStarted, BaselineMeasured, BestImproved, FinalistsRetimed, NodeRetimed,
                                BudgetUpdate, CandidateEvaluated, EvaluationStep, EventBus, NodeSelected, RunError,
                                RunFinished,
                                RunStarted, event_from_dict)
from kernelskill.runs import RunStore, load_run, read_events
from kernelskill.trajectory import LLMCall, Node

from helpers import eval_result

ROOT = Node(id="n0", parent=None, kind="root", code="ref", status="ok", speedup=1.0, result=eval_result("ok"))
CHILD = Node(id="n1", parent="n0", kind="plan", code="new", status="ok", speedup=1.7, skill_id="s",
             calls=[LLMCall(role="coder", prompt_tokens=10, completion_tokens=20, cost=0.5)], result=eval_result("ok"))
SAMPLES = [
    RunStarted(run_id="r", task="t.py", task_hash="h", backend="cpp", device="cpu", policy="stark", config={"a": 1}),
    BaselineMeasured(node=ROOT.to_dict(), seconds=1.5),
    NodeSelected(node_id="n0", action="expand", reason="exploit", attempt=1),
    AgentStarted(role="planner", node_id="n0", attempt=1),
    AgentDelta(role="planner", text="tok"),
    EvaluationStep(node_id="n1", text="compile kernel.cpp", seconds=0.4),
    AgentFinished(role="planner", node_id="n0", ok=True, call={"role": "planner"}, text="reply"),
    CandidateEvaluated(node=CHILD.to_dict(), evaluated=True),
    BestImproved(node_id="n1", speedup=1.7, why="faster with confidence: the intervals are apart"),
    FinalistsRetimed(node_ids=["n3", "n1"], race={"status": "ok", "winner": 0}, winner="n3"),
    NodeRetimed(node_id="n2", against="n1", why="the planner asked (from n1)", race={"status": "ok", "winner": 1}),
    BudgetUpdate(attempts=1, tokens=30, usd=0.5, seconds=3.0, limits={"attempts": 30}),
    RunFinished(reason="attempts", best_node="n1", best_speedup=1.7, attempts=1),
    RunError(message="endpoint down"),
]


def test_every_event_type_round_trips():
    assert {type(e) for e in SAMPLES} == set(EVENTS.values())
    for ev in SAMPLES:
        back = event_from_dict(json.loads(json.dumps(ev.to_dict())))
        assert back == ev and back.name == ev.name
    with pytest.raises(ValueError):
        event_from_dict({"event": "Nope"})


def test_bus_order_and_unsubscribe():
    bus, seen = EventBus(), []
    off = bus.subscribe(lambda e: seen.append("late"))
    bus.subscribe(lambda e: seen.append("first"), first=True)
    bus.emit(SAMPLES[0])
    off()
    bus.emit(SAMPLES[0])
    assert seen == ["first", "late", "first"]


def test_store_writes_events_nodes_best_and_report_and_rebuilds(tmp_path):
    store = RunStore.create(tmp_path, "run1", {"run": {"task": "t.py", "backend": "cpp"}, "config": {"budget": {}}})
    from kernelskill.trajectory import Trajectory
    tree = Trajectory()
    store.tree = tree
    for ev in SAMPLES[:-1]:
        if isinstance(ev, BaselineMeasured):
            tree.add(Node.from_dict(ev.node))
        if isinstance(ev, CandidateEvaluated):
            tree.add(Node.from_dict(ev.node))
        store.write(ev)
    store.close()
    run = tmp_path / "run1"
    names = [json.loads(line)["event"] for line in (run / "events.jsonl").read_text().splitlines()]
    assert "AgentDelta" not in names and names[0] == "RunStarted" and names[-1] == "RunFinished"
    assert (run / "nodes" / "n1.py").read_text() == "new" and (run / "best.py").read_text() == "new"
    report = (run / "report.md").read_text()
    assert "**n1** at **1.70×**" in report and "| n1 | n0 | plan | s | ok | 1.70× | 0.0 | 0.0 | 30 | $0.5000 |" in report
    state = load_run(run)
    assert [n.id for n in state.tree] == ["n0", "n1"] and state.attempts == 1 and state.tokens == 30
    assert state.finished.reason == "attempts"


def test_torn_last_line_is_skipped_and_cut_before_appending(tmp_path):
    store = RunStore.create(tmp_path, "run2", {"run": {}, "config": {}})
    store.write(SAMPLES[0])
    store.write(SAMPLES[2])
    store.close()
    events = tmp_path / "run2" / "events.jsonl"
    with open(events, "a") as fh:
        fh.write('{"event": "NodeSel')                       # killed mid-write
    assert [e.name for e in read_events(tmp_path / "run2")] == ["RunStarted", "NodeSelected"]
    store = RunStore(tmp_path / "run2")
    store.write(SAMPLES[3])
    store.close()
    assert [e.name for e in read_events(tmp_path / "run2")] == ["RunStarted", "NodeSelected", "AgentStarted"]
    lines = events.read_text().splitlines()
    events.write_text("\n".join([lines[0], "garbage", lines[1]]) + "\n")
    with pytest.raises(UserError, match="events.jsonl:2: corrupt event"):
        read_events(tmp_path / "run2")


def test_a_node_written_now_reads_back_to_the_same_bytes(baseline_run):
    """The root of a real run: its result is an EvalResult once read, and writing the node again gives
    the very event line the run stored (what resume appends after stays in the same format)."""
    from kernelskill.results import EvalResult
    line = (baseline_run / "events.jsonl").read_text(encoding="utf-8").splitlines()[1]
    ev = event_from_dict(json.loads(line))
    node = Node.from_dict(ev.node)
    assert isinstance(node.result, EvalResult) and node.result.profile is not None and node.quality
    assert json.dumps(BaselineMeasured(node=node.to_dict(), seconds=ev.seconds, t=ev.t).to_dict(), default=str) == line
