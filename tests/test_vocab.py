"""One vocabulary: every table keyed by a status, backend or bottleneck class covers its enum, and
the enums serialize to the plain strings that JSON, event files and stored runs have always held."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelskill.agents import analyzer
from kernelskill.events import CandidateEvaluated, RunStarted, event_from_dict
from kernelskill.evaluate.judge import roofline
from kernelskill.mcp_server import advice
from kernelskill.cli.report import _MARK
from kernelskill.results import CompileResult, EvalResult, ProfileResult, Roofline, TimingStats
from kernelskill.trajectory import INVALID, Node
from kernelskill.tui.model import STATUS_STYLE, failure_note
from kernelskill.vocab import (DID_NOT_RUN, FAILURES, RUN_FAILURES, Backend, Bottleneck, Status, WorkerStatus,
                               covering)


@pytest.mark.parametrize("table, name", [(_MARK, "report"), (STATUS_STYLE, "tui"), (advice._NEXT, "advice")])
def test_every_status_keyed_table_covers_every_status(table, name):
    # ok's advice depends on the timing (advice.evaluation), so only there may ok be missing.
    expected = set(Status) - ({Status.ok} if name == "advice" else set())
    assert expected <= set(table), f"{name} lacks {expected - set(table)}"


def test_every_bottleneck_has_a_hint():
    assert set(Bottleneck) <= set(analyzer._BOTTLENECK_HINTS)


def test_a_table_that_misses_a_member_fails_at_once():
    with pytest.raises(TypeError, match="marks has no entry for Status stochastic"):
        covering(Status, {s: "x" for s in Status if s != Status.stochastic}, "marks")
    assert covering(Status, {s: "x" for s in Status if s != Status.ok}, "next", but=(Status.ok,))


def test_groupings():
    assert set(RUN_FAILURES) < set(DID_NOT_RUN) < set(FAILURES)
    # The task's problem and success are never the candidate's failure for the debugger to repair.
    assert Status.ok not in FAILURES and Status.stochastic not in FAILURES
    assert set(FAILURES) | {Status.ok, Status.stochastic} == set(Status)
    assert Node(id="n1", parent="n0", kind="coder", code="", status="incorrect").failed
    assert not Node(id="n1", parent="n0", kind="coder", code="", status="stochastic").failed

    def node(nid: str, status: str, message: str = "") -> Node:
        return Node(id=nid, parent="n0", kind="plan", code="", status=status, message=message)
    assert failure_note(node("n2", "timeout", "took too long")) == "n2 timeout: took too long"
    assert failure_note(node("n3", INVALID)) == "n3 invalid"
    assert failure_note(node("n4", "ok")) is None


def test_values_are_todays_strings():
    # Stored runs and scripts read these strings: changing one is a breaking change, not a rename.
    assert [s.value for s in Status] == ["ok", "compile_error", "runtime_error", "timeout", "crashed", "incorrect",
                                         "flagged", "stochastic"]
    assert [b.value for b in Backend] == ["cuda", "triton", "cpp"]
    assert [b.value for b in Bottleneck] == ["memory-bound", "compute-bound", "launch-bound", "latency-bound"]
    assert {w.value for w in WorkerStatus} >= {"ok", "compile_error", "runtime_error", "task_error", "compile_only"}


def test_members_serialize_to_plain_strings():
    assert json.dumps(Status.ok) == '"ok"'
    assert json.dumps({Bottleneck.memory_bound: [Backend.cuda]}) == '{"memory-bound": ["cuda"]}'
    assert f"{Status.compile_error}" == str(Status.compile_error) == "compile_error"
    assert Status.ok == "ok" and "ok" in (Status.ok,) and {"ok": 1}[Status.ok] == 1


def _result(status) -> EvalResult:
    return EvalResult(status=status, compile=CompileResult(ok=True, backend="cpp"), message="why",
                      profile=ProfileResult(device="cpu", candidate=TimingStats(1.0, 0.1, 10),
                                            bottleneck=Bottleneck.memory_bound))


def test_eval_result_round_trips_unchanged():
    plain = _result("incorrect").to_json()
    typed = _result(Status.incorrect)
    assert typed.to_json() == plain                           # byte for byte what plain strings gave
    data = typed.to_dict()
    assert type(data["status"]) is str and type(data["profile"]["bottleneck"]) is str
    back = EvalResult.from_json(plain)
    assert back.status is Status.incorrect and back.profile.bottleneck is Bottleneck.memory_bound
    assert back == typed and back.to_json() == plain
    with pytest.raises(ValueError):                           # a status no enum names is caught on load
        EvalResult.from_dict({**data, "status": "fine"})


def test_events_round_trip_unchanged():
    node = Node(id="n1", parent="n0", kind="coder", code="x", status=Status.incorrect,
                result=_result(Status.incorrect).to_dict())
    ev = CandidateEvaluated(node=node, t=1.0)
    line = json.dumps(ev.to_dict(), default=str)
    plain = Node.from_dict({**node.to_dict(), "status": "incorrect"})
    assert line == json.dumps(CandidateEvaluated(node=plain, t=1.0).to_dict())
    back = event_from_dict(json.loads(line))
    assert back == ev and back.status == "incorrect" and isinstance(back.node, Node)
    started = RunStarted(run_id="r", task="t", task_hash="h", backend=Backend.cpp, device="cpu", policy="stark", t=1.0)
    assert json.loads(json.dumps(started.to_dict(), default=str))["backend"] == "cpp"


def test_roofline_classes_are_bottlenecks():
    assert roofline.classify(Roofline(fraction=0.5, roof="memory"), 1.0) is Bottleneck.memory_bound
    assert roofline.classify(Roofline(fraction=0.01, roof="memory"), 1.0) is Bottleneck.latency_bound


def test_the_evaluator_docs_describe_every_status():
    table = (Path(__file__).parents[1] / "docs" / "evaluator.md").read_text()
    assert all(f"| `{s}` |" in table for s in Status)


def test_bench_rows_add_their_own_statuses_to_the_verdicts():
    """A bench row carries a Status when an evaluation stands for it, else a RowStatus; the two never
    share a value (a row's status must say which it is), and what the bench counts as evaluated
    (a --reference row with a verdict of its own) are verdicts."""
    from kernelskill.bench import all_evaluated
    from kernelskill.bench.report import reference_line
    from kernelskill.vocab import EVALUATED, RowStatus
    assert not {s.value for s in RowStatus} & {s.value for s in Status}
    assert set(EVALUATED) <= set(Status)
    rows = [{"status": "ok"}, {"status": Status.stochastic}]
    assert all_evaluated(rows) and not all_evaluated(rows + [{"status": RowStatus.task_error}])
    line = reference_line({"n": 3, "statuses": {Status.ok: 1, "stochastic": 1, RowStatus.task_error: 1}})
    assert line.startswith("n 3 · evaluated 2 (ok 1, stochastic 1) · task_error 1")
    assert json.dumps({"status": RowStatus.no_correct}) == '{"status": "no_correct"}'
