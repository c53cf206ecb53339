"""The Run screen's head: what runs where, eager's time (timed beside the reference) and the best
speedup, budget meters, the best-speedup plot."""
from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Label, Sparkline

from ..model import RunView, fmt_ms, fmt_seconds, fmt_speedup, fmt_tokens, fmt_usd, profile_of

PHASE_STYLE = {"starting": "yellow", "running": "green", "paused": "yellow", "stopping": "yellow",
               "finished": "cyan", "error": "red", "incomplete": "magenta", "replaying": "blue"}


def meter(label: str, value: float, limit: float | None, text: str, limit_text: str, width: int = 8) -> Text:
    """``label value/limit ━━━━──`` (no bar without a limit)."""
    out = Text(f"{label} ", style="dim")
    out.append(text, style="bold")
    if limit:
        out.append(f"/{limit_text}", style="dim")
    if limit and width:
        out.append(" ")
        filled = min(width, round(width * value / limit))
        out.append("━" * filled, style="red" if value >= limit else "green")
        out.append("─" * (width - filled), style="dim")
    return out


class RunSummary(Vertical):
    """Three lines: the run and its phase; baseline, best and the plot; the budget meters."""

    def compose(self) -> ComposeResult:
        with Horizontal(classes="summary-row"):
            yield Label(id="run-title")
            yield Label(id="run-state")
        with Horizontal(classes="summary-row"):
            yield Label(id="baseline")
            yield Label(id="best")
            yield Label("best/attempt ", id="plot-label")
            yield Sparkline([], id="plot")
        yield Label(id="meters")

    _view: RunView | None = None

    def on_resize(self) -> None:
        if self._view is not None:
            self.show(self._view)

    def show(self, view: RunView) -> None:
        self._view = view
        title = Text(view.task or "…", style="bold")
        title.append(f"  {view.backend or '?'} on {view.device or '?'}" + (f" · {view.policy}" if view.policy else ""),
                     style="dim")
        self.query_one("#run-title", Label).update(title)
        state = Text(view.phase, style=f"bold {PHASE_STYLE.get(view.phase, '')}")
        if view.progress:
            state.append(f" {view.progress}", style="bold")
        if view.current:
            state.append(f" · {view.current}", style="dim")
        self.query_one("#run-state", Label).update(state)

        # Eager as timed beside the reference (the root's evaluation). Every evaluation times eager again
        # beside its candidate: the Profile tab labels a node's own figure and sets this one beside it.
        root = view.root
        prof = profile_of(root)
        base = prof.baseline.median_ms if prof is not None and prof.baseline else None
        self.query_one("#baseline", Label).update(Text.assemble(
            ("eager ", "dim"), (fmt_ms(base), "bold"), (f" ({root.id})" if root is not None and base else "", "dim")))
        best = view.best
        text = Text("best ", style="dim")
        if best is None:
            text.append("-", style="bold")
        else:
            sp = best.speedup or 0.0
            text.append(fmt_speedup(best.speedup), style="bold green" if sp > 1.0 else "bold yellow")
            ci = best.speedup_ci
            if ci:
                text.append(f" [{ci[0]:.2f}–{ci[1]:.2f}]", style="dim")
            if best.quality not in ("good", None):
                text.append(f" ({best.quality})", style="bold yellow")
            text.append(f" {best.id}")
        self.query_one("#best", Label).update(text)
        # From 0 (no correct candidate yet), so a constant best draws as a level bar, not as a floor line
        # that reads as zero; one point would draw as a full bar: plotted from the second attempt on.
        self.query_one("#plot", Sparkline).data = [0.0, *view.curve] if len(view.curve) > 1 else []

        self.query_one("#meters", Label).update(self._meters(view))

    def _meters(self, view: RunView) -> Text:
        """The four budgets, with bars as wide as the line allows (none when it is tight)."""
        lim, secs = view.limits, view.elapsed()
        minutes = lim.get("minutes")
        room = self.content_size.width or 200
        for bar in (8, 4, 0):
            parts = [meter("attempts", view.attempts, lim.get("attempts"), str(view.attempts),
                           str(lim.get("attempts")), bar),
                     meter("tokens", view.tokens, lim.get("tokens"), fmt_tokens(view.tokens),
                           fmt_tokens(lim.get("tokens") or 0), bar),
                     meter("cost", view.usd, lim.get("usd"), fmt_usd(view.usd), fmt_usd(lim.get("usd") or 0), bar),
                     meter("time", secs, minutes * 60 if minutes else None, fmt_seconds(secs),
                           fmt_seconds(minutes * 60 if minutes else 0), bar)]
            line = Text("  ").join(parts)
            if len(line) <= room:
                break
        return line
