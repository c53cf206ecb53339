"""Correct at every size: labels and the activity log re-fit on a resize, a message below the minimum
size, notifications on their own line (never over the panes), the mismatch details of an incorrect node."""
from __future__ import annotations

import re

from textual.widgets import Static
from textual.widgets._toast import Toast

from kernelskill.tui.app import KernelSkillApp
from kernelskill.tui.demo import DEMO_RUN
from kernelskill.tui.screens.home import HomeScreen
from kernelskill.tui.screens.overlays import TooSmall
from kernelskill.tui.widgets.activity import ActivityLog
from kernelskill.tui.widgets.candidate_tree import CandidateTree
from kernelskill.tui.widgets.node_detail import NodeDetail
from kernelskill.tui.widgets.notices import NoticeBar

from conftest import STORED_RUN, labels, run_async, until


def log_fits(log: ActivityLog) -> bool:
    """Every character logged is on screen once (no loss where a line wrapped) and no line is wider than
    the log."""
    shown = re.sub(r"\s", "", "".join(line.text for line in log.lines))
    return (shown == re.sub(r"\s", "", log.plain) and bool(log.lines)
            and max(line.cell_length for line in log.lines) <= log.scrollable_content_region.width)


@run_async
async def test_resize_refits_tree_labels_and_rewraps_the_activity_log(config_for):
    app = KernelSkillApp(config_for(None), open_run=STORED_RUN)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: isinstance(app.screen.query(CandidateTree).first(None), CandidateTree)
                    and len(labels(app.screen.query_one(CandidateTree))) == 5, what="the stored run")
        tree, log = app.screen.query_one(CandidateTree), app.screen.query_one(ActivityLog)
        narrow = labels(tree)
        assert not any("algebraic" in line for line in narrow)
        await until(pilot, lambda: log_fits(log), what="the log, wrapped at 80 columns")
        width = log.scrollable_content_region.width
        for size in ((200, 50), (80, 24), (200, 50)):
            await pilot.resize_terminal(*size)
            await until(pilot, lambda: log.scrollable_content_region.width != width and log_fits(log),
                        what=f"the log re-wrapped at {size}")
            width = log.scrollable_content_region.width
            wide = size[0] == 200
            await until(pilot, lambda: any("algebraic-simplif" in line for line in labels(tree)) == wide,
                        what=f"the tree labels re-fitted at {size}")
            lineage = app.screen.view.tree.lineage
            assert all(len(str(item.label)) <= tree.size.width - 2 * len(lineage(nid)) - 3   # guides: 2 a level
                       for nid, item in tree._items.items())
        assert labels(tree)[1].startswith("✗ n1 incorrect · algebraic-simplif")


@run_async
async def test_too_small_a_terminal_says_so_and_recovers(config_for):
    app = KernelSkillApp(config_for(None), open_run=STORED_RUN)
    async with app.run_test(size=(50, 14)) as pilot:
        await until(pilot, lambda: isinstance(app.screen.query(TooSmall).first(None), TooSmall)
                    and app.screen.query_one(TooSmall).region.height > 0, what="the too-small message")
        run = app.screen
        message = run.query_one(TooSmall)
        assert "Terminal too small: 50×14" in str(message.render()) and "at least 64×18" in str(message.render())
        assert not run.query_one("#run-body").display and not run.query_one(CandidateTree).region.height
        await pilot.resize_terminal(70, 16)                      # wide enough, still too short
        await until(pilot, lambda: "70×16" in str(message.render()) and run.has_class("-too-short"),
                    what="the message to follow the size")
        await pilot.resize_terminal(80, 24)
        await until(pilot, lambda: not message.region.height and run.query_one(CandidateTree).region.height > 3,
                    what="the panes back at 80×24")
        assert len(labels(run.query_one(CandidateTree))) == 5
        # The focus comes back to the tree (not to the hidden filter, where q and the other keys were typed).
        await until(pilot, lambda: app.focused is run.query_one(CandidateTree), what="the focus back on the tree")
        await pilot.press("question_mark")
        await until(pilot, lambda: app.screen is not run, what="the help overlay")
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is run and app.focused is run.query_one(CandidateTree),
                    what="the tree focused again after the overlay")
        await pilot.press("escape")                              # Home has the message too
        await until(pilot, lambda: isinstance(app.screen, HomeScreen), what="Home")
        await pilot.resize_terminal(60, 24)
        await until(pilot, lambda: app.screen.query_one(TooSmall).region.height > 0, what="Home's message")
        await pilot.resize_terminal(80, 24)
        await until(pilot, lambda: app.focused is not None and app.focused.id == "examples", what="Home's focus")
        await pilot.press("q")
        await until(pilot, lambda: app.return_code is not None, what="q to quit")


@run_async
async def test_notifications_sit_on_their_own_line_not_over_the_panes(config_for):
    app = KernelSkillApp(config_for(None), replay=DEMO_RUN, speed=64)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: getattr(app.screen, "view", None) is not None
                    and app.screen.view.phase == "finished", what="the replay to end")
        run = app.screen
        bar = run.query_one(NoticeBar)
        await until(pilot, lambda: bar.has_class("-shown") and "Run finished" in str(bar.content),
                    what="the notice line")
        assert not any(t.display for t in run.query(Toast))
        activity, body = run.query_one(ActivityLog), run.query_one("#run-body")
        await until(pilot, lambda: bar.region.height > 0, what="the notice line laid out")
        assert not bar.region.overlaps(activity.region) and not bar.region.overlaps(body.region)


@run_async
async def test_profile_of_an_incorrect_node_shows_its_worst_elements(config_for):
    app = KernelSkillApp(config_for(None), replay=DEMO_RUN, speed=64)
    async with app.run_test(size=(200, 50)) as pilot:
        await until(pilot, lambda: getattr(app.screen, "view", None) is not None
                    and app.screen.view.phase == "finished", what="the replay to end")
        run = app.screen
        tree = run.query_one(CandidateTree)
        tree.select_id("n1")
        await until(pilot, lambda: tree.current_id == "n1", what="n1 selected")
        run.query_one(NodeDetail).active = "tab-profile"
        profile = run.query_one("#profile", Static)
        await until(pilot, lambda: "3 of 3 trials failed" in str(profile.content), what="n1's mismatch report")
        text = str(profile.content)
        assert "3 of 3 trials failed" in text and "index" in text and "expected" in text
        assert re.search(r"\[\d+, \d+\]\s+1\.7\d+\s+1\.7\d+\s+0\.00172", text)       # index, got, expected, |diff|
        assert "trial 2 · seed 49, signed inputs · allclose" in text
        tree.select_id("n3")
        await until(pilot, lambda: "(contended)" in str(profile.content) or "(noisy)" in str(profile.content)
                    or "measurement good" in str(profile.content), what="n3's profile with its quality")
