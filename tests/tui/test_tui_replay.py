"""``kernelskill tui --replay RUN`` and ``--demo``: a stored run's events play on the Run screen as if
live (the shipped demo run, a real optimizer run on the cpp backend), with pause, speed and skip."""
from __future__ import annotations

import json

from kernelskill.cli import main
from kernelskill.runs import load_run
from kernelskill.trajectory import Node
from kernelskill.tui.app import KernelSkillApp
from kernelskill.tui.demo import DEMO_RUN
from kernelskill.tui.widgets.activity import ActivityLog
from kernelskill.tui.widgets.candidate_tree import CandidateTree

from conftest import STORED_RUN, STORED_RUNS, labels, run_async, until

DEMO_SHAPE = [["✓", "n0", "reference"], ["✗", "n1", "incorrect"], ["✓", "n2"], ["✓", "n3"],
              ["✗", "n4", "compile_error"], ["✓", "n5", "=n2"]]


def shape(lines: list[str]) -> list[list[str]]:
    """Each tree line's mark, id and (for failures, the reference and duplicates) its third word."""
    out = []
    for line in lines:
        words = line.split()
        keep = 3 if not words[2].endswith("×") else 2
        out.append(words[:keep])
    return out


def test_the_demo_run_is_small_and_has_something_for_every_view():
    """Shipped in the package: a real run with an incorrect node (worst elements), a repair faster than
    eager, roofline positions, kernel times, measurement quality, a compile error and a duplicate."""
    size = sum(f.stat().st_size for f in DEMO_RUN.rglob("*") if f.is_file())
    assert size < 100_000
    state = load_run(DEMO_RUN)
    nodes = {n.id: n for n in state.tree}
    assert [n.status for n in state.tree] == ["ok", "incorrect", "ok", "ok", "compile_error", "ok"]
    assert state.finished.reason == "attempts" and state.tree.best().id == "n2"
    assert "worst:" in nodes["n1"].result.verify.mismatch and "got " in nodes["n1"].result.verify.mismatch
    for nid in ("n0", "n2", "n3"):
        prof = nodes[nid].profile
        assert prof.roofline.fraction > 0 and prof.kernels and prof.quality.verdict
        assert prof.candidate.n >= 10 and prof.baseline.median_ms > 0
    assert nodes["n2"].speedup > 1.0 > nodes["n3"].speedup
    assert nodes["n5"].duplicate_of == "n2"
    run = json.loads((DEMO_RUN / "events.jsonl").read_text().splitlines()[0])
    assert run["event"] == "RunStarted" and run["run_id"] == "20250101-120000-relu_gelu-demo"


@run_async
async def test_demo_plays_the_whole_run_as_if_live(config_for):
    app = KernelSkillApp(config_for(None), replay=DEMO_RUN, speed=64)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: getattr(app.screen, "speed", None) is not None, what="the Run screen")
        run = app.screen
        assert run.sub_title.endswith("· replay")
        seen: set[str] = set()
        await until(pilot, lambda: run.view.phase == "finished", what="the replay to end", seen=seen)
        tree = run.query_one(CandidateTree)
        await until(pilot, lambda: len(labels(tree)) == 6, what="every node in the tree")
        assert shape(labels(tree)) == DEMO_SHAPE
        assert run.played == len(load_run(DEMO_RUN).events) and not run.replaying
        assert run.view.progress == "" and run.view.best.id == "n2"
        text = run.query_one(ActivityLog).plain
        assert "── planner · attempt 1 · from n0" in text and "★ new best n2" in text
        assert "■ n4 compile_error" in text and "■ the attempt budget is spent" in text
        # As live: the failures and the end come as notifications.
        await until(pilot, lambda: any("Run finished: the attempt budget is spent" in n for n in seen), seen=seen,
                    what="the notification that the run finished")
        assert any("n1 incorrect" in n for n in seen) and any("n4 compile_error" in n for n in seen)
        assert run.check_action("pause", ()) is False and run.check_action("to_end", ()) is False
        assert run.check_action("back", ()) is True


