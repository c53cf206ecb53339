"""The ``kernelskill`` command: parses, calls the library, prints. Nothing else lives here."""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import threading
import time
from pathlib import Path

from .errors import UserError
from .shipped import EXAMPLES_DIR
from .vocab import Status

COMMAND_MODULES = ("kernelskill.cli_skills", "kernelskill.cli_optimize", "kernelskill.mcp_server.cli",
                   "kernelskill.tui.cli", "kernelskill.cli_bench")

EPILOG = """examples:
  kernelskill eval examples/softmax_rows examples/softmax_rows/solutions/cpp_softmax_openmp.py --preset small
  kernelskill eval TASK.py CANDIDATE.py --device cuda --json
  kernelskill task show examples/softmax_rows --preset small
  kernelskill compile CANDIDATE.py

A TASK is a KernelBench file (Model, get_inputs, get_init_inputs) or a directory with
reference.py and task.toml. A CANDIDATE is a Python file that defines ModelNew.
Exit codes: 0 ok, 1 the candidate failed, 2 usage or task error (a stochastic reference too);
with --json, a usage or task error prints {"status": "error", "error": MESSAGE} on stdout."""

TIMEOUTS = """Timeouts: each evaluation runs in a worker process with two limits: --build-timeout (compiling
the candidate's extensions, default 900 s) and --run-timeout (everything after the build:
correctness trials, timing, profiling; default 300 s). A worker past its limit is killed with its
process group and the verdict is `timeout`. The optimizer reads them from [eval] build_timeout_s
and run_timeout_s in kernelskill.toml (docs/evaluator.md)."""


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


def _json_error(e: Exception) -> None:
    """The JSON error object of a --json command: status, error, and what the command adds (optimize: run_dir,
    attempts, best_speedup)."""
    print(json.dumps({"status": "error", "error": getattr(e, "message", None) or str(e),
                      **getattr(e, "json_fields", {})}, default=str), flush=True)


def _with_sets(e: UserError, args) -> UserError:
    """A task's error says which --set values were in force (unless it names one already)."""
    from .errors import TaskError
    sets = getattr(args, "sets", None)
    if not sets or not isinstance(e, TaskError) or str(e).startswith("--set "):
        return e
    out = TaskError(f"{e} (with {' '.join('--set ' + item for item in sets)})")
    out.json_fields = getattr(e, "json_fields", {})
    return out


def _parse_sets(items: list[str]) -> dict:
    from .task import parse_value
    out = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise UserError(f"--set {item!r}: expected NAME=VALUE, e.g. --set batch_size=16")
        out[name.strip()] = parse_value(value.strip())
    return out


def _task_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", help="a size preset from the task's task.toml (e.g. small)")
    p.add_argument("--set", dest="sets", action="append", metavar="NAME=VALUE",
                   help="override a module-level constant of the task (repeatable): a Python literal, else an "
                   "expression evaluated in the task's module (e.g. --set dtype=torch.float16)")


def _load_task(args):
    from .errors import TaskError
    from .task import Task
    path, sets = resolve_task_path(args.task), _parse_sets(args.sets)
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
    from .errors import TaskError
    from .task import Task
    try:
        Task.load(path, preset=args.preset).module()
    except TaskError:
        return error
    for item in args.sets:
        try:
            Task.load(path, preset=args.preset, overrides=_parse_sets([item])).module()
        except TaskError as e:
            return TaskError(f"--set {item}: {e}")
    return TaskError(f"{' '.join('--set ' + item for item in args.sets)}: {error}")     # only together


def resolve_task_path(spec: str) -> str:
    """A path, or the name of a shipped example."""
    if Path(spec).exists() or not (EXAMPLES_DIR / spec).exists():
        return spec
    return str(EXAMPLES_DIR / spec)


def cmd_eval(args) -> int:
    from .candidate import Candidate
    from .evaluate.api import Options, evaluate
    from .evaluate.timing import TimingConfig
    from .report import print_eval
    task = _load_task(args)
    cand = Candidate.from_file(args.candidate)
    timing = None if args.no_timing else TimingConfig(time_cap_s=args.time_cap, retimes=args.retimes)
    opts = Options(device=args.device, trials=args.trials, timing=timing, profile=not args.no_timing,
                   baseline=args.baseline, ncu=args.ncu, **_timeouts(args))
    with _progress(args, opts) as on_phase:
        result = evaluate(task, cand, opts=opts, on_phase=on_phase)
    _emit(result, args, print_eval)
    return _exit_code(result)


