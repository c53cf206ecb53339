"""A whole run driven from the TUI on the cpp backend, the agents served over HTTP by the local
chat-completions test server: what the Run and History screens show, pause/resume/stop, an
unreachable endpoint."""
from __future__ import annotations

import socket

from textual.widgets import Input, TextArea

from kernelskill.runs import load_run
from kernelskill.tui.app import KernelSkillApp
from kernelskill.tui.screens.history import HistoryScreen
from kernelskill.tui.screens.home import HomeScreen
from kernelskill.tui.screens.run import RunScreen
from kernelskill.tui.widgets.activity import ActivityLog
from kernelskill.tui.widgets.candidate_tree import CandidateTree

from chat_server import ChatServer
from conftest import labels, notes, run_async, until
from helpers import toolkit_candidate
from scenario import BUGGY, GOOD, RELU_TASK, Scenario

CRASH = toolkit_candidate("ext.segfault()\nreturn x")


async def start(pilot, attempts: int) -> RunScreen:
    """Fill the budget on Home and start; returns the Run screen."""
    home = pilot.app.screen
    assert isinstance(home, HomeScreen)
    home.query_one("#attempts", Input).value = str(attempts)
    await pilot.press("ctrl+r")
    await pilot.pause()
    assert isinstance(pilot.app.screen, RunScreen)
    return pilot.app.screen


@run_async
async def test_live_run_shows_tree_best_activity_code_and_history(config_for):
    # n1 incorrect → n2 its repair (ok) → n3 crashed (expanded from the root) → budget spent
    script = Scenario([BUGGY, CRASH])
    with ChatServer(script.from_request) as server:
        app = KernelSkillApp(config_for(server.url), task=str(RELU_TASK))
        async with app.run_test(size=(100, 32)) as pilot:
            home = app.screen
            assert home.query_one("#base-url", Input).value == server.url
            assert home.query_one("#model", Input).value == "planner-model"
            assert home.query_one("#task-path", Input).value == str(RELU_TASK)
            run = await start(pilot, attempts=3)
            shown: set[str] = set()
            await until(pilot, lambda: run.view.phase == "finished", what="the run to finish", seen=shown)
            # Toasts are messages the app handles after the event that finished the run: wait for the last.
            await until(pilot, lambda: any("Run finished: the attempt budget is spent" in n for n in shown), 10,
                        "the notification that the run finished", seen=shown)

            assert run.view.reason == "attempts" and run.view.attempts == 3
            tree = run.query_one(CandidateTree)
            lines = labels(tree)
            assert [line.split()[:3] for line in lines] == [
                ["✓", "n0", "reference"], ["✗", "n1", "incorrect"], ["✓", "n2", lines[2].split()[2]],
                ["✗", "n3", "crashed"]]
            assert "★" in lines[2] and lines[2].split()[2].endswith("×")
            best = str(run.query_one("#best").content)
            assert best.startswith("best ") and best.endswith(" n2") and "[" in best and "–" in best
            assert "attempts 3/3" in str(run.query_one("#meters").content)

            text = run.query_one(ActivityLog).plain
            assert "── planner · attempt 1 · from n0" in text
            assert "── debugger · attempt 2 · from n1" in text
            assert "Here is my plan." in text and "relu2_tail_bug overwrites the last element" in text
            assert "■ n3 crashed" in text and "★ new best n2" in text

            tree.select_id("n2")
            await pilot.pause()
            assert run.query_one("#code", TextArea).text == GOOD
            assert run.query_one("#code", TextArea).read_only
            await pilot.press("t")                       # Diff
            await pilot.pause()
            diff = str(run.query_one("#diff").content)
            assert "-        return ext.relu2_tail_bug(x)" in diff and "+        return ext.relu2(x)" in diff
            await pilot.press("t")                       # Profile
            await pilot.pause()
            assert "speedup" in str(run.query_one("#profile").content)
            assert run.query_one("#kernels").row_count >= 1

            assert any("n1 incorrect" in n for n in shown) and any("n3 crashed" in n for n in shown)

            await pilot.press("h")
            history = app.screen
            assert isinstance(history, HistoryScreen)
            table = history.query_one("#runs")
            await until(pilot, lambda: table.row_count == 1, 30, "the history to list the run")
            row = [str(c) for c in table.get_row_at(0)]
            assert row[1:4] == ["relu_task", "attempts", "3"]
            await pilot.press("enter")
            await pilot.pause()
            stored = app.screen
            assert isinstance(stored, RunScreen) and not stored.view.live
            assert labels(stored.query_one(CandidateTree)) == lines
            assert stored.view.run_id == run.view.run_id
            assert stored.check_action("pause", ()) is False        # read-only: no run controls


@run_async
async def test_pause_resume_and_stop(config_for):
    script = Scenario()
    with ChatServer(script.from_request) as server:
        app = KernelSkillApp(config_for(server.url), task=str(RELU_TASK))
        async with app.run_test(size=(80, 24)) as pilot:
            run = await start(pilot, attempts=20)
            await until(pilot, lambda: run.optimizer is not None and run.view.phase == "running", 60,
                        "the optimizer to start")
            assert run.check_action("resume", ()) is None                   # shown, dimmed
            await pilot.press("p")
            assert run.optimizer.paused and run.view.phase == "paused"
            assert run.check_action("resume", ()) is True and run.check_action("pause", ()) is None
            await until(pilot, lambda: len(run.view.tree) == 1, 60, "the baseline")
            await pilot.pause(1.0)
            assert run.view.attempts == 0 and not script.seen          # paused before the first attempt
            assert run.check_action("back", ()) is None                # no leaving a working run

            await pilot.press("r")
            assert not run.optimizer.paused
            await until(pilot, lambda: run.view.attempts >= 1, 60, "an attempt after resuming")
            await pilot.press("s")
            assert run.view.phase in ("stopping", "finished")
            await until(pilot, lambda: run.view.phase == "finished", 60, "the run to stop")
            assert run.view.reason == "stopped"
            # The notification is a message the app handles after the event that finished the run.
            await until(pilot, lambda: any("stopped by the user" in n for n in notes(app)), 10,
                        "the notification that the user stopped the run")
            assert run.check_action("back", ()) is True
            stored = load_run(run.optimizer.path)                          # the run is kept
            assert stored.finished.reason == "stopped" and stored.attempts == run.view.attempts


@run_async
async def test_unreachable_endpoint_and_bad_form_are_notifications(config_for, tmp_path):
    with socket.socket() as s:                      # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = KernelSkillApp(config_for(f"http://127.0.0.1:{port}/v1"))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("ctrl+r")                 # no task yet
        await pilot.pause()
        assert isinstance(app.screen, HomeScreen)
        await until(pilot, lambda: any("choose a task" in n for n in notes(app)), 10, "the notification to choose a task")

        app.screen.query_one("#task-path", Input).value = str(RELU_TASK)
        await pilot.press("ctrl+r")
        await until(pilot, lambda: isinstance(app.screen, HomeScreen), 60, "the return to Home")
        await until(pilot, lambda: any("Run not started" in n and "is unreachable" in n for n in notes(app)), 10,
                    "the notification that the endpoint is unreachable")
        assert app.is_running
        assert not (tmp_path / "runs").exists()     # nothing was stored
