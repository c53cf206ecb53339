"""The trusted evaluator (shared/EVALUATION.md is its protocol)."""
from .api import compile, evaluate, profile, verify

__all__ = ["compile", "evaluate", "profile", "verify"]
