"""Home: choose a task, the model and endpoint, the budget, policy and device; start a run."""
from __future__ import annotations

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Button, Footer, Header, Input, Select

from kernelskill.errors import UserError

from ..launch import RunRequest, apply_request, default_preset, has_cuda, list_examples
from ..widgets.notices import NoticeBar
from .overlays import KeepsFocus, TooSmall, size_breakpoints
from ..widgets.run_form import RunSettings, TaskPicker, field_label


class HomeScreen(KeepsFocus, Screen):
    """The form; ctrl+r (or the button) starts a run on the Run screen.

    A text field (path, base URL, …) takes the cursor only when the user moves to it (tab, a click): there
    q types q, and esc leaves the field; anywhere else q quits, as on every screen."""

    FOCUS_HOME = "#examples"

    HORIZONTAL_BREAKPOINTS, VERTICAL_BREAKPOINTS = size_breakpoints()
    BINDINGS = [Binding("ctrl+r", "start", "Start run", priority=True),
                Binding("ctrl+o", "history", "History", priority=True),
                Binding("escape", "leave_field", "Leave the field")]
    HELP_KEYS = (("tab, shift+tab", "the next / previous field (the examples, path, preset, base URL, …)"),
                 ("↑↓", "browse the examples (the description shows under the list)"),
                 ("enter", "pick the highlighted example: it fills path (and the preset)"),
                 ("q in a text field", "types q; esc leaves the field, then q quits"))
    HELP_WHEN = {"leave_field": "while the cursor is in a text field"}

    def __init__(self, task: str = "", preset: str | None = None) -> None:
        super().__init__()
        self.initial_task, self.preset = task, preset
        self._gpu: bool | None = None

    def compose(self) -> ComposeResult:
        app = self.app
        yield Header()
        with Horizontal(id="home-body"):
            with Vertical(id="task-pane") as pane:
                pane.border_title = "Task"
                pane.border_subtitle = "enter picks an example"
                yield TaskPicker(list_examples(app.examples_dir), self.initial_task, use_names=app.examples_are_shipped,
                                 id="task-picker")
            with Vertical(id="settings-pane") as pane:
                pane.border_title = "Model · budget · search"
                yield RunSettings(app.config, id="settings")
                yield Button("Start run  ^r", id="start", variant="primary", compact=True)
        yield NoticeBar(id="notice")
        yield TooSmall()
        yield Footer(show_command_palette=False, compact=True)

    def on_mount(self) -> None:
        self.sub_title = "new run"
        self.query_one("#task-path" if not self.initial_task else "#start").focus()
        if not self.initial_task:
            self.query_one("#examples").focus()
        self._probe_gpu()

    @work(thread=True, exclusive=True, group="probe")
    def _probe_gpu(self) -> None:
        """Whether a CUDA device is visible (importing torch takes a second: not on the UI thread)."""
        gpu = has_cuda()
        self.app.call_from_thread(self._gpu_known, gpu)

    def _gpu_known(self, gpu: bool) -> None:
        self._gpu = gpu
        self._default_preset()

    @on(TaskPicker.Changed)
    @on(Select.Changed, "#device")
    def _task_changed(self) -> None:
        self._default_preset()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """esc applies (and shows in the footer) only while a text field has the cursor."""
        if action == "leave_field":
            return isinstance(self.focused, Input)
        return True

    def on_descendant_focus(self) -> None:
        self.refresh_bindings()                      # esc comes and goes with the text fields' cursor

    def on_descendant_blur(self) -> None:
        self.refresh_bindings()

    def action_leave_field(self) -> None:
        """esc in a text field: back to the example list, where q quits again."""
        self.query_one("#examples").focus()

    def _default_preset(self) -> None:
        """The preset asked for on the command line, else ``small`` for a CPU run when the task has it."""
        picker = self.query_one(TaskPicker)
        if self.preset is not None and self.preset in picker.presets:
            picker.set_preset(self.preset)
            self.preset = None
            return
        if self._gpu is None:
            return
        device = str(self.query_one("#device", Select).value)
        if device == "auto":
            device = "cuda" if self._gpu else "cpu"
        picker.set_preset(default_preset(picker.presets, device))

    @on(Button.Pressed, "#start")
    def _start_pressed(self) -> None:
        self.action_start()

    def request(self) -> RunRequest:
        """The form as a RunRequest (UserError for a field that does not parse)."""
        picker = self.query_one(TaskPicker)
        return RunRequest(task=picker.path, preset=picker.preset, **self.query_one(RunSettings).values())

    def action_start(self) -> None:
        try:
            req = self.request()
            if not req.task:
                raise UserError("choose a task: pick an example (enter) or type the path of a KernelBench file")
            self._check_llm(req)
        except UserError as e:
            self.notify(str(e), title="Cannot start", severity="error", timeout=8)
            return
        self.app.open_run("live", req)

    def _check_llm(self, req: RunRequest) -> None:
        """The form's settings must name an endpoint and a model: say so in the form's own words (the
        library's message advises kernelskill.toml and command-line flags, which the TUI does not have)."""
        config = apply_request(self.app.config, req)
        if not config.llm.base_url:
            raise UserError(f"no LLM endpoint: type its address into the form's “{field_label(self, '#base-url')}” "
                            "field (e.g. http://localhost:8000/v1), then ctrl+r")
        if not config.llm.model and not all(config.role(r).model for r in ("planner", "coder", "debugger")):
            raise UserError(f"no LLM model: type its name into the form's “{field_label(self, '#model')}” field, "
                            "then ctrl+r")

    def action_history(self) -> None:
        self.app.open_history()
