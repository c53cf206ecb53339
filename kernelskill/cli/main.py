"""The ``kernelskill`` command: parses, calls the library, prints. Nothing else lives here; each command
group is a module of this package (front ends register theirs: ``COMMAND_MODULES``)."""
from __future__ import annotations

import argparse
import os
import sys

from ..errors import UserError
from ..paths import EXAMPLES_DIR
from .common import (Parser, UsageExit, json_error, measure_args, shapes_args, task_args, timeout_args, with_sets)
from .evaluate import cmd_compile, cmd_eval, cmd_machine, cmd_profile, cmd_task_show, cmd_warm

COMMAND_MODULES = ("kernelskill.cli.skills", "kernelskill.cli.optimize", "kernelskill.mcp_server.cli",
                   "kernelskill.tui.cli", "kernelskill.cli.bench",
                   "kernelskill.cli.export")

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


def cmd_demo(args) -> int:
    """The main job on embedded defaults: a shipped solution, on whatever device this machine has."""
    import torch
    gpu = bool(torch.version.cuda) and torch.cuda.is_available()
    task = EXAMPLES_DIR / "softmax_rows"
    solution = "cuda_softmax_regcache.py" if gpu else "cpp_softmax_openmp.py"
    argv = ["eval", str(task), str(task / "solutions" / solution)] + ([] if gpu else ["--preset", "small"])
    print(f"kernelskill {' '.join(argv)}", file=sys.stderr)
    return main(argv + (["--json"] if args.json else []))


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="kernelskill", description="Turn slow PyTorch modules into fast, verified kernels.",
                    epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    from .. import __version__
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
    task_args(p)
    p.add_argument("--trials", type=int, default=5, help="correctness trials with fresh seeds (default 5)")
    p.add_argument("--no-timing", action="store_true", help="verify only")
    p.add_argument("--time-cap", type=float, default=10.0, help="seconds of timing per model at most (default 10)")
    measure_args(p)
    shapes_args(p)
    timeout_args(p)
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
    task_args(p)
    p.add_argument("--trials", type=int, default=5, help="correctness trials before timing (default 5)")
    p.add_argument("--time-cap", type=float, default=10.0, help="seconds of timing per model at most (default 10)")
    measure_args(p)
    p.add_argument("--remeasure-ceilings", action="store_true",
                   help="measure this device's ceilings again and replace the cached ones (ceilings measured "
                   "while other processes competed are re-measured by themselves, keeping the higher values)")
    timeout_args(p)
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
    timeout_args(p, run=False)
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
    task_args(p)
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
            json_error(e)
        raise
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args)
    except UserError as e:
        e = with_sets(e, args)
        print(f"error: {e}", file=sys.stderr)
        if getattr(args, "json", False):
            json_error(e)
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
