"""The Home screen's form: which task (an example or a path, and a size preset), and how to run it
(endpoint, model, API key variable, budgets, policy, device)."""
from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Input, Label, OptionList, Select, Static
from textual.widgets.option_list import Option

from kernelskill.config import Config
from kernelskill.errors import UserError

from ..launch import DEVICES, POLICIES, Example, describe_task, presets_of


def form_row(label: str, widget) -> Horizontal:
    """One labelled row of the form."""
    return Horizontal(Label(label, classes="field-label"), widget, classes="field")


def field_label(root, selector: str) -> str:
    """What the form shows beside the field ``selector`` (messages name a field as the user sees it)."""
    return str(root.query_one(selector).parent.query_one(".field-label", Label).content)


class TaskPicker(Vertical):
    """The shipped examples, a path field that a pick fills, and the task's size presets."""

    @dataclass
    class Changed(Message):
        path: str

    def __init__(self, examples: list[Example], task: str = "", *, use_names: bool = True, **kw) -> None:
        super().__init__(**kw)
        self.examples = {ex.name: ex for ex in examples}
        self.initial_task, self.use_names = task, use_names
        self.presets: tuple[str, ...] = ()
        self._info = ("", "")

    def compose(self) -> ComposeResult:
        yield OptionList(*self._options(0), id="examples")
        yield Static("", id="task-info")
        yield form_row("path", Input(self.initial_task, placeholder="task file or directory", id="task-path",
                                     compact=True))
        yield form_row("preset", Select([], prompt="task's own sizes", id="preset", compact=True))

    @property
    def path(self) -> str:
        return self.query_one("#task-path", Input).value.strip()

    @property
    def preset(self) -> str | None:
        sel = self.query_one("#preset", Select)
        return None if sel.is_blank() else str(sel.value)

    def set_preset(self, name: str | None) -> None:
        sel = self.query_one("#preset", Select)
        if name is None:
            sel.clear()
        elif name in self.presets:
            sel.value = name

    @on(OptionList.OptionHighlighted, "#examples")
    def _preview(self, event: OptionList.OptionHighlighted) -> None:
        ex = self.examples.get(event.option.id or "")
        self._describe(ex.description if ex else "")

    def _describe(self, text: str, style: str = "") -> None:
        """Two lines about the task (drawn once the width is known; a longer text ends in …)."""
        self._info = (text, style)
        self.call_after_refresh(self._draw_info)

    def _draw_info(self) -> None:
        info = self.query_one("#task-info", Static)
        text, style = self._info
        width = max(info.size.width, 10)
        lines = textwrap.wrap(text, width)
        if len(lines) > 2:
            lines = [lines[0], lines[1][:width - 1] + "…"]
        info.update(Text("\n".join(lines), style=style))

    def _options(self, width: int) -> list[Option]:
        """One line per example: its name, and its description where the list is wide enough."""
        pad = max((len(n) for n in self.examples), default=0) + 2
        out = []
        for name, ex in self.examples.items():
            prompt = Text(name)
            if width >= 60 and ex.description:
                prompt = Text.assemble(name.ljust(pad), (ex.description, "dim"))
                prompt.truncate(width, overflow="ellipsis")
            out.append(Option(prompt, id=name))
        return out

    def on_resize(self) -> None:
        self._draw_info()
        examples = self.query_one("#examples", OptionList)
        width = examples.scrollable_content_region.width - 2
        wide = width >= 60
        if wide != getattr(self, "_wide", False):
            self._wide = wide
            highlighted = examples.highlighted
            examples.set_options(self._options(width))
            examples.highlighted = highlighted

    @on(OptionList.OptionSelected, "#examples")
    def _pick(self, event: OptionList.OptionSelected) -> None:
        ex = self.examples[event.option.id or ""]
        # The cursor stays on the list (q quits there); tab moves to the path field to edit it.
        path = self.query_one("#task-path", Input)
        path.value = ex.name if self.use_names else shown_path(ex.path)
        # The end of a long path in view (the example's name), though the cursor is not in the field.
        path.call_after_refresh(lambda: path.scroll_to(x=path.max_scroll_x, animate=False, immediate=True))

    @on(Input.Changed, "#task-path")
    def _task_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.presets = presets_of(event.value)
        self.query_one("#preset", Select).set_options([(p, p) for p in self.presets])
        self._describe(*describe_task(event.value))
        self.post_message(self.Changed(event.value.strip()))


class RunSettings(Vertical):
    """Endpoint, model, key variable, budgets, policy and device, prefilled from the config."""

    def __init__(self, config: Config, **kw) -> None:
        super().__init__(**kw)
        self.config = config

    def compose(self) -> ComposeResult:
        llm, budget = self.config.llm, self.config.budget
        text = lambda v: "" if v is None else f"{v:g}" if isinstance(v, float) else str(v)  # noqa: E731
        yield form_row("base URL", Input(text(llm.base_url), placeholder="e.g. http://localhost:8000/v1",
                                      id="base-url", compact=True))
        yield form_row("model", Input(text(llm.model), placeholder="model name", id="model", compact=True))
        yield form_row("key env", Input(text(llm.api_key_env), placeholder="e.g. OPENAI_API_KEY",
                                     id="key-env", compact=True))
        yield form_row("attempts", Input(text(budget.attempts), placeholder="no limit", type="integer",
                                      id="attempts", compact=True))
        yield form_row("minutes", Input(text(budget.minutes), placeholder="no limit", type="number",
                                     id="minutes", compact=True))
        yield form_row("tokens", Input(text(budget.tokens), placeholder="no limit", type="integer",
                                    id="tokens", compact=True))
        yield form_row("USD", Input(text(budget.usd), placeholder="no limit", type="number", id="usd", compact=True))
        yield form_row("policy", Select([(p, p) for p in POLICIES], value=self.config.search.policy,
                                     allow_blank=False, id="policy", compact=True))
        device = self.config.eval.device
        devices = DEVICES if device in DEVICES else (*DEVICES, device)
        yield form_row("device", Select([(d, d) for d in devices], value=device, allow_blank=False, id="device",
                                     compact=True))

    def values(self) -> dict:
        """The fields as RunRequest keywords (numbers parsed; empty budgets are None)."""
        get = lambda wid: self.query_one(f"#{wid}", Input).value.strip()  # noqa: E731

        def num(wid: str, kind: type):
            try:
                return kind(get(wid)) if get(wid) else None
            except ValueError:
                raise UserError(f"the form: {wid} must be a number, got {get(wid)!r}") from None
        return {"base_url": get("base-url"), "model": get("model"), "api_key_env": get("key-env"),
                "attempts": num("attempts", int), "minutes": num("minutes", float), "tokens": num("tokens", int),
                "usd": num("usd", float), "policy": str(self.query_one("#policy", Select).value),
                "device": str(self.query_one("#device", Select).value)}


def shown_path(path: Path) -> str:
    """A path as the user would type it: relative to the working directory when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
