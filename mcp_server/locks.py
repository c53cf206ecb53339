"""One evaluation per device at a time, across threads and across server processes.

Two timings on one GPU (or on the same CPU cores) slow each other down and both numbers become
wrong, so every evaluation that runs on a device holds that device's lock: a threading lock for
the calls of this process, and an ``flock`` on a file in the cache for other processes (two
editors each running ``kernelskill mcp`` on one machine).
"""
from __future__ import annotations

import contextlib
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
    import os
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


def _thread_lock(key: str) -> threading.Lock:
    with _GUARD:
        return _LOCKS.setdefault(key, threading.Lock())


def _wait(try_once: Callable[[], bool], cancel: threading.Event | None) -> None:
    """Retry ``try_once`` (which must not block) every 50 ms until it succeeds; a set ``cancel``
    ends the wait with Cancelled."""
    while not try_once():
        if cancel is not None and cancel.is_set():
            from kernelskill.evaluate.launch.isolation import Cancelled
            raise Cancelled("cancelled while waiting for the device")
        time.sleep(0.05)


def _try_flock(fh) -> bool:
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


@contextlib.contextmanager
def hold_device(device: str, locks: Path | None = None, on_wait: Callable[[str], None] | None = None,
                cancel: threading.Event | None = None) -> Iterator[str]:
    """Hold ``device`` exclusively for the duration of the block (its file lock in ``locks``, by
    default ``lock_dir()``); ``on_wait`` hears about waits, and a set ``cancel`` ends a wait (a
    cancelled call never queues behind another)."""
    locks = locks or lock_dir()
    key = device_key(device)
    lock = _thread_lock(key)
    if not lock.acquire(blocking=False):
        if on_wait:
            on_wait(f"waiting for {device}: another evaluation is running on it")
        _wait(lambda: lock.acquire(blocking=False), cancel)
    try:
        if fcntl is None:  # pragma: no cover
            yield key
            return
        locks.mkdir(parents=True, exist_ok=True)
        with open(locks / f"{key}.lock", "a") as fh:
            if not _try_flock(fh):
                if on_wait:
                    on_wait(f"waiting for {device}: another process is evaluating on it")
                _wait(lambda: _try_flock(fh), cancel)
            try:
                yield key
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)
    finally:
        lock.release()
