"""A whole run driven from the TUI on the cpp backend, the agents served over HTTP by the local
chat-completions test server: what the Run and History screens show, pause/resume/stop, an
unreachable endpoint."""
from __future__ import annotations

import socket
import threading

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
WAIT_S = 120          # a bound on waiting for a state, generous for a busy 2-core machine


async def start(pilot, attempts: int) -> RunScreen:
    """Fill the budget on Home and start; returns the Run screen."""
    home = pilot.app.screen
    assert isinstance(home, HomeScreen)
    home.query_one("#attempts", Input).value = str(attempts)
    await pilot.press("ctrl+r")
    await until(pilot, lambda: isinstance(pilot.app.screen, RunScreen), what="the Run screen")
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
            await until(pilot, lambda: any("Run finished: the attempt budget is spent" in n for n in shown),
                        what="the notification that the run finished", seen=shown)

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
            assert "Here is my plan" in text and "relu2_tail_bug overwrites the last element" in text
            assert "■ n3 crashed" in text and "★ new best n2" in text

            tree.select_id("n2")
            code = run.query_one("#code", TextArea)
            await until(pilot, lambda: tree.current_id == "n2" and code.text == GOOD,
                        what="the cursor on n2 and the code view showing n2's code")
            assert code.read_only
            await pilot.press("t")                       # Diff
            await until(pilot, lambda: "+        return ext.relu2(x)" in str(run.query_one("#diff").content),
                        what="the diff of n2 against its parent")
            diff = str(run.query_one("#diff").content)
            assert "-        return ext.relu2_tail_bug(x)" in diff and "+        return ext.relu2(x)" in diff
            await pilot.press("t")                       # Profile
            await until(pilot, lambda: "speedup" in str(run.query_one("#profile").content), what="n2's profile")
            assert run.query_one("#kernels").row_count >= 1

            assert any("n1 incorrect" in n for n in shown) and any("n3 crashed" in n for n in shown)

            await pilot.press("h")
            await until(pilot, lambda: isinstance(app.screen, HistoryScreen), what="the History screen")
            history = app.screen
            table = history.query_one("#runs")
            await until(pilot, lambda: table.row_count == 1, what="the history to list the run")
            row = [str(c) for c in table.get_row_at(0)]
            assert row[1:4] == ["relu_task", "attempts", "3"]
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen is not run,
                        what="the stored run to open")
            stored = app.screen
            assert not stored.view.live
            await until(pilot, lambda: len(labels(stored.query_one(CandidateTree))) == len(lines),
                        what="the stored run's tree")
            assert labels(stored.query_one(CandidateTree)) == lines
            assert stored.view.run_id == run.view.run_id
            assert stored.check_action("pause", ()) is False        # read-only: no run controls


@run_async
async def test_pause_resume_and_stop(config_for):
    # Until "p" is pressed the LLM answers nothing, so at most the attempt in flight when the pause
    # lands can finish ("the attempt in flight finishes, then the run waits"), however slow the pilot.
    script, pressed = Scenario(), threading.Event()

    def reply(body: dict) -> str:
        pressed.wait(WAIT_S)
        return script.from_request(body)

    with ChatServer(reply) as server:
        app = KernelSkillApp(config_for(server.url), task=str(RELU_TASK))
        async with app.run_test(size=(80, 24)) as pilot:
            run = await start(pilot, attempts=20)
            await until(pilot, lambda: run.optimizer is not None and run.view.phase == "running",
                        what="the optimizer to start")
            assert run.check_action("resume", ()) is None                   # shown, dimmed
            await pilot.press("p")
            pressed.set()
            assert run.optimizer.paused and run.view.phase == "paused"
            assert run.check_action("resume", ()) is True and run.check_action("pause", ()) is None
            opt = run.optimizer
            # Parked, the loop waits for "r" and starts nothing; a second attempt means the pause failed.
            await until(pilot, lambda: opt.parked or opt.spend.attempts >= 2, what="the run to park at the pause")
            assert opt.parked and len(opt.tree) == 1 + opt.spend.attempts and opt.spend.attempts <= 1
            begun = [b for b in server.requests if b["model"] in ("planner-model", "debugger-model")]
            assert len(begun) == opt.spend.attempts                   # no attempt in flight, none begun since
            before = opt.spend.attempts
            await until(pilot, lambda: run.view.attempts == before and len(run.view.tree) == 1 + before,
                        what="the Run screen to show the parked run")
            assert run.check_action("back", ()) is None                # no leaving a working run

            await pilot.press("r")
            assert not run.optimizer.paused
            await until(pilot, lambda: run.view.attempts > before, what="an attempt after resuming")
            seen: set[str] = set()                   # toasts expire: collect them while waiting
            await pilot.press("s")
            assert run.view.phase in ("stopping", "finished")
            await until(pilot, lambda: run.view.phase == "finished", what="the run to stop", seen=seen)
            assert run.view.reason == "stopped"
            # The notification is a message the app handles after the event that finished the run.
            await until(pilot, lambda: any("stopped by the user" in n for n in seen), seen=seen,
                        what="the notification that the user stopped the run")
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
        await until(pilot, lambda: any("choose a task" in n for n in notes(app)),
                    what="the notification to choose a task")
        assert isinstance(app.screen, HomeScreen)

        app.screen.query_one("#task-path", Input).value = str(RELU_TASK)
        await pilot.press("ctrl+r")
        await until(pilot, lambda: isinstance(app.screen, HomeScreen), what="the return to Home")
        await until(pilot, lambda: any("Run not started" in n and "is unreachable" in n for n in notes(app)),
                    what="the notification that the endpoint is unreachable")
        assert app.is_running
        assert not (tmp_path / "runs").exists()     # nothing was stored
