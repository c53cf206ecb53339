"""The MCP tools as plain functions over the server's shared state, testable without the protocol.

A ``Toolbox`` is what the server's lifespan owns: the configuration, the allowed roots, the skill
book, a private temp directory (inline tasks), and what earlier calls measured (task summaries,
eager baselines, each candidate's last verdict). Methods take the tools' arguments, return the
typed results of ``models``, and raise ``UserError`` with an actionable message for bad input.
Candidate code runs only in the evaluator's workers; evaluations hold their device's lock.
"""
from __future__ import annotations

import contextlib
import dataclasses
import shutil
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import torch

from kernelskill.candidate import Candidate
from kernelskill.errors import UserError
from kernelskill.evaluate import api, host
from kernelskill.results import CompileResult, EvalResult, TimingStats
from kernelskill.skills import SkillBook
from kernelskill.vocab import BACKENDS, PHASE_TEXT, Backend
from kernelskill.skills.predicates import gate_features, task_facts
from kernelskill.task import TASK_FILE_NAMES

from . import advice, catalog
from .describe import describe
from .jobs import JobInfo, Jobs
from .locks import hold_device

_CALL = threading.local()


@contextlib.contextmanager
def cancellable(event: threading.Event) -> Iterator[None]:
    """Within the block (one tool call, in its worker thread), a set ``event`` cancels the evaluation:
    its workers are killed and the device lock is released at once."""
    _CALL.cancel = event
    try:
        yield
    finally:
        _CALL.cancel = None


def current_cancel() -> threading.Event | None:
    return getattr(_CALL, "cancel", None)
from .models import (Compilation, DistilledSkill, Evaluation, MachineInfo, Profile, RecordedAttempt, SkillInfo,
                     SkillList, TaskInfo, TaskList, ValueSpec)
from .roots import ResolvedTask, Roots

Progress = Callable[[float, float, str], None]
# Each phase's step of the progress bar; its words are kernelskill.vocab.PHASE_TEXT, as the CLI's.
PHASES = {phase: (step, PHASE_TEXT[phase]) for step, phase in
          enumerate(("setup", "build", "run", "await", "time", "profile", "process", "shapes", "done"), start=2)}
STEPS = 10
MAX_TRIALS = 50
RESULTS = 200         # past evaluation results kept as resources


def result_uri(task_hash: str, candidate_hash: str) -> str:
    """The resource that holds the last result of this candidate on this task."""
    return f"result://{task_hash[:16]}/{candidate_hash[:16]}"


def _quiet(step: float, total: float, message: str) -> None:
    """The progress sink when nobody listens."""


def _phases(progress: Progress, opts: api.Options | None = None) -> Callable[[str], None]:
    """The evaluator's phase callback, as progress steps; each names the limit its phase runs under."""
    def on_phase(phase: str) -> None:
        step, text = PHASES.get(phase, (1, phase))
        if opts is not None and phase not in ("done",):
            limit = opts.build_timeout if phase in ("setup", "build") else opts.run_timeout
            text += f" (stopped as a timeout after {limit:.0f} s)"
        progress(step, STEPS, text)
    return on_phase


def _steps(progress: Progress) -> Callable[[str], None]:
    """A build's steps (a unit compiled, the link) as progress messages within the build phase."""
    started = time.monotonic()

    def on_step(text: str) -> None:
        progress(PHASES["build"][0], STEPS, f"build, {time.monotonic() - started:.1f} s: {text}")
    return on_step


@dataclass
class ServerConfig:
    """How the server evaluates and what it may read."""
    roots: list[Path] = field(default_factory=lambda: [Path.cwd()])
    options: api.Options = field(default_factory=api.Options)
    max_source_bytes: int = 512_000
    describe_timeout: float = 180.0
    skill_dirs: list[Path] | None = None     # None: shipped skills + the user store
    stats_path: Path | None = None           # None: $KERNELSKILL_HOME/stats.toml
    log_level: str = "WARNING"               # the SDK's log on stderr (INFO logs each failed call)


