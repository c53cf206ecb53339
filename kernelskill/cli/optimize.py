"""``kernelskill optimize | resume | runs``: run the agent loop, continue a run, inspect runs.

Exit codes: 0 when a verified candidate faster than the reference was found, 1 otherwise, 2 for
usage errors (UserError, through the main CLI).
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..errors import UserError
from ..trajectory import Node
from ..vocab import Status

EPILOG = """examples:
  kernelskill optimize examples/softmax_rows --preset small --device cpu --budget 10
  kernelskill optimize task.py --base-url http://localhost:8000/v1 --model qwen2.5-coder --json
  kernelskill optimize task.py --base-url https://api.openai.com/v1 --model gpt-4.1 --api-key-env OPENAI_API_KEY
  kernelskill resume 20250101-120000-softmax_rows-1a2b --budget 40
  kernelskill runs list; kernelskill runs show RUN

The LLM endpoint comes from kernelskill.toml [llm] (or $KERNELSKILL_HOME/config.toml),
KERNELSKILL_BASE_URL / KERNELSKILL_MODEL / KERNELSKILL_API_KEY_ENV, or the flags; see docs/optimizer.md."""


def _flags(args) -> dict[str, Any]:
    """Config settings from the flags (None: not given)."""
    return {"llm.base_url": getattr(args, "base_url", None), "llm.model": getattr(args, "model", None),
            "budget.attempts": args.budget_attempts, "budget.tokens": args.budget_tokens,
            "budget.usd": args.budget_usd, "budget.minutes": args.budget_minutes,
            "search.policy": getattr(args, "policy", None), "search.seed": getattr(args, "seed", None),
            "eval.device": getattr(args, "device", None), "llm.api_key_env": getattr(args, "api_key_env", None),
            "runs_dir": args.runs_dir}



def _sp(speedup: float | None, ci: list | None, quality: str | None) -> str:
    """A speedup for a person: with its interval, and its quality when that is not good."""
    if speedup is None:
        return "-"
    text = f"{speedup:.2f}×" + (f" [{ci[0]:.2f}–{ci[1]:.2f}]" if ci and len(ci) == 2 else "")
    return text + (f" ({quality})" if quality and quality != "good" else "")

class Progress:
    """The live display on stderr: one line per attempt, a line when the best changes (it comes after
    the attempt's line, so that line shows no best that could be stale), then a status line —
    attempts (of the budget), best speedup, tokens, cost, seconds. The outcome itself is printed once,
    on stdout, by the command."""

    def __init__(self, out=None):
        self.out, self.limit, self.best = out, None, None        # None: sys.stderr at the time of writing

    def __call__(self, ev) -> None:
        name = ev.name
        if name == "RunStarted":
            self.limit = ev.config.get("budget", {}).get("attempts")
            verb = "resuming" if ev.resumed else "run"
            self._line(f"{verb} {ev.run_id}: backend {ev.backend} on {ev.device}, policy {ev.policy}")
        elif name == "BaselineMeasured":
            prof = ev.node.profile
            ms = prof.baseline.median_ms if prof is not None and prof.baseline else None
            self._line("baseline: reference measured" + (f", {ms:.3f} ms" if ms else "") + f" ({ev.seconds:.1f} s)")
        elif name == "BestImproved":
            self.best = (ev.node_id, ev.speedup)
            self._line(f"      new best {ev.node_id}: {ev.speedup:.2f}×" + (f" ({ev.why})" if ev.why else ""))
        elif name == "CandidateEvaluated":
            self._attempt(ev.node, ev.evaluated)
        elif name == "BudgetUpdate":
            self._line("      " + status_line(ev.attempts, ev.limits.get("attempts"), self.best, ev.tokens, ev.usd,
                                              ev.seconds))
        elif name == "NodeRetimed":
            vs = f" against {ev.against}" if ev.against else " against eager"
            self._line(f"      {ev.node_id} re-timed{vs} ({ev.why}): {ev.race.message[:90] if ev.race else ''}")
        elif name == "FinalistsRetimed":
            self._line(f"finalists {', '.join(ev.node_ids)} re-timed head to head: {ev.race.message if ev.race else ''}")
        elif name == "RunError":
            self._line(f"stopped by an error: {ev.message}")

    def _attempt(self, node: Node, evaluated: bool) -> None:
        n = int(node.id[1:]) if node.id[1:].isdigit() else 0
        total = f"/{self.limit}" if self.limit else ""
        sp = " " + _sp(node.speedup, node.speedup_ci, node.quality) if node.speedup is not None else ""
        what = node.status + sp
        msg = node.message or ""
        detail = f" — {msg[:70]}" if msg and (node.status != Status.ok or not evaluated) else ""
        self._line(f"[{n}{total}] {node.id} ← {node.parent} {node.kind:<6} "
                   f"{node.skill_id or '-'}: {what}{detail}")

    def _line(self, text: str) -> None:
        print(text, file=self.out or sys.stderr, flush=True)


def status_line(attempts: int, limit: int | None, best: tuple[str, float] | None, tokens: int, usd: float,
                seconds: float) -> str:
    """``attempts 3/30 · best 1.42× (n3) · 12.3k tok · $0.0123 · 41 s``."""
    tok = f"{tokens / 1000:.1f}k tok" if tokens >= 1000 else f"{tokens} tok"
    sp = f"best {best[1]:.2f}× ({best[0]})" if best else "best -"
    total = f"/{limit}" if limit is not None else ""
    return f"attempts {attempts}{total} · {sp} · {tok} · ${usd:.4f} · {seconds:.0f} s"


def _json_line(**fields: Any) -> None:
    """The machine-readable outcome: one JSON object on the last line of stdout."""
    print(json.dumps(fields, default=str), flush=True)


def _finish(opt, args) -> int:
    progress = Progress()
    best = opt.tree.best()                   # a resumed run shows its best so far from the start
    progress.best = (best.id, best.speedup) if best else None
    opt.bus.subscribe(progress)
    try:
        outcome = opt.run()
    except UserError as e:
        # The main CLI prints the JSON error object (status, error) with these fields under --json.
        e.json_fields = {"run_dir": str(opt.path) if (opt.path / "run.toml").is_file() else None,
                         "attempts": opt.spend.attempts,
                         "best_speedup": opt.tree.best().speedup if opt.tree.best() else None}
        raise
    if args.json:
        d = outcome.to_dict()
        _json_line(run_dir=d["path"], status=outcome.reason, **d)
    else:
        print(f"run {outcome.run_id}: {outcome.reason} after {outcome.attempts} attempts")
        if outcome.best_node:
            print(f"best {outcome.best_node}: {_sp(outcome.best_speedup, outcome.best_speedup_ci, outcome.best_quality)}"
                  f" vs PyTorch eager — {outcome.path / 'best.py'}")
        else:
            print("no correct candidate")
        print(f"report: {outcome.path / 'report.md'}")
    return 0 if outcome.improved else 1


def _setup_error(e: UserError) -> None:
    """A mistake found before the run starts: under --json the main CLI's error object gets these fields."""
    e.json_fields = {"run_dir": None, "attempts": 0, "best_speedup": None}
    raise e


def cmd_optimize(args) -> int:
    from .common import load_task
    from ..config import load_config
    from ..optimizer import Optimizer
    try:
        task = load_task(args)
        config = load_config(_flags(args))
        opt = Optimizer(task, config=config)
    except UserError as e:
        _setup_error(e)
    return _finish(opt, args)


def cmd_resume(args) -> int:
    from ..optimizer import Optimizer
    from ..runs import find_run
    try:
        path = find_run(args.run, _runs_dir(args))
        flags = {k: v for k, v in _flags(args).items() if k != "runs_dir"}
        opt = Optimizer.from_run(path, flags=flags)
    except UserError as e:
        _setup_error(e)
    return _finish(opt, args)


def cmd_runs_list(args) -> int:
    from ..runs import list_runs
    runs = list_runs(_runs_dir(args))
    rows = [_summary(r) for r in runs]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print(f"no runs under {_runs_dir(args)}/")
        return 0
    for r in rows:
        sp = f"{r['best_speedup']:.2f}×" if r["best_speedup"] is not None else "-"
        print(f"{r['id']:<40} {r['task']:<20} {r['state']:<10} {r['attempts']:>4} attempts  best {sp}")
    return 0


def cmd_runs_show(args) -> int:
    from ..runs import find_run, load_run
    state = load_run(find_run(args.run, _runs_dir(args)))
    if args.json:
        print(json.dumps({**_summary(state), "nodes": [n.to_dict() | {"result": None} for n in state.tree]}, indent=2))
        return 0
    report = state.path / "report.md"
    if report.is_file():
        print(report.read_text(encoding="utf-8"), end="")
    else:
        s = _summary(state)
        print(f"run {s['id']} ({s['state']}): {s['attempts']} attempts, best {s['best_node'] or '-'}")
    return 0


def _runs_dir(args) -> str:
    """--runs-dir, else runs_dir from the config files, else runs/."""
    if getattr(args, "runs_dir", None):
        return args.runs_dir
    from ..config import load_config
    return load_config().runs_dir


def _summary(state) -> dict[str, Any]:
    best = state.tree.best()
    run = state.info.get("run", {})
    status = state.finished.reason if state.finished else ("error" if state.errors else "incomplete")
    return {"id": state.path.name, "path": str(state.path), "task": run.get("task_name", "?"),
            "state": status, "attempts": state.attempts, "best_node": best.id if best else None,
            "best_speedup": best.speedup if best else None, "tokens": state.tokens, "usd": round(state.usd, 6),
            "errors": state.errors}


def _budget_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--budget", "--budget-attempts", dest="budget_attempts", type=int, metavar="N",
                   help="attempts at most (default 30)")
    p.add_argument("--budget-tokens", type=int, metavar="N", help="LLM tokens at most")
    p.add_argument("--budget-usd", type=float, metavar="X", help="LLM spend in USD at most (from [prices])")
    p.add_argument("--budget-minutes", type=float, metavar="M", help="wall time at most")
    p.add_argument("--model", help="LLM model (all roles unless [llm.roles.*] say otherwise)")
    p.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1")
    p.add_argument("--api-key-env", metavar="VAR",
                   help="name of the environment variable that holds the API key (not the key itself)")
    p.add_argument("--run-dir", "--runs-dir", dest="runs_dir", metavar="D",
                   help="the directory runs are stored under: each run is D/<run id>/ (default runs/)")
    p.add_argument("--json", action="store_true",
                   help="end stdout with one JSON line: run_dir, status, attempts, best_speedup, …")


