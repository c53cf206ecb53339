"""Shapes, parameters and op classes of a task (``Task.summary``), without trusting its code.

Describing a task runs its module (``get_inputs``, ``Model.__init__``, one forward on meta
tensors). Shipped examples are ours and run in the server's process; a file from the roots or a
source a client sent runs in a child process with the evaluator's scrubbed environment, its own
scratch directory and a time limit, so a task that hangs, crashes or exhausts memory costs one
child, not the server.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from kernelskill.errors import TaskError
from kernelskill.evaluate.launch.isolation import kill_group, spawn

from .roots import ResolvedTask

_MARK = "\n@@kernelskill-describe@@"
_CHILD = r"""
import json, sys
from kernelskill.evaluate.launch.lifeline import hold
hold()
from kernelskill.errors import UserError
from kernelskill.task import Task
req = json.loads(sys.argv[1])
try:
    out = {"ok": True, "info": Task.load(req["path"], preset=req["preset"]).summary()}
except UserError as e:
    out = {"ok": False, "error": str(e)}
except Exception as e:  # noqa: BLE001 - the task's own failure, reported as data
    out = {"ok": False, "error": f"describing the task raised {type(e).__name__}: {e}"}
sys.stdout.write(MARK + json.dumps(out, default=str))
sys.stdout.flush()
""".replace("MARK", repr(_MARK))


def describe(resolved: ResolvedTask, scratch_root: Path, timeout: float = 180.0) -> dict:
    """``Task.summary()`` of a resolved task; TaskError with the reason when it fails."""
    if resolved.trusted:
        return resolved.task.summary()
    return describe_isolated(resolved.task.path, resolved.task.preset, scratch_root, timeout)


def describe_isolated(path: Path, preset: str | None, scratch_root: Path, timeout: float) -> dict:
    """Run ``Task.load(path, preset).summary()`` in a child process and return its result."""
    scratch = Path(tempfile.mkdtemp(prefix="describe-", dir=scratch_root))
    req = json.dumps({"path": str(path), "preset": preset})
    proc = spawn([sys.executable, "-c", _CHILD, req], scratch, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        raise TaskError(f"{path}: loading the task took longer than {timeout:.0f} s (does get_inputs() or "
                        f"the module loop forever, or are its sizes too big? try a smaller preset)") from None
    finally:
        kill_group(proc)
        shutil.rmtree(scratch, ignore_errors=True)
    text = out.decode(errors="replace")
    if _MARK not in text:
        rc = proc.returncode
        why = f"signal {-rc}" if rc is not None and rc < 0 else f"exit code {rc}"
        tail = err.decode(errors="replace").strip().splitlines()[-6:]
        raise TaskError(f"{path}: loading the task crashed ({why})" + ("\n" + "\n".join(tail) if tail else ""))
    reply = json.loads(text.rsplit(_MARK, 1)[1])
    if not reply["ok"]:
        raise TaskError(reply["error"])
    return reply["info"]

