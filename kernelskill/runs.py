"""The run directory: ``runs/<id>/`` with run.toml, events.jsonl, nodes/, best.py and report.md.

``RunStore`` is an event subscriber: each event is appended to events.jsonl and flushed before the
next step starts, so a killed run loses at most the evaluation in flight. ``load_run`` rebuilds
the tree and the spend from the events for ``kernelskill resume``.
"""
from __future__ import annotations

import json
import os
import platform
import secrets
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from .errors import UserError
from .events import (BaselineMeasured, BestImproved, BudgetUpdate, CandidateEvaluated, Event, RunError,
                     RunFinished, event_from_dict)
from .trajectory import Trajectory


def new_run_id(task_name: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in task_name)[:40] or "task"
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{safe}-{secrets.token_hex(2)}"


class RunStore:
    """Writes one run's directory; subscribe ``store.write`` to the event bus."""

    def __init__(self, path: Path):
        self.path = Path(path)
        (self.path / "nodes").mkdir(parents=True, exist_ok=True)
        events = self.path / "events.jsonl"
        _drop_partial_line(events)
        self._fh = open(events, "a", encoding="utf-8")
        self.tree: Trajectory | None = None      # set by the optimizer, for report.md

    @classmethod
    def create(cls, runs_dir: Path | str, run_id: str, info: dict[str, Any]) -> "RunStore":
        """A new run directory with its run.toml (``info``: [run] and [config] tables)."""
        path = Path(runs_dir) / run_id
        if path.exists():
            raise UserError(f"{path}: a run with this id exists already")
        path.mkdir(parents=True)
        env = {"python": sys.version.split()[0], "platform": platform.platform(), "host": platform.node()}
        try:
            import torch
            env["torch"] = torch.__version__
        except ImportError:  # pragma: no cover
            pass
        doc = {**info, "env": env}
        (path / "run.toml").write_text(tomli_w.dumps(_toml_ready(doc)), encoding="utf-8")
        return cls(path)

    def write(self, event: Event) -> None:
        """Append one event (and the files it changes)."""
        if not event.persist:
            return
        if isinstance(event, (CandidateEvaluated, BaselineMeasured)):
            node = event.node
            if node.code:
                (self.path / "nodes" / f"{node.id}.py").write_text(node.code, encoding="utf-8")
        if isinstance(event, BestImproved) and self.tree is not None and event.node_id in self.tree:
            _atomic_write(self.path / "best.py", self.tree.get(event.node_id).code)
        self._fh.write(json.dumps(event.to_dict(), default=str) + "\n")
        self._fh.flush()
        if isinstance(event, RunError) and event.traceback:
            _atomic_write(self.path / "traceback.txt", event.traceback)
        if isinstance(event, (RunFinished, RunError)) and self.tree is not None:
            _atomic_write(self.path / "report.md", render_report(self.path, self.tree, event))

    def close(self) -> None:
        self._fh.close()


REASONS = {"attempts": "the attempt budget is spent", "tokens": "the token budget is spent",
           "usd": "the money budget is spent", "minutes": "the time budget is spent",
           "exhausted": "no node is left to expand or repair", "stopped": "stopped by the user",
           "roof": "the best runs at the configured share of its roofline floor (search.stop_at_roof)"}


