"""End to end on the cpp backend with the real evaluator: plan → incorrect candidate → debugger fix →
verified, then identical code is not evaluated again; resume after a kill."""
from __future__ import annotations

import json

import pytest

from kernelskill.config import load_config
from kernelskill.events import BaselineMeasured, CandidateEvaluated, FinalistsRetimed, NodeRetimed
from kernelskill.llm import ScriptedLLM
from kernelskill.optimizer import Optimizer
from kernelskill.runs import load_run, read_events
from kernelskill.skills import SkillBook
from kernelskill.results import EvalResult, RaceResult
from kernelskill.task import Task
from kernelskill.trajectory import Node

from helpers import eval_result
from scenario import EVAL_FLAGS, GOOD, RELU_TASK, Scenario


def test_scripted_run_plans_fails_repairs_and_dedups(tmp_path):
    script = Scenario()
    config = load_config({**EVAL_FLAGS, "budget.attempts": 3, "search.epsilon": 0.0, "search.seed": 0,
                          "runs_dir": str(tmp_path / "runs")})
    opt = Optimizer(Task.load(RELU_TASK), llm=ScriptedLLM(script), config=config)
    seen = []

    def subscriber(ev):
        # A live subscriber gets typed objects: the node as it was when the event was emitted, its own copy.
        if isinstance(ev, (BaselineMeasured, CandidateEvaluated)):
            assert isinstance(ev.node, Node), type(ev.node)
            assert ev.node.result is None or isinstance(ev.node.result, EvalResult)
            assert ev.node == opt.tree.get(ev.node.id) and ev.node is not opt.tree.get(ev.node.id)
        if isinstance(ev, (NodeRetimed, FinalistsRetimed)):
            assert isinstance(ev.race, RaceResult), type(ev.race)
        seen.append(ev)
    opt.bus.subscribe(subscriber)
    out = opt.run()

    n0, n1, n2, n3 = list(opt.tree)
    assert (n1.kind, n1.status, n1.parent) == ("plan", "incorrect", "n0")
    assert n1.skill_id and n1.mechanism == "fused single pass, try 1"
    assert n1.anchors == [] and n1.anchored_code == ""          # from the root: no spans, the module written whole
    assert (n2.kind, n2.status, n2.parent, n2.skill_id) == ("repair", "ok", "n1", n1.skill_id)
    assert n2.speedup is not None and n2.diagnosis.startswith("relu2_tail_bug")
    assert (n3.code, n3.duplicate_of, n3.status) == (GOOD, "n2", "ok")       # identical code: not re-evaluated
    assert [e.evaluated for e in seen if e.name == "CandidateEvaluated"] == [True, True, False]
    assert n3.eval_seconds == 0 and n3.calls and n3.kind == "plan"
    assert (out.reason, out.attempts, out.best_node) == ("attempts", 3, "n2")

    # the debugger read the mismatch report; the planner saw the gated skills and the profile summary
    debug_prompt = script.prompts("debugger")[0]
    assert "incorrect" in debug_prompt and "outside tolerance" in debug_prompt and "relu2_tail_bug" in debug_prompt
    plan_prompt = script.prompts("planner")[0]
    assert f"[{n1.skill_id}]" in plan_prompt and "time:" in plan_prompt and "elementwise" in plan_prompt
    # every role is told the machine: cores, SIMD, compiler, torch's parallel backend, the measured ceilings
    for role in ("planner", "coder", "debugger"):
        machine = script.prompts(role)[0].split("## Machine", 1)[1].split("## Reference", 1)[0]
        assert "cores usable" in machine and "compiler:" in machine and "parallel backend" in machine, machine
        assert "copy bandwidth" in machine and "GB/s" in machine
    # every call is attributed to the node it made
    assert [c.role for c in n1.calls] == ["planner", "coder"] and [c.role for c in n2.calls] == ["debugger"]
    assert out.spend.tokens == sum(n.tokens for n in opt.tree)

    run = out.path
    names = [e.name for e in read_events(run)]
    assert names[:2] == ["RunStarted", "BaselineMeasured"] and names[-1] == "RunFinished"
    assert names.count("CandidateEvaluated") == 3 and "BestImproved" in names and "AgentDelta" not in names
    # the build's steps reached the bus while each candidate was evaluated, named by its node; live only
    steps = [e for e in seen if e.name == "EvaluationStep"]
    assert {e.node_id for e in steps} >= {"n1", "n2"} and any(e.text == "load" for e in steps), steps
    assert "EvaluationStep" not in names
    assert sorted(p.name for p in (run / "nodes").iterdir()) == ["n0.py", "n1.py", "n2.py", "n3.py"]
    assert (run / "best.py").read_text() == GOOD
    report = (run / "report.md").read_text()
    assert "**n2**" in report and "same code as n2" in report
    stats = SkillBook.load().stats.get(n1.skill_id)
    # The failure counts; n2's outcome counts when it was measured well, else it is kept, labelled.
    assert stats.failed >= 1 and stats.tried + sum(stats.unranked.values()) >= 2
    if n2.quality != "good":                  # (the store is shared by the session's tests: counts only grow)
        assert stats.unranked.get(n2.quality, 0) >= 1, (stats, n2.quality)


