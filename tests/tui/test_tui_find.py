"""Finding and comparing on the Run screen: / filters the tree, u hides duplicates, b jumps to the best
node, m marks a node to diff any other against, D diffs against another run's best."""
from __future__ import annotations

import shutil

from textual.widgets import Input, OptionList

from kernelskill.tui.app import KernelSkillApp
from kernelskill.tui.demo import DEMO_RUN
from kernelskill.tui.screens.overlays import RunPickerScreen
from kernelskill.tui.widgets.candidate_tree import CandidateTree
from kernelskill.tui.widgets.node_detail import NodeDetail

from conftest import STORED_RUN, labels, run_async, until


def ids(tree: CandidateTree) -> list[str]:
    return [line.split()[1] for line in labels(tree)]


@run_async
async def test_filter_collapse_jump_and_diff_any_two_nodes(config_for, tmp_path):
    runs = tmp_path / "runs"
    shutil.copytree(STORED_RUN, runs / STORED_RUN.name)
    app = KernelSkillApp(config_for(None, runs_dir=str(runs)), replay=DEMO_RUN, speed=64)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: getattr(app.screen, "view", None) is not None
                    and app.screen.view.phase == "finished", what="the replay to end")
        run = app.screen
        tree = run.query_one(CandidateTree)
        await until(pilot, lambda: ids(tree) == ["n0", "n1", "n2", "n3", "n4", "n5"], what="the whole tree")

        await pilot.press("slash")
        box = run.query_one("#tree-filter", Input)
        await until(pilot, lambda: box.has_focus, what="the tree's filter")
        await pilot.press(*"compile")
        await until(pilot, lambda: ids(tree) == ["n0", "n1", "n2", "n4"], what="n4 with its ancestors")
        assert "2 hidden" in str(run.query_one("#tree-pane").border_subtitle)
        await pilot.press("enter")                                  # back to the tree, the filter kept
        await until(pilot, lambda: tree.has_focus, what="the tree focused")
        await pilot.press("escape")                                 # clears the filter (does not leave)
        await until(pilot, lambda: len(ids(tree)) == 6 and not box.display, what="the filter cleared")
        assert app.screen is run

        await pilot.press("u")
        await until(pilot, lambda: "n5" not in ids(tree), what="the duplicate n5 hidden")
        assert "no duplicates · 1 hidden" in str(run.query_one("#tree-pane").border_subtitle)
        await pilot.press("u")
        await until(pilot, lambda: "n5" in ids(tree), what="n5 shown again")

        tree.select_id("n0")
        await until(pilot, lambda: tree.current_id == "n0", what="the root selected")
        await pilot.press("b")
        await until(pilot, lambda: tree.current_id == "n2", what="the jump to the best node")

        detail = run.query_one(NodeDetail)
        tree.select_id("n3")
        await until(pilot, lambda: tree.current_id == "n3", what="n3 selected")
        await pilot.press("m")                                      # n3 is the base from now on
        tree.select_id("n2")
        detail.active = "tab-diff"
        diff = run.query_one("#diff")
        await until(pilot, lambda: "--- n3.py" in str(diff.content) and "+++ n2.py" in str(diff.content),
                    what="n2 diffed against n3")
        assert "-#pragma omp parallel" not in str(diff.content) and "std::tanh" in str(diff.content)
        assert "vs n3" in str(detail.query_one("#detail-tabs").get_tab("tab-diff").label)
        tree.select_id("n3")
        await until(pilot, lambda: tree.current_id == "n3", what="n3 again")
        await pilot.press("m")                                      # unmark: parents again
        await until(pilot, lambda: "--- n2.py" in str(diff.content) and "+++ n3.py" in str(diff.content),
                    what="n3 against its parent n2")

        await pilot.press("D")                                      # another run's best
        await until(pilot, lambda: isinstance(app.screen, RunPickerScreen), what="the run picker")
        picker = app.screen.query_one(OptionList)
        assert [str(o.prompt) for o in picker._options] == [STORED_RUN.name]   # the demo itself is left out
        picker.focus()
        await pilot.press("enter")
        await until(pilot, lambda: app.screen is run, what="back on the run")
        await until(pilot, lambda: f"--- {STORED_RUN.name}/best.py" in str(diff.content),
                    what="n3 diffed against the other run's best")
        assert "ks_test_toolkit" in str(diff.content)               # the other run's code, removed
