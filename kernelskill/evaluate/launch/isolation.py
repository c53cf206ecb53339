"""Launch the worker in its own process group, scratch directory and scrubbed environment;
apply separate build and run timeouts; turn every way it can die into data."""
from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol

from kernelskill.vocab import RECHECK_PHASE, WorkerStatus
from .. import host
from . import forkserver, lifeline
from kernelskill.errors import tail
from ..cache import cache_root
from .reply import WorkerReply
from .request import WorkerRequest

_SECRET = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION)", re.I)
_SECRET_PREFIXES = ("OPENAI_", "ANTHROPIC_", "AWS_", "AZURE_", "GOOGLE_", "GCP_", "HF_", "HUGGING",
                    "GITHUB_", "GH_", "GITLAB_", "KERNELSKILL_API", "SSH_", "GPG_", "NPM_", "PYPI_")


def scrubbed_env(scratch: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The parent's environment without credentials; HOME and TMPDIR point into the scratch dir."""
    env = {k: v for k, v in os.environ.items()
           if not _SECRET.search(k) and not k.upper().startswith(_SECRET_PREFIXES)}
    env.update(HOME=str(scratch), TMPDIR=str(scratch), PYTHONDONTWRITEBYTECODE="1",
               PYTHONUNBUFFERED="1", PYTHONHASHSEED="0")
    env.setdefault("TRITON_CACHE_DIR", str(cache_root() / "triton"))
    # The worker must import this very package, wherever it was imported from.
    pkg_root = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra or {})
    return env


def child_env(scratch: Path, extra_env: dict[str, str] | None = None) -> tuple[dict[str, str], dict]:
    """The environment an untrusted child in ``scratch`` runs with (``scrubbed_env`` and the lifeline's
    variable), and the ``subprocess.Popen`` options that hand it the lifeline. A spawned child and a
    forked one (forkserver.py) get exactly this."""
    env = scrubbed_env(scratch, extra_env)
    return env, lifeline.child_options(env)


def spawn(argv: list[str], scratch: Path, extra_env: dict[str, str] | None = None, **popen) -> subprocess.Popen:
    """Start an untrusted child the one way: in ``scratch`` with the scrubbed environment, in its own
    session and process group, holding the lifeline (it dies with this process, however it dies).
    Its stdin is /dev/null unless ``popen`` says otherwise (a zygote reads its requests there)."""
    env, options = child_env(scratch, extra_env)
    popen.setdefault("stdin", subprocess.DEVNULL)
    return subprocess.Popen(argv, cwd=scratch, env=env, start_new_session=True, **options, **popen)


@dataclass
class WorkerOutcome:
    """How the worker ended and what it left behind."""
    result: WorkerReply | None   # the worker's result.json, parsed; None if it never wrote one
    returncode: int | None
    phase: str                   # the last phase it reported (setup, build, run, done)
    timed_out: bool
    seconds: float
    log_tail: str
    out_dir: Path
    prestarted: bool = False     # served by a spare worker started ahead (never a forked one)
    lost: str | None = None      # why its exit status is unknown (a forked worker whose zygote died)

    @property
    def died(self) -> str | None:
        """Why the worker ended without a result, in words; None when it reported one."""
        if self.timed_out:
            return f"timed out in the {self.phase} phase; the worker and its process group were killed"
        if self.result is not None:
            return None
        if self.lost:
            return f"worker lost in the {self.phase} phase: {self.lost}"
        rc = self.returncode
        if rc is not None and rc < 0:
            try:
                name = signal.Signals(-rc).name
            except ValueError:
                name = f"signal {-rc}"
            what = {"SIGSEGV": "segmentation fault", "SIGBUS": "bus error", "SIGABRT": "abort",
                    "SIGKILL": "killed (out of memory?)", "SIGFPE": "floating-point exception",
                    "SIGILL": "illegal instruction"}.get(name, name)
            return f"worker died with {name} ({what}) in the {self.phase} phase"
        return f"worker exited with code {rc} in the {self.phase} phase before reporting a result"

    def failure(self, default: str = "no result") -> str | None:
        """Why the worker's mode did not finish its work, in words (its own error, how it died, its
        status), ``default`` when nothing says; None when it replied ok. Every caller that must
        explain a failed worker asks this."""
        reply = self.result
        if reply is not None and reply.status == WorkerStatus.ok:
            return None
        return (reply.error if reply else None) or self.died or (reply.status if reply else None) or default


