"""Where the shipped skills and example tasks live: beside the package in a checkout (``skills/``,
``examples/``), inside it in an installed wheel (``kernelskill/_skills``, ``kernelskill/_examples``;
``setup.py`` maps them there). Every reader asks here, so both layouts behave the same."""
from __future__ import annotations

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
