"""``kernelskill bench``: a suite of tasks through an executor, scored with KernelBench's metrics.

    from kernelskill.bench.suite import discover, resolve_suite, select
    tasks = select(discover(resolve_suite("examples")), levels={1, 2}, limit=5)
    plans = plan(tasks, BenchSettings(device="cpu"))
    records, reused = run(plans, make_executor("pool", "cpu"), ResultStore(out / "results.jsonl"))
    rows = task_rows(plans, records); summary = summarize(rows)

A job is one solution of one task (or, with ``--optimize``, one optimizer run on a task). Every
finished job is one JSON line in ``results.jsonl``, flushed at once, keyed by everything behind
its numbers: a rerun skips what is done, and a crash or Ctrl-C loses nothing finished.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
import json
import math
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ..candidate import source_hash
from ..errors import StochasticTask, TaskError, UserError
from .suite import SuiteTask
from ..task import Task
from ..vocab import EVALUATED, RowStatus, Status

BACKENDS = {"cpu": ("cpp",), "cuda": ("cuda", "triton")}
# The suite's timing: examples_table's settings (a 3 s cap per model); `kernelskill eval` allows 10 s.
DEFAULT_TIMING = {"warmup": 3, "min_reps": 30, "max_reps": 100, "time_cap_s": 3.0}
FAST = (0.0, 1.0, 1.5, 2.0)
# The clipped geometric mean bounds each speedup to [1/CLIP, CLIP] (and to the task's roofline bound
# where it is known): one absurd task can no longer carry or sink a suite's mean (issue 26).
CLIP = 100.0


# Bumped when what a row's numbers mean changes with the backend flags (1: eager and the candidate
# under the user's flags, correctness against the strict reference; issue 43).
FLAGS_PROTOCOL = 1


# ---- jobs ---------------------------------------------------------------------------------------
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

    @property
    def device_kind(self) -> str:
        return "cuda" if self.device.startswith("cuda") else "cpu"


class _Shippable:
    """Jobs carry their task's files, so a worker on another machine can rebuild the task."""
    task_path: str
    files: dict

    @contextlib.contextmanager
    def shipped(self):
        tmp = Path(tempfile.mkdtemp(prefix="kernelskill-ship-"))
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
        from ..evaluate.api import Options
        from ..evaluate.timing import TimingConfig
        return Options(device=device, trials=self.trials, timing=TimingConfig(**self.timing),
                       baseline=self.baseline, flags=self.flags, threads=threads)


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
    builds: ClassVar[bool] = True                 # the pool builds it before the timing phase

    def build(self, device: str) -> str:
        """Fill the build cache (the pool's first phase); failures show again in ``run``. Returns how
        it went, in a few words (the build phase's progress line)."""
        from ..candidate import Candidate
        from ..evaluate.api import compile
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
        from ..evaluate.api import evaluate
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
        from ..evaluate.api import profile
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
    from ..evaluate.api import reference_dir
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
                key = job_key("eval", task.hash, source_hash(source), s.device, p.preset, s.trials, s.timing,
                              s.baseline, s.threads, flags)
                rel = path.relative_to(t.path if t.path.is_dir() else t.path.parent).as_posix()
                p.jobs.append(EvalJob(key, t.id, str(t.path), p.preset, rel, source, expected, s.trials,
                                      dict(s.timing), s.baseline, files, flags=s.flags))
            if not any(j.expected == "ok" for j in p.jobs):
                p.note = f"no {' or '.join(s.backends or BACKENDS[s.device_kind])} solution for {s.device}"
        plans.append(p)
    return plans


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


