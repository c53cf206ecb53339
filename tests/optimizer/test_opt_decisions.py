"""Decisions from the candidates' own times (issue 48, item 2) and plans of two skills (item 3):
ratios to eager runs that drifted apart are settled head to head, a candidate whose round was noisy
only for the baseline's sake is re-timed rather than left out, the planner may ask for a re-time
instead of spending an attempt, and a second skill is passed to the coder and scored like the first."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelskill.cli import main
from kernelskill.config import load_config
from kernelskill.llm import ScriptedLLM
from kernelskill.optimizer import Optimizer
from kernelskill.results import MeasurementQuality, RaceEntry, RaceResult
from kernelskill.runs import load_run, read_events
from kernelskill.skills import SkillBook
from kernelskill.task import Task
from kernelskill.trajectory import Node

from chat_server import ChatServer
from helpers import eval_result
from scenario import (EVAL_FLAGS, GOOD, RELU_TASK, Scenario, allowed_skills, at_root, coder_reply, current_code,
                      planner_reply, project_toml)


class Racer:
    """Stands where evaluate.race stands: records what it was asked to re-time and answers with
    the race result the test gives (the real race is exercised by the end-to-end test below)."""

    def __init__(self, winner: int | None, verdict: str = "good"):
        self.winner, self.verdict, self.calls = winner, verdict, []

    def __call__(self, task, codes, opts=None):
        self.calls.append(list(codes))
        entries = [RaceEntry(candidate_hash=str(i), speedup=2.0, speedup_ci=[1.99, 2.01]) for i in range(len(codes))]
        return RaceResult(status="ok", entries=entries, winner=self.winner,
                          quality=MeasurementQuality(verdict=self.verdict))


def node(nid: str, speedup: float, ci: tuple, eager_ms: float, own_ms: float, verdict: str = "good",
         metrics: dict | None = None) -> Node:
    result = eval_result(profile={
        "speedup": speedup, "speedup_ci": list(ci),
        "baseline": {"median_ms": eager_ms, "iqr_ms": 0.01, "n": 30},
        "candidate": {"median_ms": own_ms, "iqr_ms": 0.01, "n": 30},
        "quality": {"verdict": verdict, "reasons": [] if verdict == "good" else ["noisy"],
                    "metrics": metrics or {}}})
    return Node(id=nid, parent="n0", kind="plan", code=f"# {nid}\n", result=result, status="ok", speedup=speedup)


@pytest.fixture
def opt(tmp_path):
    config = load_config({**EVAL_FLAGS, "runs_dir": str(tmp_path / "runs")})
    return Optimizer(Task.load(RELU_TASK), llm=ScriptedLLM([]), config=config, evaluator=lambda *a, **k: None)


def test_ratios_to_eager_runs_that_drifted_apart_are_settled_head_to_head(opt):
    best = node("n1", 2.0, (1.98, 2.02), eager_ms=10.0, own_ms=5.0)
    # Apart by the intervals, but its eager ran 10 % slower: the same 5.0 ms kernel. Not promoted
    # on the ratio; the race (no winner) decides.
    opt.racer = Racer(winner=None)
    inflated = node("n2", 2.2, (2.18, 2.22), eager_ms=11.0, own_ms=5.0)
    assert opt._promotion(inflated, best) is None
    assert opt.racer.calls == [[best.code, inflated.code]]
    assert inflated.race["against"] == "n1" and "eager drifted 10.0%" in inflated.race["why"]
    # A lower ratio, but its eager ran 10 % faster and its own time is lower: re-timed, and it wins.
    opt.racer = Racer(winner=1)
    deflated = node("n3", 1.9, (1.88, 1.92), eager_ms=9.0, own_ms=4.7)
    assert opt._promotion(deflated, best) == "faster in a head-to-head re-time"
    # Without drift the rules stand: a lower ratio is not raced, intervals apart promote at once.
    opt.racer = Racer(winner=1)
    assert opt._promotion(node("n4", 1.9, (1.88, 1.92), eager_ms=10.1, own_ms=5.3), best) is None
    assert opt._promotion(node("n5", 2.2, (2.18, 2.22), eager_ms=10.1, own_ms=4.6), best) == \
        "faster with confidence: the intervals are apart"
    assert opt.racer.calls == []


def test_a_candidate_noisy_only_for_its_baselines_sake_is_retimed_not_left_out(opt):
    best = node("n1", 2.0, (1.9, 2.1), eager_ms=10.0, own_ms=5.0)
    clean_own = {"candidate_median_over_min": 1.02, "eager_median_over_min": 2.6}   # cpu limit 2.0×
    opt.racer = Racer(winner=1)
    n2 = node("n2", 2.3, (1.5, 3.1), eager_ms=10.0, own_ms=4.3, verdict="noisy", metrics=clean_own)
    assert not n2.measured_well
    assert opt._promotion(n2, best) == "faster in a head-to-head re-time"
    assert n2.measured_well and "the eager beside it was noisy" in n2.race["why"]
    # Alone (no best yet): raced against eager only, and counted once its re-time is good.
    opt.racer = Racer(winner=0)
    first = node("n3", 2.3, (1.5, 3.1), eager_ms=10.0, own_ms=4.3, verdict="noisy", metrics=clean_own)
    assert opt._promotion(first, None).startswith("the first correct candidate measured well (re-timed")
    assert opt.racer.calls == [[first.code]] and first.race["against"] is None and first.race["winner"] is None
    # Its own samples spread: that noise is the candidate's, so it is not re-timed.
    opt.racer = Racer(winner=1)
    own_noise = node("n4", 2.3, (1.5, 3.1), eager_ms=10.0, own_ms=4.3, verdict="noisy",
                     metrics={"candidate_median_over_min": 2.4, "eager_median_over_min": 2.6})
    assert opt._promotion(own_noise, best) is None and opt.racer.calls == []
    # A re-time that came back noisy too: still not measured well, not promoted.
    opt.racer = Racer(winner=1, verdict="noisy")
    still = node("n5", 2.3, (1.5, 3.1), eager_ms=10.0, own_ms=4.3, verdict="noisy", metrics=clean_own)
    assert opt._promotion(still, best) is None and not still.measured_well


def _outcomes(skill: str) -> int:
    st = SkillBook.load().stats.get(skill)
    return st.tried + st.failed + sum(st.unranked.values())


class RetimeScript(Scenario):
    """Root plan → n1 (the good kernel); then the planner asks to re-time n1; then a plan of two
    skills → n2 (the same kernel, a comment apart)."""

    def __call__(self, role: str, messages: list[dict]) -> str:
        self.seen.append((role, messages))
        n = sum(r == role for r, _ in self.seen)
        if role == "planner":
            skills = allowed_skills(messages)
            if n == 2:
                return 'The time of n1 looks doubtful.\n{"retime": "n1"}\n'
            reply = planner_reply(skills[0], f"fused single pass, try {n}", plan="write relu2 in C++",
                                  code=current_code(messages), echo=not at_root(messages))
            if n == 3:
                reply = reply.replace('"plan":', f'"secondary": "{skills[1]}", "plan":', 1)
            return reply
        return coder_reply(GOOD if n == 1 else GOOD + "# the same kernel, planned with two skills\n")


def test_the_planner_asks_for_a_retime_and_plans_with_two_skills_over_http(tmp_path, monkeypatch, capsys):
    """Through the chat-completions server and the real evaluator and race: the planner's re-time
    costs no attempt, is recorded on n1 and survives a reload of the run; the two-skill plan's coder
    gets both skills and both skills' statistics count the outcome."""
    for name in ("KERNELSKILL_BASE_URL", "KERNELSKILL_MODEL", "KERNELSKILL_API_KEY_ENV"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    script = RetimeScript()
    before = {k: _outcomes(k) for k in SkillBook.load().skills}
    with ChatServer(script.from_request) as server:
        (tmp_path / "kernelskill.toml").write_text(project_toml(server.url))
        code = main(["optimize", str(RELU_TASK), "--budget-attempts", "2", "--seed", "3", "--json"])
        captured = capsys.readouterr()
        out = json.loads(captured.out)
    assert "n1 re-timed against " in captured.err and "(the planner asked (from " in captured.err, captured.err
    assert code in (0, 1) and (out["reason"], out["attempts"]) == ("attempts", 2), out
    run = Path(out["path"])
    events = read_events(run)
    retimed = [e for e in events if e.name == "NodeRetimed"]
    # (n1 may have been raced on its own already, when its first round was noisy for eager's sake)
    assert [e.node_id for e in retimed if e.why.startswith("the planner asked (from ")] == ["n1"], \
        [(e.node_id, e.why) for e in retimed]
    assert retimed[-1].race.status == "ok" and retimed[-1].race.entries
    state = load_run(run)
    ids = [n.id for n in state.tree]
    assert ids == ["n0", "n1", "n2"]                      # the re-time request is not a node
    n1, n2 = state.tree.get("n1"), state.tree.get("n2")
    assert n1.race and n1.race["why"].startswith("the planner asked")
    planner_prompts = [m for r, m in script.seen if r == "planner"]
    first, second = allowed_skills(planner_prompts[2])[:2]
    assert (n2.skill_id, n2.secondary_skill) == (first, second)
    coder_prompt = [m for r, m in script.seen if r == "coder"][1][-1]["content"]
    assert "Second skill, applied beside the first" in coder_prompt and f"[{second}]" in coder_prompt
    # Both skills count n2's outcome (the store is shared by the session's tests: counts only grow).
    after = {k: _outcomes(k) for k in (first, second)}
    assert after[second] >= before.get(second, 0) + 1 and after[first] >= before.get(first, 0) + 1, (before, after)
    # The schema the planner reads offers both keys.
    system = planner_prompts[0][0]["content"]
    assert '"secondary"' in system and '"retime"' in system


def test_a_retime_of_an_unknown_or_untimed_node_is_refused_with_the_choices():
    from kernelskill.agents.base import OutputError
    from kernelskill.agents.planner import Planner
    from kernelskill.agents.templates import load_prompts
    p = Planner(ScriptedLLM([]), load_prompts(None)["planner"], allowed=["a", "b"], retimable=["n1", "n3"])
    assert p.parse('{"retime": "n3"}') == {"retime": "n3"}
    with pytest.raises(OutputError, match=r"retime 'n2': only a timed candidate .* \(n1, n3\)"):
        p.parse('{"retime": "n2"}')
    head = {"skill": "a", "mechanism": "m", "plan": ["x"]}
    with pytest.raises(OutputError, match="secondary 'a': a second skill must be another allowed skill"):
        p.parse(json.dumps({**head, "secondary": "a"}) + "\n```python\nx = 1\n```")
    with pytest.raises(OutputError, match="secondary 'zz'"):
        p.parse(json.dumps({**head, "secondary": "zz"}) + "\n```python\nx = 1\n```")