# ---- prestarted workers -----------------------------------------------------------------------
# A worker's start is mostly `import torch`, seconds on a GPU host
# (figures: docs/evaluator.md, "Measurements behind the code").
# A long-lived caller (the optimizer, the bench, the MCP server, the TUI) can keep one worker
# started ahead per kind: it has imported everything and waits for its request. Each still serves
# exactly one request and exits; a spare has never run candidate code.
_PRESTART = False
_SPARES: dict[tuple, list["_Spare"]] = {}
_LOCK = threading.Lock()
# Spares kept per kind. On a GPU an evaluation chains a reference worker, a run worker and (for
# huge outputs) a reference server of one kind within seconds, faster than one spare imports torch:
# three are kept there. One elsewhere (a CPU's import would take the cores a timing measures).
SPARE_DEPTH_GPU = 3
SPARE_CUDA_RUNTIME = "cuda-runtime"    # a spare's warm-up argument: CUDA's runtime only
SPARE_INDUCTOR = "inductor"            # ... and torch.compile's modules (Dynamo, Inductor) imported
# Whether the last run request timed torch.compile's baseline: then the spares started after it import
# Dynamo and Inductor while they wait (seconds of every such evaluation's set-up; docs/optimizer.md).
# Only imports: a spare still runs nothing of a task's or a candidate's before its request.
_INDUCTOR_AHEAD = False


@dataclass
class _Spare:
    proc: subprocess.Popen
    base: Path
    key: tuple


def prestart_workers(enabled: bool = True) -> None:
    """Keep a worker started ahead for the next evaluation (after each one, one per kind).
    For processes that evaluate again and again; off by default (a one-shot command would start
    one for nothing). ``False`` stops the spares there are."""
    global _PRESTART
    _PRESTART = enabled
    if not enabled:
        _stop_spare_workers()


@contextlib.contextmanager
def prestarting(enabled: bool = True):
    """``prestart_workers(enabled)`` for a block; afterwards as before (spares stopped if it was off)."""
    before = _PRESTART
    prestart_workers(enabled)
    try:
        yield
    finally:
        prestart_workers(before)


def stop_spares() -> None:
    """Stop everything started ahead: the spare workers and the zygotes (at exit, or when a caller
    wants no idle process beside it). A zygote with forked workers still running exits after them."""
    _stop_spare_workers()
    with _LOCK:
        zygotes = list(_ZYGOTES.values())
        _ZYGOTES.clear()
    for z in zygotes:
        _stop_zygote(z)


def _stop_spare_workers() -> None:
    with _LOCK:
        spares = [sp for kind in _SPARES.values() for sp in kind]
        _SPARES.clear()
    for sp in spares:
        kill_group(sp.proc)
        shutil.rmtree(sp.base, ignore_errors=True)


atexit.register(stop_spares)

# Every worker this process runs, until it is reaped: killed at exit. A Ctrl-C reaches the main
# thread only; workers run from other threads (the bench's pool, the profiling worker, the
# reference server) would otherwise outlive their parent, holding GPU memory until their own
# watch on the parent notices.
_LIVE: set = set()


def _kill_live() -> None:
    with _LOCK:
        live = list(_LIVE)
        _LIVE.clear()
    for proc in live:
        kill_group(proc)


atexit.register(_kill_live)


def _spare_key(request: WorkerRequest) -> tuple:
    """Spares are interchangeable when the environment they started with is the request's
    (OpenMP reads its thread count at import) and, for profiling workers, the device."""
    warm = request.device if request.mode == "profile" else None
    return tuple(sorted(request.env.items())), warm


def _spare_depth(request: WorkerRequest, key: tuple) -> int:
    return SPARE_DEPTH_GPU if request.device.startswith("cuda") and key[1] is None else 1


def _note_baseline(request: WorkerRequest) -> None:
    """A run request says whether the spares after it import torch.compile's modules (``_INDUCTOR_AHEAD``)."""
    global _INDUCTOR_AHEAD
    if request.mode == "run":
        _INDUCTOR_AHEAD = bool(request.timing) and request.baseline in ("compile", "both")


