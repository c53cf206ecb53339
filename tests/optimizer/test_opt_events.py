"""Events round-trip through JSON; the run store appends them and survives torn writes."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from kernelskill.errors import UserError
from kernelskill.events import (EVENTS, AgentDelta, AgentFinished, AgentStarted, BaselineMeasured, BestImproved, FinalistsRetimed, NodeRetimed,
                                BudgetUpdate, CandidateEvaluated, EvaluationStep, EventBus, NodeSelected, RunError,
                                RunFinished,
                                RunStarted, event_from_dict)
from kernelskill.results import EvalResult, MeasurementQuality, RaceEntry, RaceResult, TimingStats
from kernelskill.runs import RunStore, load_run, read_events
from kernelskill.trajectory import LLMCall, Node, Trajectory

from helpers import eval_result

TESTS = Path(__file__).resolve().parents[1]
# Runs committed before events carried typed objects: their nodes and races are plain dicts.
EARLIER_RUNS = (TESTS / "tui" / "data" / "stored_runs" / "20250101-120000-relu_task-0001",
                TESTS.parent / "tui" / "demo" / "run")

ROOT = Node(id="n0", parent=None, kind="root", code="ref", status="ok", speedup=1.0, result=eval_result("ok"))
CHILD = Node(id="n1", parent="n0", kind="plan", code="new", status="ok", speedup=1.7, skill_id="s",
             calls=[LLMCall(role="coder", prompt_tokens=10, completion_tokens=20, cost=0.5)], result=eval_result("ok"))
SAMPLES = [
    RunStarted(run_id="r", task="t.py", task_hash="h", backend="cpp", device="cpu", policy="stark", config={"a": 1}),
    BaselineMeasured(node=ROOT, seconds=1.5),
    NodeSelected(node_id="n0", action="expand", reason="exploit", attempt=1),
    AgentStarted(role="planner", node_id="n0", attempt=1),
    AgentDelta(role="planner", text="tok"),
    EvaluationStep(node_id="n1", text="compile kernel.cpp", seconds=0.4),
    AgentFinished(role="planner", node_id="n0", ok=True, call={"role": "planner"}, text="reply"),
    CandidateEvaluated(node=CHILD, evaluated=True),
    BestImproved(node_id="n1", speedup=1.7, why="faster with confidence: the intervals are apart"),
    FinalistsRetimed(node_ids=["n3", "n1"], race=RaceResult(status="ok", winner=0), winner="n3"),
    NodeRetimed(node_id="n2", against="n1", why="the planner asked (from n1)", race=RaceResult(status="ok", winner=1)),
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


RACE = RaceResult(status="ok", entries=[
    RaceEntry(candidate_hash="a", stats=TimingStats(median_ms=1.0, iqr_ms=0.1, n=30), speedup=1.5, speedup_ci=[1.4, 1.6]),
    RaceEntry(candidate_hash="b", speedup=1.1, speedup_ci=[1.0, 1.2], flags=["mismatch"])],
    winner=0, ratio=0.8, ratio_ci=[0.7, 0.9], quality=MeasurementQuality(verdict="noisy", reasons=["drift"]),
    message="a is faster", seconds=2.0)


def test_nodes_and_races_are_typed_in_memory_and_plain_data_on_the_wire():
    """On the bus a node is a Node and a race a RaceResult; to_dict writes their to_dict() (what
    events.jsonl held before), and JSON read back gives objects equal to the ones sent."""
    child = dataclasses.replace(CHILD, anchors=[{"line": 3, "text": "x"}], changed=[3, 4],
                                race={"against": "n0", "why": "the intervals overlap", **RACE.to_dict()})
    events = [BaselineMeasured(node=ROOT, seconds=1.5), CandidateEvaluated(node=child, evaluated=True),
              NodeRetimed(node_id="n1", against="n0", why="asked", race=RACE),
              FinalistsRetimed(node_ids=["n1", "n2"], race=RACE, winner="n1")]
    for ev in events:
        key = "node" if isinstance(ev, (BaselineMeasured, CandidateEvaluated)) else "race"
        sent, d = getattr(ev, key), ev.to_dict()
        assert d[key] == sent.to_dict() and isinstance(d[key], dict)
        back = event_from_dict(json.loads(json.dumps(d)))
        got = getattr(back, key)
        assert type(got) is type(sent) and got == sent and back == ev
        if key == "node":
            assert isinstance(got.result, EvalResult) and all(isinstance(c, LLMCall) for c in got.calls)
        else:
            assert isinstance(got.entries[0], RaceEntry) and isinstance(got.entries[0].stats, TimingStats)
            assert got.quality.verdict == "noisy"
    # No race: written as the field's old default ({}), read back as None.
    alone = NodeRetimed(node_id="n1")
    assert alone.to_dict()["race"] == {} and event_from_dict(alone.to_dict()).race is None


def test_an_event_keeps_the_node_as_it_was_and_each_tree_adds_its_own_copy():
    """A tree changes its nodes (children, a later re-time): the event that carried a node, and any
    other tree built from the same events, must not change with it."""
    events = [BaselineMeasured(node=ROOT.snapshot()), CandidateEvaluated(node=CHILD.snapshot())]
    tree, other = Trajectory(), Trajectory()
    for ev in events:
        assert tree.apply(ev) and other.apply(ev)
    assert tree.get("n0").children == ["n1"] == other.get("n0").children
    assert tree.get("n1") is not events[1].node and events[0].node.children == []
    assert tree.apply(NodeRetimed(node_id="n1", against="n0", why="asked", race=RaceResult(status="ok", winner=1)))
    assert tree.get("n1").race == {"against": "n0", "why": "asked", **RaceResult(status="ok", winner=1).to_dict()}
    assert events[1].node.race is None and other.get("n1").race is None


@pytest.mark.parametrize("run", EARLIER_RUNS, ids=lambda p: p.name)
def test_runs_stored_before_events_carried_typed_objects_read_back_typed(run):
    """An events.jsonl of an earlier version (nodes and races as dicts) reads back as Nodes and
    RaceResults; written again, they give the fields the file held, and the run rebuilds."""
    lines = (run / "events.jsonl").read_text(encoding="utf-8").splitlines()
    kinds = set()
    for line in lines:
        d = json.loads(line)
        ev, written = event_from_dict(d), None
        if isinstance(ev, (BaselineMeasured, CandidateEvaluated)):
            assert isinstance(ev.node, Node) and isinstance(ev.node.result, EvalResult)
            assert all(isinstance(c, LLMCall) for c in ev.node.calls)
            written, stored = ev.to_dict()["node"], d["node"]
            # result and calls have gained fields since the file was written: the file's own must match
            assert {k: written[k] for k in stored if k not in ("result", "calls")} == \
                {k: v for k, v in stored.items() if k not in ("result", "calls")}
            assert [c["role"] for c in written["calls"]] == [c["role"] for c in stored["calls"]]
            assert written["result"]["status"] == stored["result"]["status"]
        elif isinstance(ev, (NodeRetimed, FinalistsRetimed)):
            assert isinstance(ev.race, RaceResult) and ev.to_dict()["race"] == d["race"]
        kinds.add(ev.name)
    assert {"BaselineMeasured", "CandidateEvaluated"} <= kinds
    state = load_run(run)
    nodes = [Node.from_dict(json.loads(line)["node"]) for line in lines if '"node": {' in line]
    assert [n.id for n in state.tree] == [n.id for n in nodes] and list(state.tree) == nodes


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
        if isinstance(ev, (BaselineMeasured, CandidateEvaluated)):
            tree.add(ev.node.snapshot())
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
    node = ev.node
    assert isinstance(node, Node) and isinstance(node.result, EvalResult) and node.result.profile is not None
    assert node.quality
    assert json.dumps(BaselineMeasured(node=node, seconds=ev.seconds, t=ev.t).to_dict(), default=str) == line
