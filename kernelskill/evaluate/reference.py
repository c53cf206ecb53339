"""The task's reference, computed by trusted workers: the reference cache (seeded inputs,
outputs, weights, meta.json) and, for tasks too large to store outputs, a server that
recomputes them on demand. No candidate code runs in any of these workers."""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

import torch

from ..errors import TaskError
from ..task import Task
from ..vocab import WorkerStatus
from .cache import cache_root
from .launch.isolation import Cancelled, WorkerOutcome, run_worker
from .launch.reply import ReferenceMeta
from .launch.request import WorkerRequest
from .options import Options, backend_flags, mkdir, request, workdir

PROTOCOL = "v11"   # bump when the reference cache's contents change (v5: one file per trial, memory plan;
#                  v6: outputs above DEVICE_COMPARE_BYTES on a GPU are recomputed, not stored;
#                  v7: output_sizes, for the exact-size poison; v8: on a GPU every trial drawn there;
#                  v9: plan["cost_s"], where the reference worker's seconds went;
#                  v10: a worker on cuda:N sets its device, so the plan's peak memory is GPU N's;
#                  and op_classes, from the trace that counts the FLOPs;
#                  v11: outputs under strict flags beside the user's, meta["accuracy"])


def reference_key(task: Task, device: str, opts: Options) -> str:
    """The reference cache's key. ``cuda`` and ``cuda:N`` share one: the bench's pool names GPUs
    by index and its local executor does not, and each spelling used to compute its own copy."""
    limit = f"-s{opts.store_limit}" if opts.store_limit is not None else ""
    # The outputs are the strict ones whatever the flags; the user's eager beside them is not.
    _, settings = backend_flags(task, opts)
    flags = "-f" + hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:8] if settings else ""
    return f"{PROTOCOL}-{task.hash}-{device.split(':')[0]}-{opts.trials}-{opts.seed}{limit}{flags}"


def reference_dir(task: Task, device: str, opts: Options) -> Path:
    """Where the reference of ``task`` on ``device`` is cached (its ``meta.json``: the worker's reply)."""
    return cache_root() / "ref" / reference_key(task, device, opts)


def reference(task: Task, device: str, opts: Options) -> Path:
    """Seeded inputs, reference outputs and weights for ``task`` on ``device``; cached on disk."""
    ref_dir = reference_dir(task, device, opts)
    if (ref_dir / "meta.json").exists():
        return ref_dir
    base = workdir(opts)
    req = request("reference", task, None, device, opts, base, rotate=opts.timing.rotate if opts.timing else 3,
                  store_limit=opts.store_limit)
    out = run_worker(req, opts, keep=base)
    reply = out.result
    why = out.failure("unknown failure")
    if why:
        if reply and reply.status == WorkerStatus.task_error:
            raise TaskError(why)
        raise TaskError(f"{task.path}: the reference failed on {device}: {why}\n{out.log_tail[-1500:]}")
    tmp = Path(tempfile.mkdtemp(prefix="ref-", dir=mkdir(ref_dir.parent)))
    for path in [out.out_dir / "state.pt", *out.out_dir.glob("inputs_*.pt"), *out.out_dir.glob("outputs_*.pt")]:
        shutil.move(str(path), tmp / path.name)
    (tmp / "meta.json").write_text(json.dumps(reply.raw))   # the reference's reply is the cache's meta
    try:
        os.replace(tmp, ref_dir)
    except OSError:              # another process cached it first
        shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(base, ignore_errors=True)
    return ref_dir


class RefServer:
    """A trusted reference worker beside an evaluation whose reference outputs are not stored
    (memory plan ``recompute``): ``get(i)`` asks it for trial i's outputs and returns them; the
    file it wrote is deleted once read. Runs no candidate code; stopped by ``close``."""

    def __init__(self, task: Task, device: str, opts: Options, ref_dir: Path):
        self.base = workdir(opts)
        self.out = mkdir(self.base / "requests")      # the requests and answers; a spare may serve them
        self.opts = opts
        req = request("refserve", task, None, device, opts, self.base, ref_dir=str(ref_dir), serve_dir=str(self.out))
        self.outcome: WorkerOutcome | None = None
        self._n = 0
        self._thread = threading.Thread(target=self._run, args=(req,), daemon=True, name="kernelskill-refserve")
        self._thread.start()

    def _run(self, req: WorkerRequest) -> None:
        try:
            self.outcome = run_worker(req, self.opts, keep=self.base)
        except Cancelled:
            pass                                   # the evaluation raises it; this thread just ends

    def get(self, i: int) -> list:
        """Trial i's reference outputs, on the host."""
        got = self._ask(f"want_{i}", "", f"ref_{i}.pt")
        outs = torch.load(got, weights_only=True)
        got.unlink(missing_ok=True)
        return outs

    def compare(self, trial: int, file: Path, *, key=None, seed: int, dist: str, atol: float, rtol: float) -> dict:
        """A candidate's outputs (a file its worker wrote) compared with trial ``trial``'s reference on
        the reference worker's device: the TrialResult as a dict, or {"unreadable": why}."""
        self._n += 1
        name = f"cmp_{trial}_{self._n}.json"
        ask = {"file": str(file), "key": key, "trial": trial, "seed": seed, "dist": dist, "atol": atol, "rtol": rtol}
        got = self._ask(name, json.dumps(ask), name.replace("cmp_", "res_"))
        answer = json.loads(got.read_text())
        got.unlink(missing_ok=True)
        return answer

    def _ask(self, name: str, text: str, reply: str) -> Path:
        tmp = self.out / (name + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, self.out / name)
        got = self.out / reply
        deadline = time.monotonic() + self.opts.run_timeout
        while not got.exists():
            if self.opts.cancel is not None and self.opts.cancel.is_set():
                raise Cancelled("cancelled while the reference recomputed its outputs")
            if not self._thread.is_alive() or time.monotonic() > deadline:
                outcome = self.outcome
                why = outcome.failure("it stopped") if outcome else "timed out"
                raise TaskError(f"the reference worker that recomputes trial outputs stopped: {why}\n"
                                + (outcome.log_tail[-1500:] if outcome else ""))
            time.sleep(0.01)
        return got

    def close(self) -> None:
        (self.out / "stop").write_text("")
        self._thread.join(timeout=60)
        if self.opts.keep_dir is None:
            shutil.rmtree(self.base, ignore_errors=True)


@contextlib.contextmanager
def reference_server(task: Task, device: str, opts: Options, ref_dir: Path, meta: ReferenceMeta):
    """A RefServer while the block runs when the task's outputs are recomputed, else None."""
    if not meta.recompute:
        yield None
        return
    server = RefServer(task, device, opts, ref_dir)
    try:
        yield server
    finally:
        server.close()
