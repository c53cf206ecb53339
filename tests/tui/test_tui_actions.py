"""Acting: q quits (asking first while a run works), ? lists the current screen's keys, the command
palette holds the app's own commands, and History resumes, replays, exports best.py, opens $EDITOR,
copies a path and deletes (after a yes); / filters and s sorts its table."""
from __future__ import annotations

import shutil
import sys
import threading
from pathlib import Path

from textual.widgets import DataTable, Input, Static

from kernelskill.runs import load_run
from kernelskill.tui.app import KernelSkillApp
from kernelskill.tui.demo import DEMO_RUN
from kernelskill.tui.screens.history import HistoryScreen
from kernelskill.tui.screens.overlays import ConfirmScreen, HelpScreen
from kernelskill.tui.screens.run import RunScreen
from kernelskill.tui.widgets.candidate_tree import CandidateTree

from chat_server import ChatServer
from conftest import STORED_RUN, labels, run_async, until
from scenario import RELU_TASK, Scenario

ROOT = Path(__file__).resolve().parents[2]
DEMO_ID = "20250101-120000-relu_gelu-demo"


def two_runs(tmp_path: Path) -> Path:
    """A runs directory with copies of the snapshot tests' run (relu_task, 0.18×) and the demo (relu_gelu)."""
    runs = tmp_path / "runs"
    shutil.copytree(STORED_RUN, runs / STORED_RUN.name)
    shutil.copytree(DEMO_RUN, runs / DEMO_ID)
    return runs


def tasks(table: DataTable) -> list[str]:
    return [str(table.get_row_at(i)[1]) for i in range(table.row_count)]


async def history(pilot) -> tuple[HistoryScreen, DataTable]:
    await until(pilot, lambda: isinstance(pilot.app.screen, HistoryScreen), what="History")
    screen = pilot.app.screen
    table = screen.query_one("#runs", DataTable)
    await until(pilot, lambda: table.row_count == len(screen.all_rows) > 0, what="the runs listed")
    return screen, table


@run_async
async def test_q_quits_and_question_mark_lists_the_keys(config_for, tmp_path):
    two_runs(tmp_path)
    app = KernelSkillApp(config_for(None), history=True)
    async with app.run_test(size=(80, 24)) as pilot:
        screen, table = await history(pilot)
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), what="the help overlay")
        text = str(app.screen.query_one("#help-keys", Static).content)
        for what in ("Resume", "Export", "Open in $EDITOR", "Copy path", "Delete", "Filter", "Sort", "Quit"):
            assert what in text
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen, what="the help closed")
        await pilot.press("enter")                                     # a stored run: its own keys
        await until(pilot, lambda: isinstance(app.screen, RunScreen), what="the stored run")
        await pilot.press("f1")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), what="the help overlay (F1)")
        text = str(app.screen.query_one("#help-keys", Static).content)
        assert "Next tab" in text and "Pause (not now: a live run" in text  # a stored run's controls: dimmed
        await pilot.press("escape", "q")
        await until(pilot, lambda: app.return_code is not None, what="q to quit")


@run_async
async def test_q_during_a_live_run_asks_first(config_for):
    release = threading.Event()
    script = Scenario()

    def reply(body: dict) -> str:
        release.wait(60)
        return script.from_request(body)

    with ChatServer(reply) as server:
        app = KernelSkillApp(config_for(server.url), task=str(RELU_TASK))
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("ctrl+r")
            await until(pilot, lambda: isinstance(app.screen, RunScreen), what="the Run screen")
            run = app.screen
            await until(pilot, lambda: run.optimizer is not None and run.view.phase == "running", what="the run")
            await pilot.press("q")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the question")
            assert "A run is working" in str(app.screen.query_one("#confirm-text").content)
            await pilot.press("n")
            await until(pilot, lambda: app.screen is run, what="back on the run")
            assert run.view.active and not run.optimizer._stop.is_set() and app.return_code is None
            await pilot.press("q")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the question again")
            await pilot.press("y")
            await until(pilot, lambda: app.return_code is not None, what="the app to quit")
            assert run.optimizer._stop.is_set()                        # the run was told to stop
            release.set()


@run_async
async def test_command_palette_has_the_apps_commands(config_for, tmp_path):
    app = KernelSkillApp(config_for(None), history=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, HistoryScreen), what="History")
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for title in ("Resume", "Export", "Open in $EDITOR", "Filter", "Keys of this screen", "History", "Demo",
                      "Quit"):
            assert title in titles
        await pilot.press("ctrl+p")
        await until(pilot, lambda: app.screen.query("CommandInput"), what="the command palette")
        await pilot.press(*"Demo")
        await until(pilot, lambda: any("Demo" in str(o.prompt) for o in app.screen.query_one("CommandList")._options),
                    what="the Demo command listed")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.speed is not None,
                    what="the demo replay")


