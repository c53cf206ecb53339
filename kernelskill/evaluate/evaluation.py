"""One evaluation of one candidate against its task, step by step (``Evaluation.run``).

plan     the reference (cached), its memory plan, the worker's request
build    the worker builds the candidate and runs the trials (``run_worker``, this Evaluation its
           listener); while it runs:
verify     the trials are compared as they appear (``poll``); at ``await`` the verdict on them
           says whether the candidate is timed at all (``decide``)
time       each timing round is judged (quality.RoundJudge, ``round``); the timed calls' outputs
           are re-checked while the worker profiles (``timed``)
profile  the kernel breakdown (in the worker, or a profiling worker apart), the ceilings
judge    the status, message, flags, VerifyResult and ProfileResult (``judge``)

Candidate code runs only in the workers; everything here runs in the trusted parent.
"""
from __future__ import annotations

import dataclasses
import shutil
import threading
import time
from pathlib import Path
from typing import Callable

from ..candidate import Candidate
from ..errors import TaskError, UserError
from ..results import CompileResult, Env, EvalResult
from ..task import Task
from ..vocab import Backend, ProfileMode, Status, WorkerStatus
from .judge import static, verdict
from .judge.ceilings import ceilings, store_raised_ceiling
from .build.step import check_triton, compile, compile_result, user_paths
from .launch.isolation import Listener, WorkerOutcome, run_worker, write_atomic
from .ncu import run_ncu
from .options import BASELINES, Options, host_env, request, resolve_device, workdir
from .judge.quality import RoundJudge
from .reference import RefServer, reference, reference_server
from .launch.reply import ReferenceMeta, WorkerReply
from .launch.request import WorkerRequest

# Flags that make a verdict ``flagged`` beside the static checks' own cheats.
CHEAT_KINDS = ("tensor-subclass", "backend-flag", "replay", "timer-mismatch", "output-type")


