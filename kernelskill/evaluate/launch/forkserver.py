"""Forked CPU workers: a zygote that has imported what a worker imports forks one child per request.

A worker's start is mostly ``import torch`` (seconds of a core); a child forked from a process that
has done it starts in milliseconds (docs/evaluator.md, "Forked CPU workers"). The zygote is started
the one way an untrusted child is (``isolation.spawn``: scrubbed environment, own session, the
lifeline) as ``python -m kernelskill.evaluate.worker --zygote`` and runs ``serve``. It never runs
candidate or task code, so what its children inherit is a worker's imports and nothing else.

Its protocol, one line each way: the owner writes a JSON request per worker (``args``: the worker's
arguments, its ``main`` gets them after the program's path as in ``sys.argv``; ``cwd``; the whole
``env`` the child runs with; the ``log`` its output goes to); the zygote answers ``ready`` once (or ``unsafe WHY`` and exits), then ``pid N`` per request (or
``error WHY``) and ``exit PID RC`` when it has reaped a child. The owner is not the children's parent
and cannot wait for them: ``ForkedProc`` stands for ``subprocess.Popen`` and learns the end from the
zygote. The zygote exits at the end of its stdin (once its children are reaped) or of the lifeline
(the owner is dead: at once).

CPU only: a process that has initialised CUDA cannot be forked into a usable CUDA process, and a
GPU worker's import is a small part of its start.
"""
from __future__ import annotations

import importlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Callable

from . import lifeline

# How often a handle looks at its child's pid once the zygote that would report its end is gone.
LOST_POLL_S = 0.05


# ---- the zygote ---------------------------------------------------------------------------------
def _say(line: str) -> None:
    try:
        os.write(1, (line + "\n").encode())
    except OSError:               # the owner is gone: nobody will ask for a worker again
        os._exit(0)


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def _unsafe() -> str | None:
    """Why forking this process would give a broken child, None when it is single-threaded. A thread
    pool made before a fork is missing in the child (OpenMP's waits for threads that do not exist).
    Pools that stop themselves at a fork (OpenBLAS, loaded with NumPy, registers pthread_atfork) are
    stopped by one throw-away fork first; what runs after it would be in every child."""
    if not os.path.isdir("/proc/self/task"):
        return "it cannot count its threads here (no /proc)"
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    n = _threads()
    return None if n == 1 else f"the fork server has {n} threads after its imports"


def serve(main: Callable[[list[str]], int]) -> None:
    """The zygote's loop (``worker --zygote``); ``main`` is what a forked child runs. Never returns."""
    line_fd = int(os.environ[lifeline.ENV])   # selected on, never held (hold() closes it): children need it
    why = _unsafe()
    if why:
        _say(f"unsafe {why}")
        os._exit(0)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)       # SIGCHLD wakes the select below
    signal.signal(signal.SIGCHLD, lambda *_: None)
    _say("ready")
    children: set[int] = set()
    buf, reading = b"", True
    while reading or children:
        ready, _, _ = select.select([line_fd, wake_r] + ([0] if reading else []), [], [])
        if line_fd in ready and not os.read(line_fd, 64):
            os._exit(0)                    # the owner died: its workers' guards kill them
        if wake_r in ready:
            while True:
                try:
                    if not os.read(wake_r, 4096):
                        break
                except BlockingIOError:
                    break
            _reap(children)
        if 0 in ready:
            data = os.read(0, 1 << 16)
            reading = bool(data)
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if line.strip():
                    _fork(json.loads(line), line_fd, children, main)
    os._exit(0)


