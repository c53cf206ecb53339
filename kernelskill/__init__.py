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
           "UserError", "TaskError"]
# The evaluator's functions: ``from kernelskill.evaluate import compile, verify, profile, evaluate``.
