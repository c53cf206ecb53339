"""The shipped demo run agrees with itself (issue 46, item 6): a GELU task's replies speak of GELU and
of the code they came with; each debugger reply names the node it repairs and that node's own error;
the reference shows no speedup against itself; the head's eager time is the one the reference's
Profile tab shows, and a node's own eager figure is labelled as timed beside it (with the reference's
beside it when the two read apart); a roofline position above its roof says why."""
from __future__ import annotations

import json
import re

from textual.widgets import Label, Static

from kernelskill.evaluate.judge.roofline import fraction_text
from kernelskill.runs import load_run
from kernelskill.trajectory import Node
from kernelskill.tui.app import KernelSkillApp
from kernelskill.tui.demo import DEMO_RUN
from kernelskill.tui.model import fmt_ms, fmt_speedup
from kernelskill.tui.screens.run import RunScreen
from kernelskill.tui.widgets.candidate_tree import CandidateTree, node_label
from kernelskill.tui.widgets.node_detail import EAGER_APART, NodeDetail, eager_of, profile_text
from kernelskill.tui.widgets.plots import attempts

from helpers import eval_result
from conftest import demo_view, run_async, until

NODE_ID = re.compile(r"\bn\d+\b")


def demo():
    state = load_run(DEMO_RUN)
    return state, {n.id: n for n in state.tree}


def texts(state) -> dict[str, str]:
    """Every text the agents wrote into the run, by where it is: each node's code, plan, mechanism,
    differs, anchored code and advice, diagnosis and every reply (unusable ones too), and the replies
    the events carry."""
    out = {}
    for n in state.tree:
        out[f"{n.id} code"] = n.code
        out[f"{n.id} plan"] = "\n".join([n.plan, n.mechanism, n.differs, n.anchored_code, n.diagnosis]
                                        + [a.get("advice", "") for a in n.anchors])
        for i, c in enumerate(n.calls):
            out[f"{n.id} {c.role} reply {i}"] = c.reply
    for i, ev in enumerate(state.events):
        if ev.name == "AgentFinished":
            out[f"event {i}: {ev.role} on {ev.node_id}"] = ev.text
    return out


# ---- a. the replies speak of this task and its code -------------------------------------------------
def test_a_gelu_run_speaks_of_gelu_and_calls_only_functions_it_has():
    state, nodes = demo()
    assert "GELU" in nodes["n0"].code and "relu" not in nodes["n0"].code.lower()      # the task is GELU
    written = texts(state)
    assert not [where for where, text in written.items() if "relu" in text.lower()]
    # Every ext.<name> a reply mentions is a function some candidate of the run builds.
    built = {f for n in state.tree for f in re.findall(r'functions=\["(\w+)"\]', n.code)}
    assert built == {"gelu"}
    called = {where: set(re.findall(r"\bext\.(\w+)", text)) - built for where, text in written.items()}
    assert not {where: names for where, names in called.items() if names}


# ---- b. each debugger reply is about its own node -------------------------------------------------
def test_every_debugger_reply_names_its_node_and_that_nodes_error():
    state, nodes = demo()
    replies = [ev for ev in state.events if ev.name == "AgentFinished" and ev.role == "debugger"]
    assert [ev.node_id for ev in replies] == ["n1", "n4"]                 # the incorrect one, the compile error
    for ev in replies:
        failed = nodes[ev.node_id]
        head = json.loads(ev.text.split("\n", 1)[0])
        error = failed.message.removesuffix("; worst:").strip()
        assert failed.failed and error and error in head["diagnosis"], (failed.id, head)
        assert set(NODE_ID.findall(ev.text.split("```", 1)[0])) == {failed.id}, head   # no other node named
        repair = next(n for n in state.tree if n.parent == failed.id and n.kind == "repair")
        assert repair.diagnosis == head["diagnosis"] and repair.ok


def test_the_incorrect_nodes_first_worst_element_is_a_row_of_its_table():
    """The evaluator writes each trial's worst element at the end of its summary line ("…; worst: at
    [52, 1131]: got …"), then "next worst:": the Profile tab's table has that element as its first row."""
    _, nodes = demo()
    n1 = nodes["n1"]
    first = re.search(r"worst: at (\[[^\]]*\]): got (\S+), expected (\S+) ", n1.message)
    assert first, n1.message
    text = profile_text(n1).plain
    index, got, expected = first.groups()
    assert re.search(rf"\n  {re.escape(index)}\s+{re.escape(got)}\s+{re.escape(expected)}\s", text), text
    assert "next worst" not in text and "; worst" not in text


# ---- c. the reference against itself ----------------------------------------------------------------
def test_the_reference_shows_no_speedup_against_itself():
    view = demo_view()
    root = view.root
    own = root.profile.speedup                      # the evaluator's n0-vs-eager ratio: noise, not a speedup
    assert own is not None and root.speedup == 1.0
    text = profile_text(root, root).plain
    assert "speedup reference (1× by definition)" in text
    assert fmt_speedup(own) not in text and fmt_speedup(own, root.profile.speedup_ci) not in text
    assert "vs eager" not in text and " (eager " not in text          # no second figure for the same code
    assert "×" not in node_label(root, view.best.id).plain
    assert root.id not in [a.node_id for a in attempts(view)]          # the speedup chart: attempts only


