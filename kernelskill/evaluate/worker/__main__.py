"""The isolated worker: the only process that imports candidate code.

``python -m kernelskill.evaluate.worker REQUEST.json`` (or ``--spare DIR PARENT [WARM]``: started
ahead, it waits for its request; WARM, comma-separated: ``cuda-runtime``, ``inductor``, or a device
to set the profiler up on; or ``--zygote``: it forks a worker per request, launch/forkserver.py). Its modes, one module each: ``reference``, ``compile``
(candidate.py), ``run``, ``profile`` and ``race`` (run.py), ``refserve``, ``ceilings``, ``machine``
and ``ncu`` (probes.py).

It sends tensors and raw numbers back through files; verdicts are decided by the parent.
Everything the checks rely on is captured before the candidate is imported (core.py, imported
first).
"""
from __future__ import annotations

import importlib
import json
import os
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import torch

from kernelskill.evaluate.build import extensions as _build
from . import guards
from kernelskill.evaluate.launch import lifeline
from kernelskill.errors import tail
from kernelskill.vocab import WorkerStatus
from kernelskill.evaluate.launch.request import WorkerRequest
from . import core
from .core import _SET_FLAGS, _WARMED, _clock, _setup, orphaned, set_phase, warm_profiler
from .candidate import mode_compile
from .reference import mode_reference
from .run import mode_profile, mode_race, mode_run
from .refserve import mode_refserve
from .probes import mode_ceilings, mode_machine, mode_ncu


def worker_env(device: str) -> dict:
    """What the numbers were measured on (the parent never initialises CUDA itself)."""
    env = {"threads": torch.get_num_threads(), "flags": dict(_SET_FLAGS)}
    if device.startswith("cuda") and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        env.update(gpu=props.name, capability=f"{props.major}.{props.minor}")
        try:
            import subprocess
            env["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                           capture_output=True, text=True, timeout=10).stdout.strip().splitlines()[0]
        except (OSError, IndexError, subprocess.SubprocessError):
            pass
    return env


MODES = {"reference": mode_reference, "compile": mode_compile, "run": mode_run, "ceilings": mode_ceilings,
         "machine": mode_machine, "ncu": mode_ncu, "profile": mode_profile, "race": mode_race, "refserve": mode_refserve}


SPARE_IDLE_S = 1800.0


def wait_as_spare(out: Path, warm: str | None) -> Path | None:
    """A prestarted worker: Python, torch and this module are imported (and, for profiling, the
    profiler set up; for a GPU, CUDA's runtime started, which a build's call would otherwise wait
    for; after a request that timed torch.compile, Dynamo and Inductor imported; figures:
    docs/evaluator.md, "Measurements behind the code"; docs/optimizer.md); wait for the request the
    parent hands over. None: the parent is gone or
    never came back, and this process just exits. No request, no candidate code: nothing else runs.
    Its parent is the pid that started it (``_PARENT``: it may have died while this process imported torch)."""
    warmed = []                           # what got ready, written into spare-ready (tests read it)
    for what in (warm or "").split(","):
        if what == "cuda-runtime":            # isolation.SPARE_CUDA_RUNTIME: the build's arch, read ahead
            try:
                _build.gpu_arch()
                warmed.append(what)
            except Exception:  # noqa: BLE001 — a CUDA that fails here fails the request, which reports it
                pass
        elif what == "inductor":              # isolation.SPARE_INDUCTOR: torch.compile's modules, imported
            try:
                with core.compile_tempdir():      # Inductor fixes its header folder at import
                    importlib.import_module("torch._dynamo")
                    importlib.import_module("torch._inductor.compile_fx")
                warmed.append(what)
            except Exception:  # noqa: BLE001 — the baseline's compile imports them again and reports a failure
                pass
        elif what:
            _setup(WorkerRequest(mode="profile", device=what))
            _WARMED[what] = warm_profiler(what)
            warmed.append(what)
    (out / "spare-ready").write_text(",".join(warmed))
    deadline = _clock() + SPARE_IDLE_S
    path = out / "request.json"
    while _clock() < deadline and not orphaned():
        if path.exists():
            return path
        time.sleep(0.01)
    return None


def forked_main(argv: list[str]) -> int:
    """``main`` in a worker forked from the zygote (forkserver.serve has given it its own session,
    files, environment and folder). What this process's imports drew once for every child is drawn
    anew, as a fresh worker draws it: NumPy's global generator (seeded from the OS at import; Python's
    ``random`` reseeds itself at a fork)."""
    np.random.seed()
    return main(argv)


def main(argv: list[str]) -> int:
    lifeline.hold()       # first: from here on this worker's group dies with its owner, stuck or not
    # The parent it watches: the evaluator, or for a forked worker the zygote, which exits when the
    # evaluator dies (so a forked worker is orphaned when its evaluator is, and when its zygote is).
    core._PARENT = int(argv[3]) if argv[1] == "--spare" else os.getppid()
    if argv[1] == "--spare":
        path = wait_as_spare(Path(argv[2]), argv[4] if len(argv) > 4 else None)
        if path is None:
            os._exit(0)
        argv = [argv[0], str(path)]
    req = WorkerRequest.parse(json.loads(Path(argv[1]).read_text()))
    out = Path(req.out_dir)
    set_phase(out, "setup")
    try:
        result = MODES[req.mode](req, out)
    except torch.OutOfMemoryError as e:
        result = {"status": WorkerStatus.runtime_error, "error": f"out of memory: {str(e).splitlines()[0]}",
                  "traceback": tail(traceback.format_exc())}
    except Exception as e:  # noqa: BLE001 — the worker reports every failure as data
        line, text = guards.candidate_line(e)
        task_error = guards.is_task_error(e)          # its message names the file and line already
        result = {"status": WorkerStatus.task_error if task_error else WorkerStatus.runtime_error,
                  "error": (str(e) if task_error else f"{type(e).__name__}: {e}")[:2000], "line": line,
                  "source_line": text,
                  "traceback": tail(traceback.format_exc())}
        if guards.is_triton_compile_error(e):
            result["status"] = WorkerStatus.compile_error
    result.pop("module", None)
    result["env"] = worker_env(req.device)
    tmp = out / "result.json.tmp"
    tmp.write_text(json.dumps(result, default=str))
    os.replace(tmp, out / "result.json")
    set_phase(out, "done")
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: a candidate's atexit hooks or broken destructors change nothing now.
    os._exit(0)


if __name__ == "__main__":
    if sys.argv[1:] == ["--zygote"]:
        from kernelskill.evaluate.launch import forkserver
        forkserver.serve(forked_main)
    main(sys.argv)
