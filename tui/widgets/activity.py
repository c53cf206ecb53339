"""The agents' activity: each role's streamed text (AgentDelta), line by line, under a heading per call."""
from __future__ import annotations

from collections import deque

from rich.text import Text
from textual.widgets import RichLog

ROLE_STYLE = {"planner": "bold cyan", "coder": "bold green", "debugger": "bold yellow"}
MAX_LINES = 3000


class ActivityLog(RichLog):
    """A log fed by agent events; streamed text is buffered until a line is complete, and every line is
    kept so the log wraps again when its width changes."""

    def __init__(self, **kw) -> None:
        super().__init__(wrap=True, markup=False, highlight=False, max_lines=MAX_LINES, min_width=20, **kw)
        self._partial = ""
        self._streamed = False
        self._entries: deque[Text] = deque(maxlen=MAX_LINES)
        self._width = 0

    def started(self, role: str, node_id: str, attempt: int) -> None:
        self._flush()
        self._streamed = False
        self._add(Text.assemble((f"── {role}", ROLE_STYLE.get(role, "bold")),
                                (f" · attempt {attempt} · from {node_id} ──", "dim")))

    def delta(self, role: str, text: str) -> None:
        self._streamed = True
        lines = (self._partial + text).split("\n")
        self._partial = lines.pop()
        for line in lines:
            self._add(Text(line))

    def finished(self, role: str, ok: bool, text: str, error: str = "") -> None:
        """End of one call; a stored run (no deltas) shows the reply here."""
        if self._streamed:
            self._flush()
        elif text:
            for line in text.rstrip("\n").split("\n"):
                self._add(Text(line))
        if not ok:
            self._add(Text(f"✗ {role} output unusable: {error}", style="red"))
        self._streamed = False

    def note(self, text: str, style: str = "") -> None:
        """A line of the loop's own (selection, evaluation, budget)."""
        self._flush()
        self._add(Text(text, style=style))

    @property
    def plain(self) -> str:
        """Everything logged, as plain text (a line still streaming included)."""
        return "\n".join(t.plain for t in self._entries) + ("\n" + self._partial if self._partial else "")

    def _flush(self) -> None:
        if self._partial:
            self._add(Text(self._partial))
            self._partial = ""

    def _add(self, text: Text) -> None:
        self._entries.append(text)
        self.write(text)

    def on_resize(self) -> None:
        width = self.scrollable_content_region.width
        if width != self._width and self._entries:
            self._width = width
            self.clear()
            for text in self._entries:
                self.write(text)
        self._width = width
