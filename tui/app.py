"""The KernelSkill app: thin. It holds the config and the stack of screens; the screens do the work.

    KernelSkillApp(load_config()).run()          # what `kernelskill tui` does
"""
from __future__ import annotations

from pathlib import Path

from functools import partial

from textual.app import App, ScreenStackError, SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from kernelskill.shipped import EXAMPLES_DIR
from kernelskill.config import Config

from .screens.home import HomeScreen
from .screens.overlays import ConfirmScreen, HelpScreen
from .widgets.notices import NoticeBar


class KernelSkillApp(App):
    """Home → Run (live) and History → Run (stored, read-only)."""

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
            from .screens.history import HistoryScreen
            self.push_screen(HistoryScreen())
        if open_run is not None:
            from kernelskill.runs import load_run
            from .screens.run import RunScreen
            self.push_screen(RunScreen.stored(load_run(open_run)))
        replay, speed = self._replay
        if replay is not None:
            from kernelskill.runs import load_run
            from .screens.run import RunScreen
            self.push_screen(RunScreen.replayed(load_run(replay), speed))

    # ---- quitting, help, commands -----------------------------------------------------------------
    def live_runs(self) -> list:
        from .screens.run import RunScreen
        return [s for s in self.screen_stack if isinstance(s, RunScreen) and s.view.active and s.optimizer]

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
        yield SystemCommand("History", "the stored runs: open, replay, resume, export, delete", self._to_history)
        yield SystemCommand("Demo", "replay the run shipped with KernelSkill (no model, no GPU)", self.action_demo)
        yield from super().get_system_commands(screen)

    def _to_history(self) -> None:
        from .screens.history import HistoryScreen
        if not isinstance(self.screen, HistoryScreen):
            self.push_screen(HistoryScreen())

    def action_demo(self) -> None:
        from kernelskill.runs import load_run
        from .demo import DEMO_RUN
        from .screens.run import RunScreen
        self.push_screen(RunScreen.replayed(load_run(DEMO_RUN)))

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
