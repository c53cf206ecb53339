"""Planning: which jobs a bench runs. ``plan`` turns a suite's tasks and the bench's settings into a
``TaskPlan`` per task — its jobs, each keyed by everything behind its numbers (``jobs.job_key``) —
or the reason it has none."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..candidate import source_hash
from ..errors import TaskError, UserError
from ..task import Task
from .jobs import EvalJob, OptimizeJob, ReferenceJob, job_key
from .suite import SuiteTask

BACKENDS = {"cpu": ("cpp",), "cuda": ("cuda", "triton")}
# The suite's timing: examples_table's settings (a 3 s cap per model); `kernelskill eval` allows 10 s.
DEFAULT_TIMING = {"warmup": 3, "min_reps": 30, "max_reps": 100, "time_cap_s": 3.0}

# Bumped when what a row's numbers mean changes with the backend flags (1: eager and the candidate
# under the user's flags, correctness against the strict reference; issue 43).
FLAGS_PROTOCOL = 1


@dataclass
class BenchSettings:
    """What to run and how. ``preset`` None: ``small`` on a CPU for tasks that define it."""
    device: str                                   # cpu, cuda or cuda:N (resolved)
    mode: str = "solutions"                       # solutions | optimize | reference
    preset: str | None = None
    include_wrong: bool = False
    backends: tuple[str, ...] | None = None       # default: by device (BACKENDS)
    trials: int = 5
    timing: dict = field(default_factory=lambda: dict(DEFAULT_TIMING))
    baseline: str = "eager"                       # eager | compile | both
    flags: str = "default"                        # default | strict: the backend flags timed under (evaluate/flags.py)
    threads: int | None = None                    # per evaluation on a CPU (the executor's)
    optimize_config: dict | None = None           # Config.data for --optimize
    runs_dir: str | None = None                   # where --optimize stores its runs
    shapes: str | None = None                     # solutions checked at derived shapes too: auto | presets

    @property
    def device_kind(self) -> str:
        return "cuda" if self.device.startswith("cuda") else "cpu"


@dataclass
class TaskPlan:
    task: SuiteTask
    preset: str | None = None
    jobs: list = field(default_factory=list)       # honest solutions first, then wrong ones
    error: str = ""                                # the task itself does not load
    note: str = ""                                 # why it has no job


def plan(tasks: list[SuiteTask], s: BenchSettings) -> list[TaskPlan]:
    """The jobs of every task; a task that does not load gets an error row and no job."""
    if s.preset:
        missing = [t.id for t in tasks if not _has_preset(t, s.preset)]
        if missing:
            raise UserError(f"--preset {s.preset}: not defined by {', '.join(missing[:5])}"
                            f"{' …' if len(missing) > 5 else ''} (presets live in each task's task.toml)")
    if s.shapes and s.mode != "solutions":
        raise UserError(f"--shapes {s.shapes}: checks the shipped solutions at derived shapes; not with "
                        f"--{s.mode} (run `kernelskill eval --shapes` on a candidate instead)")
    if s.shapes:
        _check_shape_presets(tasks, s.shapes)
    plans = []
    # Rows timed before eager ran under the user's flags (TF32 convolutions off) are not reused.
    flags = f"flags-{FLAGS_PROTOCOL}-{s.flags}"
    for t in tasks:
        p = TaskPlan(t)
        try:
            base = Task.load(t.path)
            p.preset = s.preset or ("small" if s.device_kind == "cpu" and "small" in base.presets else None)
            task = Task.load(t.path, preset=p.preset)
        except TaskError as e:
            p.error = str(e)
            plans.append(p)
            continue
        files = _task_files(t.path, task)
        if s.mode == "reference":
            key = job_key("reference", task.hash, s.device, p.preset, s.trials, s.timing, s.baseline, s.threads, flags)
            p.jobs.append(ReferenceJob(key, t.id, str(t.path), p.preset, s.trials, dict(s.timing), s.baseline, files,
                                       flags=s.flags))
        elif s.mode == "optimize":
            key = job_key("optimize", task.hash, s.device, p.preset, s.baseline, s.threads,
                          {k: s.optimize_config.get(k) for k in ("llm", "budget", "search", "eval", "agents")}, flags)
            p.jobs.append(OptimizeJob(key, t.id, str(t.path), p.preset, s.optimize_config, s.runs_dir or "runs",
                                      s.baseline, files, flags=s.flags))
        else:
            for path, expected in t.solutions(s.backends or BACKENDS[s.device_kind], s.include_wrong):
                source = path.read_text()
                parts = ["eval", task.hash, source_hash(source), s.device, p.preset, s.trials, s.timing,
                         s.baseline, s.threads, flags]
                # A row checked at derived shapes is another row than one not checked: never reused
                # for the other. Without --shapes the key is the one it always was (old files resume).
                if s.shapes:
                    parts.append(f"shapes-{_normal_shapes(s.shapes)}")
                key = job_key(*parts)
                rel = path.relative_to(t.path if t.path.is_dir() else t.path.parent).as_posix()
                p.jobs.append(EvalJob(key, t.id, str(t.path), p.preset, rel, source, expected, s.trials,
                                      dict(s.timing), s.baseline, files, flags=s.flags, shapes=s.shapes))
            if not any(j.expected == "ok" for j in p.jobs):
                p.note = f"no {' or '.join(s.backends or BACKENDS[s.device_kind])} solution for {s.device}"
        plans.append(p)
    return plans


def _normal_shapes(spec: str) -> str:
    """``--shapes`` as a key part: its names without spaces, in their order (``auto,small``)."""
    return ",".join(n.strip() for n in spec.split(",") if n.strip())


def _check_shape_presets(tasks: list[SuiteTask], spec: str) -> None:
    """``--shapes small,large``: every task must define those presets (``auto`` takes whatever a
    task has). Refused before any run, as ``--preset`` is."""
    names = [n for n in _normal_shapes(spec).split(",") if n]
    if not names:
        raise UserError(f"--shapes {spec!r}: expected auto or preset names separated by commas (small,large)")
    wanted = [n for n in names if n != "auto"]
    missing = [f"{t.id} ({', '.join(n for n in wanted if not _has_preset(t, n))})" for t in tasks
               if not all(_has_preset(t, n) for n in wanted)]
    if missing:
        raise UserError(f"--shapes {spec}: presets not defined by {', '.join(missing[:5])}"
                        f"{' …' if len(missing) > 5 else ''} (presets live in each task's task.toml; or --shapes "
                        f"auto: each task's presets and its size constants halved, doubled and made a prime)")


def _has_preset(t: SuiteTask, preset: str) -> bool:
    try:
        return preset in Task.load(t.path).presets
    except TaskError:
        return True                 # its own error shows on its row


def _task_files(path: Path, task: Task) -> dict[str, str]:
    """The files a remote worker needs to load the task: the directory's top-level .py and .toml."""
    if not path.is_dir():
        return {path.name: task.source}
    return {f"{path.name}/{p.name}": p.read_text() for p in sorted(path.iterdir())
            if p.is_file() and p.suffix in (".py", ".toml")}


def unique_jobs(plans: list[TaskPlan]) -> list:
    """Each job once (two identical solutions of a task are one job)."""
    seen: dict[str, Any] = {}
    for p in plans:
        for j in p.jobs:
            seen.setdefault(j.key, j)
    return list(seen.values())
