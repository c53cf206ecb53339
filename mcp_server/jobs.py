"""Evaluations as jobs: work that may outlast a client's request timeout.

``start`` returns a job id at once and runs the evaluation in a thread of its own; ``get`` reports
its status, its last progress and, once finished, its result; ``cancel`` stops it (its worker is
killed and the device released within one poll, as for a cancelled call). Finished jobs stay
addressable (also as the resource ``job://<id>``) until ``KEEP`` newer ones have finished.
"""
from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from pydantic import BaseModel, Field

from kernelskill.errors import UserError, one_line
from kernelskill.evaluate.launch.isolation import Cancelled

JobKind = Literal["verify", "evaluate", "profile"]
JobStatus = Literal["running", "done", "failed", "cancelled"]
KEEP = 100          # finished jobs remembered


class JobInfo(BaseModel):
    """A job's state: its progress while it runs, its result once done."""
    job: str = Field(description="the job's id: pass it to get_job and cancel_job, or read job://<id>")
    kind: str
    task: str
    status: JobStatus = Field(description="running | done (result holds the evaluation) | failed (error says "
                              "why) | cancelled")
    step: float = Field(description="progress: step of total")
    total: float
    message: str = Field(description="the last progress message (the phase the evaluation is in)")
    elapsed_s: float
    result: dict[str, Any] | None = Field(default=None, description="the tool's result (as verify, evaluate or "
                                          "profile return it) once status is done")
    error: str | None = None


@dataclass
class _Job:
    id: str
    kind: str
    task: str
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None
    status: str = "running"
    step: float = 0.0
    total: float = 1.0
    message: str = "queued"
    result: dict | None = None
    error: str | None = None
    cancel: threading.Event = field(default_factory=threading.Event)

    def info(self) -> JobInfo:
        end = self.finished if self.finished is not None else time.monotonic()
        return JobInfo(job=self.id, kind=self.kind, task=self.task, status=self.status, step=self.step,
                       total=self.total, message=self.message, elapsed_s=round(end - self.started, 2),
                       result=self.result, error=self.error)


class Jobs:
    """The jobs of one server (all its sessions)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: OrderedDict[str, _Job] = OrderedDict()

    def start(self, kind: str, task: str, work: Callable[[Callable[[float, float, str], None]], BaseModel],
              cancellable: Callable[[threading.Event], Any]) -> JobInfo:
        """Run ``work(progress)`` in a thread of its own, inside ``cancellable(job.cancel)``."""
        job = _Job(id=secrets.token_hex(6), kind=kind, task=task)

        def progress(step: float, total: float, message: str) -> None:
            job.step, job.total, job.message = step, total, message

        def run() -> None:
            try:
                with cancellable(job.cancel):
                    out = work(progress)
                job.result, job.status = out.model_dump(mode="json"), "done"
            except Cancelled:
                job.status = "cancelled"
            except UserError as e:
                job.status, job.error = "failed", str(e)
            except Exception as e:  # noqa: BLE001 - a job's failure is its state, never the server's
                job.status, job.error = "failed", one_line(f"{type(e).__name__}: {e}")
            finally:
                if job.cancel.is_set() and job.status == "running":
                    job.status = "cancelled"
                job.finished = time.monotonic()
                self._forget_old()

        with self._lock:
            self._jobs[job.id] = job
        threading.Thread(target=run, daemon=True, name=f"kernelskill-job-{job.id}").start()
        return job.info()

    def get(self, job_id: str) -> JobInfo:
        return self._find(job_id).info()

    def cancel(self, job_id: str) -> JobInfo:
        """Ask a running job to stop; returns its state (``cancelled`` once its worker is dead)."""
        job = self._find(job_id)
        if job.status == "running":
            job.cancel.set()
        return job.info()

    def list(self) -> list[JobInfo]:
        with self._lock:
            return [j.info() for j in self._jobs.values()]

    def _find(self, job_id: str) -> _Job:
        with self._lock:
            job = self._jobs.get(str(job_id).strip())
        if job is None:
            raise UserError(f"no job {job_id!r} on this server (jobs last while the server runs; the {KEEP} "
                            f"most recently finished are kept). Start one with start_evaluation")
        return job

    def _forget_old(self) -> None:
        with self._lock:
            done = [k for k, j in self._jobs.items() if j.finished is not None]
            for k in done[:max(0, len(done) - KEEP)]:
                del self._jobs[k]