def test_resume_after_a_kill_loses_at_most_the_attempt_in_flight(run_copy):
    class Killed(Exception):
        pass

    def kill(ev):
        if ev.name == "CandidateEvaluated":
            raise Killed()
    flags = {"budget.attempts": 2, "search.epsilon": 0.0}
    opt = Optimizer.from_run(run_copy, llm=ScriptedLLM(Scenario()), flags=flags)
    opt.bus.subscribe(kill)
    with pytest.raises(Killed):
        opt.run()
    # the store (first subscriber) kept n1; a torn write at the end is what a kill leaves behind
    with open(run_copy / "events.jsonl", "a") as fh:
        fh.write('{"event": "BudgetUpd')
    state = load_run(run_copy)
    assert [n.id for n in state.tree] == ["n0", "n1"] and state.tree.get("n1").status == "incorrect"

    script = Scenario(coder_codes=[])
    opt = Optimizer.from_run(run_copy, llm=ScriptedLLM(script), flags=flags)
    out = opt.run()
    assert [(n.id, n.kind, n.status) for n in opt.tree] == [
        ("n0", "root", "ok"), ("n1", "plan", "incorrect"), ("n2", "repair", "ok")]
    assert out.attempts == 2 and out.best_node == "n2"
    assert [r for r, _ in script.seen] == ["debugger"]            # the resumed run went on with the repair
    lines = (run_copy / "events.jsonl").read_text().splitlines()
    assert all(json.loads(line) for line in lines)                # the torn line was cut before appending
    started = [e for e in read_events(run_copy) if e.name == "RunStarted"]
    assert [e.resumed for e in started] == [False, True, True]


def test_a_run_you_can_audit(tmp_path, capsys):
    """Every reply (an unusable one too) and its parse error stay on the node; report.md has per-node
    model and evaluation seconds and the whole plan; the progress shows no stale best and the outcome
    is printed once."""
    from kernelskill.cli.optimize import Progress
    script = Scenario()
    calls = {"planner": 0}

    def llm(role, messages):
        if role == "planner":
            calls["planner"] += 1
            if calls["planner"] == 1:
                return "I think we should fuse the loops."              # no JSON, no code: unusable
        return script(role, messages)
    config = load_config({**EVAL_FLAGS, "budget.attempts": 2, "search.epsilon": 0.0, "search.seed": 0,
                          "runs_dir": str(tmp_path / "runs")})
    opt = Optimizer(Task.load(RELU_TASK), llm=ScriptedLLM(llm), config=config)
    progress = Progress(out=__import__("io").StringIO())
    opt.bus.subscribe(progress)
    out = opt.run()

    n1 = load_run(out.path).tree.get("n1")                        # as stored, not as held in memory
    first, second = n1.calls[0], n1.calls[1]
    assert (first.role, first.reply) == ("planner", "I think we should fuse the loops.")
    assert "no JSON object" in first.error and second.error == "" and '"plan": ["write relu2 in C++"]' in second.reply
    report = (out.path / "report.md").read_text()
    assert "| node | parent | kind | skill | status | speedup | LLM s | eval s |" in report
    row = next(line for line in report.splitlines() if line.startswith("| n1 |"))
    cells = [c.strip() for c in row.split("|")]
    assert float(cells[7]) >= 0 and float(cells[8]) == pytest.approx(round(n1.eval_seconds, 1), abs=0.05)
    assert "## Replies that could not be used" in report and "n1, planner" in report
    assert "> write relu2 in C++" in report                      # the whole plan, quoted
    shown = progress.out.getvalue()
    attempt_lines = [line for line in shown.splitlines() if line.startswith("[")]
    assert attempt_lines and not any("best" in line for line in attempt_lines)
    assert "new best n" in shown and "finished (" not in shown    # the command prints the outcome, once