def _spawn_spare(request: WorkerRequest) -> None:
    """Start spares of the request's kind until there are as many as its depth; where its workers
    are forked, its zygote instead (a spare would only import what the zygote has)."""
    if _forks(request) and _zygote(request) is not None:
        return
    key = _spare_key(request)
    with _LOCK:
        gone = [sp for sp in _SPARES.get(key, []) if sp.proc.poll() is not None]
        alive = _SPARES[key] = [sp for sp in _SPARES.get(key, []) if sp.proc.poll() is None]
        missing = _spare_depth(request, key) - len(alive)
    for sp in gone:
        shutil.rmtree(sp.base, ignore_errors=True)
    for _ in range(missing):
        _spawn_one_spare(request, key)


def _spawn_one_spare(request: WorkerRequest, key: tuple) -> None:
    base = host.temp_dir("kernelskill-spare-")
    scratch, out_dir = base / "scratch", base / "out"
    scratch.mkdir()
    out_dir.mkdir()
    with open(out_dir / "worker.log", "wb") as log:
        # A profiling spare sets its device and the profiler up; another spare for a GPU starts
        # CUDA's runtime (no context, no GPU memory), which a build reads the GPU's arch through.
        warm = [key[1] or (SPARE_CUDA_RUNTIME if request.device.startswith("cuda") else None)]
        if _INDUCTOR_AHEAD and key[1] is None:
            warm.append(SPARE_INDUCTOR)
        warm = ",".join(w for w in warm if w)
        proc = spawn([sys.executable, "-m", "kernelskill.evaluate.worker", "--spare", str(out_dir),
                      str(os.getpid()), *([warm] if warm else [])],
                     scratch, request.env, stdout=log, stderr=subprocess.STDOUT)
    with _LOCK:
        kind = _SPARES.setdefault(key, [])
        kind.append(_Spare(proc, base, key))
        # Two threads that both found one missing started one each: the oldest beyond the depth go.
        extra = kind[:max(0, len(kind) - _spare_depth(request, key))]
        del kind[:len(extra)]
    for old in extra:
        kill_group(old.proc)
        shutil.rmtree(old.base, ignore_errors=True)


def wait_for_spares(timeout: float = 300.0) -> bool:
    """Block until every spare started so far has imported what it needs (its ``spare-ready``), as
    it has by the time an agent hands over its next candidate, seconds after the last verdict (a
    benchmark of the loop waits here between candidates). False when ``timeout`` passed first."""
    deadline = time.monotonic() + timeout
    with _LOCK:
        zygotes = list(_ZYGOTES.values())
    for z in zygotes:
        z.wait_ready(max(0.0, deadline - time.monotonic()))
    while True:
        with _LOCK:
            spares = [sp for kind in _SPARES.values() for sp in kind if sp.proc.poll() is None]
        if (all((sp.base / "out" / "spare-ready").exists() for sp in spares)
                and all(z.state != "starting" or z.ended for z in zygotes)):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)


def worker_threads(threads: int | None = None) -> int:
    """The threads a worker pins torch and OpenMP to: ``threads``, else every core this process may
    use (fewer where a cgroup CPU quota allows less: ``host.cores``)."""
    return threads or host.cores()


def worker_env_vars(threads: int) -> dict:
    """The environment a worker of ``threads`` threads starts with (a spare serves only requests
    with the same): OpenMP in C++ candidates pinned like torch; torch.compile's artifacts kept per
    environment (Inductor keys them by graph, torch and hardware)."""
    return {"OMP_NUM_THREADS": str(threads), "TORCHINDUCTOR_CACHE_DIR": str(cache_root() / "inductor")}


def start_one_ahead(threads: int | None = None) -> None:
    """For a one-shot command: start the worker its first request will take now, before the command
    imports torch itself, so that the two imports run side by side (seconds each on a GPU host;
    figures: docs/evaluator.md, "Measurements behind the code").
    Unlike ``prestart_workers`` nothing more is started after it; an unused one is stopped at exit."""
    request = WorkerRequest(mode="compile", device="cpu", env=worker_env_vars(worker_threads(threads)))
    if _forks(request) and _zygote(request) is not None:
        return
    _spawn_one_spare(request, _spare_key(request))


def _take_spare(request: WorkerRequest) -> _Spare | None:
    """The oldest live spare of the request's kind (the likeliest to be ready), or None."""
    while True:
        with _LOCK:
            kind = _SPARES.get(_spare_key(request)) or []
            sp = kind.pop(0) if kind else None
        if sp is None or sp.proc.poll() is None:
            return sp
        shutil.rmtree(sp.base, ignore_errors=True)     # it died (idle too long, killed): the next one