def _reap(children: set[int]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            children.clear()
            return
        if pid == 0:
            return
        children.discard(pid)
        _say(f"exit {pid} {os.waitstatus_to_exitcode(status)}")


def _fork(req: dict, line_fd: int, children: set[int], main) -> None:
    try:
        pid = os.fork()
    except OSError as e:
        _say(f"error fork: {e}")
        return
    if pid == 0:
        _child(req, line_fd, main)
    children.add(pid)
    _say(f"pid {pid}")


def _child(req: dict, line_fd: int, main) -> None:
    """Become the worker a fresh ``python -m kernelskill.evaluate.worker`` would be: own session, no
    file of the zygote's but the lifeline, exactly the environment, folder and path it would have.
    What the worker's own imports fixed is reset by ``main`` (worker ``forked_main``)."""
    try:
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.set_wakeup_fd(-1)
        # The zygote's pipes to the owner and its wake-up pipe: a child holding them would keep the
        # owner's reader from the zygote's end of file, and could write into the protocol.
        os.closerange(3, line_fd)
        os.closerange(line_fd + 1, os.sysconf("SC_OPEN_MAX"))
        null = os.open(os.devnull, os.O_RDONLY)
        log = os.open(req["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(null)
        os.close(log)
        os.environ.clear()
        os.environ.update(req["env"])
        os.chdir(req["cwd"])
        sys.path[0] = req["cwd"]             # as `python -m` sets it: the candidate imports from there
        sys.argv = [sys.argv[0], *req["args"]]   # the zygote's argv[0]: the worker's __main__.py
        importlib.invalidate_caches()
        tempfile.tempdir = None              # gettempdir() reads TMPDIR (the scratch) again
        main(list(sys.argv))
    except BaseException:  # noqa: BLE001 — nothing may return into the zygote's loop
        try:
            traceback.print_exc()
            sys.stderr.flush()
        except BaseException:  # noqa: BLE001
            pass
    finally:
        os._exit(1)


# ---- the owner's side ---------------------------------------------------------------------------
def _gone(pid: int) -> bool:
    """The process has ended (a zombie nobody reaps counts: it runs nothing)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:               # the pid is someone else's now
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


class ForkedProc:
    """What ``isolation`` uses of ``subprocess.Popen``, for a worker the zygote forked: its end comes
    from the zygote's ``exit`` line. ``lost`` says why its exit status is unknown (the zygote died
    first: the worker was killed then), else None."""

    def __init__(self, pid: int, zygote: "Zygote", args: list[str]):
        self.pid, self.args, self._zygote = pid, args, zygote
        self.returncode: int | None = None
        self.lost: str | None = None

    def poll(self) -> int | None:
        with self._zygote.cv:
            self._check()
            return self.returncode

    def _check(self) -> None:           # under the zygote's cv
        if self.returncode is None and self._zygote.ended and _gone(self.pid):
            self.returncode = -signal.SIGKILL

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._zygote.cv:
            while True:
                self._check()
                if self.returncode is not None:
                    return self.returncode
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(self.args, timeout)
                # While the zygote lives its `exit` line wakes this; after, nothing reports the end.
                if self._zygote.ended:
                    left = LOST_POLL_S if left is None else min(left, LOST_POLL_S)
                self._zygote.cv.wait(left)


class Zygote:
    """The owner's handle on one zygote (``proc``: the started ``--zygote`` process, its stdin and
    stdout pipes; ``base``: its folder). ``state``: starting, ready or unsafe; ``ended`` once its
    output ended (it exited). Thread-safe: workers are started from many threads."""

    def __init__(self, proc: subprocess.Popen, base: Path, env_id: tuple):
        self.proc, self.base, self.env_id = proc, base, env_id
        self.owner = os.getpid()
        self.state, self.why, self.ended = "starting", "", False
        self.cv = threading.Condition()
        self._send = threading.Lock()            # one request in flight: its `pid` line is the next one
        self._answer: ForkedProc | str | None = None
        self._args: list[str] = []
        self._children: dict[int, ForkedProc] = {}
        threading.Thread(target=self._read, name=f"zygote-{proc.pid}", daemon=True).start()

    def _read(self) -> None:
        for raw in self.proc.stdout:
            word, _, rest = raw.decode(errors="replace").strip().partition(" ")
            with self.cv:
                if word == "ready":
                    self.state = "ready"
                elif word == "unsafe":
                    self.state, self.why = "unsafe", rest
                elif word == "pid":
                    child = self._children[int(rest)] = ForkedProc(int(rest), self, self._args)
                    self._answer = child
                elif word == "error":
                    self._answer = rest
                elif word == "exit":
                    pid, rc = (int(x) for x in rest.split())
                    child = self._children.pop(pid, None)
                    if child is not None:
                        child.returncode = rc
                self.cv.notify_all()
        self.proc.wait()
        with self.cv:
            if self.state == "starting":
                log = self.base / "zygote.log"
                text = log.read_text(errors="replace")[-2000:] if log.exists() else ""
                self.state, self.why = "unsafe", f"the fork server exited ({self.proc.returncode}) before it was ready: {text}"
            self.ended = True
            orphans = list(self._children.values())
            self._children.clear()
            # Nobody can report their ends now: they are killed, not left to run unobserved (a
            # candidate that kills its zygote ends its own evaluation, as a crash).
            for child in orphans:
                if child.returncode is None:
                    child.lost = f"the fork server that started it (pid {self.proc.pid}) died while it ran; it was killed"
                    try:
                        os.killpg(child.pid, signal.SIGKILL)
                    except OSError:
                        pass
            self.cv.notify_all()

    def wait_ready(self, timeout: float) -> bool:
        """Until it is ready (True) or can never be: unsafe, dead, or ``timeout`` passed (False)."""
        with self.cv:
            self.cv.wait_for(lambda: self.state != "starting" or self.ended, timeout)
            return self.state == "ready" and not self.ended

    def fork(self, args: list[str], cwd: Path, env: dict[str, str], log: Path,
             timeout: float) -> ForkedProc | None:
        """A worker forked with the arguments ``args``, in ``cwd``, with exactly ``env``, writing to
        ``log``; None when this zygote cannot serve (not ready within ``timeout``, unsafe, dead)."""
        if not self.wait_ready(timeout):
            return None
        line = json.dumps({"args": args, "cwd": str(cwd), "env": env, "log": str(log)}) + "\n"
        with self._send:
            with self.cv:
                self._answer, self._args = None, args
            try:
                self.proc.stdin.write(line.encode())
                self.proc.stdin.flush()
            except (OSError, ValueError):
                return None
            with self.cv:
                # Dead without an answer: it died between the request and its fork (or in between
                # the fork and the answer, where a child that nobody watches may run on).
                self.cv.wait_for(lambda: self._answer is not None or self.ended)
                answer = self._answer
        return answer if isinstance(answer, ForkedProc) else None

    def busy(self) -> bool:
        with self.cv:
            return bool(self._children)

    def close(self) -> None:
        """No more requests: it exits once the children it has are reaped."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
