"""What every ``kernelskill`` command shares: the parser class whose usage errors can be JSON, the task
arguments (``--preset``, ``--set``) and their loading, timeouts, the phase countdown, output."""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
import time

from ..errors import UserError
from ..paths import resolve_task_path
from ..vocab import Status


class UsageExit(SystemExit):
    """argparse's usage error (exit 2) with its message kept, so that ``main`` can report it as JSON."""

    def __init__(self, message: str):
        super().__init__(2)
        self.message = message


class Parser(argparse.ArgumentParser):
    """argparse's parser whose usage errors carry their message (subcommands inherit the class)."""

    def error(self, message: str):
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise UsageExit(f"{self.prog}: {message}")


def json_error(e: Exception) -> None:
    """The JSON error object of a --json command: status, error, and what the command adds (optimize: run_dir,
    attempts, best_speedup)."""
    print(json.dumps({"status": "error", "error": getattr(e, "message", None) or str(e),
                      **getattr(e, "json_fields", {})}, default=str), flush=True)


def with_sets(e: UserError, args) -> UserError:
    """A task's error says which --set values were in force (unless it names one already)."""
    from ..errors import TaskError
    sets = getattr(args, "sets", None)
    if not sets or not isinstance(e, TaskError) or str(e).startswith("--set "):
        return e
    out = TaskError(f"{e} (with {' '.join('--set ' + item for item in sets)})")
    out.json_fields = getattr(e, "json_fields", {})
    return out


def parse_sets(items: list[str]) -> dict:
    from ..task import parse_value
    out = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise UserError(f"--set {item!r}: expected NAME=VALUE, e.g. --set batch_size=16")
        out[name.strip()] = parse_value(value.strip())
    return out


def task_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", help="a size preset from the task's task.toml (e.g. small)")
    p.add_argument("--set", dest="sets", action="append", metavar="NAME=VALUE",
                   help="override a module-level constant of the task (repeatable): a Python literal, else an "
                   "expression evaluated in the task's module (e.g. --set dtype=torch.float16)")


def load_task(args):
    from ..errors import TaskError
    from ..task import Task
    path, sets = resolve_task_path(args.task), parse_sets(args.sets)
    task = Task.load(path, preset=args.preset, overrides=sets)
    if sets:
        try:
            task.module()      # a --set value that breaks the module is named here, not deep in a worker
        except TaskError as e:
            raise _set_error(args, path, e) from None
    return task


def _set_error(args, path: str, error: Exception) -> Exception:
    """The error of a module that --set broke, naming the flag and its value; the error as it is when the
    module fails without the --set values too."""
    from ..errors import TaskError
    from ..task import Task
    try:
        Task.load(path, preset=args.preset).module()
    except TaskError:
        return error
    for item in args.sets:
        try:
            Task.load(path, preset=args.preset, overrides=parse_sets([item])).module()
        except TaskError as e:
            return TaskError(f"--set {item}: {e}")
    return TaskError(f"{' '.join('--set ' + item for item in args.sets)}: {error}")     # only together


def exit_code(result) -> int:
    """0 ok, 1 the candidate failed, 2 the task's fault (a reference that differs from itself)."""
    return 0 if result.ok else 2 if result.status == Status.stochastic else 1


@contextlib.contextmanager
def progress(args, opts):
    """Phase lines on stderr for a person, with a countdown while a phase lasts; nothing when stdout
    carries JSON."""
    if args.json:
        yield None
        return
    countdown = PhaseCountdown(opts.build_timeout, opts.run_timeout, sys.stderr)
    opts.on_step = countdown.step
    try:
        yield countdown
    finally:
        countdown.close()