def _team():
    """A cpp Team on the relu task answered by the Scenario: (team, script)."""
    from kernelskill.agents.team import Team
    from kernelskill.agents.templates import load_prompts
    script = Scenario()
    task = Task.load(RELU_TASK)
    return Team(ScriptedLLM(script), load_prompts(None), "cpp", task, task.summary(), SkillBook.load(),
                emit=lambda ev: None), script


def test_the_planner_sees_the_reference_when_it_expands_a_candidate():
    """Issue 21: the planner saw the reference only when expanding the root."""
    from kernelskill.trajectory import Node, Trajectory
    from scenario import REF
    team, script = _team()
    tree = Trajectory()
    root = tree.add(Node(id="n0", parent=None, kind="root", code=REF, status="ok", speedup=1.0))
    child = tree.add(Node(id="n1", parent="n0", kind="plan", code=GOOD, status="ok", speedup=1.5,
                          skill_id="cpu-fused-single-pass", mechanism="fused pass"))
    for parent in (root, child):
        assert team.expand(tree, parent, Node(id=tree.new_id(), parent=parent.id, kind="plan", code=""), 1)
    at_root, at_child = script.prompts("planner")
    assert "(the node to improve below is the reference itself)" in at_root
    ref_section = at_child.split("## Reference", 1)[1].split("## The node to improve", 1)[0]
    assert "return torch.relu(x) * 2.0" in ref_section and "class Model" in ref_section
    assert "ext.relu2" in at_child.split("## The node to improve", 1)[1]          # the node's own code


def test_the_debugger_sees_the_working_code_the_failed_one_came_from():
    """Issue 21: the debugger never saw the parent's working code."""
    from kernelskill.trajectory import Node, Trajectory
    from scenario import BUGGY, REF
    team, script = _team()
    tree = Trajectory()
    tree.add(Node(id="n0", parent=None, kind="root", code=REF, status="ok", speedup=1.0))
    tree.add(Node(id="n1", parent="n0", kind="plan", code=GOOD, status="ok", speedup=1.5))
    broken = tree.add(Node(id="n2", parent="n1", kind="plan", code=BUGGY, status="incorrect",
                           result=eval_result("incorrect"), message="1 element outside tolerance"))
    assert team.repair(tree, broken, Node(id=tree.new_id(), parent="n2", kind="repair", code=""), 1)
    prompt = script.prompts("debugger")[0]
    base = prompt.split("## The working code it started from", 1)[1].split("## The failed candidate", 1)[0]
    assert "n1, correct at 1.50×" in base and "return ext.relu2(x)" in base and "return ext.relu2_tail_bug" not in base


def test_a_mechanism_that_failed_anywhere_is_shown_with_why():
    """Issue 21: a failed mechanism was not remembered across siblings or the tree."""
    from kernelskill.agents.views import render_tried
    from kernelskill.trajectory import Node, Trajectory
    from scenario import BUGGY, REF
    tree = Trajectory()
    tree.add(Node(id="n0", parent=None, kind="root", code=REF, status="ok", speedup=1.0))
    tree.add(Node(id="n1", parent="n0", kind="plan", code=GOOD, status="ok", speedup=1.5, mechanism="fused pass"))
    tree.add(Node(id="n2", parent="n0", kind="plan", code=BUGGY, status="compile_error", skill_id="simd-vectorization",
                  mechanism="AVX-512 intrinsics", message="build failed: _mm512_loadu_ps was not declared"))
    tree.add(Node(id="n3", parent="n2", kind="repair", code=BUGGY, status="compile_error",
                  diagnosis="immintrin.h is missing\nand more", message="build failed again"))
    tree.add(Node(id="n4", parent="n0", kind="plan", code=BUGGY, status="incorrect", mechanism="tail loop"))
    tree.add(Node(id="n5", parent="n4", kind="repair", code=GOOD, status="ok", speedup=1.2))    # fixed: not listed
    text = render_tried(tree, "n1")
    assert text.startswith("(nothing yet)")
    assert ("- from n0: skill simd-vectorization / AVX-512 intrinsics → compile_error: build failed again "
            "(debugger: immintrin.h is missing)") in text
    assert "tail loop" not in text
    assert "Failed elsewhere" not in render_tried(tree, "n0")          # its own children are listed above


