"""The Plots tab: four charts drawn by textual-plotext — the run's speedup per attempt with its intervals
and the best so far, the highlighted node's timing against the reference's, the roofline with the
reference and every timed node on it, and the node's kernel times.

Narrower than 150 columns one chart fills the tab (v shows the next); wider, all four in a 2×2 grid.
The data functions are plain (tests read them); ``RunPlots.show`` draws them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Container, Vertical
from textual.widgets import Label, Static

from kernelskill.evaluate.judge.roofline import fraction_text
from kernelskill.results import Roofline, TimingStats
from kernelskill.trajectory import Node

from ..model import RunView, profile_of

try:
    from textual_plotext import PlotextPlot
except ImportError:                     # the tui extra without textual-plotext: the tab says how to get it
    PlotextPlot = None

PLOTS = ("speedup", "timing", "roofline", "kernels")
TITLES = {"speedup": "speedup", "timing": "timing", "roofline": "roofline", "kernels": "kernels"}
LEGEND_ROWS = 14                  # a smaller chart has no room for a legend
FRAME_ROWS = 4                    # a chart's rows around its data: the title, two axes, the x tick labels


@dataclass
class Attempt:
    """One attempt on the speedup chart."""
    attempt: int
    node_id: str
    speedup: float | None          # None: failed (or not timed)
    low: float | None = None
    high: float | None = None
    quality: str | None = None


def attempts(view: RunView) -> list[Attempt]:
    """Every attempt in order (the root is the reference, not an attempt); duplicates carry the speedup
    of the node they repeat."""
    out = []
    for i, node in enumerate(n for n in view.tree if n.parent is not None):
        ci = node.speedup_ci
        ok = node.ok and node.speedup is not None
        out.append(Attempt(i + 1, node.id, node.speedup if ok else None, ci[0] if ok and len(ci) == 2 else None,
                           ci[1] if ok and len(ci) == 2 else None, node.quality))
    return out


def _nice_at_least(x: float) -> float:
    """The smallest of 1, 1.5, 2, 2.5, 3, 4, 5, 6, 8 times a power of ten that is at least ``x``."""
    scale = 10.0 ** math.floor(math.log10(x)) if x > 0 else 1.0
    for m in (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if m * scale >= x * (1 - 1e-9):
            return m * scale
    return 10 * scale


def _times(v: float) -> str:
    return "0" if v == 0 else f"{round(v, 6):g}×"


@dataclass
class SpeedupAxis:
    """The speedup chart's y axis in rows, so that every label sits on the row it names, whatever the
    chart's height: row 0 holds the failed attempts ("failed"), row 1 is 0×, and 1× is a row of its own.
    Where the rows allow, the scale is linear with ``per_unit`` rows per 1× (1× on row 1 + per_unit);
    where they do not (a speedup above rows - 2 on a short chart), 0× and 1× are rows 1 and 2 and each
    row above adds ``step``. ``y(v)`` is a speedup's row (plotext rounds it); ``ticks`` are (row, label)."""
    rows: int
    per_unit: int = 0                 # linear: rows per 1×; 0: the short layout
    step: float = 0.0                 # the short layout: the speedup one row adds above 1×
    ticks: list[tuple[int, str]] = None

    FAILED = 0

    def y(self, v: float) -> float:
        if self.per_unit:
            row = 1 + v * self.per_unit
        else:
            row = 1 + v if v <= 1 else 2 + (v - 1) / self.step
        return min(max(row, 1.0), self.rows - 1)

    def value(self, row: int) -> float:
        """The speedup a row stands for (row ≥ 1)."""
        if self.per_unit:
            return (row - 1) / self.per_unit
        return float(row - 1) if row <= 2 else 1 + (row - 2) * self.step


PER_UNIT = (1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 16, 20, 25, 30, 40, 50, 100)


