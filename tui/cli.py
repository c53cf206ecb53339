"""``kernelskill tui [TASK]``: parse, load the config, run the Textual app.

Importing this module needs no Textual: ``kernelskill`` lists the command even where the ``tui``
extra is not installed, and says how to install it when it is run.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from kernelskill.errors import UserError

EPILOG = """examples:
  kernelskill tui --demo                          see the dashboard play a shipped run: no model, no GPU
  kernelskill tui --replay 20250101-120000-softmax_rows-1a2b --speed 20     play a stored run again
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
    from .app import KernelSkillApp
    if args.demo and args.replay:
        raise UserError("--demo replays the shipped run; --replay RUN replays one of yours: choose one")
    if args.speed is not None and not (args.demo or args.replay):
        raise UserError("--speed is the speed of a replay: use it with --replay RUN or --demo")
    if args.speed is not None and not args.speed > 0:
        raise UserError(f"--speed must be above 0 (1 is the run's own pace), got {args.speed:g}")
    config = load_config({"runs_dir": args.runs_dir} if args.runs_dir else None)
    runs_dir = config.runs_dir
    open_run = stored_run(args.open, runs_dir) if args.open else None
    replay = demo_run() if args.demo else stored_run(args.replay, runs_dir) if args.replay else None
    app = KernelSkillApp(config, task=args.task, preset=args.preset, open_run=open_run, history=args.history,
                         replay=replay, speed=args.speed or 1.0)
    app.run()
    return app.return_code or 0


def stored_run(spec: str, runs_dir) -> Path:
    """The run directory ``spec`` names (a path, an id or a unique id prefix), or how to find one."""
    from kernelskill.runs import find_run
    try:
        return find_run(spec, runs_dir)
    except UserError as e:
        raise UserError(f"{e}; `kernelskill runs list --runs-dir {runs_dir}` lists the stored runs, "
                        "`kernelskill tui --demo` plays the shipped one") from None


def demo_run() -> Path:
    """The run shipped with the package for ``--demo``."""
    from .demo import DEMO_RUN
    if not (DEMO_RUN / "events.jsonl").is_file():
        raise UserError(f"the demo run is missing from this installation (looked for {DEMO_RUN}/events.jsonl)")
    return DEMO_RUN


def add_parser(sub) -> None:
    """Register ``tui``."""
    p = sub.add_parser("tui", help="a terminal dashboard that starts, watches and browses optimizer runs",
                       description="Start an optimizer run and watch it live (candidate tree, agent activity, code, "
                       "diffs, profiles, plots), pause, resume or stop it; browse, replay, resume, compare and "
                       "export stored runs. New here? kernelskill tui --demo. In the app, ? lists the keys.",
                       epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("task", nargs="?", help="task file or directory, or the name of a shipped example (prefills Home)")
    p.add_argument("--preset", help="a size preset from the task's task.toml (e.g. small)")
    p.add_argument("--runs-dir", help="where runs are stored (default: runs_dir from the config, else runs/)")
    p.add_argument("--open", metavar="RUN", help="open a stored run (directory, id or unique id prefix)")
    p.add_argument("--history", action="store_true", help="start on the History screen")
    p.add_argument("--replay", metavar="RUN", help="play a stored run's events again on the Run screen, at --speed "
                   "(directory, id or unique id prefix)")
    p.add_argument("--demo", action="store_true", help="replay the small run shipped with KernelSkill: the whole "
                   "dashboard in about a dozen seconds, with no model, no endpoint and no GPU")
    p.add_argument("--speed", type=float, metavar="X", help="replay speed: 1 plays at the run's own pace, 10 ten "
                   "times faster (default 1; a pause longer than 2 s between events is cut to 2 s; + and - change "
                   "it while playing)")
    p.set_defaults(func=cmd_tui)
