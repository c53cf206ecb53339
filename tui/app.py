"""The KernelSkill app: thin. It holds the config and the stack of screens; the screens do the work.

    KernelSkillApp(load_config()).run()          # what `kernelskill tui` does
"""
from __future__ import annotations

from pathlib import Path

from functools import partial

from textual.app import App, ScreenStackError, SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from kernelskill.paths import EXAMPLES_DIR
from kernelskill.config import Config

from kernelskill.runs import RunState, load_run

from .launch import RunRequest
from .screens.history import HistoryScreen
from .screens.home import HomeScreen
from .screens.overlays import ConfirmScreen, HelpScreen
from .screens.run import RunScreen
from .widgets.notices import NoticeBar


class KernelSkillApp(App):
    """Home → Run (live) and History → Run (stored, read-only). The app moves between screens
    (``open_run``, ``open_history``, ``go_home``): no screen imports another."""

    TITLE = "KernelSkill"
    CSS_PATH = "app.tcss"
    BINDINGS = [Binding("ctrl+q", "quit", "Quit", priority=True),
                Binding("q", "ask_quit", "Quit (asks first while a run works)", show=False),
                Binding("question_mark,f1", "help", "Keys", key_display="?")]

    def __init__(self, config: Config, *, task: str | None = None, preset: str | None = None,
                 open_run: Path | None = None, history: bool = False, examples_dir: Path | None = None,
                 replay: Path | None = None, speed: float = 1.0) -> None:
        super().__init__()
        self.config = config
        self.examples_dir = Path(examples_dir or EXAMPLES_DIR)
        self.examples_are_shipped = examples_dir is None
        self._start = (task or "", preset, open_run, history)
        self._replay = (replay, speed)
        self._quit_asked = False

    def on_mount(self) -> None:
        task, preset, open_run, history = self._start
        self.push_screen(HomeScreen(task, preset))
        if history:
            self.push_screen(HistoryScreen())
        if open_run is not None:
            self.open_run("stored", load_run(open_run))
        replay, speed = self._replay
        if replay is not None:
            self.open_run("replayed", load_run(replay), speed=speed)

    # ---- navigation: the screens ask, the app moves ----------------------------------------------
    def active_runs(self) -> list[RunScreen]:
        """Run screens whose run is going (live, resumed or replaying)."""
        return [s for s in self.screen_stack if isinstance(s, RunScreen) and s.view.active]

    def live_runs(self) -> list[RunScreen]:
        """Run screens whose optimizer is working (what quitting must stop first)."""
        return [s for s in self.active_runs() if s.optimizer]

    def open_run(self, how: str, source: RunState | RunRequest, speed: float = 1.0) -> None:
        """A Run screen on top: ``live`` (a RunRequest), ``stored``, ``replayed`` or ``resumed`` (a RunState)."""
        if how == "live":
            self.push_screen(RunScreen.live(source))
        elif how == "replayed":
            self.push_screen(RunScreen.replayed(source, speed))
        elif how in ("stored", "resumed"):
            self.push_screen(getattr(RunScreen, how)(source))
        else:
            raise ValueError(f"open_run: {how!r}")

    def open_history(self) -> None:
        """History on top (unless it is the current screen)."""
        if not isinstance(self.screen, HistoryScreen):
            self.push_screen(HistoryScreen())

    def back_to_history(self) -> None:
        """Back to the History screen below, else a new one on top: a live run above that History is
        never popped (it keeps going)."""
        stack = self.screen_stack
        below = [s for s in stack[:-1] if isinstance(s, HistoryScreen)]
        if below and not any(isinstance(s, RunScreen) and s.view.active for s in stack[stack.index(below[-1]) + 1:]):
            while self.screen is not below[-1]:
                self.pop_screen()
        else:
            self.push_screen(HistoryScreen())

    def go_home(self) -> None:
        """Back to the Home screen below, else a new one on top."""
        for screen in self.screen_stack:
            if isinstance(screen, HomeScreen):
                while self.screen is not screen:
                    self.pop_screen()
                return
        self.push_screen(HomeScreen())

    # ---- quitting, help, commands -----------------------------------------------------------------

    def action_ask_quit(self) -> None:
        """q: quit; with a run working, ask first (yes stops it after the attempt in flight, saved)."""
        live = self.live_runs()
        if not live:
            self.exit()
            return

        def answered(yes: bool | None) -> None:
            if yes:
                for screen in live:
                    screen.action_stop()
                self.exit()
        self.push_screen(ConfirmScreen("A run is working. Stop it and quit?\nThe attempt in flight finishes and "
                                       "the run is saved (kernelskill resume continues it).", yes="Stop and quit"),
                         answered)

    def action_help(self) -> None:
        """The keys of the current screen."""
        if isinstance(self.screen, HelpScreen):
            return
        self.push_screen(HelpScreen(self.screen))

    def get_system_commands(self, screen: Screen):
        """The palette (ctrl+p): the current screen's keys as commands, then the app's own, then Textual's."""
        for key, binding in screen._bindings:
            if binding.description and screen.check_action(binding.action, ()) is True:
                yield SystemCommand(binding.description, f"{binding.key_display or key} on this screen",
                                    partial(screen.run_action, binding.action))
        yield SystemCommand("Keys of this screen", "? or F1: what each key does here", self.action_help)
        yield SystemCommand("History", "the stored runs: open, replay, resume, export, delete", self.open_history)
        yield SystemCommand("Demo", "replay the run shipped with KernelSkill (no model, no GPU)", self.action_demo)
        yield from super().get_system_commands(screen)

    def action_demo(self) -> None:
        from .demo import DEMO_RUN
        self.open_run("replayed", load_run(DEMO_RUN))

    # ---- notifications -------------------------------------------------------------------------
    def _refresh_notifications(self) -> None:
        """Textual's hook when notifications change: show the newest on the screen's NoticeBar (the
        toasts are hidden in app.tcss, since they would cover the panes' text)."""
        super()._refresh_notifications()
        try:
            bars = self.screen.query(NoticeBar)
        except ScreenStackError:            # no screen yet
            return
        for bar in bars:
            bar.show(list(self._notifications))

    async def action_quit(self) -> None:
        """Quit; with a run working, stop it first (it finishes the attempt in flight and is saved)."""
        live = self.live_runs()
        if live and not self._quit_asked:
            self._quit_asked = True
            for screen in live:
                screen.action_stop()
            self.notify("The run stops after the attempt in flight and is saved. ctrl+q again quits now "
                        "(the process exits once that attempt ends).", title="Stopping", severity="warning",
                        timeout=10)
            return
        self.exit()