def _exit_code(result) -> int:
    """0 ok, 1 the candidate failed, 2 the task's fault (a reference that differs from itself)."""
    return 0 if result.ok else 2 if result.status == Status.stochastic else 1


@contextlib.contextmanager
def _progress(args, opts):
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
        self._phase, self._since, self._shown = None, time.monotonic(), False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, daemon=True, name="kernelskill-countdown")
        self._thread.start()

    def limit(self, phase: str) -> float:
        return self.limits[0] if phase in ("setup", "build") else self.limits[1]

    def __call__(self, phase: str) -> None:
        with self._lock:
            self._clear()
            print(f"  … {phase}", file=self.stream, flush=True)
            self._phase, self._since = phase, time.monotonic()

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
        while True:
            with self._lock:
                phase = self._phase
                limit = self.limit(phase) if phase else 0.0
            every = self.every or (1.0 if self.tty else min(30.0, max(1.0, limit / 10)))
            if self._stop.wait(every):
                return
            with self._lock:
                if self._phase is None or self._phase != phase or phase == "done":
                    continue
                ran = time.monotonic() - self._since
                if ran < min(self.QUIET_S, limit / 2):
                    continue
                text = f"  … {phase}: {ran:.0f} s of its {limit:.0f} s limit (then the verdict is timeout)"
                if self.tty:
                    self.stream.write("\r\033[K" + text)
                    self._shown = True
                else:
                    print(text, file=self.stream)
                self.stream.flush()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        with self._lock:
            if self._shown and self.tty:
                self.stream.write("\n")
                self._shown = False


def _emit(result, args, printer) -> None:
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
        return
    printer(result)
    if getattr(result, "status", None) == Status.timeout:      # a CompileResult has no status
        print("  the limits: --build-timeout S (default 900) and --run-timeout S (default 300)")


def cmd_profile(args) -> int:
    """Breakdown, roofline and bottleneck of the reference (no CANDIDATE) or of a candidate."""
    from .candidate import Candidate
    from .evaluate.api import Options, profile
    from .evaluate.timing import TimingConfig
    from .report import print_profile
    task = _load_task(args)
    cand = Candidate.from_file(args.candidate) if args.candidate else None
    opts = Options(device=args.device, trials=args.trials,
                   timing=TimingConfig(time_cap_s=args.time_cap, retimes=args.retimes),
                   baseline=args.baseline, ncu=args.ncu, remeasure_ceilings=args.remeasure_ceilings,
                   **_timeouts(args))
    with _progress(args, opts) as on_phase:
        result = profile(task, cand, opts=opts, on_phase=on_phase)
    _emit(result, args, lambda r: print_profile(r, reference=cand is None))
    return 0 if cand is None and result.profile is not None else _exit_code(result)


def _timeouts(args) -> dict:
    """Options' build_timeout and run_timeout from the flags; each at least a second."""
    out = {}
    for flag, key in (("--build-timeout", "build_timeout"), ("--run-timeout", "run_timeout")):
        value = getattr(args, key, None)
        if value is not None:
            if value < 1:
                raise UserError(f"{flag} {value:g}: at least 1 second")
            out[key] = value
    return out


def _timeout_args(p: argparse.ArgumentParser, run: bool = True) -> None:
    p.add_argument("--build-timeout", type=float, metavar="S", help="seconds the worker may spend compiling the "
                   "candidate's extensions before it is killed (default 900)")
    if run:
        p.add_argument("--run-timeout", type=float, metavar="S", help="seconds the worker may run after the build "
                       "(correctness trials, timing, profiling) before it is killed and the verdict is `timeout` "
                       "(default 300)")


def _measure_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--baseline", choices=("eager", "compile", "both"), default="eager",
                   help="baselines timed with the candidate: eager always; compile/both add torch.compile "
                   "(compiled once per task and environment, then cached)")
    p.add_argument("--ncu", action="store_true", help="Nsight Compute metrics of the candidate's kernels "
                   "(throughputs, occupancy, stall reasons; GPU only, and only where counters are readable)")
    p.add_argument("--retimes", type=int, default=2, metavar="N",
                   help="when a timing is noisy or contended (spread, drift, other processes, GPU throttling), "
                   "time it again up to N more times with backoff (default 2; 0: report the first round)")