def speedup_axis(top: float, rows: int) -> SpeedupAxis:
    """The axis for speedups up to ``top`` on a chart whose data area has ``rows`` rows. Below 4 rows
    only "failed" is labelled (0, 1× and a speedup above it cannot all have rows of their own), and on
    a single row nothing is."""
    if rows < 4:
        axis = SpeedupAxis(max(rows, 2), step=max(top - 1, 0.1))
        axis.ticks = [(SpeedupAxis.FAILED, "failed")] if rows >= 2 else []
        return axis
    fit = int((rows - 2) // top) if top > 0 else 0
    per_unit = max((n for n in PER_UNIT if n <= fit), default=0)     # rows per 1×: a count nice labels divide
    axis = SpeedupAxis(rows, per_unit=per_unit, step=0.0 if per_unit else
                       _nice_at_least((top - 1) / max(rows - 3, 1)))
    room = rows - 1 if rows <= 9 else min(9, (rows - 1) // 2)        # labels the rows above "failed" can take
    ticks = [(SpeedupAxis.FAILED, "failed")]
    if per_unit:
        top_value = axis.value(rows - 1)
        every = next(m for m in (0.1, 0.2, 0.25, 0.5, 1, 2, 2.5, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000,
                                 float("inf"))
                     if m == float("inf") or (abs(m * per_unit - round(m * per_unit)) < 1e-9
                                              and top_value / m + 1 <= room))
        marks = [0.0, 1.0] + ([every * k for k in range(1, int(top_value / every + 1e-9) + 1)]
                              if every != float("inf") else [])
        ticks += sorted({(round(axis.y(v)), _times(v)) for v in marks})
    else:
        every = max(1, math.ceil((rows - 3) / max(room - 2, 1)))
        ticks += [(r, _times(axis.value(r))) for r in range(1, rows)
                  if r <= 2 or (r - 2) % every == 0 or r == rows - 1]
    axis.ticks = ticks
    return axis


def timing_rows(node: Node, root: Node | None) -> list[tuple[str, TimingStats]]:
    """(label, stats) for eager and the node: median, IQR, min, mean and n as the evaluator reports them
    (the events hold these statistics, not the raw samples)."""
    prof = profile_of(node)
    rows = []
    if prof is None:
        return rows
    # The reference is eager: one row (its time as a candidate is the same code again, not a comparison).
    # A node's own eager is the one timed beside it, which may read apart from the reference's.
    if node.parent is None:
        return [(f"eager = {node.id}, the reference", prof.baseline)] if prof.baseline else []
    if prof.baseline:
        rows.append((f"eager beside {node.id}", prof.baseline))
    if prof.candidate:
        rows.append((node.id, prof.candidate))
    return rows


def roofline_points(view: RunView) -> list[tuple[str, Roofline]]:
    """(node id, roofline) of every timed node that has a roofline position, the reference first;
    duplicates are left out (their point is the node they repeat)."""
    return [(n.id, n.profile.roofline) for n in view.tree
            if not n.duplicate_of and n.profile is not None and n.profile.roofline is not None
            and n.profile.roofline.bytes is not None and n.profile.roofline.achieved_gbs is not None]


def kernel_bars(node: Node, limit: int = 8) -> list[tuple[str, float, bool]]:
    """(name, time in ms, custom) of the node's slowest kernels, slowest first."""
    prof = profile_of(node)
    ks = sorted(prof.kernels if prof is not None else [], key=lambda k: -float(k.time_ms or 0))
    return [(str(k.name), float(k.time_ms or 0), bool(k.custom)) for k in ks[:limit]]


def _short(name: str, room: int) -> str:
    return name if len(name) <= room else "…" + name[-(room - 1):]


def draw_speedup(plt, data_rows: int, rows: list[Attempt], best: list[tuple[int, float]], here: Attempt | None,
                 top: float, xlabel: bool) -> SpeedupAxis:
    """The speedup chart on a data area ``data_rows`` high: failed attempts as x on a row of their own
    ("failed"), each timed attempt's speedup (● with its interval, ~ when not good), the best so far, the
    1× line and the highlighted node's attempt; every y label on the row it names (``speedup_axis``)."""
    axis = speedup_axis(top, data_rows)
    plt.title("speedup vs eager, 95% CI")
    if xlabel:
        plt.xlabel("attempt")
    if rows:
        plt.xlim(0.5, len(rows) + 0.5)
        plt.xticks([a.attempt for a in rows], [a.node_id for a in rows])
    plt.ylim(0, axis.rows - 1)
    plt.yticks([row for row, _ in axis.ticks], [label for _, label in axis.ticks])
    plt.horizontal_line(axis.y(1.0), color="gray")
    if here is not None:
        plt.vertical_line(here.attempt, color="magenta")
    if best:                                     # the lines first: the points are drawn over them
        plt.plot([x for x, _ in best], [axis.y(b) for _, b in best], color="yellow")
    timed = [a for a in rows if a.speedup is not None]
    with_ci = [a for a in timed if a.low is not None]
    if with_ci:
        lows, highs = [axis.y(a.low) for a in with_ci], [axis.y(a.high) for a in with_ci]
        plt.error([a.attempt for a in with_ci], [(lo + hi) / 2 for lo, hi in zip(lows, highs, strict=True)],
                  yerr=[hi - lo for lo, hi in zip(lows, highs, strict=True)], color="cyan")
    if timed:
        plt.scatter([a.attempt for a in timed], [axis.y(a.speedup) for a in timed], marker="●", color="green")
        for a in timed:
            if a.quality not in ("good", None):
                plt.text("~", a.attempt + 0.25, axis.y(a.speedup), color="yellow")
    failed = [a for a in rows if a.speedup is None]
    if failed:
        plt.scatter([a.attempt for a in failed], [axis.FAILED] * len(failed), marker="x", color="red")
    return axis


LEGEND = ((("●", "green"), " speedup ", ("~", "bold yellow"), " not good"), (("│", "cyan"), " 95% CI"),
          (("x", "red"), " failed"), (("─", "yellow"), " best so far"), (("│", "magenta"), " this node"),
          (("─", "bright_black"), " 1×"))


def speedup_legend(width: int) -> Text:
    """The speedup chart's legend in lines of ``width``, no entry split across two."""
    out, line = Text(), 0
    for entry in LEGEND:
        item = Text.assemble(*entry)
        if line and line + 2 + item.cell_len > width:
            out.append("\n")
            line = 0
        elif line:
            out.append("  ")
            line += 2
        out.append_text(item)
        line += item.cell_len
    return out

if PlotextPlot is not None:
    class SpeedupPlot(PlotextPlot):
        """The speedup chart, drawn by ``draw(plt, data_rows)`` each time it renders, so that its axis
        always fits the height it has (the rows decide where each label goes)."""

        draw = None

        def render(self):
            if self.draw is not None:
                self.plt.clear_figure()
                self.axis = self.draw(self.plt, self.size.height)
            return super().render()


class RunPlots(Vertical):
    """The four charts; ``show(view, node)`` draws them for the run and its highlighted node."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.current = "speedup"
        self.drawn: dict[str, str] = {}          # plot → what it shows (one line, for people and tests)
        self._args: tuple[RunView, Node] | None = None
        try:
            import textual_plotext
            del textual_plotext                  # only whether it imports matters here
            self.available = True
        except ImportError:
            self.available = False

    def compose(self) -> ComposeResult:
        yield Label("", id="plots-head")
        if not self.available:
            yield Static("The plots need textual-plotext: pip install 'kernelskill[tui]'.", id="plots-missing")
            return
        with Container(id="plots-grid"):
            for name in PLOTS:
                shown = " -shown" if name == self.current else ""
                if name == "speedup":            # its legend on a line of its own, under the chart: never over data
                    with Vertical(id="speedup-cell", classes="plot" + shown):
                        yield SpeedupPlot(id="plot-speedup")
                        yield Label("", id="speedup-legend")
                else:
                    yield PlotextPlot(id=f"plot-{name}", classes="plot" + shown)

    def on_mount(self) -> None:
        self._head()

    def next_plot(self) -> None:
        """The next chart (where one chart fills the tab)."""
        self.current = PLOTS[(PLOTS.index(self.current) + 1) % len(PLOTS)]
        for name in PLOTS:
            self.query(f"#plot-{name}.plot, #{name}-cell").set_class(name == self.current, "-shown")
        self._head()

    def _head(self) -> None:
        head = Text()
        for i, name in enumerate(PLOTS):
            head.append(f" {i + 1} {TITLES[name]} ", style="reverse bold" if name == self.current else "dim")
        self.query_one("#plots-head", Label).update(head)

    def show(self, view: RunView, node: Node) -> None:
        self._args = (view, node)
        if not self.available:
            return
        self._speedup(view, node)
        self._timing(view, node)
        self._roofline(view, node)
        self._kernels(node)

    def on_resize(self) -> None:
        """Draw again at the new size (legends and kernel names depend on it; a hidden tab has none)."""
        if self._args is not None:
            self.show(*self._args)

    def _plot(self, name: str):
        widget = self.query_one(f"#plot-{name}")
        plt = widget.plt
        plt.clear_figure()
        return widget, plt

    # ---- the charts -----------------------------------------------------------------------------
    def _speedup(self, view: RunView, node: Node) -> None:
        widget = self.query_one("#plot-speedup", SpeedupPlot)
        rows = attempts(view)
        timed = [a for a in rows if a.speedup is not None]
        best = [(i + 1, b) for i, b in enumerate(view.curve) if b]
        here = next((a for a in rows if a.node_id == node.id), None)
        # The axis reaches a little above the fastest point; an interval far above it (a contended timing)
        # runs off the top rather than squeezing every point into the bottom rows.
        top = max([min(a.high or a.speedup, 1.5 * a.speedup) for a in timed] + [1.2]) * 1.05
        cell = self.query_one("#speedup-cell")
        roomy = cell.size.height >= LEGEND_ROWS
        legend = self.query_one("#speedup-legend", Label)
        legend.display = roomy
        legend.update(speedup_legend(max(cell.size.width - 2, 20)))
        widget.draw = lambda plt, height: draw_speedup(plt, height - FRAME_ROWS - roomy, rows, best, here, top, roomy)
        widget.refresh()
        best_text = f"best {max(b for _, b in best):.2f}×" if best else "no correct candidate yet"
        self.drawn["speedup"] = (f"{len(rows)} attempts: {len(timed)} timed, {len(rows) - len(timed)} failed; "
                                 f"{best_text}" + (f"; {node.id} at attempt {here.attempt}" if here else ""))

    def _timing(self, view: RunView, node: Node) -> None:
        widget, plt = self._plot("timing")
        rows = timing_rows(node, view.root)
        plt.title(f"{node.id}: ms, median±IQR/2 ◀min ◆mean")
        if rows:
            ys = list(range(1, len(rows) + 1))
            stats = [s for _, s in rows]
            plt.yticks(ys, [f"{label} n={s.n}" for label, s in rows])
            plt.ylim(0.5, len(rows) + 0.5)
            plt.error([s.median_ms for s in stats], ys, xerr=[s.iqr_ms or 0 for s in stats], color="cyan")
            plt.scatter([s.min_ms or s.median_ms for s in stats], ys, marker="◀", color="green")
            plt.scatter([s.mean_ms or s.median_ms for s in stats], ys, marker="◆", color="yellow")
            low = min(s.min_ms or s.median_ms for s in stats)
            high = max(max(s.median_ms + (s.iqr_ms or 0) / 2, s.mean_ms or 0) for s in stats)
            plt.xlim(low * 0.9, high * 1.1 if high > low else low * 1.1 + 1e-6)
            self.drawn["timing"] = " vs ".join(f"{label} {s.median_ms:.4g} ms" for label, s in rows)
        else:
            plt.title(f"{node.id}: not timed (failed first)")
            plt.xlim(-1, 1)
            plt.ylim(-1, 1)
            self.drawn["timing"] = f"{node.id}: not timed"
        widget.refresh()

    def _roofline(self, view: RunView, node: Node) -> None:
        widget, plt = self._plot("roofline")
        points = roofline_points(view)
        if not points:
            plt.title("roofline: not measured for this run")
            plt.xlim(-1, 1)
            plt.ylim(-1, 1)
            self.drawn["roofline"] = "not measured"
            widget.refresh()
            return
        roof = points[-1][1]
        bw, peak = float(roof.bandwidth_gbs or 0), float(roof.peak_tflops or 0)
        if all((r.flops or 0) > 0 for _, r in points) and bw and peak:
            # The classic picture: attainable TFLOP/s = min(peak, bandwidth × intensity), log-log.
            xs = [float(r.intensity) for _, r in points]
            lo, hi = min(xs + [peak * 1e3 / bw]) / 10, max(xs + [peak * 1e3 / bw]) * 10
            grid = [lo * (hi / lo) ** (i / 40) for i in range(41)]
            plt.xscale("log")
            plt.yscale("log")
            plt.plot(grid, [min(peak, bw * x / 1e3) for x in grid], color="gray")
            for nid, r in points:
                plt.scatter([float(r.intensity)], [max(float(r.achieved_tflops or 0), 1e-9)],
                            marker="●" if nid != node.id else "◉", color="magenta" if nid == node.id else "green")
                plt.text(nid, float(r.intensity), max(float(r.achieved_tflops or 0), 1e-9), color="white")
            plt.title(f"roofline {peak:g} TFLOP/s, {bw:g} GB/s")
            plt.xlabel("FLOP/byte")
            self.drawn["roofline"] = "log-log: " + ", ".join(f"{nid} {fraction_text(r, what='')}" for nid, r in points)
        else:
            # No FLOPs counted (data movement only): where each node sits against the memory roof.
            names = [nid for nid, _ in points]
            gbs = [float(r.achieved_gbs or 0) for _, r in points]
            # A bar past the roof is never silent: the evaluator's reason in the title and in ``drawn``
            # (a stored run from before the evaluator gave one says so).
            over = [float(r.fraction or 0) > 1.0 for _, r in points]
            plt.bar(names, gbs, orientation="horizontal", color="green", width=0.4)
            if bw:
                plt.vertical_line(bw, color="red")
                plt.xlim(0, max(gbs + [bw]) * 1.1)
            past = [f"{nid} past it: {r.over_roof_reason or 'no reason recorded, do not trust it'}"
                    for (nid, r), o in zip(points, over, strict=True) if o]
            plt.title(f"GB/s vs the {bw:g} GB/s roof │" + "".join(f"; {p}" for p in past))
            pairs = ", ".join(f"{n} {g:.3g}" + (f" ({fraction_text(r, what='of its pace')})" if o else "")
                              for n, g, (_, r), o in zip(names, gbs, points, over, strict=True))
            self.drawn["roofline"] = f"GB/s: {pairs}; roof {bw:g}"
        widget.refresh()

    def _kernels(self, node: Node) -> None:
        widget, plt = self._plot("kernels")
        bars = kernel_bars(node)
        if bars:
            room = max(12, widget.size.width // 3)
            names = [("* " if custom else "") + _short(name, room) for name, _, custom in bars]
            plt.bar(list(reversed(names)), [t for _, t, _ in reversed(bars)], orientation="horizontal",
                    color="green", width=0.4)
            plt.title(f"{node.id}: ms per kernel (* ours)")
            plt.xlim(0, max(t for _, t, _ in bars) * 1.1 or 1)
            self.drawn["kernels"] = ", ".join(f"{n} {t:.3g} ms" for n, t, _ in bars)
        else:
            plt.title(f"{node.id}: no kernels profiled")
            plt.xlim(-1, 1)
            plt.ylim(-1, 1)
            self.drawn["kernels"] = "none"
        widget.refresh()