def _data(mechanism, differs="", plan="write relu2 in C++", changed=(14,)):
    from scenario import ANCHORED
    return {"skill_id": "simd-vectorization", "mechanism": mechanism, "differs": differs, "plan": plan,
            "anchored_code": ANCHORED, "changed": list(changed)}


def test_a_repeat_by_meaning_needs_a_differs_the_loop_can_check():
    """Issue 21: an exact-string repeat check per parent, and any non-empty differs passed it."""
    from kernelskill.agents.parsing import check_echo
    from kernelskill.agents.team import Team
    from kernelskill.trajectory import Node, Trajectory
    from scenario import ANCHORED, BUGGY, REF
    tree = Trajectory()
    root = tree.add(Node(id="n0", parent=None, kind="root", code=REF, status="ok", speedup=1.0))
    tree.add(Node(id="n1", parent="n0", kind="plan", code=GOOD, status="ok", speedup=1.4, skill_id="simd-vectorization",
                  mechanism="Vectorize the inner loop with AVX2", plan="AVX2 loads of 8 floats",
                  changed=check_echo(REF, ANCHORED), anchored_code=ANCHORED))
    assert tree.get("n1").changed == [14]                # the forward's `return torch.relu(x) * 2.0`
    # the same idea in other words, on the same line: refused, naming n1 and how it ended
    why = Team.repeat(tree, root, _data("AVX2 SIMD over the inner loops"))
    assert why and "repeats n1 (from n0: skill simd-vectorization" in why and "→ ok 1.40×" in why
    assert "mark other code" not in why                  # the root marks no spans: no span to move
    # a differs that names nothing new: refused
    why = Team.repeat(tree, root, _data("AVX2 SIMD over the inner loops", differs="this time it will be faster"))
    assert why and "names nothing that your plan or advice has" in why
    # a differs whose change is not in the plan: refused; in the plan: accepted
    assert Team.repeat(tree, root, _data("vectorized inner loop", differs="unroll by 4"))
    assert Team.repeat(tree, root, _data("vectorized inner loop", differs="unroll by 4",
                                         plan="AVX2 loads of 8 floats, unroll by 4")) is None
    # another idea, or the same idea on other code: no repeat
    assert Team.repeat(tree, root, _data("OpenMP over the rows")) is None
    assert Team.repeat(tree, root, _data("vectorize the inner loop with AVX2", changed=(3, 4))) is None
    # a move that failed for good on a sibling's line is refused from anywhere else too
    tree.add(Node(id="n2", parent="n1", kind="plan", code=BUGGY, status="compile_error", skill_id="simd-vectorization",
                  mechanism="AVX-512 intrinsics", message="build failed: _mm512_loadu_ps was not declared"))
    why = Team.repeat(tree, root, _data("avx512 intrinsic loads"))
    assert why and "repeats n2 (from n1 and failed for good" in why and "_mm512_loadu_ps" in why


