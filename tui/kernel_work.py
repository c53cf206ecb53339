"""Work on one stored node from the TUI: the shape check (``generalize``) and the package export.

Both are long (an evaluation per derived shape; a build and a recording run for an export), so the
screens run them in thread workers and show the progress lines these functions report. The shape check
calls ``kernelskill.evaluate.shapes.generalize`` (each shape is an evaluation in the evaluator's isolated
worker); the export runs ``kernelskill export RUN/NODE --json`` as a child process, so the candidate's
module never runs in the TUI's process and a stop kills it.
"""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from rich.text import Text

from kernelskill.errors import UserError
from kernelskill.runs import RunState

VERDICT_STYLE = {"ok": "green", "refused": "yellow", "incorrect": "red", "crashed": "red", "skipped": "dim"}
LABEL_STYLE = {"yes": "bold green", "specialised": "bold yellow", "no": "bold red"}


@dataclass
class Target:
    """One verified node of a stored run, and the task and sizes it was verified at."""
    run: Path
    node_id: str
    source: str
    task: str           # the task as the run names it
    preset: str | None
    overrides: dict

    @property
    def name(self) -> str:
        return f"{self.node_id} of {self.run.name}"


def target(state: RunState, node_id: str | None = None) -> Target:
    """The node ``node_id`` (default: the run's best) of a stored run; UserError saying why it cannot be used."""
    tree = state.tree
    if node_id is None:
        best = tree.best() if len(tree) else None
        if best is None:
            raise UserError(f"{state.path.name} has no verified candidate: nothing to check or export")
        node_id = best.id
    if node_id not in tree:
        raise UserError(f"{state.path.name} has no node {node_id}")
    node = tree.get(node_id)
    if node.parent is None:
        raise UserError(f"{node_id} is the reference itself: pick a candidate node")
    if not node.ok:
        raise UserError(f"{node_id} is not a verified candidate (status {node.status}): pick a node whose status is ok")
    path = state.path / "nodes" / f"{node_id}.py"
    source = node.code or (path.read_text() if path.is_file() else "")
    if not source:
        raise UserError(f"{node_id}: its code is not in the run ({path} is missing)")
    run = state.info.get("run", {})
    if not run.get("task"):
        raise UserError(f"{state.path.name}: run.toml names no task")
    return Target(run=state.path, node_id=node_id, source=source, task=str(run["task"]), preset=run.get("preset"),
                  overrides=dict(run.get("overrides") or {}))


def task_path(t: Target) -> str:
    """The run's task as a path from here: as written (relative to the working directory), else a shipped
    example of that name; UserError naming what to do when neither exists."""
    from kernelskill.paths import resolve_task_path
    spec = resolve_task_path(t.task)
    if not Path(spec).exists():
        raise UserError(f"the run's task {t.task} is not found from {Path.cwd()}: start the TUI in the directory "
                        f"the run was made in")
    return str(Path(spec).resolve())


def generalize(t: Target, config, on_shape: Callable[[int, int, str], None],
               cancel: threading.Event | None = None):
    """The node at the task's derived shapes (``shapes="auto"``), correctness only: a ShapesResult."""
    from kernelskill.candidate import Candidate
    from kernelskill.evaluate import api
    from kernelskill.evaluate.shapes import generalize as check
    from kernelskill.optimizer import eval_options
    from kernelskill.task import Task
    task = Task.load(task_path(t), preset=t.preset, overrides=t.overrides or None)
    cand = Candidate.from_source(t.source, t.run / "nodes" / f"{t.node_id}.py")
    device = api.resolve_device(config.eval.device, cand.backend)
    opts = dataclasses.replace(eval_options(config, device), shapes=None, cancel=cancel)
    return check(task, cand, opts, api.evaluate, "auto", on_shape=on_shape)


def default_export_dir(t: Target) -> Path:
    """``<run>/export/<node>`` (then ``<node>-2``, … when that one is taken and not empty)."""
    base = t.run / "export" / t.node_id
    dest, k = base, 2
    while dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        dest, k = base.with_name(f"{t.node_id}-{k}"), k + 1
    return dest


def export(t: Target, dest: Path, cancel: threading.Event | None = None) -> dict:
    """``kernelskill export RUN/NODE --to DEST --json`` in a child: its result (out_dir, package, ops, notes,
    seconds, files); UserError with the reason when it refuses or fails."""
    argv = [sys.executable, "-m", "kernelskill", "export", f"{t.run.name}/{t.node_id}", "--runs-dir", str(t.run.parent),
            "--task", task_path(t), "--to", str(dest), "--json"]
    if t.preset:
        argv += ["--preset", t.preset]
    for k, v in t.overrides.items():
        argv += ["--set", f"{k}={v}"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                            start_new_session=True)
    while True:
        try:
            out, err = proc.communicate(timeout=0.1)
            break
        except subprocess.TimeoutExpired:
            if cancel is not None and cancel.is_set():
                proc.kill()
                proc.communicate()
                raise UserError("the export was stopped")
    try:
        res = json.loads(out.strip().splitlines()[-1])
    except (IndexError, ValueError):
        res = None
    if proc.returncode != 0 or not isinstance(res, dict) or res.get("status") != "ok":
        why = res.get("error") if isinstance(res, dict) else None
        if not why:
            lines = [ln for ln in err.strip().splitlines() if ln.strip()]
            why = (lines[-1] if lines else "") or f"kernelskill export exited with code {proc.returncode}"
        raise UserError(why.removeprefix("error: "))
    root = Path(res["out_dir"])
    res["files"] = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    return res


# ---- what the screens show -------------------------------------------------------------------------------
def shapes_text(t: Target, result) -> Text:
    """The overall label, then one line per shape: its verdict, the shape, why (refused, wrong, skipped)."""
    text = Text()
    text.append(f"generalize {t.name}: ", style="bold")
    text.append(result.generalizes, style=LABEL_STYLE.get(result.generalizes, "bold"))
    text.append(f" — {result.summary}\n")
    width = max((len(c.verdict) for c in result.shapes), default=2)
    for c in result.shapes:
        text.append(f"  {c.verdict.ljust(width)}  ", style=VERDICT_STYLE.get(c.verdict, ""))
        text.append(c.label)
        if c.message:
            text.append(f"  {c.message}", style="dim")
        text.append("\n")
    text.rstrip()
    return text


def export_text(t: Target, res: dict) -> Text:
    text = Text()
    text.append(f"export {t.name}: ", style="bold")
    text.append("written", style="bold green")
    text.append(f" → {res['out_dir']} (package {res['package']}, {len(res['files'])} files, "
                f"{res['seconds']:.1f} s)\n")
    for op in res.get("ops", []):
        text.append(f"  op {op}\n")
    for note in res.get("notes", []):
        text.append(f"  note: {note}\n", style="dim")
    text.append(f"  build it: pip install --no-build-isolation {res['out_dir']}", style="dim")
    return text


def failed_text(what: str, t: Target, why: str) -> Text:
    text = Text()
    text.append(f"{what} {t.name}: ", style="bold")
    text.append("failed", style="bold red")
    text.append(f" — {why}")
    return text


def elapsed(started: float) -> str:
    return f"{time.monotonic() - started:.0f} s"
