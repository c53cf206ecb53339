"""Listing tasks and looking up / recording skills: the tools that read data rather than run code."""
from __future__ import annotations

import math

import os
import re
from pathlib import Path

from kernelskill.errors import UserError
from kernelskill.skills.stats import OUTCOMES
from kernelskill.skills import SkillBook, arch_allows
from kernelskill.task import TASK_FILE_NAMES, Task
from kernelskill.vocab import BACKENDS, BOTTLENECKS, Status

from .models import RecordedAttempt, SkillInfo, SkillList, SkillStatsInfo, TaskEntry, TaskList
from .roots import Roots, example_dir, example_names

SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "__pycache__", ".kernelskill-cache", "solutions",
             "runs", "build", "dist", "site-packages"}
MAX_ENTRIES, MAX_DEPTH, MAX_SCAN_BYTES = 200, 3, 200_000
MAX_LIMIT = 50
_MODEL = re.compile(r"^class\s+Model\s*[(:]", re.M)
_INPUTS = re.compile(r"^def\s+get_inputs\s*\(", re.M)


def _entry(task: str, path: Path, uri: str | None = None) -> TaskEntry:
    try:
        t = Task.load(path)
    except UserError as e:
        return TaskEntry(task=task, name=path.stem, description=f"(cannot be loaded: {str(e)[:200]})")
    return TaskEntry(task=task, name=t.name, level=t.level, description=t.description,
                     presets=sorted(t.presets), uri=uri)


def _looks_like_task(path: Path) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read(MAX_SCAN_BYTES)
    except OSError:
        return False
    return bool(_MODEL.search(text) and _INPUTS.search(text))


def list_tasks(roots: Roots, path: str | None = None) -> TaskList:
    """Shipped examples (no path), or the KernelBench tasks found under a directory in the roots."""
    if path is None:
        tasks = [_entry(n, example_dir(n), f"task://{n}") for n in example_names()]
        return TaskList(tasks=tasks, note=f"{len(tasks)} shipped examples; pass a name as `task`. Use a small "
                                          f"preset on a CPU server. list_tasks(path=DIR) lists tasks in a "
                                          f"directory inside the roots ({roots}).")
    where = roots.check(path)
    if where.is_file():
        if not _looks_like_task(where):
            raise UserError(f"{path}: not a KernelBench task (no top-level class Model and def get_inputs)")
        return TaskList(tasks=[_entry(str(where), where)])
    if not where.is_dir():
        raise UserError(f"{path}: no such directory inside the roots ({roots})")
    found: list[TaskEntry] = []
    truncated = False
    base_depth = len(where.parts)
    for dirpath, dirnames, filenames in os.walk(where):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        if len(here.parts) - base_depth >= MAX_DEPTH:
            dirnames[:] = []
        ref = next((here / n for n in TASK_FILE_NAMES if n in filenames), None)
        if ref is not None and ((here / "task.toml").is_file() or _looks_like_task(ref)):
            found.append(_entry(str(here), here))
            dirnames[:] = []
            continue
        for name in sorted(filenames):
            p = here / name
            if name.endswith(".py") and roots.contains(p.resolve()) and _looks_like_task(p):
                found.append(_entry(str(p), p))
        if len(found) >= MAX_ENTRIES:
            truncated = True
            break
    note = f"{len(found[:MAX_ENTRIES])} task(s) under {where}"
    if truncated:
        note += " (truncated: list a subdirectory)"
    return TaskList(tasks=found[:MAX_ENTRIES], note=note)


def lookup_skills(book: SkillBook, *, features: list[str] | None, backend: str, bottleneck: str | None = None,
                  query: str | None = None, limit: int = 5, arch: str | None = None,
                  facts: dict | None = None) -> SkillList:
    """The skills the gate allows (op classes, bottleneck, backend, arch), best-ranked first."""
    if backend not in BACKENDS:
        raise UserError(f"backend {backend!r} is not one of {', '.join(BACKENDS)}")
    if bottleneck is not None and bottleneck not in BOTTLENECKS:
        raise UserError(f"bottleneck {bottleneck!r} is not one of {', '.join(BOTTLENECKS)}")
    if not 1 <= limit <= MAX_LIMIT:
        raise UserError(f"limit={limit}: choose between 1 and {MAX_LIMIT}")
    feats = sorted(set(features or []))
    if features is not None:
        allowed = book.gate(feats, {"bottleneck": bottleneck} if bottleneck else None, backend=backend, arch=arch,
                            facts=facts)
    else:
        allowed = sorted((s for s in book if backend in s.backends and arch_allows(s.arch, arch)
                          and (bottleneck is None or "*" in s.bottlenecks or bottleneck in s.bottlenecks)),
                         key=lambda s: book.rank_key(s, backend=backend, arch=arch))
    if query and query.strip():
        order = {s.id: i for i, s in enumerate(book.search(query))}
        allowed = sorted((s for s in allowed if s.id in order), key=lambda s: order[s.id])
    shown = allowed[:limit]
    what = f"op classes and features {', '.join(feats) or '(none)'}" if features is not None else "any op class"
    note = (f"{len(allowed)} skill(s) fit {what}, backend {backend}"
            + (f", bottleneck {bottleneck}" if bottleneck else "") + (f", query {query!r}" if query else "")
            + f"; showing {len(shown)}, best first (how specifically each fits, then the success rate and mean speedup recorded for these op classes on this backend). Choose one and say why; "
              f"after evaluating, call record_attempt with its id.")
    if not shown:
        note += " Nothing matched: drop the query or bottleneck, or try another backend."
    return SkillList(skills=[SkillInfo.of(s, book.stats.get(s.id), feats, backend, arch) for s in shown],
                     op_classes=feats,
                     backend=backend, bottleneck=bottleneck, note=note)


def record_attempt(book: SkillBook, *, features: list[str], skill_id: str, outcome: str, speedup: float | None,
                   verdict: tuple | None, candidate_hash: str, backend: str | None = None,
                   arch: str | None = None) -> RecordedAttempt:
    """Count one try of a skill; the server's own verdict on the source overrides the caller's claim.

    Only what the server measured itself with good quality ranks skills: a success or no_gain
    without a server timing is kept as ``unmeasured``, one timed noisy or contended under that label."""
    if outcome not in OUTCOMES:
        raise UserError(f"outcome {outcome!r} is not one of {', '.join(OUTCOMES)}")
    if speedup is not None and not (math.isfinite(speedup) and speedup > 0):
        raise UserError(f"speedup {speedup!r}: a speedup is a finite number above 0; leave it out when "
                        f"there is no measurement")
    book.get(skill_id)                 # an unknown id is the caller's mistake before anything else
    quality = "unmeasured"
    if verdict is not None:
        status, measured, timed_quality = (tuple(verdict) + (None,))[:3]
        if outcome == "success" and status != Status.ok:
            # '{status}', not !r: a Status's repr is not its value
            raise UserError(f"this source was last evaluated here as '{status}'; only a correct candidate can "
                            f"be a success. Record outcome 'failure', or fix it and evaluate again")
        if measured is not None:
            speedup, quality = measured, timed_quality or "good"
    op_class, st = book.record_outcome(skill_id, features, outcome, speedup, quality=quality, backend=backend,
                                       arch=arch)
    return RecordedAttempt(skill_id=skill_id, outcome=outcome, op_class=op_class, speedup=speedup,
                           candidate_hash=candidate_hash, measured_by_server=verdict is not None,
                           ranked=outcome == "failure" or quality == "good",
                           quality="good" if outcome == "failure" else quality,
                           stats=SkillStatsInfo.of(st, features, backend, arch))