def add_parser(sub) -> None:
    """Register optimize, resume and runs."""
    from .common import task_args
    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser("optimize", help="let the agents write a faster, verified kernel for a task",
                       description="Search for a faster ModelNew with the planner, coder and debugger agents; every "
                       "candidate is compiled, verified and timed by the evaluator.", epilog=EPILOG, formatter_class=fmt)
    p.add_argument("task", help="task file or directory, or the name of a shipped example")
    p.add_argument("--device", help="cpu, cuda or cuda:N (default: auto)")
    task_args(p)
    p.add_argument("--policy", choices=("stark", "line"), help="search policy (default stark)")
    p.add_argument("--seed", type=int, help="seed of the search policy (deterministic choices)")
    _budget_args(p)
    p.set_defaults(func=cmd_optimize)

    p = sub.add_parser("resume", help="continue a stored run from its events", epilog=EPILOG, formatter_class=fmt)
    p.add_argument("run", help="run directory, id, or a unique prefix of an id")
    _budget_args(p)
    p.set_defaults(func=cmd_resume)

    p = sub.add_parser("runs", help="list and show stored runs")
    rsub = p.add_subparsers(dest="runs_command", metavar="SUBCOMMAND")
    runs_dir = "the directory runs are stored under (default: runs_dir from the config, else runs/)"
    q = rsub.add_parser("list", help="every run under the runs directory")
    q.add_argument("--run-dir", "--runs-dir", dest="runs_dir", metavar="D", help=runs_dir)
    q.add_argument("--json", action="store_true", help="print a JSON list: id, task, state, attempts, best, spend")
    q.set_defaults(func=cmd_runs_list)
    q = rsub.add_parser("show", help="one run's report")
    q.add_argument("run", help="run directory, id, or a unique prefix of an id")
    q.add_argument("--run-dir", "--runs-dir", dest="runs_dir", metavar="D", help=runs_dir)
    q.add_argument("--json", action="store_true", help="print one JSON object: the summary and every node")
    q.set_defaults(func=cmd_runs_show)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])

