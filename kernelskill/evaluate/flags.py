"""PyTorch's backend flags: the ones a user's process runs with, and the strict ones correctness uses.

Two sets matter to every evaluation (shared/EVALUATION.md, "Backend flags"):

- the **user's** flags: what a fresh process has (PyTorch's defaults: TF32 for cuDNN convolutions on,
  for matmuls off), or the task's own (``[flags]`` in task.toml). Eager, torch.compile and the
  candidate are timed under them, and the candidate's trial outputs come from them: a speedup is
  one over the PyTorch the user runs;
- the **strict** flags: TF32 off everywhere. The reference outputs that correctness compares
  against are computed under them, and the user's eager's own distance from them sets how far
  the tolerance may be raised (verdict.tolerances).

``--flags strict`` (or ``flags = "strict"`` in task.toml) times under the strict flags instead, for
users who want strict-fp32 baselines; every speedup shown then says so.

Settings are plain data ({name: value}, names as ``guards.backend_flags`` reports them), so they
travel in a worker's request and land in the result's Env.
"""
from __future__ import annotations

import contextlib

import torch

MODES = ("default", "strict")

# TF32 off everywhere; fp32 matmuls at full precision.
STRICT = {"cuda.matmul.allow_tf32": False, "cudnn.allow_tf32": False, "float32_matmul_precision": "highest"}



def resolve(task_flags: dict | None, task_mode: str | None, mode: str) -> tuple[str, dict]:
    """(label, settings) an evaluation times under: ``mode`` is the caller's ("default" | "strict");
    a task may ask for strict itself, or name its own settings. Label: "default" (PyTorch's
    defaults), "task" (the task's own settings on top of them) or "strict"."""
    if mode not in MODES:
        raise ValueError(f"flags {mode!r}: expected one of {', '.join(MODES)}")
    if mode == "strict" or task_mode == "strict":
        return "strict", dict(STRICT)
    if task_flags:
        return "task", dict(task_flags)
    return "default", {}


def apply(settings: dict) -> None:
    """Set each named flag (the others keep what the process has)."""
    b = torch.backends
    for name, value in settings.items():
        if name == "cuda.matmul.allow_tf32":
            b.cuda.matmul.allow_tf32 = bool(value)
        elif name == "cudnn.allow_tf32":
            b.cudnn.allow_tf32 = bool(value)
        elif name == "cudnn.benchmark":
            b.cudnn.benchmark = bool(value)
        elif name == "cudnn.deterministic":
            b.cudnn.deterministic = bool(value)
        elif name == "float32_matmul_precision":
            torch.set_float32_matmul_precision(str(value))
        else:
            raise ValueError(f"unknown backend flag {name!r}")


def current(names=None) -> dict:
    """The flags' values now (those of ``names``, or every one ``apply`` knows)."""
    b = torch.backends
    now = {"cuda.matmul.allow_tf32": b.cuda.matmul.allow_tf32, "cudnn.allow_tf32": b.cudnn.allow_tf32,
           "cudnn.benchmark": b.cudnn.benchmark, "cudnn.deterministic": b.cudnn.deterministic,
           "float32_matmul_precision": torch.get_float32_matmul_precision()}
    return {k: v for k, v in now.items() if names is None or k in names}


@contextlib.contextmanager
def applied(settings: dict):
    """``settings`` while the block runs, then what was there before."""
    before = current(settings)
    apply(settings)
    try:
        yield
    finally:
        apply(before)

