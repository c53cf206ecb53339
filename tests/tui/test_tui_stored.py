"""Stored runs: RunView replays events.jsonl; History lists runs and opens one read-only; the form's
values become config settings."""
from __future__ import annotations

import pytest
from textual.widgets import Label

from kernelskill.errors import UserError
from kernelskill.runs import load_run
from kernelskill.tui.app import KernelSkillApp
from kernelskill.tui.launch import RunRequest, apply_request, describe_task, list_examples, presets_of
from kernelskill.tui.model import RunView
from kernelskill.tui.screens.history import HistoryScreen
from kernelskill.tui.screens.run import RunScreen
from kernelskill.tui.widgets.activity import ActivityLog
from kernelskill.tui.widgets.candidate_tree import CandidateTree

from helpers import eval_result
from conftest import EXAMPLES, STORED_RUN, STORED_RUNS, labels, run_async, until


def test_run_view_replays_a_stored_run():
    state = load_run(STORED_RUN)
    view = RunView.stored(state)
    for ev in state.events:
        view.apply(ev)
    view.settle()
    assert (view.phase, view.reason, view.attempts, view.task) == ("finished", "attempts", 4, "relu_task")
    assert [n.status for n in view.tree] == ["ok", "incorrect", "ok", "crashed", "ok"]
    assert view.best.id == "n2" and view.tokens == state.tokens and view.limits["attempts"] == 4
    assert view.curve == [0.0, view.best.speedup, view.best.speedup, view.best.speedup]
    best = f"best n2 at {view.best.speedup:.2f}×"
    assert view.finish_note() == (f"Run finished: the attempt budget is spent — {best}.", "warning")


def test_form_values_become_validated_settings(config_for):
    base = config_for("http://localhost:1/v1", **{"llm.api_key_env": "SOME_KEY"})
    req = RunRequest(task="t.py", base_url="http://h:2/v1", model="m", api_key_env="", attempts=7, minutes=None,
                     tokens=1000, usd=0.5, policy="line", device="cpu")
    cfg = apply_request(base, req)
    assert cfg.data["llm"]["base_url"] == "http://h:2/v1" and cfg.data["llm"]["api_key_env"] is None
    assert cfg.data["budget"] == {"attempts": 7, "tokens": 1000, "usd": 0.5, "minutes": None}
    assert cfg.data["search"]["policy"] == "line" and cfg.where("llm.model") == "the form"
    assert base.data["budget"]["attempts"] != 7                  # the app's config is left alone
    with pytest.raises(UserError, match="must not be negative"):
        apply_request(base, RunRequest(task="t.py", attempts=-1))
    with pytest.raises(UserError, match="not one of stark, line"):
        apply_request(base, RunRequest(task="t.py", policy="greedy"))


def test_examples_presets_and_task_descriptions():
    names = [ex.name for ex in list_examples(EXAMPLES)]
    assert names == ["relu_scale", "softmax_rows_small"]
    assert presets_of(str(EXAMPLES / "relu_scale")) == ("small",) and presets_of(str(STORED_RUN)) == ()
    assert describe_task(str(EXAMPLES / "relu_scale"))[0].startswith("relu(x) * 2")
    assert describe_task("no/such/task.py") == ("no such file or directory: no/such/task.py", "red")


@run_async
async def test_history_opens_a_stored_run_read_only(config_for):
    app = KernelSkillApp(config_for(None, runs_dir=str(STORED_RUNS)), history=True)
    async with app.run_test(size=(80, 24)) as pilot:
        history = app.screen
        assert isinstance(history, HistoryScreen)
        table = history.query_one("#runs")
        await until(pilot, lambda: table.row_count == 1, what="the runs")
        assert [str(c) for c in table.get_row_at(0)][:5] == ["2025-01-01 12:00", "relu_task", "attempts", "4",
                                                            "0.18×"]
        assert str(history.query_one("#history-detail", Label).content).startswith(STORED_RUN.name)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, RunScreen), what="the stored run to open")
        run = app.screen
        await until(pilot, lambda: len(labels(run.query_one(CandidateTree))) == 5, what="the stored run's tree")
        assert run.view.phase == "finished"
        assert [line.split()[:3] for line in labels(run.query_one(CandidateTree))] == [
            ["✓", "n0", "reference"], ["✗", "n1", "incorrect"], ["✓", "n2", "0.18×"], ["✗", "n3", "crashed"],
            ["✓", "n4", "=n2"]]
        assert "── coder · attempt 3 · from n0" in run.query_one(ActivityLog).plain   # replies from the events
        assert run.sub_title == f"{STORED_RUN.name} · read-only"
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is history, what="the return to History")


def test_node_detail_shows_the_roofline_position_and_bottleneck():
    from kernelskill.trajectory import Node
    from kernelskill.tui.widgets.node_detail import profile_text
    prof = {"candidate": {"median_ms": 2.0, "iqr_ms": 0.01, "n": 30}, "baseline": {"median_ms": 3.0, "iqr_ms": 0.02, "n": 30},
            "speedup": 1.5, "speedup_ci": [1.4, 1.6], "custom_share": 1.0, "bottleneck": "memory-bound",
            "roofline": {"floor_ms": 1.0, "fraction": 0.5, "eager_fraction": 0.33, "achieved_gbs": 1500.0,
                         "roof": "memory", "ceilings": "GPU (measured now)"}}
    node = Node(id="n1", parent="n0", kind="plan", code="", status="ok", result=eval_result(profile=prof))
    text = profile_text(node).plain
    assert "floor 1.000 ms · 50% of its pace (eager 33%) · 1500 GB/s · memory roof" in text
    assert "bottleneck memory-bound" in text