def render_report(path: Path, tree: Trajectory, last: Event) -> str:
    """report.md: the outcome, the best candidate, and every attempt with what it cost."""
    info = tomllib.loads((path / "run.toml").read_text(encoding="utf-8")) if (path / "run.toml").is_file() else {}
    run = info.get("run", {})
    best = tree.best()
    lines = [f"# Run {path.name}", "", f"- task: `{run.get('task', '?')}`"
             + (f" (preset {run['preset']})" if run.get("preset") else ""),
             f"- backend {run.get('backend', '?')} · device {run.get('device', '?')} · policy "
             f"{info.get('config', {}).get('search', {}).get('policy', '?')}"]
    if isinstance(last, RunFinished):
        lines.append(f"- finished after {last.attempts} attempts: {REASONS.get(last.reason, last.reason)}")
    else:
        lines.append(f"- stopped by an error: {getattr(last, 'message', '')} (resume with `kernelskill resume "
                     f"{path.name}`)")
        if getattr(last, "traceback", ""):
            lines.append("- an unexpected error: its traceback is in `traceback.txt`; please report it with that file")
    if best is not None:
        verdict = "faster than the reference" if (best.speedup or 0) > 1.0 else "not faster than the reference"
        lines.append(f"- best: **{best.id}** at **{best.speedup:.2f}×** vs PyTorch eager ({verdict}); "
                     f"code in `best.py`")
    else:
        lines.append("- best: no correct candidate")
    tokens, cost = sum(n.tokens for n in tree), sum(n.cost for n in tree)
    evals = sum(n.eval_seconds for n in tree)
    llm_s = sum(c.seconds for n in tree for c in n.calls)
    lines += [f"- spent: {tokens} tokens · ${cost:.4f} · {llm_s:.1f} s waiting for the model · {evals:.1f} s of "
              f"evaluation", "",
              "| node | parent | kind | skill | status | speedup | LLM s | eval s | tokens | cost | note |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for n in tree:
        sp = f"{n.speedup:.2f}×" if n.speedup is not None else "-"
        note = (f"same code as {n.duplicate_of}" if n.duplicate_of else n.message).replace("|", "/")
        llm = sum(c.seconds for c in n.calls)
        lines.append(f"| {n.id} | {n.parent or '-'} | {n.kind} | {n.skill_id or '-'} | {n.status} | {sp} | "
                     f"{llm:.1f} | {n.eval_seconds:.1f} | {n.tokens} | ${n.cost:.4f} | {note[:80]} |")
    plans = [n for n in tree if n.plan or (n.kind == "repair" and n.diagnosis)]
    if plans:
        lines += ["", "## Plans", ""]
        for n in plans:
            head = f"**{n.id}** ({n.skill_id or 'no skill'})" + (f": {n.mechanism}" if n.mechanism else "")
            lines += [f"- {head}"]
            if n.kind == "repair" and n.diagnosis:
                lines += [f"  - repair of {n.parent}: {n.diagnosis.strip()}"]
            lines += ["  > " + line for line in n.plan.strip().splitlines()] if n.plan.strip() else []
    calls = [(n, c) for n in tree for c in n.calls]
    lines += _call_section("Replies that could not be used",
                           "Each got one corrective message; the whole reply is kept on the node (`kernelskill runs "
                           "show RUN --json`, `calls[].reply`).",
                           [f"- {n.id}, {c.role} ({c.model or '?'}): {c.error}" for n, c in calls if c.error])
    lines += _call_section("Prompts cut to fit their budget",
                           "`agents.prompt_tokens` (or `llm.roles.<role>.prompt_tokens`) capped these prompts; the "
                           "parts named lost their later lines.",
                           [f"- {n.id}, {c.role}: {c.trimmed}" for n, c in calls if c.trimmed])
    return "\n".join(lines) + "\n"


def _call_section(title: str, intro: str, items: list[str]) -> list[str]:
    """A report section listing LLM calls, or nothing when there are none."""
    return ["", f"## {title}", "", intro, "", *items] if items else []


def _drop_partial_line(path: Path) -> None:
    """A kill mid-write leaves half a line: cut it so the next event starts on a line of its own."""
    if not path.exists() or path.stat().st_size == 0:
        return
    data = path.read_bytes()
    if not data.endswith(b"\n"):
        with open(path, "r+b") as fh:
            fh.truncate(data.rfind(b"\n") + 1)


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _toml_ready(d: Any) -> Any:
    if isinstance(d, dict):
        return {str(k): _toml_ready(v) for k, v in d.items() if v is not None}
    if isinstance(d, (list, tuple)):
        return [_toml_ready(v) for v in d if v is not None]
    return d


def read_events(path: Path) -> list[Event]:
    """The events of a run; a torn last line (the run was killed mid-write) is skipped."""
    file = Path(path) / "events.jsonl"
    if not file.exists():
        raise UserError(f"{path}: not a run directory (no events.jsonl)")
    out = []
    lines = file.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            out.append(event_from_dict(json.loads(line)))
        except (ValueError, TypeError) as e:
            if i == len(lines) - 1:
                break
            raise UserError(f"{file}:{i + 1}: corrupt event ({e})") from None
    return out


@dataclass
class RunState:
    """What a run's events say: its tree, what it spent, how it ended."""
    path: Path
    info: dict
    tree: Trajectory
    attempts: int = 0
    tokens: int = 0
    usd: float = 0.0
    seconds: float = 0.0
    finished: RunFinished | None = None
    errors: list[str] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)


def load_run(path: Path | str) -> RunState:
    """Rebuild a run from run.toml and events.jsonl."""
    path = Path(path)
    if not (path / "run.toml").is_file():
        raise UserError(f"{path}: not a run directory (no run.toml)")
    info = tomllib.loads((path / "run.toml").read_text(encoding="utf-8"))
    events = read_events(path)
    state = RunState(path=path, info=info, tree=Trajectory(), events=events)
    for ev in events:
        if state.tree.apply(ev):
            continue
        if isinstance(ev, BudgetUpdate):
            state.tokens, state.usd, state.seconds = ev.tokens, ev.usd, ev.seconds
        elif isinstance(ev, RunFinished):
            state.finished = ev
        elif isinstance(ev, RunError):
            state.errors.append(ev.message)
    state.attempts = max(len(state.tree) - 1, 0)
    # Calls of nodes written after the last BudgetUpdate still count.
    state.tokens = max(state.tokens, sum(n.tokens for n in state.tree))
    state.usd = max(state.usd, sum(n.cost for n in state.tree))
    return state


def find_run(spec: str, runs_dir: Path | str = "runs") -> Path:
    """A run directory from a path or an id (or a unique prefix of one) under ``runs_dir``."""
    p = Path(spec)
    if (p / "run.toml").is_file():
        return p
    base = Path(runs_dir)
    matches = sorted(d for d in base.glob(f"{spec}*") if (d / "run.toml").is_file()) if base.is_dir() else []
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise UserError(f"no run {spec!r} (looked for {p}/run.toml and under {base}/)")
    raise UserError(f"run id {spec!r} is ambiguous: {', '.join(m.name for m in matches[:5])}")


def list_runs(runs_dir: Path | str = "runs") -> list[RunState]:
    """Every run under ``runs_dir``, oldest first."""
    base = Path(runs_dir)
    if not base.is_dir():
        return []
    return [load_run(d) for d in sorted(base.iterdir()) if (d / "run.toml").is_file()]
