"""Snapshots of Home, Run (a stored run, so nothing varies), the replay of the demo run (its Plots tab)
and History, each at 80×24 and 200×50; after a deliberate change to the look, review and accept with
``pytest tests/tui --snapshot-update``."""
from __future__ import annotations

from pathlib import Path

import pytest

from kernelskill.config import load_config
from kernelskill.tui.app import KernelSkillApp
from kernelskill.tui.widgets.candidate_tree import CandidateTree
from kernelskill.tui.demo import DEMO_RUN
from kernelskill.tui.widgets.node_detail import NodeDetail
from kernelskill.tui.widgets.notices import NoticeBar
from kernelskill.tui.widgets.plots import RunPlots

from conftest import EXAMPLES, STORED_RUN, notes, until

ROOT = Path(__file__).resolve().parents[2]
RUNS = "tests/tui/data/stored_runs"            # relative: the screens show it, and it must not name this machine


@pytest.fixture
def config(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    return load_config({"llm.base_url": "http://localhost:8000/v1", "llm.model": "qwen2.5-coder-32b",
                        "budget.attempts": 20, "budget.usd": 2.0, "runs_dir": RUNS}, cwd=tmp_path, env={})


async def settled(pilot) -> None:
    """Workers done (history loaded, GPU probed) and the screen redrawn."""
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=["80x24", "200x50"])
def test_home(snap_compare, config, size):
    assert snap_compare(KernelSkillApp(config, examples_dir=EXAMPLES), terminal_size=size, run_before=settled)


def stored_run_at(tab_presses: int):
    async def run_before(pilot) -> None:
        await settled(pilot)
        tree = pilot.app.screen.query_one(CandidateTree)
        await until(pilot, lambda: tree.current_id == "n2", what="the best node, selected on open")
        await pilot.press(*["t"] * tab_presses)
        detail = pilot.app.screen.query_one(NodeDetail)
        await until(pilot, lambda: detail.active == NodeDetail.TABS[tab_presses], what=f"tab {tab_presses}")
        await settled(pilot)
    return run_before


def test_run_stored_profile_80x24(snap_compare, config):
    app = KernelSkillApp(config, open_run=Path(RUNS) / STORED_RUN.name)
    assert snap_compare(app, terminal_size=(80, 24), run_before=stored_run_at(2))


def test_run_stored_diff_200x50(snap_compare, config):
    app = KernelSkillApp(config, open_run=Path(RUNS) / STORED_RUN.name)
    assert snap_compare(app, terminal_size=(200, 50), run_before=stored_run_at(1))


@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=["80x24", "200x50"])
def test_history(snap_compare, config, size):
    assert snap_compare(KernelSkillApp(config, history=True), terminal_size=size, run_before=settled)


async def replay_plots(pilot) -> None:
    """The demo replayed to its end, the best node's Plots tab, no notification left on screen."""
    app = pilot.app
    await until(pilot, lambda: getattr(app.screen, "view", None) is not None
                and app.screen.view.phase == "finished", what="the replay to end")
    tree = app.screen.query_one(CandidateTree)
    await until(pilot, lambda: tree.current_id == "n2", what="the best node, selected at the end")
    app.screen.query_one(NodeDetail).active = "tab-plots"
    bar, plots = app.screen.query_one(NoticeBar), app.screen.query_one(RunPlots)
    await until(pilot, lambda: "n2 at attempt 2" in plots.drawn.get("speedup", ""), what="n2's plots")
    # Notifications are messages handled after the event that made them: wait for the last, then clear.
    await until(pilot, lambda: any("Run finished" in n for n in notes(app)), what="the last notification")
    app.clear_notifications()
    await until(pilot, lambda: not bar.has_class("-shown"), what="no notice left")
    await settled(pilot)


@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=["80x24", "200x50"])
def test_replay_of_the_demo_plots(snap_compare, config, size):
    app = KernelSkillApp(config, replay=DEMO_RUN, speed=256)
    assert snap_compare(app, terminal_size=size, run_before=replay_plots)
