"""History: the runs in the run store; enter opens one read-only on the Run screen."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Label

from kernelskill.errors import UserError
from kernelskill.runs import RunState, load_run

from ..widgets.notices import NoticeBar
from .overlays import TooSmall, size_breakpoints
from ..model import fmt_speedup, fmt_tokens, fmt_usd

STATE_STYLE = {"error": "red", "incomplete": "magenta", "stopped": "yellow"}


@dataclass
class RunRow:
    """One stored run, or why it cannot be read."""
    path: Path
    state: RunState | None = None
    problem: str = ""

    @property
    def status(self) -> str:
        if self.state is None:
            return "unreadable"
        return self.state.finished.reason if self.state.finished else ("error" if self.state.errors else "incomplete")


def read_runs(runs_dir: Path) -> list[RunRow]:
    """Every run directory under ``runs_dir``, newest first; a corrupt one is listed with its problem."""
    if not runs_dir.is_dir():
        return []
    rows = []
    for d in sorted(runs_dir.iterdir(), reverse=True):
        if not (d / "run.toml").is_file():
            continue
        try:
            rows.append(RunRow(d, load_run(d)))
        except (UserError, OSError, ValueError) as e:
            rows.append(RunRow(d, problem=str(e)))
    return rows


class HistoryScreen(Screen):
    """A table of stored runs (loaded in a worker)."""

    HORIZONTAL_BREAKPOINTS, VERTICAL_BREAKPOINTS = size_breakpoints()
    BINDINGS = [Binding("o", "open", "Open"), Binding("g", "reload", "Reload"),
                Binding("n", "new", "New run"), Binding("escape", "back", "Back")]

    @dataclass
    class Loaded(Message):
        rows: list[RunRow]

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, RunRow] = {}

    def compose(self) -> ComposeResult:
        yield Header()
        yield Label("", id="history-title")
        yield DataTable(id="runs", cursor_type="row", zebra_stripes=True)
        yield Label("", id="history-detail")
        yield NoticeBar(id="notice")
        yield TooSmall()
        yield Footer(show_command_palette=False, compact=True)

    def on_mount(self) -> None:
        self.sub_title = "history"
        table = self.query_one("#runs", DataTable)
        table.add_columns("started", "task", "state", "tries", "best", "tokens", "cost")
        table.focus()

    def on_screen_resume(self) -> None:
        self.action_reload()                     # a run may have been stored since

    @property
    def runs_dir(self) -> Path:
        return Path(self.app.config.data["runs_dir"])

    def action_reload(self) -> None:
        self.query_one("#history-title", Label).update(f"Loading runs from {self.runs_dir}/ …")
        self._load()

    @work(thread=True, exclusive=True, group="history")
    def _load(self) -> None:
        self.post_message(self.Loaded(read_runs(self.runs_dir)))

    def on_history_screen_loaded(self, message: Loaded) -> None:
        table = self.query_one("#runs", DataTable)
        keep = table.cursor_row
        table.clear()
        self.rows = {str(r.path): r for r in message.rows}
        for r in message.rows:
            table.add_row(*self._cells(r), key=str(r.path))
        if message.rows:
            table.move_cursor(row=min(keep, len(message.rows) - 1))
        n = len(message.rows)
        self.query_one("#history-title", Label).update(
            f"{n} run{'s' if n != 1 else ''} in {self.runs_dir}/ — enter or o opens one" if n
            else f"No runs in {self.runs_dir}/ yet — n starts one")

    @staticmethod
    def _cells(r: RunRow) -> tuple:
        style = STATE_STYLE.get(r.status, "green" if r.status != "unreadable" else "red")
        if r.state is None:
            return r.path.name[:16], "?", Text(r.status, style=style), "", "", "", ""
        s = r.state
        run = s.info.get("run", {})
        best = s.tree.best() if len(s.tree) else None
        sp = Text(fmt_speedup(best.speedup) + ("~" if best.quality not in ("good", None) else "") if best else "-",
                  style=("green" if best and (best.speedup or 0) > 1 else "yellow") if best else "dim")
        started = str(run.get("created", "?")).replace("T", " ")[:16]
        return (started, run.get("task_name", "?"), Text(r.status, style=style), str(s.attempts), sp,
                fmt_tokens(s.tokens), fmt_usd(s.usd))

    @on(DataTable.RowHighlighted, "#runs")
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """The highlighted run's id (what ``kernelskill resume`` takes) and its error or problem, if any."""
        row = self.rows.get(event.row_key.value or "")
        if row is None:
            return
        text = Text(row.path.name, style="bold")
        if row.state is None:
            text.append(f"  {row.problem}", style="red")
        elif row.state.errors:
            text.append(f"  error: {row.state.errors[-1]}", style="red")
        self.query_one("#history-detail", Label).update(text)

    def action_open(self) -> None:
        table = self.query_one("#runs", DataTable)
        if not table.row_count:
            return
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        self._open(key)

    @on(DataTable.RowSelected, "#runs")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self._open(event.row_key.value)

    def _open(self, key: str | None) -> None:
        from .run import RunScreen
        row = self.rows.get(key or "")
        if row is None:
            return
        if row.state is None:
            self.notify(row.problem, title="Cannot open this run", severity="error", timeout=10)
            return
        self.app.push_screen(RunScreen.stored(row.state))

    def action_new(self) -> None:
        from .home import HomeScreen
        from .run import RunScreen
        if any(isinstance(s, RunScreen) and s.view.active for s in self.app.screen_stack):
            self.notify("A run is in progress: go back to it (esc) and stop it (s) first.", severity="warning")
            return
        for screen in self.app.screen_stack:
            if isinstance(screen, HomeScreen):
                while self.app.screen is not screen:
                    self.app.pop_screen()
                return
        self.app.push_screen(HomeScreen())

    def action_back(self) -> None:
        self.dismiss()
