"""Jobs: one solution of one task (``EvalJob``), a task's reference as its own candidate
(``ReferenceJob``) or one optimizer run on a task (``OptimizeJob``). Each carries its task's files,
runs on whatever machine an executor hands it to, and returns its record: the JSON line that
``store.ResultStore`` keeps (``store.Row`` reads it back)."""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ..errors import StochasticTask, TaskError, UserError
from ..task import Task
from ..vocab import RowStatus, Status


class _Shippable:
    """Jobs carry their task's files, so a worker on another machine can rebuild the task."""
    task_path: str
    files: dict

    @contextlib.contextmanager
    def shipped(self):
        from kernelskill.evaluate import host
        tmp = host.temp_dir("kernelskill-ship-")
        try:
            top = Path(self.task_path).name
            for rel, text in self.files.items():
                (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
                (tmp / rel).write_text(text)
            yield dataclasses.replace(self, task_path=str(tmp / top))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def load_task(self) -> Task:
        return Task.load(self.task_path, preset=self.preset)


class _Evaluates:
    """A job that runs the trusted evaluator under the bench's settings."""
    trials: int
    timing: dict
    baseline: str

    def _options(self, device: str, threads: int | None):
        from kernelskill.evaluate.api import Options
        from kernelskill.evaluate.worker.timing import TimingConfig
        # --shapes: a solution's correct verdict is followed by the check at derived shapes.
        return Options(device=device, trials=self.trials, timing=TimingConfig(**self.timing),
                       baseline=self.baseline, flags=self.flags, threads=threads,
                       shapes=getattr(self, "shapes", None))


@dataclass
class EvalJob(_Shippable, _Evaluates):
    """One solution of one task: compile, verify and time it."""
    key: str
    task: str
    task_path: str
    preset: str | None
    solution: str                                 # its path from the task directory (solutions/…)
    source: str
    expected: str
    trials: int
    timing: dict
    baseline: str
    files: dict = field(default_factory=dict, repr=False)
    kind: str = "eval"
    flags: str = "default"
    shapes: str | None = None                     # --shapes: auto or preset names (evaluate.shapes)
    builds: ClassVar[bool] = True                 # the pool builds it before the timing phase

    def build(self, device: str) -> str:
        """Fill the build cache (the pool's first phase); failures show again in ``run``. Returns how
        it went, in a few words (the build phase's progress line)."""
        from ..candidate import Candidate
        from kernelskill.evaluate.api import compile
        try:
            res = compile(Candidate.from_source(self.source), device=device, opts=self._options(device, None))
        except UserError as e:
            return f"not built: {str(e)[:80]}"
        if not res.ok:
            return "compile error" + (" (compile-only check)" if res.compile_only else "")
        how = "cached" if res.cache_hit else f"built in {res.seconds:.1f} s"
        return how + (", compile-only check" if res.compile_only else "") + (
            f", torch's build ({res.fallback[:60]})" if res.path == "torch" and res.fallback else "")

    def run(self, device: str, threads: int | None) -> dict:
        from ..candidate import Candidate
        from kernelskill.evaluate.api import evaluate
        started = time.perf_counter()
        try:
            cand = Candidate.from_source(self.source, path=Path(self.solution))
            r = evaluate(self.load_task(), cand, opts=self._options(device, threads))
            status, message, result = r.status, r.message, r.to_dict()
        except UserError as e:
            status, message, result = _error_status(e), str(e), None
        return _record(self, status, message, result, device, threads, started)


@dataclass
class ReferenceJob(_Shippable, _Evaluates):
    """A task's reference as its own candidate (``--reference``; no solution, no LLM): the whole
    protocol on it — seeded trials against itself, where a reference that differs from itself under
    one seed is ``stochastic``; eager (and torch.compile) timed; roofline floor, fraction and
    bottleneck — plus the task's op classes. What a suite costs and where its floors lie, before
    any kernel is written; the rows of ``OUT/baseline.json``."""
    key: str
    task: str
    task_path: str
    preset: str | None
    trials: int
    timing: dict
    baseline: str
    files: dict = field(default_factory=dict, repr=False)
    solution: str = "reference"
    expected: str = "ok"
    kind: str = "reference"
    flags: str = "default"
    builds: ClassVar[bool] = False

    def build(self, device: str) -> None:
        pass                        # nothing to build: the candidate is the reference

    def run(self, device: str, threads: int | None) -> dict:
        from kernelskill.evaluate.api import profile
        started = time.perf_counter()
        classes, task = None, None
        try:
            task = self.load_task()
            opts = self._options(device, threads)
            r = profile(task, None, opts=opts)
            status, message, result = r.status, r.message, r.to_dict()
            classes = reference_op_classes(task, device, opts)
        except UserError as e:
            status, message, result = _error_status(e), str(e), None
        if classes is None and task is not None:
            classes = op_classes(task)
        return {**_record(self, status, message, result, device, threads, started), "op_classes": classes}


def reference_op_classes(task: Task, device: str, opts) -> list[str] | None:
    """The op classes the reference worker traced beside its FLOPs (its cached reply); None when it
    has none (a reference that failed, or one cached before it recorded them)."""
    from kernelskill.evaluate.api import reference_dir
    meta = reference_dir(task, device, opts) / "meta.json"
    try:
        return json.loads(meta.read_text()).get("op_classes")
    except (OSError, ValueError):
        return None


def op_classes(task: Task) -> list[str] | None:
    """The task's op classes (traced on meta tensors); None when its forward cannot be traced."""
    from ..features import trace
    try:
        return trace(task, fallback=False)["op_classes"]    # never the task's real sizes on this CPU
    except Exception:  # noqa: BLE001 — an op without a meta kernel, or an __init__ that needs data: unknown
        return None


@dataclass
class OptimizeJob(_Shippable):
    """One task through ``kernelskill.optimize``; its best verified candidate is the result."""
    key: str
    task: str
    task_path: str
    preset: str | None
    config: dict
    runs_dir: str
    baseline: str
    files: dict = field(default_factory=dict, repr=False)
    solution: str = "optimize"
    expected: str = "ok"
    kind: str = "optimize"
    flags: str = "default"
    builds: ClassVar[bool] = False

    def build(self, device: str) -> None:
        pass                        # the optimizer builds as it goes

    def run(self, device: str, threads: int | None) -> dict:
        from ..config import Config
        from ..optimizer import eval_options, optimize
        from ..runs import load_run
        started = time.perf_counter()
        config = Config(copy.deepcopy(self.config))
        extra: dict[str, Any] = {}
        try:
            opts = dataclasses.replace(eval_options(config, device), baseline=self.baseline, flags=self.flags,
                                       threads=threads)
            out = optimize(self.load_task(), config=config, runs_dir=self.runs_dir, device=device, eval_opts=opts)
            best = load_run(out.path).tree.get(out.best_node) if out.best_node else None
            result = best.result.to_dict() if best and best.result else None   # a JSON record
            status = Status.ok if best else RowStatus.no_correct
            message = (f"best {out.best_node} at {out.best_speedup:.2f}× after {out.attempts} attempts" if best
                       else f"no correct candidate after {out.attempts} attempts ({out.reason})")
            extra = {"run_dir": str(out.path), "best_file": str(out.path / "best.py") if best else None,
                     "attempts": out.attempts, "reason": out.reason, "tokens": out.spend.tokens,
                     "usd": out.spend.usd}
        except UserError as e:
            status, message, result = _error_status(e), str(e), None
        return {**_record(self, status, message, result, device, threads, started), **extra}


def _error_status(e: UserError) -> str:
    """A job's status when it raised: stochastic (the optimizer stopped on a reference that differs
    from itself: the evaluator's verdict for it), task_error, or error (the LLM endpoint, …)."""
    if isinstance(e, StochasticTask):
        return Status.stochastic
    return RowStatus.task_error if isinstance(e, TaskError) else RowStatus.error


def _record(job, status: str, message: str, result: dict | None, device: str, threads: int | None,
            started: float) -> dict:
    """The JSON line stored for a finished job."""
    return {"key": job.key, "kind": job.kind, "task": job.task, "solution": job.solution,
            "expected": job.expected, "status": status, "message": message, "device": device,
            "threads": threads, "seconds": round(time.perf_counter() - started, 3),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S"), "result": result}


def job_key(*parts: Any) -> str:
    """What identifies a result: the task, the code, the device and every setting behind the numbers."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:24]
