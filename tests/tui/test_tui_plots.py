"""The Plots tab (textual-plotext): speedup per attempt with intervals and the best so far, a node's
timing against eager's, the roofline with the reference and the nodes on it, per-kernel times; one
chart at a time below 150 columns (v: next), all four at 200×50."""
from __future__ import annotations

import re

from textual.widgets import Label
from textual_plotext import PlotextPlot

from kernelskill.tui.app import KernelSkillApp
from kernelskill.tui.demo import DEMO_RUN
from kernelskill.tui.model import RunView
from kernelskill.tui.widgets.candidate_tree import CandidateTree
from kernelskill.tui.widgets.node_detail import NodeDetail
from kernelskill.tui.widgets.plots import PLOTS, RunPlots, attempts, kernel_bars, roofline_points, timing_rows

from helpers import eval_result
from conftest import STORED_RUN, demo_view, run_async, until


def test_what_the_charts_are_drawn_from():
    view = demo_view()
    rows = attempts(view)
    assert [(a.attempt, a.node_id, a.speedup is not None) for a in rows] == [
        (1, "n1", False), (2, "n2", True), (3, "n3", True), (4, "n4", False), (5, "n5", True)]
    n2 = rows[1]
    assert n2.low < n2.speedup < n2.high and n2.quality in ("good", "noisy", "contended")
    assert rows[4].speedup == n2.speedup                        # n5 repeats n2's code
    tree = view.tree
    timing = timing_rows(tree.get("n2"), view.root)
    assert [label for label, _ in timing] == ["eager beside n2", "n2"] and all(s.n >= 10 for _, s in timing)
    # The reference is eager itself: one row, never a ratio against itself.
    assert [label for label, _ in timing_rows(tree.get("n0"), view.root)] == ["eager = n0, the reference"]
    assert timing_rows(tree.get("n1"), view.root) == []         # incorrect: never timed
    assert [nid for nid, _ in roofline_points(view)] == ["n0", "n2", "n3"]      # the reference first
    bars = kernel_bars(tree.get("n2"))
    assert bars[0][0] == "demo_gelu_omp.gelu" and bars[0][2] and bars[0][1] >= bars[-1][1]


def plot_text(widget: PlotextPlot) -> str:
    return widget.render().plain


@run_async
async def test_plots_fit_80x24_one_at_a_time(config_for):
    app = KernelSkillApp(config_for(None), replay=DEMO_RUN, speed=64)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: getattr(app.screen, "view", None) is not None
                    and app.screen.view.phase == "finished", what="the replay to end")
        run = app.screen
        tree = run.query_one(CandidateTree)
        await until(pilot, lambda: tree.current_id == "n2", what="the best node selected")
        assert run.check_action("next_plot", ()) is False          # v applies on the Plots tab only
        run.query_one(NodeDetail).active = "tab-plots"
        plots = run.query_one(RunPlots)
        shown = lambda: [p.id for p in plots.query(PlotextPlot) if p.region.height > 0]  # noqa: E731
        await until(pilot, lambda: shown() == ["plot-speedup"], what="the speedup chart alone")
        speedup = plots.query_one("#plot-speedup", PlotextPlot)
        assert speedup.region.width >= 40 and speedup.region.height >= 6
        await until(pilot, lambda: "speedup vs eager, 95% CI" in plot_text(speedup), what="the chart drawn")
        assert "n1" in plot_text(speedup) and "n5" in plot_text(speedup)            # one tick per attempt
        assert plots.drawn["speedup"].startswith("5 attempts: 3 timed, 2 failed; best ")
        assert run.check_action("next_plot", ()) is True
        for name in PLOTS[1:] + PLOTS[:1]:
            await pilot.press("v")
            await until(pilot, lambda: shown() == [f"plot-{name}"], what=f"the {name} chart")
        assert "n2 13" not in plots.drawn["timing"] and plots.drawn["timing"].startswith("eager ")
        assert plots.drawn["roofline"].startswith("GB/s: n0 ") and "; roof " in plots.drawn["roofline"]
        tree.select_id("n1")                                          # a failed node: no timing, no kernels
        await until(pilot, lambda: plots.drawn["timing"] == "n1: not timed", what="n1's charts")
        assert plots.drawn["kernels"] == "none" and "n1 at attempt 1" in plots.drawn["speedup"]


@run_async
async def test_plots_grow_to_a_grid_at_200x50(config_for):
    app = KernelSkillApp(config_for(None), replay=DEMO_RUN, speed=64)
    async with app.run_test(size=(200, 50)) as pilot:
        await until(pilot, lambda: getattr(app.screen, "view", None) is not None
                    and app.screen.view.phase == "finished", what="the replay to end")
        run = app.screen
        run.query_one(NodeDetail).active = "tab-plots"
        plots = run.query_one(RunPlots)
        widgets = list(plots.query(PlotextPlot))
        await until(pilot, lambda: all(p.region.height >= 18 and p.region.width >= 40 for p in widgets),
                    what="four charts in a 2×2 grid")
        assert len({p.region.x for p in widgets}) == 2 and len({p.region.y for p in widgets}) == 2
        legend = plots.query_one("#speedup-legend", Label)
        await until(pilot, lambda: legend.region.height > 0 and "best so far" in str(legend.render()),
                    what="the legend, once there is room for it")
        assert "omp.gelu" in plot_text(plots.query_one("#plot-kernels"))          # ours, marked *
        assert "roof" in plot_text(plots.query_one("#plot-roofline"))