# ---- forked CPU workers (forkserver.py) -----------------------------------------------------------
# A CPU worker is forked from a zygote that has imported what a worker imports (milliseconds instead
# of `import torch`'s seconds), one zygote per kind of spare, per process. GPU workers are spawned:
# a process that has started CUDA cannot be forked into a usable one. Tests switch it off to cover
# the spawned path.
FORK = True
# Zygotes kept per process, the least recently used stopped beyond it: each holds a worker's imports
# in memory, and a process that evaluates under many environments (caches, thread counts) would keep
# one per environment it ever used.
ZYGOTES_MAX = 4
_ZYGOTES: dict[tuple, forkserver.Zygote] = {}      # in order of use, the latest last
_NO_FORK: dict[tuple, str] = {}      # kinds whose zygote could not serve, and why (said once)


def _forks(request: WorkerRequest, launcher: list[str] | None = None) -> bool:
    return FORK and launcher is None and request.device == "cpu" and hasattr(os, "fork")


def _zygote_env_id(request: WorkerRequest) -> tuple:
    """The environment a zygote imports under, less what differs per worker (its scratch): a zygote
    serves only while this process's environment is what it started with."""
    env = scrubbed_env(Path("."), request.env)
    return tuple(sorted((k, v) for k, v in env.items() if k not in ("HOME", "TMPDIR")))


