"""History: the runs in the run store; enter opens one read-only on the Run screen."""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult, SuspendNotSupported
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Input, Label, Static

from kernelskill.errors import UserError
from kernelskill.runs import RunState, load_run

from ..model import fmt_speedup, fmt_tokens, fmt_usd
from ..widgets.notices import NoticeBar
from .kernel_actions import KernelWork
from .overlays import ConfirmScreen, KeepsFocus, TooSmall, size_breakpoints

STATE_STYLE = {"error": "red", "incomplete": "magenta", "stopped": "yellow"}


@dataclass
class RunRow:
    """One stored run, or why it cannot be read."""
    path: Path
    state: RunState | None = None
    problem: str = ""

    @property
    def best(self):
        return self.state.tree.best() if self.state is not None and len(self.state.tree) else None

    def sort_value(self, column: str):
        """This row's value in ``column``, for sorting (unreadable runs sort as the least)."""
        s = self.state
        if s is None:
            return (0, "") if column in ("started", "task", "state") else (0, 0)
        run = s.info.get("run", {})
        value = {"started": str(run.get("created", "")), "task": str(run.get("task_name", "")), "state": self.status,
                 "tries": s.attempts, "best": (self.best.speedup or 0.0) if self.best else -1.0,
                 "tokens": s.tokens, "cost": s.usd}[column]
        return (1, value)

    def matches(self, text: str) -> bool:
        """Whether the run's id, task, state or best node contain ``text`` (any case)."""
        if not text:
            return True
        run = self.state.info.get("run", {}) if self.state is not None else {}
        hay = " ".join([self.path.name, str(run.get("task_name", "")), self.status, self.best.id if self.best else ""])
        return text.lower() in hay.lower()

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


COLUMNS = ("started", "task", "state", "tries", "best", "tokens", "cost")


