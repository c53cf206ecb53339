"""Which files the server may read, and how a tool's ``task`` argument becomes a loaded Task.

A ``task`` is one of: the KernelBench source itself (it has a newline), a path inside the allowed
roots (relative paths are looked up in each root in turn; symlinks and ``..`` are resolved before
the check), or the name of a shipped example. Inline sources are written into a directory the
server owns; they are never trusted to run in the server's own process.
"""
from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from kernelskill.paths import EXAMPLES_DIR
from kernelskill.errors import UserError
from kernelskill.task import Task
from kernelskill.candidate import parse_python

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")
INLINE_PREFIX = "inline:"


@dataclass(frozen=True)
class ResolvedTask:
    """A task ready for the evaluator, and where it came from."""
    task: Task
    kind: str          # example | path | inline
    ref: str           # what a client passes back to name this task again (inline: a handle)

    @property
    def trusted(self) -> bool:
        """Shipped examples may run in the server process; anything else runs in a worker."""
        return self.kind == "example"


def example_names() -> list[str]:
    """Names of the shipped example tasks (directories under examples/ with a reference.py)."""
    if not EXAMPLES_DIR.is_dir():
        return []
    return sorted(p.name for p in EXAMPLES_DIR.iterdir() if (p / "reference.py").is_file())


def example_dir(name: str) -> Path:
    """The directory of one shipped example; UserError naming the known ones otherwise."""
    if _NAME.match(name) and name in example_names():
        return EXAMPLES_DIR / name
    raise UserError(f"no example task named {name!r}; examples: {', '.join(example_names()) or 'none'}")


class Roots:
    """The directories whose files the server may read."""

    def __init__(self, dirs: list[Path | str]):
        resolved = []
        for d in dirs:
            p = Path(d).expanduser().resolve()
            if not p.is_dir():
                raise UserError(f"--root {d}: no such directory")
            resolved.append(p)
        if not resolved:
            raise UserError("at least one --root directory is needed")
        self.dirs: list[Path] = resolved

    def __str__(self) -> str:
        return ", ".join(map(str, self.dirs))

    def contains(self, path: Path) -> bool:
        return any(path == r or path.is_relative_to(r) for r in self.dirs)

    def check(self, spec: str) -> Path:
        """The resolved path of ``spec`` if it lies inside a root (it need not exist)."""
        if "\x00" in spec:
            raise UserError("the path contains a NUL byte")
        if len(spec.encode()) > 4096 or any(len(part.encode()) > 255 for part in Path(spec).parts):
            raise UserError(f"{spec[:80]}…: {len(spec)} characters is no path (the limit is 4096, and 255 "
                            f"per name); pass a path inside a root, an example name, or the KernelBench "
                            f"source itself (class Model, get_inputs, get_init_inputs on several lines)")
        raw = Path(spec).expanduser()
        options = [raw] if raw.is_absolute() else [r / raw for r in self.dirs]
        resolved = [p.resolve() for p in options]
        inside = [p for p in resolved if self.contains(p)]
        existing = [p for p in inside if p.exists()]
        if existing:
            return existing[0]
        if inside:
            return inside[0]
        raise UserError(f"{spec}: outside the allowed roots ({self}). Pass a path inside a root, an "
                        f"example name, or the KernelBench source itself; the server's operator can "
                        f"allow another directory with --root DIR")

    def resolve_task(self, spec: str, inline_dir: Path, preset: str | None = None,
                     max_bytes: int = 512_000) -> ResolvedTask:
        """Turn a tool's ``task`` argument into a loaded Task (no task code runs here)."""
        if not spec or not spec.strip():
            raise UserError("task is empty: pass an example name (see list_tasks), a task path inside "
                            "the roots, or the KernelBench source")
        if "\n" in spec.strip():
            path = write_inline(spec, inline_dir, max_bytes)
            return ResolvedTask(Task.load(path, preset=preset), "inline", inline_handle(path))
        spec = spec.strip()
        if spec.startswith(INLINE_PREFIX):
            path = inline_dir / f"inline_{spec[len(INLINE_PREFIX):]}.py"
            if not _NAME.match(spec[len(INLINE_PREFIX):]) or not path.is_file():
                raise UserError(f"{spec}: unknown inline task handle (handles last while the server runs); "
                                f"send the task source again")
            return ResolvedTask(Task.load(path, preset=preset), "inline", spec)
        is_name = _NAME.match(spec) is not None and "/" not in spec
        try:
            path = self.check(spec)
        except UserError:
            if is_name and spec in example_names():
                return ResolvedTask(Task.load(example_dir(spec), preset=preset), "example", spec)
            raise
        if path.is_file() and path.suffix != ".py":
            raise UserError(f"{spec}: a task file is a Python (.py) file, or a directory with reference.py")
        if path.exists():
            task = Task.load(path, preset=preset)
            if not self.contains(task.path.resolve()):      # task.toml's `reference` may point elsewhere
                raise UserError(f"{spec}: its reference file {task.path} is outside the allowed roots ({self})")
            return ResolvedTask(task, "path", str(path))
        if is_name and spec in example_names():
            return ResolvedTask(Task.load(example_dir(spec), preset=preset), "example", spec)
        near = [n for n in example_names() if spec.lower() in n.lower()][:5]
        hint = f" Similar examples: {', '.join(near)}." if near else " Call list_tasks to see the tasks."
        raise UserError(f"{spec}: no such task file or directory in the roots ({self}) and no example "
                        f"of that name.{hint}")


def inline_handle(path: Path) -> str:
    """The short name a client can pass instead of resending an inline source."""
    return INLINE_PREFIX + path.stem.removeprefix("inline_")


def write_inline(source: str, inline_dir: Path, max_bytes: int) -> Path:
    """Check an inline KernelBench source statically and store it under ``inline_dir``."""
    size = len(source.encode())
    if size > max_bytes:
        raise UserError(f"the task source is {size} bytes; the limit is {max_bytes}. Pass a path "
                        f"inside the roots instead")
    try:
        tree = parse_python(source)
    except SyntaxError as e:
        raise UserError(f"the task source has a syntax error at line {e.lineno}: {e.msg}") from None
    defined = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    missing = [n for n in REQUIRED_NAMES if n not in defined]
    if missing:
        raise UserError(f"the task source defines no {', '.join(missing)} at the top level; a KernelBench "
                        f"task defines class Model(nn.Module), get_inputs() and get_init_inputs()")
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    inline_dir.mkdir(parents=True, exist_ok=True)
    path = inline_dir / f"inline_{digest}.py"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        tmp.write_text(source)
        tmp.replace(path)
    return path
