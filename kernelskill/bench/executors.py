"""Where evaluations run: ``local`` (one after another here), ``pool`` (every local GPU, or N CPU
workers) and ``ray`` (a Ray cluster, or a local Ray started on demand). One interface:

    for job, record in make_executor("pool", device="cuda").map(jobs):
        ...                          # records arrive as jobs finish, in any order

A job is any object with ``key``, ``run(device, threads) -> dict`` (a JSON-ready record),
``build(device)`` (fills the build cache; may do nothing) and ``shipped()`` (a context manager
giving a copy that needs no file of this machine: what a remote worker runs). Candidate code
never runs in an executor's own process: ``evaluate()`` isolates it in a worker subprocess.

Timings never share a device: the pool runs one timing thread per GPU (``cuda:0`` … ``cuda:N-1``),
Ray gives every timing task ``num_gpus=1``. On a CPU, N workers each get ``cores // N`` threads;
that trades timing precision (neighbours share caches and memory bandwidth) for throughput.
"""
from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Callable, Iterator, Protocol, Sequence

from ..errors import UserError

Note = Callable[[str], None]
EXECUTORS = ("local", "pool", "ray")


class Job(Protocol):
    key: str
    builds: bool            # the pool's build phase runs its build() (False: build() does nothing)

    def run(self, device: str, threads: int | None) -> dict: ...

    def build(self, device: str) -> str | None: ...   # how it went, for the progress line

    def shipped(self): ...


def cpu_cores() -> int:
    """Cores this process may use (the affinity mask, not the machine's count; a cgroup CPU quota's
    worth where that is fewer: ``host.cores``)."""
    from kernelskill.evaluate import host
    return host.cores()


def gpu_devices(device: str, limit: int | None = None) -> list[str]:
    """``cuda:N`` is that GPU alone; ``cuda`` is every visible GPU (the first ``limit`` of them)."""
    import torch
    if ":" in device:
        return [device]
    n = torch.cuda.device_count()
    return [f"cuda:{i}" for i in range(min(n, limit) if limit else n)]