class Evaluation(Listener):
    """The state of one ``evaluate()`` call; ``run()`` takes it through its steps. While its run
    worker runs, it is the worker's listener (``launch.isolation.WorkerListener``)."""

    def __init__(self, task: Task, cand: Candidate, opts: Options, on_phase: Callable[[str], None] | None = None):
        self.task, self.cand, self.opts, self.on_phase = task, cand, opts, on_phase
        self.started = time.perf_counter()
        self.device = resolve_device(opts.device, cand.backend)
        if cand.backend == Backend.cpp and self.device != "cpu":
            raise UserError(f"{cand.name}: a C++ (cpp backend) candidate runs on CPU tensors; use --device cpu")
        if cand.backend == Backend.triton:
            check_triton(cand, self.device)
        self.flags: list[str] = static.check_source(cand.source, task.dtype)
        self.result = EvalResult(status=Status.ok, compile=CompileResult(ok=False, backend=cand.backend),
                                 env=host_env(self.device), task=task.name, candidate_hash=cand.hash)
        # Set by plan():
        self.ref_dir: Path | None = None
        self.meta: ReferenceMeta | None = None  # what the reference worker found (its meta.json)
        self.base: Path | None = None          # the run worker's folder
        self.request: WorkerRequest | None = None
        self.apart: ApartProfile | None = None
        self.late_profile = False              # the profiling worker goes only once the run worker has ended
        # Set while the worker runs:
        self.server: RefServer | None = None   # recomputes reference outputs the cache does not hold
        self.trials: verdict.TrialJudge | None = None
        self.rounds: RoundJudge | None = None
        self.verified: tuple | None = None     # verify_run's (VerifyResult | None, cheat flags)
        self.replay: list[str] | None = None   # the timed outputs' re-check, when done while it profiled
        self.outcome: WorkerOutcome | None = None
        self.roof: dict = {}                   # the device's ceilings, when the candidate was profiled
        self._mark: tuple[str, float] | None = None   # the step under way and when it began (result.phases)

    @property
    def reply(self) -> WorkerReply | None:
        """The run worker's reply; None before it ran, or when it never reported."""
        return self.outcome.result if self.outcome else None

    def run(self) -> EvalResult:
        """plan → build (verify, time) → profile → judge, and --ncu; the verdict."""
        self.mark("plan")
        if self.plan():
            return self.result
        with reference_server(self.task, self.device, self.opts, self.ref_dir, self.meta) as self.server:
            self.build_and_run()
            self.mark("judge")
            try:
                self.profile()
                self.judge()
                if self.roof:
                    store_raised_ceiling(self.result, self.device, self.reply.env if self.reply else {}, self.roof)
            finally:
                if self.opts.keep_dir is None:
                    shutil.rmtree(self.base, ignore_errors=True)
            self.ncu()
        return self.result

    # ---- plan -----------------------------------------------------------------------------------
    def plan(self) -> bool:
        """The reference and the run worker's request; True when the verdict is known already."""
        task, cand, opts, device = self.task, self.cand, self.opts, self.device
        if cand.backend == Backend.cuda and device == "cpu":
            self.result.compile = compile(cand, device="cpu", opts=opts)
            if self.result.compile.ok:
                raise UserError(f"{cand.name}: CUDA candidate compiled (compile-only check with nvcc passed) but "
                                f"this machine has no CUDA device to run it; evaluate it on a GPU machine")
            first = next((d for d in self.result.compile.diagnostics if d.severity == "error"), None)
            # The compile-only check's first error, with its line: a link check's missing symbol
            # ("does not link") reads differently from a compiler's error.
            self.finish(Status.compile_error, str(first).splitlines()[0] if first else "the CUDA source does not compile")
            return True
        self.mark("reference")
        self.ref_dir = reference(task, device, opts)
        self.mark("plan")
        self.meta = ReferenceMeta.load(self.ref_dir)
        if self.meta.stochastic:      # the task's problem: nothing a candidate does can be verified
            self.finish(Status.stochastic, verdict.stochastic_message(task, self.meta))
            return True
        if opts.baseline not in BASELINES:
            raise UserError(f"baseline {opts.baseline!r}: expected one of {', '.join(BASELINES)}")
        self.base = workdir(opts)
        profile = ProfileMode.here if opts.profile and opts.timing is not None else ProfileMode.off
        if profile == ProfileMode.here and (opts.profile_apart if opts.profile_apart is not None else device.startswith("cuda")):
            profile = ProfileMode.apart
        self.request = request("run", task, cand, device, opts, self.base, ref_dir=str(self.ref_dir),
                               poison_bytes=2 * self.meta.output_bytes, poison_sizes=self.meta.output_sizes,
                               timing=dataclasses.asdict(opts.timing) if opts.timing else None, profile=profile)
        # A task whose outputs are recomputed fills the GPU with two workers already: its profiling
        # worker sets up beside them (a CUDA context, CUPTI) but profiles once the run worker is gone.
        self.late_profile = self.meta.recompute
        if profile == ProfileMode.apart:
            # It builds after the run worker: two builds of one source at once queue on its build
            # lock, and the profiling worker, set up ahead, took it first (the verdict waited on its
            # build, and a failed build ran twice)
            # (figures: docs/evaluator.md, "Measurements behind the code").
            # Released, it loads what the run worker built.
            self.apart = ApartProfile(request("profile", task, cand, device, opts, self.base, ref_dir=str(self.ref_dir),
                                              build_after=str(self.base / "run-built"),
                                              build_wait_s=opts.build_timeout), opts)
        return False

    # ---- build, verify, time: one worker ----------------------------------------------------------
    def build_and_run(self) -> None:
        """The worker builds the candidate, runs the trials and, if ``verify`` says go, times it."""
        opts, t = self.opts, self.opts.timing
        self.trials = verdict.TrialJudge(self.task, self.ref_dir, self.meta, self.server)
        self.rounds = RoundJudge(self.device, self.request.threads, t.retimes if t else 0, t.backoff_s if t else 0.0,
                                 min_rounds=t.min_rounds(self.device) if t else 1)
        self.mark("start")       # until the worker reports its first phase: its start-up
        try:
            self.outcome = run_worker(self.request, opts, self, keep=self.base)
        finally:
            self.rounds.resume_own_builds()      # however the worker ended
            if self.apart is not None:
                # Never timed (incorrect, crashed): it exits without running. Timed, a huge task's
                # profile goes now that the run worker and its gigabytes are gone.
                self.apart.release(self.late_profile and self.replay is not None)
                self.apart.join()
        reply = self.reply
        if self.verified is None and reply and reply.status == WorkerStatus.ok and not self.outcome.timed_out:
            self.verified = self.verify_outputs(self.outcome.out_dir)   # verify only: no await

    def run_built(self) -> None:
        """The run worker is past its build: the profiling worker may build (load) now. A build that
        failed never says so: the verdict stops the profiling worker before it builds."""
        if self.apart is not None and self.base is not None and not (self.base / "run-built").exists():
            write_atomic(self.base / "run-built", "built")

    def mark(self, name: str | None) -> None:
        """Step ``name`` begins (None: the evaluation ends); the last one's seconds go to result.phases."""
        now = time.perf_counter()
        if self._mark is not None:
            last, began = self._mark
            self.result.phases[last] = round(self.result.phases.get(last, 0.0) + now - began, 3)
        self._mark = (name, now) if name else None

    def phase(self, name: str) -> None:
        """Each phase the worker reports: the round judge's clock, then the caller's progress."""
        if name not in ("setup", "build", "done"):    # built: the profiling worker may load it now
            self.run_built()
        self.mark(name)
        self.rounds.phase(name)
        if self.on_phase:
            self.on_phase(name)

    def poll(self, out_dir: Path) -> None:
        """Every ~50 ms while the worker runs: trials compared as their files appear, rounds watched."""
        self.trials.poll(out_dir)
        self.rounds.poll(out_dir)

    def step(self, text: str) -> None:
        """A step of the candidate's build: the caller's progress (``Options.on_step``)."""
        if self.opts.on_step:
            self.opts.on_step(text)

    def round(self, out_dir: Path, k: int) -> str:
        """A timing round is written: the round judge answers it."""
        return self.rounds.round(out_dir, k)

    def verify_outputs(self, out_dir: Path) -> tuple:
        """verify_run on the worker's outputs, with the trials compared already."""
        return verdict.verify_run(out_dir, self.task, self.ref_dir, self.meta, self.trials)

    def decide(self, out_dir: Path) -> bool:
        """The worker's outputs are written (``await``): go on to timing only if they are correct."""
        self.verified = self.verify_outputs(out_dir)
        v, cheats = self.verified
        go = v is not None and v.correct and not cheats and not any(static.is_cheat(f) for f in self.flags)
        if go and self.apart is not None:
            self.apart.ready.wait(self.opts.run_timeout)   # its profiler set-up never overlaps the timing
        if go:          # nor the tool's own background builds (a header's maker): paused while it times
            self.rounds.pause_own_builds()
        return go

    def timed(self, out_dir: Path) -> None:
        """The timed calls' outputs are written (``profile``): re-check them while the worker profiles."""
        if self.apart is not None and not self.late_profile:
            self.apart.release(True)
        try:
            self.replay = verdict.replay_flags(out_dir, self.task, verdict.reference_outputs(self.ref_dir, self.server),
                                               self.meta.distributions, live=True)
        finally:
            write_atomic(out_dir / "timed_checked", "done")   # outputs shared on the GPU may go now

    # ---- profile --------------------------------------------------------------------------------
    def profile(self) -> None:
        """The profiling worker's kernels and the rounds' quality into the reply; the ceilings."""
        reply = self.reply
        if not (reply and reply.timing):
            return
        if self.apart is not None:
            self.apart.merge_into(reply)
        reply.timing.quality = self.rounds.summary(reply.timing.kept_rounds())
        if self.request.profile != ProfileMode.off:
            self.roof = ceilings(self.device, reply.env, self.opts, refresh=self.opts.remeasure_ceilings)

    def ncu(self) -> None:
        """Nsight Compute's metrics of a correct, profiled candidate (``--ncu``; GPU only)."""
        if not (self.opts.ncu and self.result.ok and self.result.profile is not None):
            return
        if self.on_phase:
            self.on_phase("ncu")
        self.mark("ncu")
        run_ncu(self.result, self.task, self.cand, self.device, self.ref_dir, self.opts)
        self.mark(None)
        self.result.seconds = round(time.perf_counter() - self.started, 3)

    # ---- judge ----------------------------------------------------------------------------------
    def finish(self, status: Status, message: str) -> None:
        """The verdict: status, message, every flag raised, and the evaluation's seconds."""
        r = self.result
        self.mark(None)
        r.status, r.message = status, message
        r.flags = list(dict.fromkeys(r.flags + self.flags))
        r.seconds = round(time.perf_counter() - self.started, 3)

    def judge(self) -> None:
        """The verdict from how the worker ended and what it sent back."""
        result, cand, out, reply = self.result, self.cand, self.outcome, self.reply
        result.compile = compile_result(cand, reply, out)
        if reply and reply.env:
            result.env = Env.from_dict({**dataclasses.asdict(result.env), **reply.env})
        result.env.flags_mode = self.request.flags_mode
        if out.timed_out:
            result.log_tail = user_paths(out.log_tail, cand)
            building = out.phase in ("setup", "build")
            if building:
                result.compile.ok = False
            limit = f"build timeout {self.opts.build_timeout:g} s" if building else \
                f"run timeout {self.opts.run_timeout:g} s"
            return self.finish(Status.timeout, f"{out.died} ({limit})")
        if out.died:
            result.log_tail = user_paths(out.log_tail, cand)
            return self.finish(Status.crashed, out.died)
        if reply.status == WorkerStatus.task_error:
            raise TaskError(reply.error if reply.error is not None else "task failed")
        if reply.status == WorkerStatus.compile_only:
            raise UserError("CUDA candidate compiled but cannot run on this machine")
        if reply.status == WorkerStatus.compile_error:
            result.compile.ok = False
            first = next((d for d in result.compile.diagnostics if d.severity == "error"), None)
            why = first or (reply.error if reply.error is not None else "build failed")
            return self.finish(Status.compile_error, str(why).splitlines()[0])
        if reply.status == WorkerStatus.runtime_error:
            result.log_tail = user_paths(reply.traceback if reply.traceback is not None else out.log_tail, cand)
            line, text = reply.line, reply.source_line.strip()
            where = "" if not line else f" ({cand.label}:{line}: {text})" if cand.path else \
                f" (candidate line {line}: {text})"
            return self.finish(Status.runtime_error, (reply.error if reply.error is not None else "runtime error") + where)
        self.judge_outputs()

    def judge_outputs(self) -> None:
        """The verdict of a candidate that ran: correct, incorrect or flagged, and its profile."""
        result, meta, flags = self.result, self.meta, self.flags
        verify, cheats = self.verified or verdict.verify_run(self.outcome.out_dir, self.task, self.ref_dir, meta)
        flags += cheats
        if verify is None:
            return self.finish(Status.flagged, "outputs are not plain torch.Tensor objects")
        result.verify = verify
        if meta.degenerate:
            flags.append(f"degenerate-task: {meta.degenerate}; a speedup on it means nothing")
        if meta.plan:
            from .worker.trials import describe
            verify.memory_plan = {**meta.plan, "summary": describe(meta.plan)}
            if meta.recompute and self.trials is not None:
                # How the candidate's outputs reached the comparison: shared on the GPU, or as files.
                verify.memory_plan["handoff"] = ("file" if not self.trials.shared else
                                                 "cuda-ipc" if self.device.startswith("cuda") else "shared-memory")
        if meta.random:
            flags.append(verdict.random_reference_flag(meta.random))
        timing = self.reply.timing
        if timing and verify.correct:
            # The timed calls' outputs, re-checked: a result computed once and replayed fails here.
            # Usually done already, while the worker profiled (``timed``).
            flags += self.replay if self.replay is not None else verdict.replay_flags(
                self.outcome.out_dir, self.task, verdict.reference_outputs(self.ref_dir, self.server),
                meta.distributions, live=False)
            result.profile = verdict.timed_profile(self.reply, result.env.device, result.compile.backend, meta, flags)
            result.profile.baseline_flags = result.env.flags_mode
            verdict._roofline(result.profile, self.task, meta, self.roof, flags, timing.raw_times(),
                              flush_l2=timing.flush_l2)
            if not self.cheats(flags):
                flags += self.time_in_other_processes(result.profile)
                self.span_eager_runs(result.profile)
            verdict.rerun_floor(result.profile, self.device)
        cheat_flags = self.cheats(flags)
        if cheat_flags:
            return self.finish(Status.flagged, cheat_flags[0])
        if not verify.correct:
            first = next((t for t in verify.trials if not t.ok), None)
            msg = f"trial {first.trial} failed the {first.check} check: {first.message}" if first else \
                verify.mismatch.splitlines()[-1]
            return self.finish(Status.incorrect, msg)
        prof = result.profile
        msg = f"correct on {len(verify.trials)} trials" + (f"; {prof.speedup_text()} vs eager"
                                                           if prof and prof.speedup else "")
        self.finish(Status.ok, msg)


    @staticmethod
    def cheats(flags: list[str]) -> list[str]:
        return [f for f in flags if static.is_cheat(f) or f.split(":")[0] in CHEAT_KINDS]

    def span_eager_runs(self, prof) -> None:
        """The interval spans eager's medians in this task's last good evaluations here (on a GPU;
        ``TimingConfig.eager_runs``); a good one records its own for the next."""
        t = self.opts.timing
        if t is None or prof is None or prof.baseline is None or not t.span_eager_runs(self.device):
            return
        env = self.result.env
        where = {"gpu": env.gpu, "fingerprint": env.fingerprint, "flags": env.flags_mode, "threads": prof.threads,
                 "flush_l2": t.flush_l2, "hide_launch": t.hide_launch}
        verdict.span_eager_runs(prof, verdict.eager_runs(self.ref_dir, where))
        if prof.quality is not None and prof.quality.good:
            verdict.record_eager_run(self.ref_dir, where, prof.baseline.median_ms)

    def time_in_other_processes(self, prof) -> list[str]:
        """A good measurement timed again in fresh worker processes (``TimingConfig.processes``,
        default 1: none), the candidate alone against eager, its timed outputs re-checked; the speedup
        and its interval then span the processes (``verdict.fold_processes``). Returns the flags
        the other workers raised."""
        t = self.opts.timing
        if t is None or prof is None or prof.speedup is None or prof.quality is None or not prof.quality.good:
            return []
        n = t.worker_processes(self.device)
        if n < 2:
            return []
        from .race import race
        self.mark("process")
        if self.on_phase:
            self.on_phase("process")
        opts = dataclasses.replace(self.opts, timing=dataclasses.replace(t, rounds=1, processes=1))
        others = [race(self.task, [self.cand], opts=opts, server=self.server) for _ in range(n - 1)]
        self.mark("judge")
        return verdict.fold_processes(prof, others, self.device)