@run_async
async def test_roofline_is_log_log_where_flops_are_counted():
    """A compute task (FLOPs counted): the roof min(peak, bandwidth × intensity) on log axes, the reference
    and the node placed on it by their intensity and achieved TFLOP/s."""
    from textual.app import App

    from kernelskill.trajectory import Node

    def node(nid: str, parent: str | None, achieved: float, fraction: float) -> Node:
        roof = {"flops": 2 * 1024 ** 3, "bytes": 12 * 1024 ** 2, "intensity": 170.7, "ridge": 20.0,
                "peak_tflops": 60.0, "bandwidth_gbs": 3000.0, "achieved_gbs": 200.0, "achieved_tflops": achieved,
                "fraction": fraction, "roof": "compute", "floor_ms": 0.036}
        prof = {"candidate": {"median_ms": 0.1, "iqr_ms": 0.01, "n": 30, "min_ms": 0.09, "mean_ms": 0.1},
                "baseline": {"median_ms": 0.2, "iqr_ms": 0.01, "n": 30, "min_ms": 0.19, "mean_ms": 0.2},
                "speedup": 2.0, "speedup_ci": [1.9, 2.1], "roofline": roof, "kernels": []}
        return Node(id=nid, parent=parent, kind="root" if parent is None else "plan", code="", status="ok",
                    speedup=2.0 if parent else 1.0, result=eval_result(profile=prof))

    view = RunView()
    view.tree.add(node("n0", None, 11.0, 0.18))
    view.tree.add(node("n1", "n0", 22.0, 0.37))

    class Plots(App):
        def compose(self):
            yield RunPlots(id="plots")

    app = Plots()
    async with app.run_test(size=(100, 40)) as pilot:
        plots = app.query_one(RunPlots)
        plots.show(view, view.tree.get("n1"))
        await pilot.pause()
        assert plots.drawn["roofline"] == "log-log: n0 18%, n1 37%"
        text = plot_text(plots.query_one("#plot-roofline", PlotextPlot))
        assert "roofline 60 TFLOP/s, 3000 GB/s" in text and "FLOP/byte" in text


def y_axis(text: str) -> dict[str, int]:
    """The chart's y labels and the line each sits on (0: the chart's first line)."""
    out = {}
    for i, line in enumerate(text.splitlines()):
        m = re.match(r"\s*([^\s┤├]+)\s*[┤├]", line)
        if m:
            out[m.group(1)] = i
    return out


async def stored_plots(pilot, app) -> tuple[RunPlots, PlotextPlot]:
    """The stored run (n1 incorrect, n2 0.18×, n3 crashed, n4 = n2) on its Plots tab, n2 highlighted."""
    await until(pilot, lambda: getattr(app.screen, "view", None) is not None
                and app.screen.query_one(CandidateTree).current_id == "n2", what="the stored run, on n2")
    app.screen.query_one(NodeDetail).active = "tab-plots"
    plots = app.screen.query_one(RunPlots)
    speedup = plots.query_one("#plot-speedup", PlotextPlot)
    await until(pilot, lambda: speedup.region.height > 0 and "speedup vs eager" in plot_text(speedup)
                and "n4" in plot_text(speedup), what="the speedup chart drawn, every attempt on it")
    return plots, speedup


@run_async
async def test_speedup_axis_at_80x24_keeps_failed_zero_and_1x_apart(config_for):
    """Issue 46, item 5d: at 80×24 the 0 and 1× lines fell on one row labelled 0.67, so a failed attempt
    read as a 0.67× result. Failed attempts now have a row of their own, and every label names its row."""
    app = KernelSkillApp(config_for(None), open_run=STORED_RUN)
    async with app.run_test(size=(80, 24)) as pilot:
        plots, speedup = await stored_plots(pilot, app)
        text = plot_text(speedup)
        lines, labels_at = text.splitlines(), y_axis(text)
        failed, zero, one = labels_at["failed"], labels_at["0"], labels_at["1×"]
        assert failed > zero > one, labels_at                        # three rows, bottom to top
        assert failed == max(labels_at.values())                     # the lowest row of the chart
        plot_area = lambda i: re.split(r"[┤├]", lines[i], maxsplit=1)[1]  # noqa: E731 (right of the y axis)
        assert plot_area(failed).count("x") == 2 and "●" not in plot_area(failed)     # n1 and n3, nothing else
        assert plot_area(one).count("─") > 10                         # the 1× line is on the row labelled 1×
        n2 = [i for i, line in enumerate(lines) if "●" in line]
        assert n2 and all(one < i < failed for i in n2), (n2, labels_at)   # 0.18×: below 1×, above failed
        values = [(i, float(k.rstrip("×"))) for k, i in labels_at.items() if k != "failed"]
        assert [v for _, v in sorted(values, reverse=True)] == sorted(v for _, v in values)   # rising upwards
        assert plots.drawn["speedup"].startswith("4 attempts: 2 timed, 2 failed")


@run_async
async def test_speedup_legend_at_200x50_sits_outside_the_chart(config_for):
    """Issue 46, item 5e: at 200×50 the legend covered data; it is now a line under the chart."""
    app = KernelSkillApp(config_for(None), open_run=STORED_RUN)
    async with app.run_test(size=(200, 50)) as pilot:
        plots, speedup = await stored_plots(pilot, app)
        legend = plots.query_one("#speedup-legend", Label)
        await until(pilot, lambda: legend.region.height > 0, what="the legend shown")
        assert not legend.region.overlaps(speedup.region)
        assert legend.region.y >= speedup.region.bottom                # under the chart, the axes and labels
        shown = str(legend.render())
        for entry in ("speedup", "95% CI", "failed", "best so far", "this node", "1×"):
            assert entry in shown
        text = plot_text(speedup)
        assert "best so far" not in text and "this node" not in text     # nothing of it inside the chart
        labels_at = y_axis(text)
        assert text.splitlines()[labels_at["failed"]].count("x") == 2    # both failed attempts visible