def test_a_refused_repeat_costs_one_corrective_turn_and_the_node_records_its_spans():
    from kernelskill.agents.parsing import check_echo
    from kernelskill.trajectory import Node, Trajectory
    from scenario import REF, anchor, coder_reply, current_code, planner_reply
    team, _ = _team()
    replies = []

    def planner(role, messages):
        if role != "planner":
            return coder_reply(GOOD)
        replies.append(messages[-1]["content"])
        if len(replies) == 1:
            return planner_reply("simd-vectorization", "AVX2 SIMD over the inner loops", code=current_code(messages))
        return planner_reply("simd-vectorization", "AVX2 SIMD over the inner loops", differs="unroll by 4",
                             plan="AVX2 loads of 8 floats, unroll by 4", code=current_code(messages))
    team.llm = ScriptedLLM(planner)
    team.allowed_skills = lambda node: [team.book.get("simd-vectorization")]
    tree = Trajectory()
    tree.add(Node(id="n0", parent=None, kind="root", code=REF, status="ok", speedup=1.0))
    parent = tree.add(Node(id="n1", parent="n0", kind="plan", code=GOOD, status="ok", speedup=1.4))
    spans = check_echo(GOOD, anchor(GOOD))                       # the forward's return, as the script marks it
    tree.add(Node(id="n2", parent="n1", kind="plan", code=GOOD + "\n", status="ok", speedup=1.5,
                  skill_id="simd-vectorization", mechanism="Vectorize the inner loop with AVX2",
                  plan="AVX2 loads of 8 floats", changed=spans))
    node = Node(id="n3", parent="n1", kind="plan", code="")
    assert team.expand(tree, parent, node, 1)
    assert len(replies) == 2 and "repeats n2" in replies[1] and node.differs == "unroll by 4"
    assert "mark other code" in replies[1]                    # from a candidate another span is a way out
    assert node.changed == spans and GOOD.splitlines()[spans[0] - 1].strip() == "return ext.relu2(x)"


def test_the_coder_sees_the_nearest_successful_relatives():
    """Issue 21: the coder's "related attempts" was almost always just the reference."""
    from kernelskill.trajectory import Node, Trajectory
    from scenario import BUGGY, REF
    team, script = _team()
    tree = Trajectory()
    tree.add(Node(id="n0", parent=None, kind="root", code=REF, status="ok", speedup=1.0))
    tree.add(Node(id="n1", parent="n0", kind="plan", code=GOOD, status="ok", speedup=1.5, skill_id="cpu-fused-single-pass",
                  mechanism="fused pass", plan="one loop: relu and scale in registers"))
    tree.add(Node(id="n2", parent="n0", kind="plan", code=GOOD + "\n", status="ok", speedup=2.5,
                  skill_id="openmp-parallel-for", mechanism="OpenMP over rows", plan="#pragma omp parallel for, -fopenmp"))
    tree.add(Node(id="n3", parent="n0", kind="plan", code=BUGGY, status="incorrect", mechanism="broken tail"))
    parent = tree.get("n1")
    assert team.expand(tree, parent, tree.add(Node(id="n4", parent="n1", kind="plan", code="")), 1)
    nearby = script.prompts("coder")[0].split("## What worked nearby", 1)[1].split("## Related attempts", 1)[0]
    assert "n1 (the node you start from; skill cpu-fused-single-pass): correct, 1.50× — fused pass" in nearby
    assert "one loop: relu and scale in registers" in nearby
    assert "n2 (2 steps away; skill openmp-parallel-for): correct, 2.50× — OpenMP over rows" in nearby
    assert "#pragma omp parallel for" in nearby and "broken tail" not in nearby


def test_the_optimizer_and_the_mcp_tool_record_a_skill_outcome_in_the_same_row(run_copy, tmp_path, monkeypatch):
    """One way to record a skill outcome (SkillBook.record_outcome): a failure the loop saw and one an
    MCP client reports for the same skill, task and backend count in one (op class, backend, arch) row."""
    pytest.importorskip("mcp.server.mcpserver")
    from kernelskill.mcp_server.toolbox import ServerConfig, Toolbox
    from kernelskill.results import CompileResult, EvalResult
    monkeypatch.setenv("KERNELSKILL_HOME", str(tmp_path / "home"))       # an empty stats store
    wrong = lambda task, cand, opts=None, **kw: EvalResult(                # noqa: E731
        status="incorrect", compile=CompileResult(ok=True, backend="cpp"), message="1 element outside tolerance")
    opt = Optimizer.from_run(run_copy, llm=ScriptedLLM(Scenario(coder_codes=[GOOD])), flags={"budget.attempts": 1},
                             evaluator=wrong)
    opt.run()
    n1 = opt.tree.get("n1")
    assert n1.skill_id and n1.status == "incorrect"
    with Toolbox.open(ServerConfig(roots=[RELU_TASK.parent])) as tb:
        recorded = tb.record_attempt(str(RELU_TASK), GOOD, n1.skill_id, "failure")
    stats = SkillBook.load().stats.get(n1.skill_id)
    assert list(stats.contexts) == [(recorded.op_class, "cpp", "*")]
    assert stats.failed == stats.tried == 2


