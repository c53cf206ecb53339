"""Home: choose a task, the model and endpoint, the budget, policy and device; start a run."""
from __future__ import annotations

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Button, Footer, Header, Select

from kernelskill.errors import UserError

from ..launch import RunRequest, default_preset, has_cuda, list_examples
from ..widgets.notices import NoticeBar
from .overlays import KeepsFocus, TooSmall, size_breakpoints
from ..widgets.run_form import RunSettings, TaskPicker


class HomeScreen(KeepsFocus, Screen):
    """The form; ctrl+r (or the button) starts a run on the Run screen."""

    FOCUS_HOME = "#examples"

    HORIZONTAL_BREAKPOINTS, VERTICAL_BREAKPOINTS = size_breakpoints()
    BINDINGS = [Binding("ctrl+r", "start", "Start run", priority=True),
                Binding("ctrl+o", "history", "History", priority=True)]

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
        except UserError as e:
            self.notify(str(e), title="Cannot start", severity="error", timeout=8)
            return
        self.app.open_run("live", req)

    def action_history(self) -> None:
        self.app.open_history()
