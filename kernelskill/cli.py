"""The ``kernelskill`` command: parses, calls the library, prints. Nothing else lives here."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .errors import UserError
from .shipped import EXAMPLES_DIR

COMMAND_MODULES = ("kernelskill.cli_skills", "kernelskill.cli_optimize", "kernelskill.mcp_server.cli",
                   "kernelskill.tui.cli", "kernelskill.cli_bench")

EPILOG = """examples:
  kernelskill eval examples/softmax_rows examples/softmax_rows/solutions/cpp_online_softmax.py --preset small
  kernelskill eval TASK.py CANDIDATE.py --device cuda --json
  kernelskill task show examples/softmax_rows --preset small
  kernelskill compile CANDIDATE.py

A TASK is a KernelBench file (Model, get_inputs, get_init_inputs) or a directory with
reference.py and task.toml. A CANDIDATE is a Python file that defines ModelNew.
Exit codes: 0 ok, 1 the candidate failed, 2 usage or task error (a stochastic reference too)."""


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
                   help="override a module-level constant of the task (repeatable)")


def _load_task(args):
    from .task import Task
    return Task.load(resolve_task_path(args.task), preset=args.preset, overrides=_parse_sets(args.sets))


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
                   baseline=args.baseline, ncu=args.ncu)
    result = evaluate(task, cand, opts=opts, on_phase=_progress(args))
    _emit(result, args, print_eval)
    return _exit_code(result)


def _exit_code(result) -> int:
    """0 ok, 1 the candidate failed, 2 the task's fault (a reference that differs from itself)."""
    return 0 if result.ok else 2 if result.status == "stochastic" else 1


def _progress(args):
    """Phase lines on stderr for a person; nothing when stdout carries JSON."""
    return None if args.json else (lambda phase: print(f"  … {phase}", file=sys.stderr, flush=True))


def _emit(result, args, printer) -> None:
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        printer(result)


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
                   baseline=args.baseline, ncu=args.ncu, remeasure_ceilings=args.remeasure_ceilings)
    result = profile(task, cand, opts=opts, on_phase=_progress(args))
    _emit(result, args, lambda r: print_profile(r, reference=cand is None))
    return 0 if cand is None and result.profile is not None else _exit_code(result)


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
    from .evaluate.api import compile
    from .report import print_compile
    res = compile(Candidate.from_file(args.candidate), device=args.device)
    _emit(res, args, print_compile)
    return 0 if res.ok else 1


def cmd_task_show(args) -> int:
    from .report import print_task
    info = _load_task(args).summary()
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        print_task(info)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kernelskill", description="Turn slow PyTorch modules into fast, "
                                     "verified kernels.", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    from . import __version__
    parser.add_argument("--version", action="version", version=f"kernelskill {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("eval", help="compile, verify and time a candidate against its task",
                       description="Compile, verify (5+ seeded trials) and time CANDIDATE against TASK in an "
                       "isolated worker.", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("task", help="task file or directory, or the name of a shipped example")
    p.add_argument("candidate", help="Python file defining ModelNew")
    p.add_argument("--device", default="auto", help="cpu, cuda or cuda:N (default: cuda for CUDA/Triton "
                   "candidates when a GPU is present, else cpu)")
    _task_args(p)
    p.add_argument("--trials", type=int, default=5, help="correctness trials with fresh seeds (default 5)")
    p.add_argument("--no-timing", action="store_true", help="verify only")
    p.add_argument("--time-cap", type=float, default=10.0, help="seconds of timing per model at most (default 10)")
    _measure_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("profile", help="kernel breakdown, roofline and bottleneck of a task or a candidate",
                       description="Time and profile the task's reference (no CANDIDATE) or a candidate: the "
                       "kernels that ran, FLOPs and compulsory bytes against this device's measured ceilings "
                       "(roofline floor and achieved fraction), and the bottleneck class.",
                       epilog="examples:\n  kernelskill profile examples/softmax_rows --preset small\n"
                       "  kernelskill profile examples/gemm_bias_relu examples/gemm_bias_relu/solutions/"
                       "cuda_gemm_bias_relu.py --ncu\n\nCeilings (copy bandwidth, matmul FLOP rate per dtype, "
                       "per-launch overhead) are measured once per device and cached under "
                       "$KERNELSKILL_CACHE/ceilings.", formatter_class=argparse.RawDescriptionHelpFormatter)
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
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_profile)

    p = sub.add_parser("demo", help="evaluate a shipped example solution on this machine's device")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("compile", help="build a candidate's extensions (compile-only check where CUDA can't run)")
    p.add_argument("candidate")
    p.add_argument("--device", default="auto")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("task", help="inspect tasks")
    tsub = p.add_subparsers(dest="task_command", metavar="SUBCOMMAND")
    p = tsub.add_parser("show", help="shapes, dtypes, parameters and op classes of a task")
    p.add_argument("task")
    _task_args(p)
    p.add_argument("--json", action="store_true")
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
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
