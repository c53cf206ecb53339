"""Overlays on any screen: the keys of the screen below (? or F1), a yes/no question, and the message
shown instead of the panes when the terminal is too small for them."""
from __future__ import annotations

import textwrap
from pathlib import Path

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Label, OptionList, Static
from textual.widgets.option_list import Option

MIN_WIDTH, MIN_HEIGHT = 64, 18          # below this the panes cannot show a line of content each


def screen_keys(screen: Screen) -> list[tuple[str, str, bool, str]]:
    """(key, what it does, whether it applies now, when it would) for the screen's and the app's bindings,
    then the screen's ``HELP_KEYS`` (keys its widgets handle, such as the tree's arrows). Every key is
    listed: one that does not apply now (hidden from the footer, or dimmed there) too, with when it does
    from the screen's ``HELP_WHEN``."""
    out, seen = [], set()
    for owner in (screen, screen.app):
        for b in getattr(owner, "BINDINGS", []):
            if not isinstance(b, Binding) or not b.description or b.action in seen:
                continue
            seen.add(b.action)
            state = owner.check_action(b.action, ()) if hasattr(owner, "check_action") else True
            keys = ", ".join(screen.app.get_key_display(Binding(k, "")) for k in b.key.split(","))
            out.append((keys, b.description, state is True, getattr(owner, "HELP_WHEN", {}).get(b.action, "")))
    out += [(k, d, True, "") for k, d in getattr(screen, "HELP_KEYS", ())]
    return out


class HelpScreen(ModalScreen[None]):
    """The keys of the screen below, with what each does; any key closes it."""

    BINDINGS = [Binding("escape,question_mark,f1,q", "dismiss", "Close")]

    def __init__(self, below: Screen) -> None:
        super().__init__()
        self.below = below

    def compose(self) -> ComposeResult:
        name = type(self.below).__name__.removesuffix("Screen")
        keys = screen_keys(self.below)
        pad = max((len(k) for k, _, _, _ in keys), default=0) + 2
        room = max(int(self.app.size.width * 0.9) - 5 - pad, 20)      # the box's border and padding, a scrollbar
        text = Text()
        for key, what, now, when in keys:
            text.append(key.ljust(pad), style="bold cyan" if now else "dim cyan")
            note = "" if now else f" (not now{': ' + when if when else ''})"
            lines = textwrap.wrap(what + note, room) or [""]
            text.append("\n".join([lines[0], *(" " * pad + line for line in lines[1:])]) + "\n",
                        style="" if now else "dim")
        with Vertical(id="help-box") as box:
            box.border_title = f"Keys · {name}"
            box.border_subtitle = "esc closes · ctrl+p: every command"
            with VerticalScroll():
                text.rstrip()
                yield Static(text if text.plain else Text("no keys"), id="help-keys")

    def on_click(self) -> None:
        self.dismiss()


class ConfirmScreen(ModalScreen[bool]):
    """A yes/no question; y or enter on Yes answers yes, n or esc answers no."""

    BINDINGS = [Binding("y", "answer(True)", "Yes"), Binding("n,escape", "answer(False)", "No")]

    def __init__(self, question: str, yes: str = "Yes") -> None:
        super().__init__()
        self.question, self.yes = question, yes

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-box"):
            yield Label(self.question, id="confirm-text")
            with Horizontal(id="confirm-buttons"):
                yield Button(f"{self.yes} (y)", id="yes", variant="error", compact=True)
                yield Button("No (n)", id="no", compact=True)

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class TooSmall(Static):
    """What a screen shows instead of its panes below the minimum size: each screen's breakpoints set
    ``-too-narrow`` / ``-too-short`` (``SIZE_BREAKPOINTS``), and app.tcss then shows only this."""

    def render(self) -> str:
        width, height = self.app.size
        return (f"Terminal too small: {width}×{height}.\nKernelSkill needs at least {MIN_WIDTH}×{MIN_HEIGHT}.\n"
                "Enlarge the window; ctrl+q quits.")


class KeepsFocus:
    """For screens: focus goes back where it was after the too-small message hid the panes (Textual drops
    the focus of a hidden widget and later picks the first focusable one, a hidden filter included), and
    after an overlay closes. ``FOCUS_HOME`` names the widget to fall back to."""

    FOCUS_HOME = ""
    _kept_focus = None

    def on_resize(self, event: events.Resize) -> None:
        if event.size != self.app.size:
            # A stale resize: the terminal has been resized again since. Textual's own handler would lay
            # the screen out at the old size, which posts the screen a resize of that size again: with
            # two sizes pending (two quick resizes on a busy machine) the two re-posted each other for
            # ever. The resize of the terminal's current size is on its way.
            event.prevent_default()
            return
        if self.app.size.width < MIN_WIDTH or self.app.size.height < MIN_HEIGHT:
            if self.focused is not None:
                self._kept_focus = self.focused
        else:
            self.call_after_refresh(self.restore_focus)

    def on_screen_resume(self) -> None:
        self.call_after_refresh(self.restore_focus)

    def restore_focus(self) -> None:
        """Focus the widget focused before, else ``FOCUS_HOME``, unless a visible widget has the focus."""
        now = self.focused
        if now is not None and now.display and now.region.area:
            return
        kept = self._kept_focus
        target = kept if kept is not None and kept.is_attached and kept.display else None
        if target is None and self.FOCUS_HOME:
            target = self.query(self.FOCUS_HOME).first(None)
        if target is not None:
            target.focus()


def size_breakpoints(*wide: tuple[int, str]) -> tuple[list, list]:
    """(horizontal, vertical) breakpoints with the too-small classes below the minimum, then ``wide``."""
    return ([(0, "-too-narrow"), (MIN_WIDTH, "-fits"), *wide], [(0, "-too-short"), (MIN_HEIGHT, "-short")])


class RunPickerScreen(ModalScreen["Path | None"]):
    """The stored runs that have a best.py (newest first); enter chooses one, esc none."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, runs_dir: Path, exclude: Path | None = None) -> None:
        super().__init__()
        here = Path(exclude).resolve() if exclude else None
        self.runs = [d for d in sorted(runs_dir.iterdir(), reverse=True) if (d / "best.py").is_file()
                     and d.resolve() != here] if runs_dir.is_dir() else []
        self.runs_dir = runs_dir

    def compose(self) -> ComposeResult:
        with Vertical(id="picker-box") as box:
            box.border_title = "Diff against the best of…"
            box.border_subtitle = "enter chooses · esc cancels"
            if self.runs:
                yield OptionList(*[Option(d.name, id=str(i)) for i, d in enumerate(self.runs)], id="picker")
            else:
                yield Label(f"No other run with a best.py under {self.runs_dir}/", id="picker-empty")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.runs[int(event.option.id or 0)])
