"""``kernelskill tui [TASK]``: parse, load the config, run the Textual app.

Importing this module needs no Textual: ``kernelskill`` lists the command even where the ``tui``
extra is not installed, and says how to install it when it is run.
"""
from __future__ import annotations

import argparse

from kernelskill.errors import UserError

EPILOG = """examples:
  kernelskill tui                                 choose a task, the model and the budget, then start
  kernelskill tui examples/softmax_rows --preset small
  kernelskill tui --open 20250101-120000-softmax_rows-1a2b      browse a stored run
  kernelskill tui --history --runs-dir runs

The endpoint, model and budgets are prefilled from kernelskill.toml / $KERNELSKILL_HOME/config.toml
and the KERNELSKILL_* variables (see docs/optimizer.md); docs/tui.md lists the screens and keys."""


def cmd_tui(args) -> int:
    try:
        import textual  # noqa: F401
    except ImportError:
        raise UserError("the TUI needs the textual package: pip install 'kernelskill[tui]'") from None
    from kernelskill.config import load_config
    from kernelskill.runs import find_run
    from .app import KernelSkillApp
    config = load_config({"runs_dir": args.runs_dir} if args.runs_dir else None)
    open_run = find_run(args.open, config.data["runs_dir"]) if args.open else None
    app = KernelSkillApp(config, task=args.task, preset=args.preset, open_run=open_run, history=args.history)
    app.run()
    return app.return_code or 0


def add_parser(sub) -> None:
    """Register ``tui``."""
    p = sub.add_parser("tui", help="a terminal dashboard that starts, watches and browses optimizer runs",
                       description="Start an optimizer run and watch it live (candidate tree, agent activity, code, "
                       "diffs, profiles), pause, resume or stop it, and browse stored runs.", epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("task", nargs="?", help="task file or directory, or the name of a shipped example (prefills Home)")
    p.add_argument("--preset", help="a size preset from the task's task.toml (e.g. small)")
    p.add_argument("--runs-dir", help="where runs are stored (default: runs_dir from the config, else runs/)")
    p.add_argument("--open", metavar="RUN", help="open a stored run (directory, id or unique id prefix)")
    p.add_argument("--history", action="store_true", help="start on the History screen")
    p.set_defaults(func=cmd_tui)