class HistoryScreen(KernelWork, KeepsFocus, Screen):
    """A table of stored runs (loaded in a worker): open, replay, resume, export, edit, copy, delete;
    filter with /, sort with s (or a click on a column's header)."""

    FOCUS_HOME = "#runs"

    HORIZONTAL_BREAKPOINTS, VERTICAL_BREAKPOINTS = size_breakpoints()
    BINDINGS = [Binding("o", "open", "Open"), Binding("p", "replay", "Replay"), Binding("r", "resume", "Resume"),
                Binding("x", "export", "Export"), Binding("e", "edit", "Open in $EDITOR", show=False),
                # On the highlighted run's best node, in a worker; the panel under the table shows them.
                Binding("G", "generalize", "Generalize: its best node at other shapes", show=False),
                Binding("X", "export_package", "Export its best node as a package", show=False),
                # The footer fits 80 columns: delete and sort (and the rest) are in ? and the palette.
                Binding("c", "copy_path", "Copy path", show=False), Binding("d", "delete", "Delete", show=False),
                Binding("slash", "filter", "Filter", key_display="/"), Binding("s", "sort", "Sort", show=False),
                Binding("S", "sort_reverse", "Reverse", show=False),
                Binding("g", "reload", "Reload", show=False), Binding("n", "new", "New run"),
                Binding("escape", "back", "Back")]
    HELP_KEYS = (("enter", "open the highlighted run (read-only)"), ("↑↓ pgup pgdn", "move in the table"),
                 ("click a header", "sort by that column (again: reverse)"),
                 ("esc in the filter", "clear it"), ("esc", "hide the generalize / export panel once it is done"))

    @dataclass
    class Loaded(Message):
        rows: list[RunRow]

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, RunRow] = {}
        self.all_rows: list[RunRow] = []
        self.sort_column, self.sort_reverse = "started", True
        self.filter_text = ""

    def compose(self) -> ComposeResult:
        yield Header()
        yield Label("", id="history-title")
        yield Input(placeholder="filter: part of an id, task, state or best node · esc clears", id="history-filter",
                    compact=True)
        yield DataTable(id="runs", cursor_type="row", zebra_stripes=True)
        yield Static("", id="kernel-work")
        yield Label("", id="history-detail")
        yield NoticeBar(id="notice")
        yield TooSmall()
        yield Footer(show_command_palette=False, compact=True)

    def on_mount(self) -> None:
        self.sub_title = "history"
        table = self.query_one("#runs", DataTable)
        for name in COLUMNS:
            table.add_column(name, key=name)
        self.query_one("#history-filter", Input).display = False
        self.query_one("#history-filter", Input).can_focus = False      # hidden: never the focus Textual falls back to
        self.query_one("#kernel-work", Static).display = False
        table.focus()

    def on_screen_resume(self) -> None:
        self.action_reload()                     # a run may have been stored since

    @property
    def runs_dir(self) -> Path:
        return Path(self.app.config.runs_dir)

    def action_reload(self) -> None:
        self.query_one("#history-title", Label).update(f"Loading runs from {self.runs_dir}/ …")
        self._load()

    @work(thread=True, exclusive=True, group="history")
    def _load(self) -> None:
        self.post_message(self.Loaded(read_runs(self.runs_dir)))

    def on_history_screen_loaded(self, message: Loaded) -> None:
        self.all_rows = message.rows
        self._fill()

    # ---- the table: filtered, sorted ------------------------------------------------------------
    def shown(self) -> list[RunRow]:
        """The runs that pass the filter, in the chosen order."""
        rows = [r for r in self.all_rows if r.matches(self.filter_text)]
        return sorted(rows, key=lambda r: r.sort_value(self.sort_column), reverse=self.sort_reverse)

    def _fill(self) -> None:
        table = self.query_one("#runs", DataTable)
        keep = self.current_key()
        table.clear()
        rows = self.shown()
        self.rows = {str(r.path): r for r in self.all_rows}
        for r in rows:
            table.add_row(*self._cells(r), key=str(r.path))
        keys = [str(r.path) for r in rows]
        if rows:
            table.move_cursor(row=keys.index(keep) if keep in keys else 0)
        for name in COLUMNS:
            arrow = (" ↓" if self.sort_reverse else " ↑") if name == self.sort_column else ""
            table.columns[name].label = Text(name + arrow, style="bold" if arrow else "")
        n, total = len(rows), len(self.all_rows)
        if not total:
            title = f"No runs in {self.runs_dir}/ yet — n starts one, ctrl+p → Demo replays the shipped one"
        elif self.filter_text:
            title = f"{n} of {total} runs match “{self.filter_text}” — esc in the filter clears it"
        else:
            title = f"{total} run{'s' if total != 1 else ''} in {self.runs_dir}/ — enter opens, ? lists the keys"
        self.query_one("#history-title", Label).update(title)
        if not rows:
            self.query_one("#history-detail", Label).update("")
        table.refresh()

    def current_key(self) -> str | None:
        table = self.query_one("#runs", DataTable)
        if not table.row_count:
            return None
        return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value

    def current(self) -> RunRow | None:
        return self.rows.get(self.current_key() or "")

    def action_filter(self) -> None:
        box = self.query_one("#history-filter", Input)
        box.display = box.can_focus = True
        box.focus()

    @on(Input.Changed, "#history-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value.strip()
        self._fill()

    @on(Input.Submitted, "#history-filter")
    def _filter_done(self) -> None:
        self.query_one("#runs", DataTable).focus()


    def action_sort(self) -> None:
        """The next column (the first press sorts by best, fastest first)."""
        i = COLUMNS.index(self.sort_column)
        self.sort_column = COLUMNS[(i + 1) % len(COLUMNS)] if self.sort_column != "started" else "best"
        self.sort_reverse = self.sort_column in ("started", "tries", "best", "tokens", "cost")
        self._fill()

    def action_sort_reverse(self) -> None:
        self.sort_reverse = not self.sort_reverse
        self._fill()

    @on(DataTable.HeaderSelected, "#runs")
    def _header_clicked(self, event: DataTable.HeaderSelected) -> None:
        column = str(event.column_key.value)
        if column == self.sort_column:
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_column, self.sort_reverse = column, column in ("started", "tries", "best", "tokens", "cost")
        self._fill()

    @staticmethod
    def _cells(r: RunRow) -> tuple:
        style = STATE_STYLE.get(r.status, "green" if r.status != "unreadable" else "red")
        if r.state is None:
            return r.path.name[:16], "?", Text(r.status, style=style), "", "", "", ""
        s = r.state
        run = s.info.get("run", {})
        best = r.best
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

    # ---- acting on the highlighted run ---------------------------------------------------------
    def _readable(self) -> RunRow | None:
        """The highlighted run, or None (with a notification) when there is none or it cannot be read."""
        row = self.current()
        if row is None:
            self.notify("No run is highlighted.", severity="warning")
            return None
        if row.state is None:
            self.notify(row.problem, title="Cannot read this run", severity="error", timeout=10)
            return None
        return row

    def _live(self, row: RunRow) -> bool:
        return any(Path(s.optimizer.path).resolve() == row.path.resolve() for s in self.app.live_runs())

    def kernel_target(self):
        """G / X act on the highlighted run's best node."""
        row = self._readable()
        return None if row is None else (row.state, None)

    def action_open(self) -> None:
        self._open(self.current_key())

    @on(DataTable.RowSelected, "#runs")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self._open(event.row_key.value)

    def _open(self, key: str | None) -> None:
        row = self.rows.get(key or "")
        if row is None:
            return
        if row.state is None:
            self.notify(row.problem, title="Cannot open this run", severity="error", timeout=10)
            return
        self.app.open_run("stored", row.state)

    def action_replay(self) -> None:
        if (row := self._readable()) is not None:
            self.app.open_run("replayed", load_run(row.path))

    def action_resume(self) -> None:
        """Continue the run live, as ``kernelskill resume`` (endpoint, models and budgets from the TUI's settings)."""
        row = self._readable()
        if row is None:
            return
        if self._live(row) or self.app.active_runs():
            self.notify("A run is working: go back to it (esc) and stop it (s) first.", severity="warning")
            return
        self.app.open_run("resumed", load_run(row.path))

    def action_export(self) -> None:
        """Export best.py: copy the run's best.py into the working directory (never over an existing file)."""
        row = self._readable()
        if row is None:
            return
        best = row.path / "best.py"
        if not best.is_file():
            self.notify(f"{row.path.name} has no best.py: no candidate was correct.", severity="warning")
            return
        task = row.state.info.get("run", {}).get("task_name", "task")
        dest = Path.cwd() / f"{task}_best.py"
        k = 2
        while dest.exists():
            dest, k = Path.cwd() / f"{task}_best_{k}.py", k + 1
        shutil.copyfile(best, dest)
        self.notify(f"{row.state.tree.best().id if row.best else 'best'} of {row.path.name} → {dest}",
                    title="Exported best.py", timeout=8)

    def action_edit(self) -> None:
        """Open the run's best.py (else its report) in $VISUAL / $EDITOR; the TUI waits for it."""
        row = self.current()
        if row is None:
            return
        editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
        if not editor:
            self.notify("Set $EDITOR (or $VISUAL) to the editor to use, e.g. EDITOR=vim.", title="No editor",
                        severity="warning", timeout=8)
            return
        path = next((p for p in (row.path / "best.py", row.path / "report.md", row.path / "run.toml") if p.is_file()),
                    row.path)
        command = [*shlex.split(editor), str(path)]
        try:
            with self.app.suspend():
                code = subprocess.call(command)
        except SuspendNotSupported:           # no terminal to hand over (headless, web): a GUI editor still works
            code = subprocess.call(command, stdin=subprocess.DEVNULL)
        except OSError as e:
            self.notify(f"{editor}: {e}", title="The editor did not start", severity="error", timeout=10)
            return
        if code:
            self.notify(f"{editor} exited with {code} on {path}", severity="warning")

    def action_copy_path(self) -> None:
        """Put the run directory's path on the clipboard (OSC 52, where the terminal supports it)."""
        row = self.current()
        if row is None:
            return
        path = str(row.path.resolve())
        self.app.copy_to_clipboard(path)
        self.notify(f"{path} (terminals with OSC 52 put it on the clipboard)", title="Copied", timeout=6)

    def action_delete(self) -> None:
        """Delete the run's directory, after a yes."""
        row = self.current()
        if row is None:
            return
        if self._live(row):
            self.notify("This run is working: stop it first.", severity="warning")
            return
        if row.path.resolve().is_relative_to(Path(__file__).resolve().parents[1]):
            self.notify("The shipped demo run cannot be deleted.", severity="warning")
            return
        what = f"{row.state.attempts} attempts" if row.state is not None else row.problem or "unreadable"

        def answered(yes: bool | None) -> None:
            if not yes:
                return
            shutil.rmtree(row.path)
            self.notify(f"Deleted {row.path}", title="Run deleted", timeout=6)
            self.action_reload()
        self.app.push_screen(ConfirmScreen(f"Delete run {row.path.name} ({what})?\nIts directory {row.path} goes, "
                                           "with its events, nodes and best.py. This cannot be undone.",
                                           yes="Delete"), answered)

    def action_new(self) -> None:
        if self.app.active_runs():
            self.notify("A run is in progress: go back to it (esc) and stop it (s) first.", severity="warning")
            return
        self.app.go_home()

    def action_back(self) -> None:
        """esc: clear and hide the filter when it is open, else back."""
        box = self.query_one("#history-filter", Input)
        if box.display:
            box.value, box.display, box.can_focus = "", False, False
            self.filter_text = ""
            self._fill()
            self.query_one("#runs", DataTable).focus()
            return
        if self.kernel_panel_close():
            return
        self.dismiss()