@run_async
async def test_replay_pauses_changes_speed_and_skips_to_the_end(config_for):
    app = KernelSkillApp(config_for(None), replay=STORED_RUN, speed=0.25)      # slow: one event per 4 s
    async with app.run_test(size=(200, 50)) as pilot:
        await until(pilot, lambda: getattr(app.screen, "played", 0) > 0, what="the first events")
        run = app.screen
        assert run.view.phase == "replaying" and run.replaying
        assert "events · 0.25×" in str(run.query_one("#run-state").content)
        await pilot.press("p")
        assert run.replay_paused and run._replay_timer is None             # nothing is scheduled while paused
        played = run.played
        assert "paused" in str(run.query_one("#run-state").content)
        assert run.check_action("pause", ()) is None and run.check_action("resume", ()) is True
        await pilot.press("plus", "plus")
        assert run.speed == 1.0
        await pilot.press("minus")
        assert run.speed == 0.5 and run.played == played
        await pilot.press("r")
        assert not run.replay_paused
        await pilot.press("e")                                               # the rest at once
        assert not run.replaying and run.view.phase == "finished"
        tree = run.query_one(CandidateTree)
        await until(pilot, lambda: len(labels(tree)) == 5, what="the whole tree")
        assert [line.split()[:3] for line in labels(tree)][:4] == [
            ["✓", "n0", "reference"], ["✗", "n1", "incorrect"], ["✓", "n2", "0.18×"], ["✗", "n3", "crashed"]]
        await until(pilot, lambda: tree.current_id == "n2", what="the best node, selected at the end")


def test_cli_replay_errors_name_what_was_looked_for(tmp_path, capsys):
    runs = tmp_path / "runs"
    assert main(["tui", "--replay", "nosuch", "--runs-dir", str(runs)]) == 2
    err = capsys.readouterr().err
    assert "no run 'nosuch'" in err and f"under {runs}/" in err
    assert f"kernelskill runs list --runs-dir {runs}" in err and "kernelskill tui --demo" in err
    assert main(["tui", "--speed", "3"]) == 2
    assert "--speed is the speed of a replay" in capsys.readouterr().err
    assert main(["tui", "--demo", "--speed", "0"]) == 2
    assert "--speed must be above 0" in capsys.readouterr().err
    assert main(["tui", "--demo", "--replay", STORED_RUN.name, "--runs-dir", str(STORED_RUNS)]) == 2
    assert "choose one" in capsys.readouterr().err


def test_cli_help_teaches_demo_and_replay(capsys):
    try:
        main(["tui", "--help"])
    except SystemExit as e:
        assert e.code == 0
    out = capsys.readouterr().out
    assert "--demo" in out and "--replay RUN" in out and "--speed X" in out and "kernelskill tui --demo" in out


def test_a_stored_run_replays_to_the_same_tree_for_resume_and_for_the_dashboard():
    """One replay (Trajectory.apply): runs.load_run (resume, ``runs show``) and the TUI's RunView fold a
    stored run's events into the same tree, results parsed to EvalResults, the events left as stored."""
    from kernelskill.results import EvalResult
    from kernelskill.tui.model import RunView
    for run in (DEMO_RUN, STORED_RUN):
        state = load_run(run)
        view = RunView.stored(state)
        for ev in state.events:
            view.apply(ev)
        assert [n.to_dict() for n in view.tree] == [n.to_dict() for n in state.tree] and len(state.tree) > 1
        assert [n.children for n in view.tree] == [n.children for n in state.tree]
        assert view.tree.best().id == state.tree.best().id and view.tree.best_id == state.tree.best_id
        assert all(isinstance(n.result, EvalResult) for n in state.tree if n.result is not None)
        for ev in state.events:                    # applying the events again changes nothing
            assert not state.tree.apply(ev)
        # replaying leaves the events' nodes as stored: each tree adds its own copy and changes only that
        stored = [json.loads(line) for line in (run / "events.jsonl").read_text(encoding="utf-8").splitlines()]
        nodes = [getattr(ev, "node", None) for ev in state.events]
        assert [Node.from_dict(d["node"]) if "node" in d else None for d in stored] == nodes
        in_trees = {id(n) for n in (*view.tree, *state.tree)}
        assert all(not n.children and id(n) not in in_trees for n in nodes if n is not None)
