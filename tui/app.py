"""The KernelSkill app: thin. It holds the config and the stack of screens; the screens do the work.

    KernelSkillApp(load_config()).run()          # what `kernelskill tui` does
"""
from __future__ import annotations

from pathlib import Path

from textual.app import App
from textual.binding import Binding

from kernelskill.shipped import EXAMPLES_DIR
from kernelskill.config import Config

from .screens.home import HomeScreen


class KernelSkillApp(App):
    """Home → Run (live) and History → Run (stored, read-only)."""

    TITLE = "KernelSkill"
    CSS_PATH = "app.tcss"
    BINDINGS = [Binding("ctrl+q", "quit", "Quit", priority=True)]

    def __init__(self, config: Config, *, task: str | None = None, preset: str | None = None,
                 open_run: Path | None = None, history: bool = False, examples_dir: Path | None = None) -> None:
        super().__init__()
        self.config = config
        self.examples_dir = Path(examples_dir or EXAMPLES_DIR)
        self.examples_are_shipped = examples_dir is None
        self._start = (task or "", preset, open_run, history)
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

    async def action_quit(self) -> None:
        """Quit; with a run working, stop it first (it finishes the attempt in flight and is saved)."""
        from .screens.run import RunScreen
        live = [s for s in self.screen_stack if isinstance(s, RunScreen) and s.view.active and s.optimizer]
        if live and not self._quit_asked:
            self._quit_asked = True
            for screen in live:
                screen.action_stop()
            self.notify("The run stops after the attempt in flight and is saved. ctrl+q again quits now "
                        "(the process exits once that attempt ends).", title="Stopping", severity="warning",
                        timeout=10)
            return
        self.exit()