class PhaseCountdown:
    """The evaluator's phases as lines (``  … build``) and, while one lasts, how long it has run and
    when its timeout stops it: a status line rewritten every second on a terminal, a line every
    tenth of the limit (1–30 s) elsewhere. Each worker phase has its own limit: the build timeout
    for setup and build, the run timeout for the others."""

    QUIET_S = 5.0          # phases shorter than this show no countdown

    def __init__(self, build_timeout: float, run_timeout: float, stream, every: float | None = None):
        self.limits, self.stream, self.every = (build_timeout, run_timeout), stream, every
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self._lock = threading.Lock()
        # A new phase or close() wakes the ticker at once: a tick chosen for a long phase (30 s for a
        # 900 s build) must not sleep through a short one that follows (6 s of run).
        self._wake = threading.Condition(self._lock)
        self._phase, self._since, self._shown, self._closed = None, time.monotonic(), False, False
        self._rounds = 0               # timing rounds seen (each on fresh allocations after the first)
        self._thread = threading.Thread(target=self._tick, daemon=True, name="kernelskill-countdown")
        self._thread.start()

    def limit(self, phase: str) -> float:
        return self.limits[0] if phase in ("setup", "build") else self.limits[1]

    def __call__(self, phase: str) -> None:
        from ..vocab import phase_text
        with self._lock:
            self._clear()
            if phase == "time":
                self._rounds += 1
            # "timed" (the parent judging a round) is the tool's own step: not a line of its own.
            if phase != "timed":
                print(f"  … {phase_text(phase, self._rounds - 1)}", file=self.stream, flush=True)
            self._phase, self._since = phase, time.monotonic()
            self._wake.notify_all()

    def step(self, text: str) -> None:
        """A step within the phase (a build's unit compiled, its link), with the phase's time so far."""
        with self._lock:
            self._clear()
            print(f"      {time.monotonic() - self._since:5.1f} s  {text}", file=self.stream, flush=True)

    def _clear(self) -> None:
        if self._shown and self.tty:
            self.stream.write("\r\033[K")
        self._shown = False

    def _tick(self) -> None:
        from ..vocab import phase_text
        with self._lock:
            while not self._closed:
                phase = self._phase
                limit = self.limit(phase) if phase else 0.0
                every = self.every or (1.0 if self.tty else min(30.0, max(1.0, limit / 10)))
                self._wake.wait(every)
                if self._closed:
                    return
                if self._phase is None or self._phase != phase or phase == "done":
                    continue
                ran = time.monotonic() - self._since
                if ran < min(self.QUIET_S, limit / 2):
                    continue
                text = (f"  … {phase_text(phase, self._rounds - 1)}: {ran:.0f} s of its {limit:.0f} s limit "
                        "(then the verdict is timeout)")
                if self.tty:
                    self.stream.write("\r\033[K" + text)
                    self._shown = True
                else:
                    print(text, file=self.stream)
                self.stream.flush()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._wake.notify_all()
        self._thread.join(timeout=5)
        with self._lock:
            if self._shown and self.tty:
                self.stream.write("\n")
                self._shown = False


def emit(result, args, printer) -> None:
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
        return
    printer(result)
    if getattr(result, "status", None) == Status.timeout:      # a CompileResult has no status
        print("  the limits: --build-timeout S (default 900) and --run-timeout S (default 300)")


def timeouts(args) -> dict:
    """Options' build_timeout and run_timeout from the flags; each at least a second."""
    out = {}
    for flag, key in (("--build-timeout", "build_timeout"), ("--run-timeout", "run_timeout")):
        value = getattr(args, key, None)
        if value is not None:
            if value < 1:
                raise UserError(f"{flag} {value:g}: at least 1 second")
            out[key] = value
    return out


def timeout_args(p: argparse.ArgumentParser, run: bool = True) -> None:
    p.add_argument("--build-timeout", type=float, metavar="S", help="seconds the worker may spend compiling the "
                   "candidate's extensions before it is killed (default 900)")
    if run:
        p.add_argument("--run-timeout", type=float, metavar="S", help="seconds the worker may run after the build "
                       "(correctness trials, timing, profiling) before it is killed and the verdict is `timeout` "
                       "(default 300)")


def shapes_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shapes", default=None, metavar="auto|PRESETS",
                   help="after a correct verdict, check the candidate at other shapes: 'auto' (the task's presets, "
                   "and each size constant of 8 or more halved, doubled and made a prime near it) or preset names "
                   "(small,large). A wrong value or a crash at any of them fails the verdict; a clean refusal "
                   "(its own size check) is reported as 'specialised'")
    p.add_argument("--shapes-timed", action="store_true",
                   help="with --shapes: time the candidate at each shape too (slower)")


def measure_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--baseline", choices=("eager", "compile", "both"), default="eager",
                   help="baselines timed with the candidate: eager always; compile/both add torch.compile "
                   "(compiled once per task and environment, then cached)")
    p.add_argument("--flags", choices=("default", "strict"), default="default",
                   help="PyTorch backend flags eager, torch.compile and the candidate run under: default (PyTorch's "
                   "own, as your process has them: TF32 for cuDNN convolutions on, for matmuls off; or the task's "
                   "[flags]) or strict (TF32 off everywhere; every speedup shown then says 'strict fp32 flags'). "
                   "Correctness always compares with a strict fp32 reference, with a tolerance no tighter than "
                   "your default-flag eager achieves")
    p.add_argument("--ncu", action="store_true", help="Nsight Compute metrics of the candidate's kernels "
                   "(throughputs, occupancy, stall reasons; GPU only, and only where counters are readable)")
    p.add_argument("--retimes", type=int, default=2, metavar="N",
                   help="when a timing is noisy or contended (spread, drift, other processes, GPU throttling), "
                   "time it again up to N more times with backoff (default 2; 0: report the first round)")
    p.add_argument("--processes", type=int, default=None, metavar="N",
                   help="worker processes a good measurement is timed in: after the evaluation's own worker, "
                   "fresh ones time the candidate against eager again, and the speedup's interval spans them "
                   "(default 1: on an H100 a second process cost 3.6-7 s and read what the first did)")
    p.add_argument("--rounds", type=int, default=None, metavar="N",
                   help="timing rounds, each on fresh allocations of the inputs, a good measurement needs; the "
                   "speedup's interval spans every round's (default: 2 on a GPU, where one allocation's placement "
                   "can move a median beyond its own interval; 1 on a CPU)")


