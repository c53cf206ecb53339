"""``kernelskill optimize | resume | runs``: run the agent loop, continue a run, inspect runs.

Exit codes: 0 when a verified candidate faster than the reference was found, 1 otherwise, 2 for
usage errors (UserError, through the main CLI).
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

EPILOG = """examples:
  kernelskill optimize examples/softmax_rows --preset small --device cpu --budget-attempts 10
  kernelskill optimize task.py --base-url http://localhost:8000/v1 --model qwen2.5-coder --json
  kernelskill resume 20250101-120000-softmax_rows-1a2b --budget-attempts 40
  kernelskill runs list; kernelskill runs show RUN

The LLM endpoint comes from kernelskill.toml [llm] (or $KERNELSKILL_HOME/config.toml),
KERNELSKILL_BASE_URL / KERNELSKILL_MODEL / KERNELSKILL_API_KEY_ENV, or the flags; see docs/optimizer.md."""


def _flags(args) -> dict[str, Any]:
    """Config settings from the flags (None: not given)."""
    return {"llm.base_url": getattr(args, "base_url", None), "llm.model": getattr(args, "model", None),
            "budget.attempts": args.budget_attempts, "budget.tokens": args.budget_tokens,
            "budget.usd": args.budget_usd, "budget.minutes": args.budget_minutes,
            "search.policy": getattr(args, "policy", None), "search.seed": getattr(args, "seed", None),
            "eval.device": getattr(args, "device", None), "runs_dir": args.runs_dir}


class Progress:
    """One line per attempt on stderr."""

    def __init__(self, out=sys.stderr):
        self.out, self.limit, self.best = out, None, None

    def __call__(self, ev) -> None:
        name = ev.name
        if name == "RunStarted":
            self.limit = ev.config.get("budget", {}).get("attempts")
            verb = "resuming" if ev.resumed else "run"
            self._line(f"{verb} {ev.run_id}: backend {ev.backend} on {ev.device}, policy {ev.policy}")
        elif name == "BaselineMeasured":
            base = ((ev.node.get("result") or {}).get("profile") or {}).get("baseline") or {}
            ms = base.get("median_ms")
            self._line("baseline: reference measured" + (f", {ms:.3f} ms" if ms else "") + f" ({ev.seconds:.1f} s)")
        elif name == "BestImproved":
            self.best = (ev.node_id, ev.speedup)
        elif name == "CandidateEvaluated":
            self._attempt(ev.node, ev.evaluated)
        elif name == "BudgetUpdate":
            tok = f"{ev.tokens / 1000:.1f}k tok" if ev.tokens >= 1000 else f"{ev.tokens} tok"
            self._line(f"      spent {tok} · ${ev.usd:.4f} · {ev.seconds:.0f} s")
        elif name == "RunFinished":
            best = f"best {ev.best_node} at {ev.best_speedup:.2f}×" if ev.best_node else "no correct candidate"
            self._line(f"finished ({ev.reason}) after {ev.attempts} attempts: {best}")
        elif name == "RunError":
            self._line(f"stopped by an error: {ev.message}")

    def _attempt(self, node: dict, evaluated: bool) -> None:
        n = int(node["id"][1:]) if node["id"][1:].isdigit() else 0
        total = f"/{self.limit}" if self.limit else ""
        sp = f" {node['speedup']:.2f}×" if node.get("speedup") is not None else ""
        what = node["status"] + sp
        best = f" · best {self.best[1]:.2f}× ({self.best[0]})" if self.best else ""
        msg = node.get("message") or ""
        detail = f" — {msg[:70]}" if msg and (node["status"] != "ok" or not evaluated) else ""
        self._line(f"[{n}{total}] {node['id']} ← {node['parent']} {node['kind']:<6} "
                   f"{node.get('skill_id') or '-'}: {what}{best}{detail}")

    def _line(self, text: str) -> None:
        print(text, file=self.out, flush=True)


def _finish(opt, args) -> int:
    opt.bus.subscribe(Progress())
    outcome = opt.run()
    if args.json:
        print(json.dumps(outcome.to_dict(), indent=2))
    else:
        print(f"run {outcome.run_id}: {outcome.reason} after {outcome.attempts} attempts")
        if outcome.best_node:
            print(f"best {outcome.best_node}: {outcome.best_speedup:.2f}× vs PyTorch eager — {outcome.path / 'best.py'}")
        else:
            print("no correct candidate")
        print(f"report: {outcome.path / 'report.md'}")
    return 0 if outcome.improved else 1


def cmd_optimize(args) -> int:
    from .cli import _load_task
    from .config import load_config
    from .optimizer import Optimizer
    task = _load_task(args)
    config = load_config(_flags(args))
    return _finish(Optimizer(task, config=config), args)


def cmd_resume(args) -> int:
    from .optimizer import Optimizer
    from .runs import find_run
    path = find_run(args.run, _runs_dir(args))
    flags = {k: v for k, v in _flags(args).items() if k != "runs_dir"}
    return _finish(Optimizer.from_run(path, flags=flags), args)


def cmd_runs_list(args) -> int:
    from .runs import list_runs
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
    from .runs import find_run, load_run
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
    from .config import load_config
    return load_config().data["runs_dir"]


def _summary(state) -> dict[str, Any]:
    best = state.tree.best()
    run = state.info.get("run", {})
    status = state.finished.reason if state.finished else ("error" if state.errors else "incomplete")
    return {"id": state.path.name, "path": str(state.path), "task": run.get("task_name", "?"),
            "state": status, "attempts": state.attempts, "best_node": best.id if best else None,
            "best_speedup": best.speedup if best else None, "tokens": state.tokens, "usd": round(state.usd, 6),
            "errors": state.errors}


def _budget_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--budget-attempts", type=int, metavar="N", help="attempts at most (default 30)")
    p.add_argument("--budget-tokens", type=int, metavar="N", help="LLM tokens at most")
    p.add_argument("--budget-usd", type=float, metavar="X", help="LLM spend in USD at most (from [prices])")
    p.add_argument("--budget-minutes", type=float, metavar="M", help="wall time at most")
    p.add_argument("--model", help="LLM model (all roles unless [llm.roles.*] say otherwise)")
    p.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1")
    p.add_argument("--runs-dir", help="where runs are stored (default runs/)")
    p.add_argument("--json", action="store_true", help="print the outcome as one JSON object")


def add_parser(sub) -> None:
    """Register optimize, resume and runs."""
    from .cli import _task_args
    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser("optimize", help="let the agents write a faster, verified kernel for a task",
                       description="Search for a faster ModelNew with the planner, coder and debugger agents; every "
                       "candidate is compiled, verified and timed by the evaluator.", epilog=EPILOG, formatter_class=fmt)
    p.add_argument("task", help="task file or directory, or the name of a shipped example")
    p.add_argument("--device", help="cpu, cuda or cuda:N (default: auto)")
    _task_args(p)
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
    q = rsub.add_parser("list", help="every run under the runs directory")
    q.add_argument("--runs-dir")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cmd_runs_list)
    q = rsub.add_parser("show", help="one run's report")
    q.add_argument("run")
    q.add_argument("--runs-dir")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cmd_runs_show)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])