# ---- running, resumable -------------------------------------------------------------------------
class ResultStore:
    """``results.jsonl``: one line per finished job, flushed as it lands."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()

    def load(self) -> dict[str, dict]:
        """Finished records by key (later lines win); a line cut short by a crash is skipped.
        A job that stopped on an ``error`` (an unreachable endpoint, …) is not finished: it reruns."""
        records: dict[str, dict] = {}
        if not self.path.is_file():
            return records
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(rec, dict) and "key" in rec:
                records[rec["key"]] = rec
        return {k: r for k, r in records.items() if r.get("status") != RowStatus.error}

    def reset(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("")

    def append(self, record: dict) -> None:
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a+", encoding="utf-8") as f:
                f.seek(0, 2)
                if f.tell():            # a last line cut short must not swallow this one
                    f.seek(f.tell() - 1)
                    if f.read(1) != "\n":
                        f.write("\n")
                f.write(json.dumps(record, default=str) + "\n")
                f.flush()


def unique_jobs(plans: list[TaskPlan]) -> list:
    """Each job once (two identical solutions of a task are one job)."""
    seen: dict[str, Any] = {}
    for p in plans:
        for j in p.jobs:
            seen.setdefault(j.key, j)
    return list(seen.values())


def stored(plans: list[TaskPlan], store: ResultStore) -> tuple[dict[str, dict], int]:
    """What ``run`` would reuse, running nothing: (the stored records of these plans, how many).
    UserError when none is stored (other flags than the run's, or another folder)."""
    keys = {j.key for j in unique_jobs(plans)}
    done = {k: r for k, r in store.load().items() if k in keys}
    if not done:
        raise UserError(f"--report-only: {store.path} holds no finished job of these tasks with these flags; "
                        f"give the flags of the run that wrote it (--levels, --device, --preset, --baseline, "
                        f"--trials, --time-cap) or run without --report-only")
    return done, len(done)


def run(plans: list[TaskPlan], executor, store: ResultStore, *, fresh: bool = False, on_start=None,
        on_result=None, note=lambda _: None) -> tuple[dict[str, dict], int]:
    """Run what is not done yet; return (every record by key, how many were reused).

    ``on_start(to_run, reused)`` is called once, ``on_result(job, record)`` after each job is stored.
    """
    jobs = unique_jobs(plans)
    if fresh:
        store.reset()
    keys = {j.key for j in jobs}
    done = {k: r for k, r in store.load().items() if k in keys}
    todo = [j for j in jobs if j.key not in done]
    reused = len(jobs) - len(todo)
    if on_start:
        on_start(len(todo), reused)
    from ..evaluate.isolation import prestarting
    # On a GPU machine the next worker imports torch while this one runs; on a CPU that would
    # take cores from the evaluations being timed.
    with prestarting(str(getattr(executor, "device", "")).startswith("cuda")):
        for job, record in executor.map(todo, note):
            store.append(record)
            done[job.key] = record
            if on_result:
                on_result(job, record)
    return done, reused


# ---- rows and metrics ---------------------------------------------------------------------------
def solution_row(p: TaskPlan, job, rec: dict) -> dict:
    """One evaluated solution (examples_table's row: task, solution, expected, status, speedup, …)."""
    res = rec.get("result") or {}
    prof = res.get("profile") or {}
    ms = lambda name: (prof.get(name) or {}).get("median_ms")  # noqa: E731
    row = {"task": p.task.id, "level": p.task.level, "solution": rec.get("best_file") or job.solution,
           "expected": job.expected, "status": rec["status"], "as_expected": rec["status"] == job.expected,
           "speedup": res.get("speedup"), "ci": prof.get("speedup_ci") or None,
           "quality": (prof.get("quality") or {}).get("verdict"),
           "speedup_vs_compile": prof.get("speedup_vs_compile"), "eager_ms": ms("baseline"),
           "cand_ms": ms("candidate"), "compile_ms": ms("compile_baseline"), "custom_share": res.get("custom_share"),
           "flags": res.get("flags", []), "message": rec.get("message", ""), "seconds": rec.get("seconds"),
           "device": rec.get("device"), "gpu": (res.get("env") or {}).get("gpu"),
           "floor_ms": (prof.get("roofline") or {}).get("floor_ms"),
           "floor_binds": (prof.get("roofline") or {}).get("binds"),
           "eager_fraction": (prof.get("roofline") or {}).get("eager_fraction"),
           "eager_over_roof_reason": (prof.get("roofline") or {}).get("eager_over_roof_reason"),
           "bottleneck": prof.get("bottleneck"), "op_classes": rec.get("op_classes"),
           "phases": res.get("phases") or {}}
    if job.kind == "optimize":
        row.update({k: rec.get(k) for k in ("run_dir", "attempts", "reason", "tokens", "usd")})
    return row


def task_rows(plans: list[TaskPlan], records: dict[str, dict]) -> list[dict]:
    """Per task: its best verified solution (status ok, highest speedup), all solutions nested."""
    rows = []
    for p in plans:
        sols = [solution_row(p, j, records[j.key]) for j in p.jobs if j.key in records]
        honest = [r for r in sols if r["expected"] == "ok"]
        ok = [r for r in honest if r["status"] == "ok"]
        # A solution measured well beats one whose timing was noisy, whatever the noisy one read.
        best = max(ok, key=lambda r: (r["quality"] in ("good", None), r["speedup"] or 0.0)) if ok else None
        first = best or (honest[0] if honest else None)
        if p.error:
            status, message = RowStatus.task_error, p.error
        elif first is None:
            status = RowStatus.no_solution if not any(j.expected == "ok" for j in p.jobs) else RowStatus.pending
            message = p.note if status == RowStatus.no_solution else "not run yet"
        else:
            status, message = first["status"], first["message"]
        rows.append({"task": p.task.id, "level": p.task.level, "preset": p.preset, "status": status,
                     "speedup": best["speedup"] if best else None, "ci": best["ci"] if best else None,
                     "quality": best["quality"] if best else None,
                     "speedup_vs_compile": best["speedup_vs_compile"] if best else None,
                     "custom_share": best["custom_share"] if best else None,
                     "eager_ms": (first or {}).get("eager_ms"), "solution": best["solution"] if best else None,
                     "message": message, "solutions": sols,
                     # What the task itself costs (the same in every solution's run): from the first.
                     **{k: (first or {}).get(k) for k in ("compile_ms", "floor_ms", "floor_binds", "eager_fraction",
                                                          "bottleneck", "op_classes", "seconds", "gpu")}})
    return rows


def geomean(xs: list[float]) -> float | None:
    """The geometric mean; None for no values."""
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def summarize(rows: list[dict]) -> dict:
    """KernelBench's metrics over every task (a task with no solution counts in n, not as correct):
    correct_rate = correct / n; fast_p = (correct and speedup > p) / n; geomean over correct tasks.

    Only good measurements count for speed: a correct task whose timing stayed noisy or contended
    (after the evaluator's re-times) is counted apart (``timing_not_good``) and left out of fast_p's
    numerator and denominator and of the geometric mean. Beside the plain geometric mean, one with
    each speedup clipped to [1/CLIP, CLIP] and to the task's roofline bound (eager time over the
    floor), and the tasks whose speedup is beyond that bound (``impossible_tasks``)."""
    n = len(rows)
    correct = [r for r in rows if r["status"] == "ok"]
    unsure = [r for r in correct if r.get("quality") not in ("good", None)]
    measured = [r for r in correct if r.get("quality") in ("good", None)]
    speedups = [r["speedup"] for r in measured if r["speedup"] is not None and r["speedup"] > 0]
    out: dict[str, Any] = {"n": n, "correct": len(correct), "correct_rate": len(correct) / n if n else 0.0,
                           "timing_not_good": len(unsure), "timing_not_good_tasks": [r["task"] for r in unsure]}
    timed_n = n - len(unsure)
    for p in FAST:
        name = f"fast_{p:g}".replace(".", "_")
        out[name] = sum(1 for s in speedups if s > p) / timed_n if timed_n else 0.0
    out["geomean_speedup"] = geomean(speedups)
    # A speedup that puts the candidate below its roofline floor (eager time / floor) is physically
    # impossible: the floor is the time the compulsory bytes and FLOPs take at the measured ceilings —
    # where it binds (``floor_binds``, the evaluator's: on a GPU, its L2 flushed; on a CPU its caches
    # may hold the working set, so there the floor is information). Rows from before the field: GPU rows.
    impossible, clipped = [], []
    for r in measured:
        if r["speedup"] is None or r["speedup"] <= 0:
            continue
        binds = r.get("floor_binds")
        binds = bool(r.get("gpu")) if binds is None else binds
        roof = r["eager_ms"] / r["floor_ms"] if binds and r.get("eager_ms") and r.get("floor_ms") else None
        if roof is not None and r["speedup"] > roof * 1.05:
            impossible.append(r["task"])
        clipped.append(min(max(r["speedup"], 1 / CLIP), CLIP, roof if roof else CLIP))
    out["geomean_speedup_clipped"] = geomean(clipped)
    out["impossible_tasks"] = impossible
    vs_compile = [r["speedup_vs_compile"] for r in measured if r.get("speedup_vs_compile")]
    if vs_compile:
        out["geomean_speedup_vs_compile"] = geomean(vs_compile)
    out["statuses"] = {s: sum(r["status"] == s for r in rows) for s in sorted({r["status"] for r in rows})}
    # What the suite's tasks are, whatever solved them: torch.compile against eager where both were
    # timed, the bottleneck classes, and the evaluation time the jobs took (summed, every executor slot).
    both = [r["eager_ms"] / r["compile_ms"] for r in rows if r["status"] == "ok" and r.get("eager_ms")
            and r.get("compile_ms") and r.get("quality") in ("good", None)]
    if both:
        out["compile_over_eager"] = {"n": len(both), "geomean": geomean(both),
                                     "faster": sum(x > 1 for x in both)}
    out["bottlenecks"] = {b: sum(r.get("bottleneck") == b for r in rows)
                          for b in sorted({r["bottleneck"] for r in rows if r.get("bottleneck")})}
    out["job_seconds"] = round(sum(s.get("seconds") or 0.0 for r in rows for s in r["solutions"]), 1)
    # Where those seconds went, by the evaluator's steps (EvalResult.phases), summed over the jobs.
    steps: dict[str, float] = {}
    for sol in (s for r in rows for s in r["solutions"]):
        for step, sec in (sol.get("phases") or {}).items():
            steps[step] = steps.get(step, 0.0) + sec
    out["phase_seconds"] = {k: round(v, 1) for k, v in sorted(steps.items(), key=lambda kv: -kv[1])}
    sols = [s for r in rows for s in r["solutions"]]
    honest = [s for s in sols if s["expected"] == "ok"]
    out["verdicts"] = {"solutions": len(sols), "as_expected": sum(s["as_expected"] for s in sols),
                       "honest_rejected": sum(s["status"] != "ok" for s in honest),
                       "faster_than_eager": sum(s["status"] == "ok" and (s["speedup"] or 0) > 1 for s in honest),
                       "honest": len(honest)}
    return out



def all_evaluated(rows: list[dict]) -> bool:
    """A --reference run: every task got a verdict of its own (ok, or stochastic: a reference that
    differs from itself under one seed); anything else (task_error, timeout, crashed, …) did not."""
    return all(r["status"] in EVALUATED for r in rows)


def all_as_expected(rows: list[dict]) -> bool:
    """Every evaluated solution (or optimize run) got its expected verdict, and every task loaded."""
    return all(r["status"] not in (RowStatus.task_error, RowStatus.pending) for r in rows) and \
        all(s["as_expected"] for r in rows for s in r["solutions"])

