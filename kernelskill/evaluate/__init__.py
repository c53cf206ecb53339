"""The trusted evaluator (shared/EVALUATION.md is its protocol).

``from kernelskill.evaluate import compile, evaluate, profile, verify``: the functions of ``api``,
imported on first use, so that the package's torch-free modules (``isolation``, ``build``,
``lifeline``) import without torch — a one-shot command starts its worker before its own torch import.
"""
_API = ("compile", "evaluate", "profile", "verify")

__all__ = list(_API)


def __getattr__(name: str):
    if name in _API:
        from . import api
        value = getattr(api, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