class Toolbox:
    """Shared state plus the tools' logic."""

    def __init__(self, config: ServerConfig, book: SkillBook, workdir: Path):
        self.config, self.book, self.workdir = config, book, workdir
        self.roots = Roots(config.roots)
        self.has_cuda = bool(torch.version.cuda) and torch.cuda.is_available()
        self._lock = threading.Lock()
        self._summaries: dict[str, dict] = {}
        self._baselines: dict[str, tuple[TimingStats, str]] = {}
        self._verdicts: dict[tuple[str, str], tuple[str, float | None, str | None]] = {}
        self.jobs = Jobs()
        self._results: OrderedDict[str, str] = OrderedDict()

    @classmethod
    @contextlib.contextmanager
    def open(cls, config: ServerConfig, book: SkillBook | None = None) -> Iterator["Toolbox"]:
        """A toolbox with its own temp directory, removed on exit."""
        book = book if book is not None else SkillBook.load(config.skill_dirs, config.stats_path)
        workdir = host.temp_dir("kernelskill-mcp-")
        try:
            yield cls(config, book, workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    # ---- inputs -------------------------------------------------------------------------------
    def resolve(self, task: str, preset: str | None = None) -> ResolvedTask:
        """A tool's ``task`` argument as a loaded task (see ``Roots.resolve_task``)."""
        return self.roots.resolve_task(task, self.workdir / "tasks", preset, self.config.max_source_bytes)

    def candidate(self, source: str) -> Candidate:
        """A candidate from a client's source, with size limits stated in the error."""
        if not source or not source.strip():
            raise UserError("source is empty: pass the whole Python module that defines "
                            "class ModelNew(nn.Module)")
        size = len(source.encode())
        if size > self.config.max_source_bytes:
            raise UserError(f"source is {size} bytes; the limit is {self.config.max_source_bytes}. Send only "
                            f"the candidate module (kernels as inline strings), without data or generated tables")
        return Candidate.from_source(source)

    def summary(self, rt: ResolvedTask) -> dict:
        """``Task.summary()`` (cached); untrusted tasks are described in a child process."""
        key = f"{rt.task.path}|{rt.task.hash}"
        with self._lock:
            hit = self._summaries.get(key)
        if hit is None:
            hit = describe(rt, self.workdir, self.config.describe_timeout)
            with self._lock:
                self._summaries[key] = hit
        return hit

    def _options(self, trials: int | None = None, timed: bool = True, run_timeout: float | None = None) -> api.Options:
        opts = dataclasses.replace(self.config.options, cancel=current_cancel())
        if run_timeout is not None:
            most = self.config.options.run_timeout
            if not 1 <= run_timeout <= most:
                raise UserError(f"run_timeout_s={run_timeout:g}: choose between 1 and {most:g} seconds (this "
                                f"server's limit; its operator sets it with kernelskill mcp --run-timeout)")
            opts = dataclasses.replace(opts, run_timeout=float(run_timeout))
        if trials is not None:
            if not 1 <= trials <= MAX_TRIALS:
                raise UserError(f"trials={trials}: choose between 1 and {MAX_TRIALS} (5 is the protocol's default)")
            opts = dataclasses.replace(opts, trials=trials)
        return opts if timed else dataclasses.replace(opts, timing=None, profile=False)

    # ---- evaluation ---------------------------------------------------------------------------
    def _run(self, rt: ResolvedTask, cand: Candidate, opts: api.Options, progress: Progress) -> EvalResult:
        device = api.resolve_device(opts.device, cand.backend)
        with hold_device(device, on_wait=lambda msg: progress(0, STEPS, msg), cancel=opts.cancel,
                         what=f"kernelskill mcp, evaluating for {rt.task.path.name}"):
            progress(1, STEPS, f"evaluating {cand.backend} candidate on {device} (reference outputs first, "
                               f"cached after one run)")
            result = api.evaluate(rt.task, cand, opts=dataclasses.replace(opts, device=device,
                                                                          on_step=_steps(progress)),
                                  on_phase=_phases(progress, opts))
        with self._lock:
            key = (rt.task.hash, cand.hash)
            speedup, quality = result.speedup, result.quality
            if speedup is None and result.ok and key in self._verdicts:   # a later verify keeps the timing
                speedup, quality = self._verdicts[key][1], self._verdicts[key][2]
            self._verdicts[key] = (result.status, speedup, quality)
            if result.profile and result.profile.baseline:
                self._baselines[rt.task.hash] = (result.profile.baseline, result.env.gpu or device)
        return result

    def _evaluation(self, result: EvalResult, timed: bool, key: tuple[str, str], cls=Evaluation, **extra):
        """The tool's reply, also kept (the last RESULTS) as the resource result://<task>/<candidate>."""
        clean = EvalResult.from_dict(result.to_dict())     # NaN → null: the wire is JSON
        summary, next_step = advice.evaluation(result, timed)
        uri = result_uri(*key)
        correct = result.verify.correct if result.verify else None
        if correct and result.shapes is not None and result.shapes.generalizes == "no":
            correct = False            # right at the task's sizes, wrong (or crashing) at another
        out = cls(status=result.status, correct=correct,
                  speedup=clean.speedup, summary=summary, next_step=next_step, result=clean, uri=uri, **extra)
        with self._lock:
            self._results[uri] = out.model_dump_json(indent=1)
            self._results.move_to_end(uri)
            while len(self._results) > RESULTS:
                self._results.popitem(last=False)
        return out

    def past_result(self, uri: str) -> str:
        """A result this server returned earlier (its JSON), by the ``uri`` it carried."""
        with self._lock:
            text = self._results.get(uri)
        if text is None:
            raise UserError(f"{uri}: no such result on this server (results last while it runs; the {RESULTS} "
                            f"most recent are kept)")
        return text

    def compile(self, source: str, backend: Backend | str | None = None, progress: Progress = _quiet) -> Compilation:
        """Build the candidate's extensions only; each build step comes back as progress."""
        cand = self.candidate(source)
        if backend and backend != cand.backend:
            # '{backend}', not !r: the server passes a Backend, whose repr is not its value
            raise UserError(f"backend='{backend}' but the source is a '{cand.backend}' candidate (cuda: "
                            f"load_inline with cuda_sources; triton: @triton.jit kernels; cpp: load_inline with "
                            f"cpp_sources only). Fix the source or leave backend out")
        progress(PHASES["build"][0], STEPS, PHASES["build"][1])
        opts = dataclasses.replace(self._options(), on_step=_steps(progress))
        res: CompileResult = api.compile(cand, device=self.config.options.device, opts=opts)
        res = CompileResult.from_dict(res.to_dict())
        summary, next_step = advice.compilation(res)
        return Compilation(ok=res.ok, backend=res.backend, summary=summary, next_step=next_step, result=res)

    def verify(self, task: str, source: str, trials: int | None = None, preset: str | None = None,
               progress: Progress = _quiet, run_timeout: float | None = None, shapes: str | None = None) -> Evaluation:
        """Compile and run the seeded correctness trials; no timing. ``shapes``: also at derived shapes."""
        rt, cand = self.resolve(task, preset), self.candidate(source)
        opts = dataclasses.replace(self._options(trials, timed=False, run_timeout=run_timeout), shapes=shapes)
        return self._evaluation(self._run(rt, cand, opts, progress), timed=False, key=(rt.task.hash, cand.hash))

    def evaluate(self, task: str, source: str, preset: str | None = None,
                 progress: Progress = _quiet, run_timeout: float | None = None, shapes: str | None = None) -> Evaluation:
        """Compile, verify, then time against the eager reference. ``shapes``: also correct at derived shapes."""
        rt, cand = self.resolve(task, preset), self.candidate(source)
        opts = dataclasses.replace(self._options(run_timeout=run_timeout), shapes=shapes)
        return self._evaluation(self._run(rt, cand, opts, progress), timed=True, key=(rt.task.hash, cand.hash))

    def profile(self, task: str, source: str | None = None, baseline: str | None = None,
                preset: str | None = None, progress: Progress = _quiet,
                run_timeout: float | None = None) -> Profile:
        """Time a candidate (or the reference itself), optionally back to back with an earlier candidate."""
        rt = self.resolve(task, preset)
        cand = self.candidate(source) if source is not None else \
            Candidate.from_source(rt.task.source + "\n\nModelNew = Model\n")
        base = self.candidate(baseline) if baseline is not None else None
        total = STEPS * (2 if base is not None else 1)
        opts = self._options(run_timeout=run_timeout)
        result = self._run(rt, cand, opts, lambda s, _, m: progress(s, total, m))
        base_result, ratio = None, None
        if base is not None:
            base_result = self._run(rt, base, opts, lambda s, _, m: progress(STEPS + s, total, f"baseline: {m}"))
            a, b = result.profile, base_result.profile
            if a and b and a.candidate and b.candidate and a.candidate.median_ms > 0:
                ratio = round(b.candidate.median_ms / a.candidate.median_ms, 4)
            base_result = EvalResult.from_dict(base_result.to_dict())
        out = self._evaluation(result, True, (rt.task.hash, cand.hash), Profile, vs_baseline=ratio,
                               baseline_result=base_result)
        if source is None:
            out.summary, out.next_step = advice.reference_profile(result)
        return out

    # ---- jobs ---------------------------------------------------------------------------------
    def start_evaluation(self, kind: str, task: str, source: str | None = None, preset: str | None = None,
                         trials: int | None = None, run_timeout: float | None = None) -> JobInfo:
        """verify / evaluate / profile as a job: its id at once, the work in a thread of its own.
        The task and source are checked now, so a mistake is an error of this call, not of the job."""
        rt = self.resolve(task, preset)
        if kind in ("verify", "evaluate") and source is None:
            raise UserError(f"{kind} needs the candidate's source")
        if source is not None:
            self.candidate(source)
        self._options(run_timeout=run_timeout)              # a limit out of range fails this call
        work = {"verify": lambda p: self.verify(task, source, trials, preset, p, run_timeout),
                "evaluate": lambda p: self.evaluate(task, source, preset, p, run_timeout),
                "profile": lambda p: self.profile(task, source, None, preset, p, run_timeout)}.get(kind)
        if work is None:
            raise UserError(f"kind {kind!r}: one of verify, evaluate, profile")
        return self.jobs.start(kind, rt.ref, work, cancellable)

    # ---- tasks --------------------------------------------------------------------------------
    def get_task(self, task: str, preset: str | None = None) -> TaskInfo:
        """Source, shapes, op classes and any measured baseline of one task."""
        rt = self.resolve(task, preset)
        info = self.summary(rt)
        toml = rt.task.path.parent / "task.toml"
        own_toml = rt.kind != "inline" and rt.task.path.name in TASK_FILE_NAMES and toml.is_file()
        toml_text = toml.read_text() if own_toml else None
        with self._lock:
            base = self._baselines.get(rt.task.hash)
        specs = lambda items: [ValueSpec(**x) for x in items]  # noqa: E731
        hint = (f"lookup_skills(task={rt.ref!r}) gives the skills for op classes "
                f"{', '.join(info['op_classes']) or '(none)'}; write ModelNew, compile, then evaluate.")
        if base is None:
            hint += " profile(task) measures the eager reference time."
        return TaskInfo(task=rt.ref, name=rt.task.name, kind=rt.kind, level=rt.task.level,
                        description=rt.task.description, dtype=rt.task.dtype, preset=rt.task.preset,
                        presets=rt.task.presets, constants=info.get("constants", {}), source=rt.task.source,
                        task_toml=toml_text, inputs=specs(info["inputs"]), outputs=specs(info["outputs"]),
                        parameters=specs(info["parameters"]), buffers=specs(info["buffers"]),
                        op_classes=info["op_classes"], aten_ops=info.get("aten_ops", []), flops=info["flops"],
                        bytes=info["bytes"], tolerance=info["tolerance"], baseline=base[0] if base else None,
                        baseline_device=base[1] if base else None, next_step=hint)

    def describe_machine(self) -> MachineInfo:
        """This server's CPU, GPU and measured ceilings (read once per machine, cached)."""
        from kernelskill.evaluate.machine import render
        device = api.resolve_device(self.config.options.device, self.default_backend)
        profile = api.machine(device, dataclasses.replace(self.config.options, device=device))
        return MachineInfo(device=device, text=render(profile, self.default_backend), cpu=profile.get("cpu") or {},
                           gpu=profile.get("gpu"), ceilings=profile.get("ceilings") or {})

    def list_tasks(self, path: str | None = None) -> TaskList:
        """Shipped examples, or the tasks under a directory in the roots."""
        return catalog.list_tasks(self.roots, path)

    # ---- skills -------------------------------------------------------------------------------
    @property
    def default_backend(self) -> Backend:
        """The backend this server can run: cuda with a GPU, else C++ on the CPU."""
        return Backend.cuda if self.has_cuda else Backend.cpp

    @property
    def arch(self) -> str | None:
        """This server's GPU architecture (sm_90, …) for the skill gate; None without a GPU."""
        if not self.has_cuda:
            return None
        major, minor = torch.cuda.get_device_capability()
        return f"sm_{major}{minor}"

    def lookup_skills(self, task: str | None = None, bottleneck: str | None = None, query: str | None = None,
                      backend: str | None = None, limit: int = 5, preset: str | None = None) -> SkillList:
        """Skills gated by the task's op classes, the bottleneck and the backend, best first."""
        info = self.summary(self.resolve(task, preset)) if task else None
        features = gate_features(info) if info else None
        return catalog.lookup_skills(self.book, features=features, backend=backend or self.default_backend,
                                     bottleneck=bottleneck, query=query, limit=limit, arch=self.arch,
                                     facts=task_facts(info))

    def distill_skill(self, run: str, node: str | None = None, skill_id: str | None = None) -> DistilledSkill:
        """A run's node that beat its parent with confidence, as a draft skill in the user's directory."""
        from kernelskill.runs import load_run
        from kernelskill.skills.distill import draft, save
        path = self.roots.check(run)
        d = draft(load_run(path), node, skill_id, book=self.book)
        saved = save(self.book, d, rename="pass skill_id to name the draft")
        return DistilledSkill(path=str(saved), node=d.node_id, base=d.base_id, gain=round(d.gain, 4),
                              gain_low=round(d.gain_low, 4), skill=SkillInfo.of(d.skill, self.book.stats.get(d.skill.id)))

    def record_attempt(self, task: str, source: str, skill_id: str, outcome: str,
                       speedup: float | None = None, preset: str | None = None) -> RecordedAttempt:
        """Feed one outcome of a skill into its statistics (SkillBook.record)."""
        rt, cand = self.resolve(task, preset), self.candidate(source)
        with self._lock:
            verdict = self._verdicts.get((rt.task.hash, cand.hash))
        return catalog.record_attempt(self.book, features=self.summary(rt)["op_classes"], skill_id=skill_id,
                                      outcome=outcome, speedup=speedup, verdict=verdict, candidate_hash=cand.hash,
                                      backend=cand.backend if cand.backend in BACKENDS else None,
                                      arch=self.arch if cand.backend in (Backend.cuda, Backend.triton) else None)

    # ---- export -------------------------------------------------------------------------------
    def export_kernel(self, to: str, source: str | None = None, run: str | None = None, node: str | None = None,
                      task: str | None = None, preset: str | None = None, build: bool = False,
                      package: str | None = None, force: bool = False, progress: Progress = _quiet):
        """A verified candidate (its source, or a run's node) written as a package under the roots, built on
        request; every candidate step runs in a child process (mcp_server.exporting)."""
        from kernelskill.export import resolve_source

        from . import exporting
        started = time.monotonic()
        if (source is None) == (run is None):
            raise UserError("pass either source (the candidate module) or run (a run directory inside the roots, "
                            "optionally RUN/NODE), not both and not neither")
        if node is not None and run is None:
            raise UserError("node names a node of a run: pass run too (or pass the node's source as source)")
        if package is not None and not package.isidentifier():
            raise UserError(f"package={package!r}: a Python identifier, e.g. ks_my_task")
        dest = self.roots.check(to)
        if dest.exists() and not dest.is_dir():
            raise UserError(f"{to}: exists and is a file; pass a new directory inside the roots")
        if dest.is_dir() and any(dest.iterdir()) and not force:
            raise UserError(f"{to}: exists and is not empty; pass a new directory (or force=true to write into it)")
        prov: dict = {}
        if run is not None:
            run_dir, node_id = self._run_dir(run, node)
            spec = run_dir.name + (f"/{node_id}" if node_id else "")
            code, cand_path, prov = resolve_source(spec, run_dir.parent)
            if task is None:
                if not prov.get("task"):
                    raise UserError(f"run {run_dir.name} does not name its task: pass task")
                task = str(prov["task"])
                if preset is None:
                    preset = prov.get("preset")
            what = f"run {run_dir.name}, node {prov.get('node')}"
        else:
            if task is None:
                raise UserError("task is required with source: the task the candidate was verified on (an example "
                                "name, a task path inside the roots, or its source)")
            self.candidate(source)                       # the size limits, an empty source
            code, cand_path, what = source, None, "source"
        try:
            rt = self.resolve(task, preset)
        except UserError as e:
            if run is not None and prov.get("task") == task:
                raise UserError(f"the run's task {task!r} cannot be found from the server's roots ({e}); pass task "
                                f"(a path inside the roots or an example name)") from None
            raise
        cand = Candidate.from_source(code, cand_path)
        if cand.backend not in ("cpp", "cuda", "triton"):
            kind = "plain PyTorch (no extension)" if cand.backend == "none" else f"a {cand.backend} candidate"
            raise UserError(f"the candidate is {kind}: export writes cpp, cuda and triton candidates only")
        overrides = dict(prov.get("overrides") or {}) if run is not None and preset == prov.get("preset") else {}
        req = {"source": code, "task": str(rt.task.path), "preset": rt.task.preset, "overrides": overrides,
               "to": str(dest), "package": package, "path": str(cand_path) if cand_path else None,
               "provenance": prov or {"candidate": "source sent to the MCP server"}, "force": force}
        opts = self._options()
        device = api.resolve_device(opts.device, cand.backend)
        with hold_device(device, on_wait=lambda msg: progress(0, exporting.STEPS, msg), cancel=opts.cancel,
                         what=f"kernelskill mcp, exporting for {rt.task.path.name}"):
            progress(1, exporting.STEPS, f"exporting the {cand.backend} candidate (building it, then running it on "
                                         f"the task's inputs to record its output shapes)")
            res = exporting.run_export(req, self.workdir, opts.cancel)
            out_dir, pkg = Path(res["out_dir"]), res["package"]
            built = imported = build_log = import_message = build_s = None
            if build:
                progress(2, exporting.STEPS, "building the package (setup.py build_ext --inplace; about a minute "
                                             "for a C++ kernel)")
                t0 = time.monotonic()
                built, log = exporting.build_inplace(out_dir, self.workdir, opts.cancel)
                build_s = round(time.monotonic() - t0, 2)
                build_log = None if built else log
                if built:
                    progress(3, exporting.STEPS, "importing the built package and comparing it with the reference")
                    imported, import_message = exporting.check_import(out_dir, pkg, device, rt.task.tolerance,
                                                                      self.workdir, opts.cancel)
        progress(exporting.STEPS, exporting.STEPS, "done")
        files = exporting.files_under(out_dir)
        if build and not built:
            summary = f"exported {pkg} to {out_dir}, but its build failed"
            next_step = "read build_log; the candidate's own build flags are kept in setup.py"
        elif build and not imported:
            summary = f"exported and built {pkg} in {out_dir}, but the import check failed: {import_message}"
            next_step = "read import_message; the package's own tests: python -m pytest <path>/<package>"
        else:
            state = "built and checked" if build else "written (not built)"
            summary = f"{what} exported as package {pkg} ({len(res['ops'])} op(s)) in {out_dir}: {state}"
            next_step = (f"pip install --no-build-isolation {out_dir} installs it; python -m pytest --pyargs {pkg} "
                         f"runs its tests; import {pkg}; {pkg}.ModelNew is the drop-in")
        return exporting.ExportedKernel(
            path=str(out_dir), package=pkg, backend=res["backend"], files=files, ops=res["ops"],
            recorded=res["recorded"], notes=res["notes"], source=what, task=rt.ref, built=built, build_log=build_log,
            imported=imported, import_message=import_message, export_s=res["seconds"], build_s=build_s,
            seconds=round(time.monotonic() - started, 2), summary=summary, next_step=next_step)

    def _run_dir(self, run: str, node: str | None) -> tuple[Path, str | None]:
        """A run directory inside the roots and the node asked for (``run`` may be RUN/NODE)."""
        path = self.roots.check(run)
        if (path / "run.toml").is_file():
            return path, node
        head, _, tail = run.rstrip("/").rpartition("/")
        if head and node is None:
            parent = self.roots.check(head)
            if (parent / "run.toml").is_file():
                return parent, tail
        raise UserError(f"{run}: no run directory there (a directory with run.toml, as kernelskill optimize writes "
                        f"runs/<id>/); pass the run's path inside the roots ({self.roots}), optionally as RUN/NODE")