def cpu_threads(workers: int) -> int:
    """Threads per CPU worker when ``workers`` evaluations run at once."""
    return max(1, cpu_cores() // max(1, workers))


def _silent(_: str) -> None:
    pass


class Running:
    """The jobs running now in this process (the local and pool executors), for the progress
    display: a KernelBench level-3 LSTM can hold a GPU for minutes with nothing else to show."""

    def __init__(self):
        self._lock = threading.Lock()
        self._jobs: dict[int, tuple[str, str, float]] = {}

    @contextlib.contextmanager
    def job(self, job: "Job", device: str):
        token = object()
        with self._lock:
            self._jobs[id(token)] = (_label(job), device, time.monotonic())
        try:
            yield
        finally:
            with self._lock:
                self._jobs.pop(id(token), None)

    def now(self) -> list[tuple[str, str, float]]:
        """(job, device, seconds so far) of each running job, the longest-running first."""
        t = time.monotonic()
        with self._lock:
            jobs = list(self._jobs.values())
        return sorted(((label, device, t - start) for label, device, start in jobs), key=lambda x: -x[2])


RUNNING = Running()


@dataclass
class LocalExecutor:
    """One job after another, in this process, on one device."""
    device: str
    name: str = "local"

    def slots(self) -> list[str]:
        return [self.device]

    def threads(self) -> int | None:
        return None                 # the evaluator's default: every core

    def map(self, jobs: Sequence[Job], note: Note = _silent) -> Iterator[tuple[Job, dict]]:
        for job in jobs:
            with RUNNING.job(job, self.device):
                record = job.run(self.device, None)
            yield job, record


@dataclass
class PoolExecutor:
    """Every local GPU (or ``workers`` CPU evaluators): builds first, in parallel on ``jobs`` CPU
    cores, then one timing thread per device slot pulling jobs from a shared queue."""
    device: str
    workers: int | None = None      # cuda: the first N GPUs (default all); cpu: N evaluators (default 1)
    jobs: int | None = None         # parallel builds (default: every core)
    name: str = "pool"

    def slots(self) -> list[str]:
        if self.device.startswith("cuda"):
            gpus = gpu_devices(self.device, self.workers)
            if not gpus:
                raise UserError("--executor pool: no CUDA device is visible")
            return gpus
        return ["cpu"] * (self.workers or 1)

    def threads(self) -> int | None:
        return None if self.device.startswith("cuda") else cpu_threads(len(self.slots()))

    def map(self, jobs: Sequence[Job], note: Note = _silent) -> Iterator[tuple[Job, dict]]:
        slots, threads = self.slots(), self.threads()
        if jobs:
            self._build_all(jobs, note)
        todo: queue.SimpleQueue = queue.SimpleQueue()
        for job in jobs:
            todo.put(job)
        done: queue.SimpleQueue = queue.SimpleQueue()
        stop = threading.Event()

        def work(device: str) -> None:
            while not stop.is_set():
                try:
                    job = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    with RUNNING.job(job, device):
                        record = job.run(device, threads)
                    done.put((job, record))
                except BaseException as e:   # noqa: BLE001 — handed to the caller's thread, re-raised there
                    done.put((job, e))
                    return

        for i, device in enumerate(slots):
            threading.Thread(target=work, args=(device,), daemon=True, name=f"kernelskill-{device}-{i}").start()
        try:
            for _ in range(len(jobs)):
                job, record = _get(done)
                if isinstance(record, BaseException):
                    raise record
                yield job, record
        finally:
            stop.set()              # threads finish the job in hand and take no other

    def _build_all(self, jobs: Sequence[Job], note: Note) -> None:
        """Phase 1: fill the build cache, so the timing phase never waits for a compiler."""
        jobs = [j for j in jobs if j.builds]          # reference and optimize jobs build nothing here
        if not jobs:
            return
        n = self.jobs or cpu_cores()
        started = time.perf_counter()
        pool = ThreadPoolExecutor(n, thread_name_prefix="kernelskill-build")
        eta = BuildEta(len(jobs), n)

        def build(job: Job):
            t = time.perf_counter()
            how = job.build(self.device)
            return job, how, time.perf_counter() - t
        note(f"building {len(jobs)} candidates, {n} at a time")
        try:
            for future in as_completed([pool.submit(build, job) for job in jobs]):
                job, how, seconds = future.result()
                eta.done(seconds)
                note(f"  build {eta.finished}/{len(jobs)} · {_clock(time.perf_counter() - started)} · "
                     f"{eta.text()} · {_label(job)}: {how or 'done'}")
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        note(f"built {len(jobs)} candidates on {n} CPU workers in {time.perf_counter() - started:.0f} s")


def _label(job: Job) -> str:
    """A job as a person reads it: its task and solution where it has them, else its key."""
    words = [str(getattr(job, a, "") or "") for a in ("task", "solution")]
    return " ".join(w for w in words if w) or job.key[:12]


class BuildEta:
    """What remains of a build phase, learned from the builds it has seen: their mean duration times
    the builds left, over the builds that run at once. Cached builds take a fraction of a second and
    cold ones tens of seconds: the estimate follows what this run's sources actually cost."""

    def __init__(self, total: int, parallel: int):
        self.total, self.parallel, self.finished, self.seconds = total, max(1, parallel), 0, 0.0

    def done(self, seconds: float) -> None:
        self.finished += 1
        self.seconds += seconds

    def remaining(self) -> float | None:
        if not self.finished:
            return None
        left = self.total - self.finished
        return self.seconds / self.finished * left / min(self.parallel, max(left, 1))

    def text(self) -> str:
        r = self.remaining()
        return "ETA ?" if r is None else f"ETA {_clock(r)}"


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def _get(q: queue.SimpleQueue):
    """A blocking get that Ctrl-C can still interrupt."""
    while True:
        try:
            return q.get(timeout=0.2)
        except queue.Empty:
            continue


def _run_shipped(job: Job, device: str, threads: int | None) -> dict:
    """What a Ray worker runs: the job with its files written locally, so no shared disk is needed."""
    with job.shipped() as local:
        return local.run(device, threads)


@dataclass
class RayExecutor:
    """Jobs as Ray tasks: on a cluster (``address``) or a local Ray started here and shut down after.

    Each timing task asks for ``num_gpus=1`` on CUDA (Ray sets CUDA_VISIBLE_DEVICES, so the task
    sees its GPU as ``cuda``), or ``cores // workers`` CPUs on a CPU. Builds run inside the tasks:
    a cluster's nodes do not share one build cache unless $KERNELSKILL_CACHE is on a shared disk.
    """
    device: str
    address: str | None = None
    workers: int | None = None      # cpu: tasks at once (default 1)
    env: dict[str, str] = field(default_factory=dict)   # more variables for the workers
    name: str = "ray"

    def slots(self) -> list[str]:
        return [self.device]

    def threads(self) -> int | None:
        return None if self.device.startswith("cuda") else cpu_threads(self.workers or 1)

    def map(self, jobs: Sequence[Job], note: Note = _silent) -> Iterator[tuple[Job, dict]]:
        ray = import_ray()
        started_here = not ray.is_initialized()
        if started_here:
            self._init(ray, note)
        try:
            cuda = self.device.startswith("cuda")
            threads = self.threads()
            remote = ray.remote(_run_shipped).options(num_gpus=1 if cuda else 0, num_cpus=1 if cuda else threads,
                                                      max_retries=0)
            device = "cuda" if cuda else "cpu"     # inside the task, its one GPU is cuda:0
            pending = {remote.remote(job, device, threads): job for job in jobs}
            try:
                while pending:
                    ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
                    for ref in ready:
                        yield pending.pop(ref), ray.get(ref)
            finally:
                for ref in pending:
                    ray.cancel(ref, force=True)
        finally:
            if started_here:
                ray.shutdown()

    def _init(self, ray, note: Note) -> None:
        import logging
        env = {k: os.environ[k] for k in ("KERNELSKILL_CACHE", "KERNELSKILL_HOME") if os.environ.get(k)}
        runtime_env = {"env_vars": {**env, **self.env}}
        if self.address:
            ray.init(address=self.address, runtime_env=runtime_env, logging_level=logging.WARNING,
                     log_to_driver=False)
            note(f"connected to the Ray cluster at {self.address}")
        else:
            ray.init(num_cpus=cpu_cores(), runtime_env=runtime_env, include_dashboard=False,
                     logging_level=logging.WARNING, log_to_driver=False)
            note(f"started a local Ray with {cpu_cores()} CPUs")


def import_ray():
    """Ray, imported on first use (``import kernelskill`` never imports it)."""
    try:
        import ray
    except ImportError:
        raise UserError("--executor ray needs Ray: pip install 'kernelskill[ray]'") from None
    return ray


def make_executor(name: str, device: str, *, workers: int | None = None, jobs: int | None = None,
                  ray_address: str | None = None, env: dict[str, str] | None = None):
    """The executor called ``name`` for ``device`` (cpu, cuda or cuda:N)."""
    if workers is not None and workers < 1:
        raise UserError(f"--workers {workers}: expected 1 or more")
    if jobs is not None and jobs < 1:
        raise UserError(f"--jobs {jobs}: expected 1 or more")
    if name == "local":
        if workers not in (None, 1):
            raise UserError("--workers needs --executor pool or ray (local runs one job at a time)")
        return LocalExecutor(device)
    if name == "pool":
        return PoolExecutor(device, workers=workers, jobs=jobs)
    if name == "ray":
        import_ray()
        return RayExecutor(device, address=ray_address, workers=workers, env=dict(env or {}))
    raise UserError(f"--executor {name}: expected one of {', '.join(EXECUTORS)}")
