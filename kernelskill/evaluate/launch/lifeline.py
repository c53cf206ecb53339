"""A child dies with the process that owns it, however the owner dies (SIGKILL included).

Workers run agent-written code in their own process group (``start_new_session``), so a Ctrl-C
or a closed terminal never reaches them, and a candidate stuck in native code (a C++ loop that
holds the GIL) answers no Python-level check. The owner therefore hands every child the read
end of a pipe whose only write end it keeps: the kernel closes that end when the owner dies, by any
means. The child's first act, before it reads its request or imports any candidate, is to fork a
guard that does nothing but wait on the pipe and, at end of file, SIGKILL the child's whole
process group (the worker, its compiler and ninja children, anything the candidate started, the
guard itself). The guard is a separate process: it needs no GIL and no cooperation from the code
it watches. When the worker ends the guard ends too (a launcher such as ncu waits for every process
it started), and the owner kills what is left of the group.

``PR_SET_PDEATHSIG`` would also do on Linux, but it fires when the *thread* that started the child
ends; the bench pool and the evaluator start workers from short-lived threads, and a spare worker
outlives the thread that started it.
"""
from __future__ import annotations

import os
import select
import signal
import stat
import threading

ENV = "KERNELSKILL_LIFELINE_FD"

_lock = threading.Lock()
_pipe: tuple[int, int, int] | None = None      # (owner pid, read end, write end)


def owner_fd() -> int:
    """The read end this process gives its children; made once per process (again after a fork,
    whose child must not share its parent's lifeline)."""
    global _pipe
    with _lock:
        if _pipe is None or _pipe[0] != os.getpid():
            r, w = os.pipe()          # non-inheritable: only children named in pass_fds get `r`
            _pipe = (os.getpid(), r, w)
        return _pipe[1]


def child_options(env: dict[str, str]) -> dict:
    """``subprocess.Popen`` keyword arguments that hand a child the lifeline (``env`` gets its fd)."""
    fd = owner_fd()
    env[ENV] = str(fd)
    return {"pass_fds": (fd,)}


def hold() -> int | None:
    """In a child started with ``child_options``: fork the guard; returns its pid (None without a
    lifeline, e.g. a worker started by hand). Call first thing, in the group leader."""
    value = os.environ.pop(ENV, None)
    if value is None or not hasattr(os, "fork"):
        return None
    try:
        fd = int(value)
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):   # a launcher (ncu) closed it and the number was reused
            return None
    except (ValueError, OSError):
        return None
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:                                            # the guard
        try:
            # it holds nothing but the lifeline: a pipe it kept open (the child's stdout, read by
            # the owner to its end) would keep the owner waiting for as long as the guard lives
            os.closerange(0, fd)
            os.closerange(fd + 1, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 4096)
            if _watch(fd, parent):                          # EOF: the owner is gone
                os.killpg(os.getpgid(0), signal.SIGKILL)
        finally:
            os._exit(0)
    os.close(fd)                                            # the worker itself holds no end
    return pid


def _watch(fd: int, parent: int, poll: float = 0.25) -> bool:
    """Wait until the owner dies (True: EOF on the lifeline) or the worker that forked the guard
    ends (False). The guard outlives no worker: a launcher that follows every process it started
    (``ncu --target-processes all``) waits for the guard as for the worker, and after the worker
    its owner kills the group anyway."""
    while True:
        try:
            ready, _, _ = select.select([fd], [], [], poll)
            if ready and not os.read(fd, 64):
                return True
        except InterruptedError:
            continue
        if os.getppid() != parent:                          # re-parented: the worker has ended
            return False
