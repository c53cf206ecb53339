"""KernelSkill: turn slow PyTorch modules into fast, verified kernels.

``import kernelskill`` needs only torch, numpy and tomli-w; the TUI, MCP server and LLM client
import their packages lazily.
"""
from .candidate import Candidate
from .errors import TaskError, UserError
from .results import CompileResult, EvalResult, ProfileResult, VerifyResult
from .task import Task

__version__ = "0.1.0"

__all__ = ["Candidate", "Task", "EvalResult", "CompileResult", "VerifyResult", "ProfileResult",
           "UserError", "TaskError", "optimize", "Budget"]

_LAZY = {"optimize": "optimizer", "Budget": "config"}


def __getattr__(name: str):
    """``kernelskill.optimize(task, llm=…, budget=…)`` and ``kernelskill.Budget``, imported on first
    use so that ``import kernelskill`` stays free of the optimizer (and of openai)."""
    if name in _LAZY:
        import importlib
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
# The evaluator's functions: ``from kernelskill.evaluate import compile, verify, profile, evaluate``.