class ApartProfile(Listener):
    """The profiling worker of one evaluation, run from a thread beside the timing worker.

    It starts with the timing worker, sets the profiler up, loads the candidate once the timing
    worker has built it (``run_built``: never a second build beside it), then waits (``ready``)
    for ``release``: go once the candidate is verified and timed, stop otherwise. A stop
    ends it at once, wherever it is: a compile error or an incorrect candidate is reported without
    waiting for this worker's own start-up and build."""

    def __init__(self, req: WorkerRequest, opts: Options):
        self.ready, self._released, self._go = threading.Event(), threading.Event(), False
        self._stop = threading.Event()
        self.outcome: WorkerOutcome | None = None
        self.error: str | None = None
        self._base = Path(req.candidate_path).parent / "profile"
        self._thread = threading.Thread(target=self._run, args=(req, opts), daemon=True, name="kernelskill-profile")
        self._thread.start()

    def _run(self, req: WorkerRequest, opts: Options) -> None:
        try:
            self.outcome = run_worker(req, opts, self, keep=self._base)
        except Exception as e:  # noqa: BLE001 — a profile that fails is a note, never the verdict
            self.error = f"{type(e).__name__}: {e}"
        finally:
            self.ready.set()

    def decide(self, out_dir: Path) -> bool:
        """Set up and built: ready; it profiles only once released with go."""
        self.ready.set()
        self._released.wait()
        return self._go

    def cancelled(self) -> bool:
        """Stopped before its decision (the caller's cancel, in ``opts``, ``run_worker`` checks itself)."""
        return self._stop.is_set()

    def release(self, go: bool) -> None:
        if not self._released.is_set():
            self._go = go
            if not go and not self.ready.is_set():
                self._stop.set()         # still starting or building: killed within one poll
            self._released.set()

    def join(self) -> None:
        # Released, it finishes in moments; one stuck in its own set-up is left to its timeouts.
        self._thread.join(timeout=60)

    def merge_into(self, reply: WorkerReply) -> None:
        """The kernel breakdown into the timing worker's reply, or a note saying why there is none."""
        mine = self.outcome.result if self.outcome else None
        if mine and mine.status == WorkerStatus.ok and mine.kernels:
            reply.kernels = mine.kernels
            reply.timing.cost_s.update({f"apart: {k}": v for k, v in mine.cost_s.items()})
            return
        why = (self.error or (mine.error if mine else None) or (self.outcome.died if self.outcome else "still running")
               or (mine.status if mine else None))
        reply.kernels_note = f"kernel breakdown: the profiling worker failed ({why})"[:500]