# ---- d. the eager baseline: one figure, labelled wherever it differs ---------------------------------
def test_a_nodes_own_eager_figure_is_labelled_and_set_beside_the_references():
    view = demo_view()
    root, ref = view.root, eager_of(view.root)
    assert f"eager {fmt_ms(ref)} (IQR" in profile_text(root, root).plain
    timed = [n for n in view.tree if n.parent is not None and n.profile is not None and not n.duplicate_of]
    assert [n.id for n in timed] == ["n2", "n3"]
    for node in timed:
        here = eager_of(node)
        text = profile_text(node, root).plain
        assert f"vs eager {fmt_ms(here)} timed beside it" in text
        apart = max(here / ref, ref / here) > EAGER_APART
        assert (f"eager read {fmt_ms(ref)} beside the reference (n0, the head's figure)" in text) == apart


def test_eager_far_from_the_references_is_explained():
    """The first demo showed 304.5 µs in the head and 6.312 ms in n3's Profile tab, unlabelled: the
    same eager, timed in two evaluations on a busy machine."""
    def node(nid: str, parent: str | None, eager_ms: float) -> Node:
        prof = {"candidate": {"median_ms": 9.4, "iqr_ms": 2.9, "n": 30},
                "baseline": {"median_ms": eager_ms, "iqr_ms": 3.9, "n": 30}, "speedup": eager_ms / 9.4,
                "speedup_ci": [0.42, 0.87], "quality": {"verdict": "contended", "reasons": ["busy"]}}
        return Node(id=nid, parent=parent, kind="plan" if parent else "root", code="", status="ok",
                    speedup=1.0 if parent is None else eager_ms / 9.4, result=eval_result(profile=prof))
    root, n3 = node("n0", None, 0.3045), node("n3", "n2", 6.312)
    text = profile_text(n3, root).plain
    assert "vs eager 6.312 ms timed beside it" in text
    assert ("eager read 304.5 µs beside the reference (n0, the head's figure): each evaluation times eager "
            "again; here it ran 20.7× slower (contended)") in text
    assert "eager read" not in profile_text(n3).plain                 # no reference known: nothing to compare


@run_async
async def test_the_head_and_the_references_profile_show_the_same_eager(config_for):
    app = KernelSkillApp(config_for(None), open_run=DEMO_RUN)
    async with app.run_test(size=(200, 50)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.view.phase == "finished",
                    what="the demo opened")
        run = app.screen
        view, root = run.view, run.view.root
        figure = f"eager {fmt_ms(eager_of(root))}"
        await until(pilot, lambda: str(run.query_one("#baseline", Label).content) == f"{figure} (n0)",
                    what="the head's eager, labelled with the node it was timed beside")
        tree = run.query_one(CandidateTree)
        profile = run.query_one(NodeDetail).query_one("#profile", Static)
        for nid in ("n0", "n3"):
            node = view.tree.get(nid)
            await until(pilot, lambda: tree.select_id(nid), what=f"{nid} in the tree")
            # The tab shows what profile_text says with the run's reference (its eager set beside the node's).
            await until(pilot, lambda: str(profile.content) == profile_text(node, root).plain, what=f"{nid}'s Profile")
        assert f"{figure} (IQR" in profile_text(root, root).plain              # n0's Profile: the head's figure


# ---- e. above the roof ------------------------------------------------------------------------------
def test_a_position_above_the_roof_says_why():
    view = demo_view()
    for node in view.tree:
        roof = node.profile.roofline if node.profile is not None else None
        if roof is not None and (roof.fraction or 0) > 1 and not node.duplicate_of:
            assert roof.over_roof_reason, node.id                  # the evaluator says why
            assert f"above the roof: {roof.over_roof_reason}" in profile_text(node, view.root).plain

    def node(roof: dict) -> Node:
        prof = {"candidate": {"median_ms": 0.082, "iqr_ms": 0.04, "n": 30},
                "baseline": {"median_ms": 0.247, "iqr_ms": 2.2, "n": 30}, "speedup": 3.0, "speedup_ci": [2.5, 3.7],
                "roofline": {"flops": 0, "bytes": 2097152, "floor_ms": 0.0787, "achieved_gbs": 30.06,
                             "bandwidth_gbs": 26.6, "roof": "memory", "eager_fraction": 0.35, **roof}}
        return Node(id="n2", parent="n1", kind="repair", code="", status="ok", speedup=3.0,
                    result=eval_result(profile=prof))
    why = {"fraction": 1.128, "over_roof_reason": "working set resident in the CPU's caches",
           "over_roof_detail": "2 MiB of compulsory bytes fit the 32 MiB last-level cache"}
    text = profile_text(node(why)).plain
    assert "113% of its pace (above the roof: working set resident in the CPU's caches)" in text
    assert "n2 above the roof: 2 MiB of compulsory bytes fit the 32 MiB last-level cache" in text
    # A position above the roof without a reason (a run stored before the evaluator gave one) is never silent.
    text = profile_text(node({"fraction": 1.128})).plain
    assert fraction_text({"fraction": 1.128}, what="of its pace") in text and "do not trust it" in text
