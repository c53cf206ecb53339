"""One evaluation per device at a time, across threads and across server processes.

Two timings on one GPU (or on the same CPU cores) slow each other down and both numbers become
wrong, so every evaluation that runs on a device holds that device's lock: a threading lock for
the calls of this process, and an ``flock`` on a file in the cache for other processes (two
editors each running ``kernelskill mcp`` on one machine).
"""
from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

try:  # POSIX; elsewhere only the calls within one process are serialized.
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

_GUARD = threading.Lock()
_LOCKS: dict[str, threading.Lock] = {}


def lock_dir() -> Path:
    """Where the device locks live: ``$KERNELSKILL_LOCKS``, else ``locks/`` in the build cache, which
    every server and process of this machine that shares the cache shares too (one evaluation per
    device among them). The test suite gives each of its parallel workers its own."""
    from kernelskill.evaluate.cache import cache_root
    return Path(os.environ.get("KERNELSKILL_LOCKS") or cache_root() / "locks")


def device_key(device: str) -> str:
    """A name for the physical device: the GPU's UUID when known (CUDA_VISIBLE_DEVICES-proof)."""
    if not device.startswith("cuda"):
        return "cpu"
    import torch
    index = int(device.split(":", 1)[1]) if ":" in device else torch.cuda.current_device()
    try:
        return f"gpu-{torch.cuda.get_device_properties(index).uuid}"
    except (AttributeError, RuntimeError, AssertionError):
        return f"cuda{index}"


def _thread_lock(locks: Path, key: str) -> threading.Lock:
    """The lock of this process's calls on ``key`` within one lock directory (a directory is one
    domain: the file lock beside it guards the same device for other processes)."""
    with _GUARD:
        return _LOCKS.setdefault(f"{locks}|{key}", threading.Lock())


def _lock_file(locks: Path, key: str) -> Path:
    return locks / f"{key}.lock"


def holder(device: str, locks: Path | str | None = None) -> str:
    """Who holds ``device`` now, as its holder wrote it ("pid 123: kernelskill mcp, evaluating for
    relu_task.py"), or ""."""
    return _read_holder(_lock_file(Path(locks) if locks else lock_dir(), device_key(device)))


def _read_holder(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def is_free(device: str, locks: Path | str | None = None) -> bool:
    """Whether ``device`` could be taken at this moment (by this process and by any other); a probe
    that never waits and leaves the device as it found it."""
    locks = Path(locks) if locks else lock_dir()
    lock = _thread_lock(locks, device_key(device))
    if not lock.acquire(blocking=False):
        return False
    try:
        if fcntl is None:  # pragma: no cover
            return True
        path = _lock_file(locks, device_key(device))
        if not path.exists():
            return True
        with open(path, "a") as fh:
            if not _try_flock(fh):
                return False
            fcntl.flock(fh, fcntl.LOCK_UN)
            return True
    finally:
        lock.release()


def _wait(try_once: Callable[[], bool], cancel: threading.Event | None) -> None:
    """Retry ``try_once`` (which must not block) every 50 ms until it succeeds; a set ``cancel``
    ends the wait with Cancelled."""
    while not try_once():
        if cancel is not None and cancel.is_set():
            from kernelskill.evaluate.launch.isolation import Cancelled
            raise Cancelled("cancelled while waiting for the device")
        time.sleep(0.05)


def _write_holder(fh, text: str) -> None:
    """The holder's line in the lock file (written only while the lock is held; best effort: a full
    disk must not fail an evaluation)."""
    try:
        fh.seek(0)
        fh.truncate()
        fh.write(text + ("\n" if text else ""))
        fh.flush()
    except OSError:
        pass


def _try_flock(fh) -> bool:
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


@contextlib.contextmanager
def hold_device(device: str, locks: Path | str | None = None, on_wait: Callable[[str], None] | None = None,
                cancel: threading.Event | None = None, what: str = "") -> Iterator[str]:
    """Hold ``device`` exclusively for the duration of the block (its file lock in ``locks``, by
    default ``lock_dir()``); ``on_wait`` hears about waits, and a set ``cancel`` ends a wait (a
    cancelled call never queues behind another). ``what`` (the call, its task) is written into the
    lock file while it is held, so a waiter can say who it waits for."""
    locks = Path(locks) if locks else lock_dir()
    key = device_key(device)
    lock = _thread_lock(locks, key)
    if not lock.acquire(blocking=False):
        if on_wait:
            on_wait(f"waiting for {device}: another evaluation is running on it")
        _wait(lambda: lock.acquire(blocking=False), cancel)
    try:
        if fcntl is None:  # pragma: no cover
            yield key
            return
        locks.mkdir(parents=True, exist_ok=True)
        with open(_lock_file(locks, key), "a") as fh:
            if not _try_flock(fh):
                if on_wait:
                    who = _read_holder(_lock_file(locks, key))
                    on_wait(f"waiting for {device}: another process is evaluating on it" + (f" ({who})" if who else ""))
                _wait(lambda: _try_flock(fh), cancel)
            _write_holder(fh, f"pid {os.getpid()}" + (f": {what}" if what else ""))
            try:
                yield key
            finally:
                _write_holder(fh, "")
                fcntl.flock(fh, fcntl.LOCK_UN)
    finally:
        lock.release()