def cmd_demo(args) -> int:
    """The main job on embedded defaults: a shipped solution, on whatever device this machine has."""
    import torch
    gpu = bool(torch.version.cuda) and torch.cuda.is_available()
    task = EXAMPLES_DIR / "softmax_rows"
    solution = "cuda_softmax_regcache.py" if gpu else "cpp_softmax_openmp.py"
    argv = ["eval", str(task), str(task / "solutions" / solution)] + ([] if gpu else ["--preset", "small"])
    print(f"kernelskill {' '.join(argv)}", file=sys.stderr)
    return main(argv + (["--json"] if args.json else []))


def cmd_compile(args) -> int:
    from .candidate import Candidate
    from .evaluate.api import Options, compile
    from .report import print_compile
    opts = Options(**_timeouts(args))
    with _progress(args, opts) as on_phase:
        if on_phase:
            on_phase("build")
        res = compile(Candidate.from_file(args.candidate), device=args.device, opts=opts)
    _emit(res, args, print_compile)
    return 0 if res.ok else 1


def cmd_machine(args) -> int:
    from .evaluate.api import Options, machine, resolve_device
    from .evaluate.machine import render
    device = resolve_device(args.device)
    profile = machine(device, Options(device=device), refresh=args.refresh)
    if args.json:
        print(json.dumps(profile, indent=2))
    else:
        print(render(profile, "cpp" if device == "cpu" else "cuda"))
    return 0


def cmd_warm(args) -> int:
    import shlex
    from .evaluate import toolchain
    from .evaluate.build import build_root
    sets = [shlex.split(f) for f in args.flags]
    if not args.only:
        sets += [[], ["-O2"], ["-O3"]] + toolchain.shipped_flag_sets()
    unique = []
    for flags in sets:
        if flags not in unique:
            unique.append(flags)
    root = build_root()
    print(f"precompiled headers under {root / '_pch'}: the bindings' and {len(unique)} flag sets"
          + (" (in the background)" if args.background else ""))
    toolchain.warm(root, unique, wait=not args.background)
    return 0


