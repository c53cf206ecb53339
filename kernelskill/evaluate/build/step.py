"""compile(): a candidate's build in a worker, and the CompileResult read from any worker's reply."""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import sys

import torch

from kernelskill.candidate import Candidate
from kernelskill.errors import UserError
from kernelskill.results import CompileResult, Diagnostic
from kernelskill.vocab import Backend, WorkerStatus
from ..launch.isolation import StepListener, WorkerOutcome, run_worker
from ..options import Options, request, resolve, resolve_device, workdir
from ..launch.reply import WorkerReply

# The worker imports the candidate from a copy in its scratch directory (Triton needs a file):
# tracebacks name that copy, and the user's file is what a person can open.
_SCRATCH_COPY = re.compile(r"""[^\s"'()]*candidate_module\.py""")


def user_paths(text: str, cand: Candidate) -> str:
    """``text`` with the worker's scratch copy of the candidate named as the user's file (``cand.label``)."""
    return _SCRATCH_COPY.sub(lambda m: cand.label, text) if text else text


def compile_result(cand: Candidate, reply: WorkerReply | None, out: WorkerOutcome | None) -> CompileResult:
    """The build part of a worker's reply (compile, run, …) as the CompileResult users see."""
    build = reply.build if reply else {}
    diags = [Diagnostic.from_dict(d) for d in build.get("diagnostics", [])]
    for d in diags:               # the worker knows only "candidate"; name the user's file where there is one
        if d.file == "candidate":
            d.file = cand.label
    status = reply.status if reply else None
    if status is None:      # no report: it compiled only if the worker got past the build phase
        ok = out is not None and out.phase not in ("setup", "build")
    else:
        ok = status != WorkerStatus.compile_error
    return CompileResult(ok=ok, backend=cand.backend, seconds=round(build.get("seconds", 0.0), 3),
                         cache_hit=bool(build.get("cache_hit", False)) and bool(build.get("extensions")),
                         compile_only=bool(build.get("compile_only")), diagnostics=diags,
                         log_tail=user_paths(build.get("log_tail") or (out.log_tail if out and not ok else ""), cand),
                         extensions=build.get("extensions", []), path=build.get("path", ""),
                         fallback=build.get("fallback", ""), units=build.get("units") or {},
                         steps=[list(x) for x in build.get("steps") or []])


def compile(candidate, *, device: str = "auto", opts: Options | None = None) -> CompileResult:
    """Build the candidate's extensions in a worker (compile-only nvcc check where CUDA can't run)."""
    opts = opts or Options()
    _, cand = resolve(None, candidate)
    if cand.backend == Backend.triton and not has_triton():
        raise UserError(f"{cand.name}: a Triton candidate needs the triton package, which this Python "
                        f"({sys.executable}) does not have: pip install triton (its kernels compile at their first "
                        f"launch, on a CUDA GPU)")
    device = resolve_device(device, cand.backend) if device != "auto" else ("cpu" if cand.backend == Backend.cpp else
                                                                          resolve_device("auto"))
    base = workdir(opts)
    out = run_worker(request("compile", None, cand, device, opts, base), opts, StepListener(opts.on_step), keep=base)
    res = compile_result(cand, out.result, out)
    if out.died:
        res.ok = False
        res.diagnostics.append(Diagnostic("error", out.died, origin="python"))
        res.log_tail = user_paths(out.log_tail, cand)
    shutil.rmtree(base, ignore_errors=True)
    return res


def has_triton() -> bool:
    """Whether this Python has the triton package (without importing it)."""
    return importlib.util.find_spec("triton") is not None


def check_triton(cand: Candidate, device: str) -> None:
    """A UserError that says what is missing and what to do when a Triton candidate cannot run here.

    Triton kernels run on a CUDA GPU, or on CPU tensors under Triton's interpreter (TRITON_INTERPRET=1,
    which the workers inherit): without either, the import or the first launch would fail and read
    as the candidate's compile_error."""
    triton = has_triton()
    has_cuda = bool(torch.version.cuda) and torch.cuda.is_available()
    if triton and os.environ.get("TRITON_INTERPRET") == "1":
        return
    interpreter = ("run its kernels on the CPU with Triton's interpreter (slow; for correctness, not speed): "
                   + ("" if triton else "pip install triton, then ") + "set TRITON_INTERPRET=1")
    if not has_cuda:
        lacks = "no CUDA GPU" + ("" if triton else " and no triton package")
        raise UserError(f"{cand.name}: a Triton candidate runs on a CUDA GPU and this machine has {lacks}; evaluate "
                        f"it on a GPU machine{'' if triton else ' with triton installed'}, or {interpreter}")
    if not triton:
        raise UserError(f"{cand.name}: a Triton candidate needs the triton package, which this Python "
                        f"({sys.executable}) does not have: pip install triton")
    if device == "cpu":
        raise UserError(f"{cand.name}: a Triton candidate runs on CUDA tensors; use --device cuda, or {interpreter}")