@run_async
async def test_history_filters_and_sorts(config_for, tmp_path):
    two_runs(tmp_path)
    app = KernelSkillApp(config_for(None), history=True)
    async with app.run_test(size=(80, 24)) as pilot:
        screen, table = await history(pilot)
        assert tasks(table) == ["relu_task", "relu_gelu"]                # newest first: same start, id order
        await pilot.press("slash")
        box = screen.query_one("#history-filter", Input)
        await until(pilot, lambda: box.has_focus, what="the filter")
        await pilot.press(*"gelu")
        await until(pilot, lambda: tasks(table) == ["relu_gelu"], what="the filtered table")
        assert "1 of 2 runs match “gelu”" in str(screen.query_one("#history-title").content)
        await pilot.press("escape")
        await until(pilot, lambda: table.row_count == 2 and not box.display, what="the filter cleared")
        assert isinstance(app.screen, HistoryScreen)                    # esc cleared the filter, did not go back
        await pilot.press("s")                                           # by best, fastest first
        await until(pilot, lambda: tasks(table) == ["relu_gelu", "relu_task"], what="sorted by best")
        assert "best ↓" in str(table.columns["best"].label)
        await pilot.press("S")
        await until(pilot, lambda: tasks(table) == ["relu_task", "relu_gelu"], what="reversed")
        await pilot.press("s")                                           # by tokens
        assert screen.sort_column == "tokens"


@run_async
async def test_history_exports_edits_copies_replays_and_deletes(config_for, tmp_path, monkeypatch):
    runs = two_runs(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    seen = tmp_path / "editor-args"
    editor = tmp_path / "editor.py"
    editor.write_text(f"import sys, pathlib\npathlib.Path({str(seen)!r}).write_text(sys.argv[1])\n")
    monkeypatch.setenv("EDITOR", f"{sys.executable} {editor}")
    monkeypatch.delenv("VISUAL", raising=False)
    app = KernelSkillApp(config_for(None, runs_dir=str(runs)), history=True)
    async with app.run_test(size=(80, 24)) as pilot:
        screen, table = await history(pilot)
        await until(pilot, lambda: screen.current() is not None, what="a highlighted run")
        assert screen.current().path.name == STORED_RUN.name
        await pilot.press("x")
        await until(pilot, lambda: (work / "relu_task_best.py").is_file(), what="best.py exported")
        assert (work / "relu_task_best.py").read_text() == (runs / STORED_RUN.name / "best.py").read_text()
        await pilot.press("x")                                           # never over an existing file
        await until(pilot, lambda: (work / "relu_task_best_2.py").is_file(), what="a second export")
        await pilot.press("e")
        await until(pilot, lambda: seen.is_file(), what="the editor to run")
        assert seen.read_text() == str(runs / STORED_RUN.name / "best.py")
        await pilot.press("c")
        await until(pilot, lambda: app.clipboard == str((runs / STORED_RUN.name).resolve()), what="the path copied")

        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the delete question")
        await pilot.press("n")
        await until(pilot, lambda: app.screen is screen, what="no")
        assert (runs / STORED_RUN.name).is_dir()
        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the delete question")
        await pilot.press("y")
        await until(pilot, lambda: not (runs / STORED_RUN.name).exists(), what="the run deleted")
        await until(pilot, lambda: tasks(table) == ["relu_gelu"], what="the table reloaded")

        await pilot.press("p")                                           # replay the demo copy
        await until(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.speed == 1.0, what="a replay")
        run = app.screen
        await pilot.press("e")                                           # to the end
        await until(pilot, lambda: run.view.phase == "finished" and len(labels(run.query_one(CandidateTree))) == 6,
                    what="the replayed tree")


@run_async
async def test_history_resumes_a_run_live(config_for, tmp_path, monkeypatch):
    """r continues a stored run with the TUI's endpoint and budget: the stored run (4 attempts) gets a fifth."""
    monkeypatch.chdir(ROOT)                                     # the stored run names its task relative to the repo
    runs = tmp_path / "runs"
    shutil.copytree(STORED_RUN, runs / STORED_RUN.name)
    with ChatServer(Scenario().from_request) as server:
        app = KernelSkillApp(config_for(server.url, **{"budget.attempts": 5}), history=True)
        async with app.run_test(size=(80, 24)) as pilot:
            screen, table = await history(pilot)
            await pilot.press("r")
            await until(pilot, lambda: isinstance(app.screen, RunScreen), what="the Run screen")
            run = app.screen
            assert run.view.live and run.resume_path == runs / STORED_RUN.name
            await until(pilot, lambda: len(run.view.tree) >= 5, what="the stored nodes")
            await until(pilot, lambda: run.optimizer is not None and run.view.phase == "finished"
                        and len(run.view.tree) == 6, what="the resumed run to finish its fifth attempt")
            assert run.view.reason == "attempts" and run.view.attempts == 5
            await until(pilot, lambda: len(labels(run.query_one(CandidateTree))) == 6, what="n5 in the tree")
    state = load_run(runs / STORED_RUN.name)
    assert state.attempts == 5 and state.finished.reason == "attempts"
    assert [e.resumed for e in state.events if e.name == "RunStarted"] == [False, True]