def cmd_task_show(args) -> int:
    from .report import print_task
    info = _load_task(args).summary()
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        print_task(info)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="kernelskill", description="Turn slow PyTorch modules into fast, verified kernels.",
                    epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    from . import __version__
    parser.add_argument("--version", action="version", version=f"kernelskill {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("eval", help="compile, verify and time a candidate against its task",
                       description="Compile, verify (5+ seeded trials) and time CANDIDATE against TASK in an "
                       "isolated worker.", epilog=EPILOG + "\n\n" + TIMEOUTS,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("task", help="task file or directory, or the name of a shipped example")
    p.add_argument("candidate", help="Python file defining ModelNew")
    p.add_argument("--device", default="auto", help="cpu, cuda or cuda:N (default: cuda for CUDA/Triton "
                   "candidates when a GPU is present, else cpu)")
    _task_args(p)
    p.add_argument("--trials", type=int, default=5, help="correctness trials with fresh seeds (default 5)")
    p.add_argument("--no-timing", action="store_true", help="verify only")
    p.add_argument("--time-cap", type=float, default=10.0, help="seconds of timing per model at most (default 10)")
    _measure_args(p)
    _timeout_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("profile", help="kernel breakdown, roofline and bottleneck of a task or a candidate",
                       description="Time and profile the task's reference (no CANDIDATE) or a candidate: the "
                       "kernels that ran, FLOPs and compulsory bytes against this device's measured ceilings "
                       "(roofline floor and achieved fraction), and the bottleneck class.",
                       epilog="examples:\n  kernelskill profile examples/softmax_rows --preset small\n"
                       "  kernelskill profile examples/gemm_bias_relu examples/gemm_bias_relu/solutions/"
                       "cuda_cublas_bias_relu_epilogue.py --ncu\n\nCeilings (copy bandwidth, matmul FLOP rate per "
                       "dtype, per-launch overhead) are measured once per device and cached under "
                       "$KERNELSKILL_CACHE/ceilings.\n\n" + TIMEOUTS,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("task", help="task file or directory, or the name of a shipped example")
    p.add_argument("candidate", nargs="?", help="Python file defining ModelNew (default: the reference itself)")
    p.add_argument("--device", default="auto", help="cpu, cuda or cuda:N (default: cuda when a GPU is present)")
    _task_args(p)
    p.add_argument("--trials", type=int, default=5, help="correctness trials before timing (default 5)")
    p.add_argument("--time-cap", type=float, default=10.0, help="seconds of timing per model at most (default 10)")
    _measure_args(p)
    p.add_argument("--remeasure-ceilings", action="store_true",
                   help="measure this device's ceilings again and replace the cached ones (ceilings measured "
                   "while other processes competed are re-measured by themselves, keeping the higher values)")
    _timeout_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_profile)

    p = sub.add_parser("demo", help="evaluate a shipped example solution on this machine's device",
                       description="Evaluate the shipped softmax_rows solution for this machine: the CUDA one on a "
                       "GPU, else the C++ one on the small preset. Prints the eval command it runs.")
    p.add_argument("--json", action="store_true", help="print the evaluation as one JSON object")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("compile", help="build a candidate's extensions (compile-only check where CUDA can't run)",
                       description="Build CANDIDATE's C++/CUDA extensions and import it in a worker, without a task: "
                       "the diagnostics name the candidate's file, line and column. Exit 0 when it builds, 1 when "
                       "not.")
    p.add_argument("candidate", help="Python file defining ModelNew")
    p.add_argument("--device", default="auto", help="cpu, cuda or cuda:N (default: cpu for C++ candidates, else cuda "
                   "when a GPU is present; without one a CUDA candidate gets an nvcc compile-only check)")
    _timeout_args(p, run=False)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("machine", help="what the agents are told about this machine's CPU, GPU and ceilings",
                       description="Print the machine profile every agent prompt carries: the CPU (cores, SIMD "
                       "instruction sets, caches, the C++ compiler, torch's parallel backend) and, for a GPU device, "
                       "the GPU (architecture, SMs, shared memory and registers per block and per SM, L2, memory), "
                       "with the measured bandwidth, matmul and launch ceilings. Read once per machine and cached "
                       "under $KERNELSKILL_CACHE/machine; --refresh reads it again.")
    p.add_argument("--device", default="auto", help="cpu, cuda or cuda:N (default: cuda when a GPU is present)")
    p.add_argument("--refresh", action="store_true", help="read the facts again and replace the cached ones")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_machine)

    p = sub.add_parser("warm", help="precompile the headers C++ builds use (seconds per build instead of ~30)",
                       description="Make the precompiled headers the evaluator's C++ builds use: torch's full "
                       "header for the bindings and the light header (torch/types.h) for the candidate's own "
                       "unit, for each flag set given with --flags, the defaults (none, -O2, -O3) and every flag "
                       "set of the shipped C++ solutions. Each is made once per flag set and environment and kept "
                       "under $KERNELSKILL_CACHE/build/<environment>/_pch (about 0.5-0.8 GB each). Builds make a "
                       "missing one themselves in the background; this makes them ahead, in the foreground, with "
                       "progress (about 25 s each on 2 cores; several at once where cores and memory allow: "
                       "a core and 2 GB each, at most eight).",
                       epilog="examples:\n  kernelskill warm\n  kernelskill warm --flags '-O3 -march=native -fopenmp'"
                              "\n  kernelskill warm --only --flags=-O3      (a single flag: write it with '=')"
                              "\n  kernelskill warm --background",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--flags", action="append", default=[], metavar="FLAGS",
                   help="one more set of extra_cflags, as one string (repeatable); one flag alone "
                   "is written --flags=-O3")
    p.add_argument("--only", action="store_true", help="only the --flags sets (and the bindings' header)")
    p.add_argument("--background", action="store_true", help="start the makers detached, at the lowest "
                   "priority, and return at once")
    p.set_defaults(func=cmd_warm)

    p = sub.add_parser("task", help="inspect tasks", description="Inspect tasks.")
    tsub = p.add_subparsers(dest="task_command", metavar="SUBCOMMAND")
    p = tsub.add_parser("show", help="shapes, dtypes, parameters and op classes of a task",
                        description="Load TASK (with its preset and --set values), run its reference once on meta "
                        "tensors and print its inputs, outputs, parameters, buffers, op classes, FLOPs (matmul, "
                        "conv and attention only: torch's FLOP counter) and compulsory bytes.")
    p.add_argument("task", help="task file or directory, or the name of a shipped example")
    _task_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_task_show)

    # Each command group registers itself; its module imports its own packages lazily.
    import importlib
    import importlib.util
    for name in COMMAND_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:      # its parent package is absent (a source tree without the front ends)
            found = False
        if found:
            importlib.import_module(name).add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageExit as e:
        if "--json" in argv:
            _json_error(e)
        raise
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args)
    except UserError as e:
        e = _with_sets(e, args)
        print(f"error: {e}", file=sys.stderr)
        if getattr(args, "json", False):
            _json_error(e)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`kernelskill skills gate --explain | head`): stop quietly, as cat does.
        # stdout is pointed at /dev/null so that the interpreter's final flush raises nothing.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
