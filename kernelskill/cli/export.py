"""``kernelskill export RUN[/NODE] | CANDIDATE --task T --to DIR``: a verified candidate as a package
that builds its kernels ahead of time and registers them as torch.library ops (docs/export.md)."""
from __future__ import annotations

import argparse
import json
import sys

from ..errors import UserError
from .common import load_task, task_args

EPILOG = """examples:
  kernelskill export examples/relu_gelu/solutions/cpp_gelu_openmp.py --task examples/relu_gelu --preset small --to dist/gelu
  kernelskill export 20261127-031109-relu_task-1f4a --to dist/relu          # the run's best.py
  kernelskill export 20261127-031109-relu_task-1f4a/n3 --to dist/relu       # one verified node
  pip install --no-build-isolation dist/gelu && python -m pytest --pyargs ks_relu_gelu

A run gives the task, preset and --set values it was verified at (--task/--preset/--set override
them). Backends: cpp; cuda (on a machine without a GPU: sources and build only, the fake shapes are
recorded on a GPU); triton (on a GPU, or on a CPU with TRITON_INTERPRET=1: the launchers become
torch.library.triton_op ops, nothing is built). Exit codes: 0 written, 2 cannot be exported."""


def cmd_export(args) -> int:
    from ..export import export, resolve_source
    source, path, prov = resolve_source(args.source, args.runs_dir)
    if args.task is None:
        if not prov.get("task"):
            raise UserError("--task is required for a candidate file (the task it was verified on)")
        args.task = prov["task"]
        if args.preset is None and not args.sets:       # the sizes the run verified at (preset, then --set)
            args.preset = prov.get("preset")
            args.sets = [f"{k}={v}" for k, v in (prov.get("overrides") or {}).items()]
    task = load_task(args)
    res = export(source, task, args.to, package=args.name, path=path, provenance=prov, force=args.force)
    if args.json:
        print(json.dumps(res.to_dict()))
        return 0
    print(f"exported {res.backend} candidate to {res.out_dir} (package {res.package}) in {res.seconds:.1f} s")
    for op in res.ops:
        print(f"  op {op}")
    for note in res.notes:
        print(f"  note: {note}", file=sys.stderr)
    verb = "install it (Python only)" if res.backend == "triton" else "build it"
    print(f"{verb}: pip install --no-build-isolation {res.out_dir}\n"
          f"test it:  python -m pytest --pyargs {res.package}")
    return 0


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("export", help="a verified candidate as a package: AOT-built kernels as torch.library ops",
                              description="Write a Python package from a verified candidate (a run's best.py, a "
                              "run's node RUN/NODE, or a candidate file): the kernel sources as files, a setup.py "
                              "that builds them ahead of time, one torch.library op per load_inline function with a "
                              "fake implementation (torch.compile(fullgraph=True) traces through it), ModelNew "
                              "calling the ops (falling back to the reference when a kernel refuses its inputs), "
                              "and a test file.", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("source", metavar="RUN[/NODE]|CANDIDATE", help="a run id (or path), RUN/NODE, or a candidate file")
    p.add_argument("--task", help="the task the candidate was verified on (default: the run's)")
    task_args(p)
    p.add_argument("--to", required=True, metavar="DIR", help="the package's directory (created)")
    p.add_argument("--name", help="the Python package's name (default ks_<task>); also the ops' namespace")
    p.add_argument("--runs-dir", "--run-dir", dest="runs_dir", default="runs", help="where runs are (default runs/)")
    p.add_argument("--force", action="store_true", help="write into a non-empty DIR")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_export)
    return p