def _zygote(request: WorkerRequest) -> forkserver.Zygote | None:
    """The zygote of the request's kind, started now if there is none (or only a dead one, or one of
    another environment); None where its kind cannot fork (``_NO_FORK``)."""
    key, env_id = _spare_key(request), _zygote_env_id(request)
    with _LOCK:
        if key in _NO_FORK:
            return None
        old = _ZYGOTES.pop(key, None)
        if old is not None and old.owner == os.getpid() and old.env_id == env_id and not old.ended:
            _ZYGOTES[key] = old
            return old
        base = host.temp_dir("kernelskill-zygote-")
        (base / "scratch").mkdir()
        with open(base / "zygote.log", "wb") as log:
            proc = spawn([sys.executable, "-m", "kernelskill.evaluate.worker", "--zygote"], base / "scratch",
                         request.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
        zygote = _ZYGOTES[key] = forkserver.Zygote(proc, base, env_id)
        unused = [_ZYGOTES.pop(k) for k in list(_ZYGOTES)[:max(0, len(_ZYGOTES) - ZYGOTES_MAX)]]
    for z in [old, *unused]:
        if z is not None and z.owner == os.getpid():
            _stop_zygote(z)
    return zygote


def _stop_zygote(zygote: forkserver.Zygote) -> None:
    zygote.close()
    if not zygote.busy():
        kill_group(zygote.proc)
    shutil.rmtree(zygote.base, ignore_errors=True)


def _fork_worker(request: WorkerRequest, args: list[str], scratch: Path, log: Path,
                 timeout: float) -> forkserver.ForkedProc | None:
    """The worker (arguments ``args``) forked from its kind's zygote, with the environment ``spawn``
    would give it; None when it must be spawned (the zygote is unsafe, failed, or not ready within
    ``timeout``)."""
    zygote = _zygote(request)
    if zygote is None:
        return None
    env, _ = child_env(scratch, request.env)
    proc = zygote.fork(args, scratch, env, log, timeout)
    if proc is None and zygote.state == "unsafe":
        key = _spare_key(request)
        with _LOCK:
            first = key not in _NO_FORK
            _NO_FORK[key] = zygote.why
            if _ZYGOTES.get(key) is zygote:
                del _ZYGOTES[key]
        if first:
            print(f"kernelskill: CPU workers are spawned, not forked, for this environment: {zygote.why}",
                  file=sys.stderr)
        _stop_zygote(zygote)
    return proc


class Cancelled(Exception):
    """The caller cancelled the evaluation (``Options.cancel`` set): its worker is dead."""


class Limits(Protocol):
    """What ``run_worker`` reads of the caller's options (``evaluate.options.Options`` has them)."""
    build_timeout: float                 # seconds a phase before the candidate runs (setup, build) may take
    run_timeout: float                   # seconds any later phase may take
    cancel: threading.Event | None       # once set, the worker is killed within one poll


class WorkerListener(Protocol):
    """What hears one worker while it runs and answers its questions; every method is called on
    ``run_worker``'s thread, between polls (~50 ms apart)."""

    def phase(self, name: str) -> None:
        """The worker entered phase ``name`` (setup, build, run, await, timed, profile, done, …)."""

    def step(self, text: str) -> None:
        """A step within the phase (a build's unit compiled, its link)."""

    def decide(self, out_dir: Path) -> bool:
        """``await``: its outputs are written; True lets it go on to timing (an incorrect
        candidate is never timed)."""

    def timed(self, out_dir: Path) -> None:
        """The timed calls' outputs are written: re-check them while the worker profiles."""

    def round(self, out_dir: Path, k: int) -> str:
        """Timing round ``k``'s samples are written: ``again SECONDS`` or ``done K``."""

    def poll(self, out_dir: Path) -> None:
        """Every poll while the worker lives (trials are compared as they appear)."""

    def cancelled(self) -> bool:
        """True kills the worker within one poll and ``run_worker`` raises ``Cancelled``."""


class Listener:
    """A listener that hears nothing and lets the worker run through: go on to timing, keep the
    first round, never cancel. Subclass it and override what a caller needs."""

    def phase(self, name: str) -> None:
        pass

    def step(self, text: str) -> None:
        pass

    def decide(self, out_dir: Path) -> bool:
        return True

    def timed(self, out_dir: Path) -> None:
        pass

    def round(self, out_dir: Path, k: int) -> str:
        return "done 0"

    def poll(self, out_dir: Path) -> None:
        pass

    def cancelled(self) -> bool:
        return False


class StepListener(Listener):
    """Hears only a build's steps (``compile``: the CLI's progress line)."""

    def __init__(self, on_step: Callable[[str], None] | None):
        self.on_step = on_step

    def step(self, text: str) -> None:
        if self.on_step:
            self.on_step(text)


def run_worker(request: WorkerRequest, opts: Limits, listener: WorkerListener | None = None, *,
               keep: Path | None = None, launcher: list[str] | None = None) -> WorkerOutcome:
    """Run ``python -m kernelskill.evaluate.worker`` on ``request``; never raises for its failures.

    ``opts`` gives the timeouts (a phase before the candidate runs gets ``build_timeout``, a later
    one ``run_timeout``; the whole run at most their sum) and ``cancel``. ``listener`` hears the
    worker's phases and steps and answers its questions (``WorkerListener``; None: ``Listener()``,
    which hears nothing and lets it run through). ``launcher`` is a command the worker runs under
    (Nsight Compute: ``["ncu", …]``). With ``prestart_workers()`` on, a worker started ahead serves
    the request when one matches, and another is started for the next request: at once on a GPU,
    once this one ends on a CPU.
    """
    listener = listener if listener is not None else Listener()
    build_timeout, run_timeout, cancel = opts.build_timeout, opts.run_timeout, opts.cancel
    _note_baseline(request)
    base = Path(keep) if keep else host.temp_dir("kernelskill-")
    # A spare is taken whenever one of the request's kind waits (started ahead by prestart_workers or
    # start_one_ahead); more are started only with prestart_workers on.
    spare = _take_spare(request) if launcher is None else None
    # On a GPU the next worker of this kind starts importing now, while this one runs: an
    # evaluation chains three or four workers (reference, run, profile), each of which would
    # otherwise wait for `import torch`. On a CPU it waits until this one ends: an import beside a
    # timing worker takes the cores the timing measures.
    # Not a profiling worker's successor: it sets the profiler up on the GPU (a context, CUPTI, a
    # profiled warm-up call) seconds after it starts, which is when the evaluation that started it
    # times its first round (figures: docs/evaluator.md, "Measurements behind the code"). It
    # starts when this one ends, after the timing; the next evaluation takes it and waits for its
    # set-up before timing (evaluation.ApartProfile.ready).
    early = (_PRESTART and launcher is None and request.device.startswith("cuda")
             and request.mode != "profile")
    if early:
        _spawn_spare(request)
    if spare is not None:
        scratch, out_dir = spare.base / "scratch", spare.base / "out"
    else:
        scratch, out_dir = base / "scratch", base / "out"
        scratch.mkdir(parents=True, exist_ok=True)
        out_dir.mkdir(parents=True, exist_ok=True)
    request = request.replace(out_dir=str(out_dir))
    log_path = out_dir / "worker.log"
    started = time.monotonic()
    with open(log_path, "ab") as log:
        if spare is not None:
            proc = spare.proc
            write_atomic(out_dir / "request.json", json.dumps(request.to_dict()))   # the spare polls for it
        else:
            (out_dir / "request.json").write_text(json.dumps(request.to_dict()))
            args = [str(out_dir / "request.json")]
            proc = _fork_worker(request, args, scratch, log_path, build_timeout) if _forks(request, launcher) else None
            if proc is None:
                proc = spawn([*(launcher or []), sys.executable, "-m", "kernelskill.evaluate.worker", *args],
                             scratch, request.env, stdout=log, stderr=subprocess.STDOUT)
        with _LOCK:
            _LIVE.add(proc)
        phase, phase_started, timed_out, rounds = "setup", started, False, 0
        try:
            phases = _PhaseLog(out_dir / "phases")
            while True:
                try:
                    proc.wait(timeout=0.05)
                    break
                except subprocess.TimeoutExpired:
                    pass
                for new_phase in phases.read_new():   # every phase, however short, in order
                    if new_phase.startswith(STEP):
                        listener.step(new_phase[len(STEP):])
                        continue
                    phase, phase_started = new_phase, time.monotonic()
                    listener.phase(phase)
                    if phase == "await":
                        write_atomic(out_dir / "decision", "go" if listener.decide(out_dir) else "stop")
                    elif phase == "timed":
                        write_atomic(out_dir / f"round_{rounds}", listener.round(out_dir, rounds))
                        rounds += 1
                    elif phase in TIMED_OUTPUTS_WRITTEN:
                        listener.timed(out_dir)
                listener.poll(out_dir)
                if (cancel is not None and cancel.is_set()) or listener.cancelled():
                    raise Cancelled(f"cancelled in the {phase} phase")
                limit = build_timeout if phase in ("setup", "build") else run_timeout
                # The phase file is written by untrusted code: the sum of both limits bounds it all.
                if (time.monotonic() - phase_started > limit
                        or time.monotonic() - started > build_timeout + run_timeout):
                    timed_out = True
                    kill_group(proc)
                    break
        except BaseException:
            # Ctrl-C, a cancel, or a failing callback in the caller: the worker never outlives its caller.
            kill_group(proc)
            with _LOCK:
                _LIVE.discard(proc)
            raise
        kill_group(proc)   # stray children of a finished worker go too
        with _LOCK:
            _LIVE.discard(proc)
    if not timed_out:
        for phase in phases.read_new():       # what it reported just before it exited
            if phase.startswith(STEP):
                listener.step(phase[len(STEP):])
                continue
            listener.phase(phase)
            if phase in TIMED_OUTPUTS_WRITTEN:
                listener.timed(out_dir)
    if spare is not None:
        # The spare's folders become the caller's, as if it had started there.
        for name in ("scratch", "out"):
            if (base / name).exists():
                shutil.rmtree(base / name, ignore_errors=True)
            shutil.move(str(spare.base / name), str(base / name))
        shutil.rmtree(spare.base, ignore_errors=True)
        out_dir, log_path = base / "out", base / "out" / "worker.log"
    if _PRESTART and launcher is None and not early:
        _spawn_spare(request)
    result_path = out_dir / "result.json"
    result = None
    if result_path.exists() and not timed_out:
        try:
            result = WorkerReply.parse(json.loads(result_path.read_text()))
        except json.JSONDecodeError:
            result = None
    return WorkerOutcome(result=result, returncode=proc.returncode, phase=phase, timed_out=timed_out,
                         seconds=time.monotonic() - started,
                         log_tail=tail(log_path.read_text(errors="replace")), out_dir=out_dir,
                         prestarted=spare is not None, lost=getattr(proc, "lost", None))


# The phases at which the timed calls' outputs are written (or shared) and the parent re-checks them.
TIMED_OUTPUTS_WRITTEN = ("profile", RECHECK_PHASE)
STEP = "step "       # a line of the phase log that reports a step within the phase, not a new phase


def write_atomic(path: Path, text: str) -> None:
    """The worker polls these files: it must never see one half-written (empty)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


class _PhaseLog:
    """The worker appends one line per phase; complete lines are read once, in order."""

    def __init__(self, path: Path):
        self.path, self.offset = path, 0

    def read_new(self) -> list[str]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return []
        end = data.rfind(b"\n") + 1          # a line still being written waits for the next poll
        self.offset += end
        return [ln.strip() for ln in data[:end].decode(errors="replace").splitlines() if ln.strip()]


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process group ``proc`` leads (started with start_new_session) and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