def test_an_unexpected_exception_ends_the_record_with_its_traceback_and_a_report(run_copy):
    """A failure nobody foresaw (a provider SDK raising its own exception type, a bug): the run's
    record ends with a RunError of kind "crash" and the traceback, report.md says where it is, the
    exception still propagates, and the run resumes."""
    class ProviderBug(RuntimeError):
        pass
    opt = Optimizer.from_run(run_copy, llm=ScriptedLLM([ProviderBug("SDK: unexpected field 'refusal'")]),
                             flags={"budget.attempts": 1, "search.epsilon": 0.0})
    with pytest.raises(ProviderBug):
        opt.run()
    last = read_events(run_copy)[-1]
    assert last.name == "RunError" and last.kind == "crash"
    assert last.message == "ProviderBug: SDK: unexpected field 'refusal'"
    tb = (run_copy / "traceback.txt").read_text()
    assert "Traceback (most recent call last)" in tb and "ProviderBug" in tb and "llm.py" in tb
    report = (run_copy / "report.md").read_text()
    assert "stopped by an error: ProviderBug" in report and "traceback.txt" in report
    assert load_run(run_copy).errors == ["ProviderBug: SDK: unexpected field 'refusal'"]
    # A user's mistake is no crash: no traceback file for it.
    (run_copy / "traceback.txt").unlink()
    opt = Optimizer.from_run(run_copy, llm=ScriptedLLM([]), flags={"budget.attempts": 2, "search.epsilon": 0.0})
    with pytest.raises(Exception):
        opt.run()
    assert read_events(run_copy)[-1].kind == "UserError" and not (run_copy / "traceback.txt").exists()


def test_a_restart_from_the_reference_is_explained_to_the_planner(run_copy):
    """With ε = 1 and seed 0 the second attempt starts from the reference again though n1 works:
    the planner's prompt says why (the policy's reason) and names the best so far."""
    script = Scenario(coder_codes=[GOOD, GOOD])
    opt = Optimizer.from_run(run_copy, llm=ScriptedLLM(script),
                             flags={"budget.attempts": 2, "search.epsilon": 1.0, "search.seed": 0})
    opt.run()
    assert [(n.id, n.parent, n.status) for n in opt.tree][1:] == [("n1", "n0", "ok"), ("n2", "n0", "ok")]
    first, second = script.prompts("planner")
    assert "Why from the reference again" not in first                  # nothing worked yet
    assert "Why from the reference again: the search chose it (explore (ε=1) among 2)" in second
    # (the best, or on a busy machine where n1's timing was not good, the fastest with its label)
    assert "the best so far is n1 at" in second or "the fastest so far is n1 at" in second


def test_require_generalize_asks_the_evaluator_for_shapes_except_for_the_baseline():
    from kernelskill.optimizer import eval_options
    assert eval_options(load_config({"search.require_generalize": True}), "cpu").shapes == "auto"
    assert eval_options(load_config({}), "cpu").shapes is None


@pytest.mark.slow       # ~2 min on 2 busy cores: a dozen evaluations at other shapes
def test_a_run_that_requires_generalization_fails_a_kernel_specialised_to_the_benchmarks_rows(run_copy):
    """search.require_generalize: every candidate is also checked at derived shapes; one right only
    for the benchmark's 64 rows is incorrect, and the debugger is told at which shape."""
    from helpers import toolkit_candidate
    first_rows = toolkit_candidate("y = torch.zeros_like(x)\ny[:64] = ext.relu2(x[:64].contiguous())\nreturn y")
    script = Scenario(coder_codes=[first_rows])
    opt = Optimizer.from_run(run_copy, llm=ScriptedLLM(script),
                             flags={"budget.attempts": 2, "search.epsilon": 0.0, "search.require_generalize": True})
    opt.run()
    n1 = opt.tree.get("n1")
    assert n1.status == "incorrect" and "incorrect at shape batch_size=128 (double)" in n1.message, n1.message
    debugger = script.prompts("debugger")
    assert debugger and "incorrect at shape batch_size=128 (double)" in debugger[0]
    assert opt.tree.get("n2").kind == "repair" and opt.tree.get("n2").status == "ok"    # GOOD generalizes
