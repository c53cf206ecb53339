"""A suite of tasks: a directory of task directories (``task.toml`` + ``reference.py`` +
``solutions/``, as ``examples/``) or of plain KernelBench files, found the way KernelBench lays them
out (``level1/19_ReLU.py``; a plain file's solutions, if any, in ``level1/solutions/19_ReLU/*.py``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from ..errors import TaskError, UserError
from ..paths import EXAMPLES_DIR
from ..task import Task, level_of

_EXPECT = re.compile(r"#\s*expect:\s*(\w+)")


@dataclass(frozen=True)
class SuiteTask:
    id: str                      # the task's name (a directory), or its path in the suite without .py
    path: Path                   # a task directory or a KernelBench file
    level: int | None
    solutions_dir: Path

    def solutions(self, backends: Iterable[str], include_wrong: bool = False) -> list[tuple[Path, str]]:
        """(file, expected verdict) of the solutions for ``backends``; honest ones first."""
        from ..candidate import detect_backend
        found = []
        for folder, wrong in ((self.solutions_dir, False), (self.solutions_dir / "wrong", True)):
            if wrong and not include_wrong or not folder.is_dir():
                continue
            for p in sorted(folder.glob("*.py"), key=_natural):
                text = p.read_text()
                if detect_backend(text) in backends:
                    found.append((p, expected_status(text) if wrong else "ok"))
        return found

    def has_solutions(self) -> bool:
        return any(self.solutions_dir.glob("*.py"))


def expected_status(text: str) -> str:
    """The verdict a wrong solution declares on its first line (``# expect: incorrect``); else ok."""
    m = _EXPECT.match(text)
    return m.group(1) if m else "ok"


def resolve_suite(spec: str) -> Path:
    """A directory, or ``examples`` (the shipped suite) or the name of one shipped example."""
    path = Path(spec)
    if path.exists():
        return path.resolve()
    name = spec.strip("/")
    if name == "examples" and EXAMPLES_DIR.is_dir():
        return EXAMPLES_DIR
    if name and (EXAMPLES_DIR / name / "task.toml").is_file():
        return EXAMPLES_DIR / name
    raise UserError(f"{spec}: no such suite directory (a directory of task directories or KernelBench "
                    f"files, or `examples` for the shipped suite)")


def discover(suite: Path) -> list[SuiteTask]:
    """Every task under ``suite`` (three directory levels at most), in natural order."""
    if not suite.is_dir():
        raise UserError(f"{suite}: not a directory; a suite is a directory of tasks "
                        f"(`kernelskill eval` takes one task)")
    if _is_task_dir(suite):
        return [_dir_task(suite, suite.parent, None)]
    found: list[SuiteTask] = []
    _walk(suite, suite, level_of(suite.name), 0, found)
    if not found:
        raise UserError(f"{suite}: no tasks found (expected directories with task.toml and reference.py, "
                        f"or KernelBench .py files defining Model, get_inputs and get_init_inputs)")
    return found


def _walk(folder: Path, root: Path, level: int | None, depth: int, out: list[SuiteTask]) -> None:
    for entry in sorted(folder.iterdir(), key=_natural):
        if entry.name.startswith((".", "_")) or entry.name == "solutions":
            continue
        if entry.is_dir():
            if _is_task_dir(entry):
                out.append(_dir_task(entry, root, level))
            elif depth < 2:
                _walk(entry, root, level_of(entry.name) or level, depth + 1, out)
        elif entry.suffix == ".py" and _is_kernelbench(entry):
            rel = entry.relative_to(root).with_suffix("")
            out.append(SuiteTask(id=rel.as_posix(), path=entry, level=level,
                                 solutions_dir=entry.parent / "solutions" / entry.stem))


def _is_task_dir(p: Path) -> bool:
    return (p / "task.toml").is_file() or (p / "reference.py").is_file()


def _dir_task(p: Path, root: Path, level: int | None) -> SuiteTask:
    try:
        task = Task.load(p)
        name, level = task.name, task.level if task.level is not None else level
    except TaskError:                          # reported on its row when the bench plans it
        name = p.name
    return SuiteTask(id=name, path=p, level=level, solutions_dir=p / "solutions")


def _is_kernelbench(p: Path) -> bool:
    text = p.read_text(errors="replace")
    return "class Model" in text and "def get_inputs" in text and "def get_init_inputs" in text


def _natural(p: Path) -> list:
    """``2_x`` before ``10_x``: KernelBench numbers its files."""
    return [int(s) if s.isdigit() else s.lower() for s in re.split(r"(\d+)", p.name)]


def select(tasks: list[SuiteTask], levels: set[int] | None = None, limit: int | None = None,
           names: list[str] | None = None) -> list[SuiteTask]:
    """Tasks of ``levels`` (all when None) and ``names`` (all when None), the first ``limit`` of them."""
    if names:
        missing = set(names) - {t.id for t in tasks}
        if missing:
            raise UserError(f"no task named {', '.join(sorted(missing))} in the suite")
        tasks = [t for t in tasks if t.id in names]
    picked = [t for t in tasks if levels is None or t.level in levels]
    if not picked:
        have = sorted({t.level for t in tasks if t.level is not None})
        raise UserError(f"no task of level {', '.join(map(str, sorted(levels or [])))} in the suite "
                        f"(levels present: {', '.join(map(str, have)) or 'none recorded'})")
    return picked[:limit] if limit is not None else picked
