"""Where things live: the user store (``$KERNELSKILL_HOME``), the shipped skills and example tasks,
and what a task argument names. Every reader asks here, so a checkout and an installed wheel behave
the same.

The shipped skills and examples sit beside the package in a checkout (``skills/``, ``examples/``)
and inside it in a wheel (``kernelskill/_skills``, ``kernelskill/_examples``; ``setup.py`` maps them
there)."""
from __future__ import annotations

import os
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def _shipped(name: str) -> Path:
    checkout = _PACKAGE.parent
    # a checkout has its pyproject beside the package; site-packages may hold some other `examples`
    if (checkout / "pyproject.toml").is_file() and (checkout / name).is_dir():
        return checkout / name
    return _PACKAGE / f"_{name}"


SKILLS_DIR = _shipped("skills")
EXAMPLES_DIR = _shipped("examples")


def user_home() -> Path:
    """The user store: ``$KERNELSKILL_HOME``, else ``$XDG_DATA_HOME/kernelskill``, else
    ``~/.local/share/kernelskill``."""
    env = os.environ.get("KERNELSKILL_HOME")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / "kernelskill"


def cache_root() -> Path:
    """Where builds, references and ceilings are cached: $KERNELSKILL_CACHE, else ~/.cache/kernelskill."""
    root = os.environ.get("KERNELSKILL_CACHE") or str(Path.home() / ".cache" / "kernelskill")
    return Path(root)


def resolve_task_path(spec: str) -> str:
    """A task argument as a path: the path itself when it exists, else the shipped example of that
    name (``softmax_rows``), else the argument unchanged (the loader then says what is missing)."""
    if Path(spec).exists() or not (EXAMPLES_DIR / spec).exists():
        return spec
    return str(EXAMPLES_DIR / spec)
