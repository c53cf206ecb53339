"""From the Home screen's form to an ``Optimizer``: the same library calls ``kernelskill optimize`` makes.

The form yields a ``RunRequest`` (plain data); ``build_optimizer`` loads the task and the config
with the request's values as flags, which is slow enough (tracing the task, loading skills and
prompts, the LLM client) to belong in the run's worker thread, not the UI.
"""
from __future__ import annotations

import dataclasses
import functools
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelskill.config import Config, flatten, nest
from kernelskill.errors import UserError

DEVICES = ("auto", "cpu", "cuda")
POLICIES = ("stark", "line")


@dataclass
class RunRequest:
    """What the user asked for on the Home screen."""
    task: str
    preset: str | None = None
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    attempts: int | None = None
    minutes: float | None = None
    tokens: int | None = None
    usd: float | None = None
    policy: str = "stark"
    device: str = "auto"
    runs_dir: str | None = None

    def flags(self) -> dict[str, Any]:
        """Config settings, as ``load_config`` flags (an empty field keeps the configured value,
        except budgets, where empty means no limit)."""
        return {"llm.base_url": self.base_url or None, "llm.model": self.model or None,
                "llm.api_key_env": self.api_key_env, "search.policy": self.policy, "eval.device": self.device,
                "runs_dir": self.runs_dir or None}

    def budget(self) -> dict[str, Any]:
        return {"attempts": self.attempts, "tokens": self.tokens, "usd": self.usd, "minutes": self.minutes}


def build_optimizer(req: RunRequest, config: Config, *, llm=None):
    """The task and an Optimizer configured as ``config`` with the form's values on top (UserError
    for anything the user must fix)."""
    from kernelskill.paths import resolve_task_path
    from kernelskill.optimizer import Optimizer
    from kernelskill.task import Task
    if not req.task.strip():
        raise UserError("choose a task: pick an example or type the path of a KernelBench file")
    task = Task.load(resolve_task_path(req.task.strip()), preset=req.preset or None)
    return Optimizer(task, llm=llm, config=apply_request(config, req))


def apply_request(config: Config, req: RunRequest) -> Config:
    """A copy of ``config`` with the form's values, validated like any config layer."""
    flags = {k: v for k, v in req.flags().items() if v is not None}
    checked = flatten(nest(flags), "the form")
    out = config.copy()
    for key, value in checked.items():
        out.set(key, value, "the form")
    if req.api_key_env == "":
        out.llm.api_key_env = None          # cleared on the form: no key
    for name, value in req.budget().items():
        if value is not None and value < 0:
            raise UserError(f"the form: budget {name} must not be negative")
        setattr(out.budget, name, value)
    return out


@dataclass
class Example:
    """A shipped task directory, for the Home screen's list."""
    name: str
    path: Path
    description: str = ""
    presets: tuple[str, ...] = ()


def list_examples(root: Path) -> list[Example]:
    """Task directories under ``root`` (those with a reference.py), sorted by name."""
    if not root.is_dir():
        return []
    out = []
    for d in sorted(root.iterdir()):
        if not (d / "reference.py").is_file():
            continue
        meta = _task_toml(d)
        out.append(Example(d.name, d, str(meta.get("description", "")), tuple(meta.get("presets", {}))))
    return out


def describe_task(spec: str) -> tuple[str, str]:
    """(one line about the task at ``spec``, a style): its description, or what is wrong with the path."""
    from kernelskill.paths import resolve_task_path
    if not spec.strip():
        return "", ""
    p = Path(resolve_task_path(spec.strip()))
    if p.is_dir():
        meta = _task_toml(p)
        if not (p / "reference.py").is_file():
            return f"{p.name}: no reference.py in this directory", "red"
        return str(meta.get("description") or f"{p.name}: a task directory"), ""
    if p.is_file():
        return f"{p.name}: a KernelBench file", ""
    return f"no such file or directory: {spec.strip()}", "red"


def _task_toml(d: Path) -> dict[str, Any]:
    try:
        return tomllib.loads((d / "task.toml").read_text(encoding="utf-8")) if (d / "task.toml").is_file() else {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}


def presets_of(spec: str) -> tuple[str, ...]:
    """Preset names of a task directory or file path (none for a plain file or a bad path)."""
    from kernelskill.paths import resolve_task_path
    p = Path(resolve_task_path(spec.strip())) if spec.strip() else None
    return tuple(_task_toml(p).get("presets", {})) if p and p.is_dir() else ()


@functools.lru_cache(maxsize=1)
def has_cuda() -> bool:
    import torch
    return bool(torch.version.cuda) and torch.cuda.is_available()


def default_preset(presets: tuple[str, ...], device: str) -> str | None:
    """``small`` when the task has it and the run is on the CPU, else the task's own sizes."""
    return "small" if "small" in presets and device == "cpu" else None


def resume_flags(config: Config) -> dict[str, Any]:
    """What a run resumed from the TUI takes from the TUI's settings: the endpoint and models (the
    ``[llm]`` table, per-role models included) and every budget that is set; the rest stays the run's."""
    def given(d: dict) -> dict:
        return {k: given(v) if isinstance(v, dict) else v for k, v in d.items() if v is not None}
    llm = flatten({"llm": given(dataclasses.asdict(config.llm))}, "the TUI's settings")
    return {**llm, **{f"budget.{k}": v for k, v in dataclasses.asdict(config.budget).items() if v is not None}}
