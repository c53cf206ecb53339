"""The newest notification on a line of its own above the footer: toasts would cover the panes' text."""
from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

SEVERITY = {"information": ("●", "green"), "warning": ("▲", "yellow"), "error": ("✗", "red")}


class NoticeBar(Static):
    """Hidden while there is no notification; else the newest (title: message) and how many more."""

    def show(self, notifications: list) -> None:
        if not notifications:
            self.remove_class("-shown")
            return
        n = notifications[-1]
        mark, style = SEVERITY.get(n.severity, ("●", ""))
        text = Text(f"{mark} ", style=f"bold {style}")
        message = " ".join(str(n.message).split())
        if n.title and not message.startswith(n.title):
            text.append(f"{n.title}: ", style=f"bold {style}")
        text.append(message)
        if len(notifications) > 1:
            text.append(f"  (+{len(notifications) - 1} more)", style="dim")
        self.update(text)
        self.add_class("-shown")
