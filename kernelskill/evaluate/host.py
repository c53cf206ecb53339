"""The machine the evaluator runs on, as the trusted parent reads it: the cores this process may use
(affinity, the cgroup's CPU quota), how busy the host is (/proc: ``HostSampler`` while a worker
times), and the GPU's state from nvidia-smi (other processes' kernels, throttling) without
initialising CUDA. The measurement quality (quality.py) judges a timing by these; the build, the
isolation and the machine's description size their work by ``cores()``. And this process's own
temporary folder (``temp_dir``), which a later process removes if this one is killed.
"""
from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

# nvidia-smi's clock event reasons that mean the GPU was slowed by something outside the code.
THROTTLE = {0x8: "hardware slowdown", 0x20: "software thermal slowdown", 0x40: "hardware thermal slowdown",
            0x80: "hardware power brake"}

# ---- the host, sampled by the parent while the worker times --------------------------------------
def _cpu_busy_s() -> float | None:
    """Seconds all CPUs have been busy since boot (/proc/stat), None off Linux."""
    try:
        with open("/proc/stat") as f:
            parts = f.readline().split()
    except OSError:
        return None
    v = [int(x) for x in parts[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return (sum(v[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _proc_cpu_s(pid: int) -> float | None:
    """CPU seconds (user + system, all threads) of one process, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")


def host_busy_cores(seconds: float = 1.0) -> float | None:
    """How many cores the whole machine kept busy over the next ``seconds`` (every process: call it
    while the caller itself is idle). A benchmark says with it whether its host was quiet."""
    b0, t0 = _cpu_busy_s(), time.monotonic()
    time.sleep(seconds)
    b1 = _cpu_busy_s()
    if b0 is None or b1 is None:
        return None
    return round(max(0.0, b1 - b0) / (time.monotonic() - t0), 2)


def host_line(busy: float | None, when: str = "") -> str:
    """One line on the host's load for a benchmark's table: quiet, or busy with what it means (and
    the CPU quota of this process's cgroup, where one holds it below the cores it sees)."""
    head = f"host{' ' + when if when else ''}"
    quota = cpu_quota()
    seen = _affinity()
    limit = f"; a CPU quota of {quota:g} cores for {seen} visible" if quota is not None and quota < seen else ""
    if busy is None:
        return f"{head}: load unknown (no /proc/stat){limit}"
    n = cores()
    if busy <= max(0.5, 0.1 * n):
        return f"{head}: quiet ({busy:.1f} of {n} cores busy{limit})"
    return (f"{head}: BUSY ({busy:.1f} of {n} cores busy with other work{limit}): a busy machine's figures, "
            f"not a quiet one's")


def _affinity() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def cores() -> int:
    """The cores this process can keep busy: those it may run on, fewer where its cgroup's CPU quota
    (a container's ``--cpus``) allows less — threads beyond it only queue for the quota."""
    quota = cpu_quota()
    n = _affinity()
    return max(1, min(n, int(quota + 0.999))) if quota is not None else n


CGROUP_ROOT = Path("/sys/fs/cgroup")


def _cgroup_dirs(root: Path, proc_cgroup: str | None) -> list[Path]:
    """The cgroup folders whose CPU limits apply to this process, innermost first (v2's unified
    hierarchy and v1's cpu controller; each level's parents limit it too)."""
    if proc_cgroup is None:
        try:
            proc_cgroup = Path("/proc/self/cgroup").read_text()
        except OSError:
            return []
    dirs = []
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, rel = parts
        if controllers == "":
            base = root / "unified" if (root / "unified" / "cgroup.controllers").exists() else root
        elif "cpu" in controllers.split(","):
            base = root / controllers
            if not base.exists():
                base = root / "cpu"
        else:
            continue
        here = base / rel.strip().lstrip("/")
        while True:
            dirs.append(here)
            if here == base or base not in here.parents:
                break
            here = here.parent
    return dirs


def cpu_quota(root: Path | None = None, proc_cgroup: str | None = None) -> float | None:
    """The CPUs per second this process's cgroups allow (the smallest limit on the way up: cgroup v2
    ``cpu.max``, v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``); None where nothing limits it or
    nothing says. A container given 4 CPUs on a 64-core host sees 64 cores and gets 4."""
    limits = []
    for d in _cgroup_dirs(root or CGROUP_ROOT, proc_cgroup):
        try:
            if (d / "cpu.max").exists():
                quota, period = (d / "cpu.max").read_text().split()[:2]
                if quota != "max":
                    limits.append(int(quota) / int(period))
            elif (d / "cpu.cfs_quota_us").exists():
                quota = int((d / "cpu.cfs_quota_us").read_text())
                if quota > 0:
                    limits.append(quota / int((d / "cpu.cfs_period_us").read_text()))
        except (OSError, ValueError):
            continue
    return round(min(limits), 2) if limits else None


def cpu_throttled_s(root: Path | None = None, proc_cgroup: str | None = None) -> float | None:
    """Seconds this process's cgroup has been held back by its CPU quota (``cpu.stat``: v2
    ``throttled_usec``, v1 ``throttled_time`` in ns): the most any level on the way up says (a
    parent's count holds its children's); None if none says."""
    total, seen = 0.0, False
    for d in _cgroup_dirs(root or CGROUP_ROOT, proc_cgroup):
        try:
            text = (d / "cpu.stat").read_text()
        except OSError:
            continue
        stats = dict(line.split()[:2] for line in text.splitlines() if len(line.split()) >= 2)
        if "throttled_usec" in stats:
            total, seen = max(total, int(stats["throttled_usec"]) / 1e6), True
        elif "throttled_time" in stats:
            total, seen = max(total, int(stats["throttled_time"]) / 1e9), True
    return round(total, 3) if seen else None


class HostSampler:
    """How much CPU other processes used while the worker timed.

    ``start(pid)`` when the worker enters a timing round, ``stop()`` when it leaves it: every CPU
    second of the machine not spent by the worker counts as competition (the caller's own threads
    included: a test's busy threads compete like any other)."""

    def __init__(self) -> None:
        self._t0 = self._busy0 = self._pid = self._own0 = None

    def start(self, pid: int | None) -> None:
        """``pid``: the worker, whose CPU time is not competition; None counts every process."""
        self._pid, self._t0 = pid, time.monotonic()
        self._busy0 = _cpu_busy_s()
        self._own0 = _proc_cpu_s(pid) if pid else 0.0

    def stop(self) -> dict | None:
        if self._t0 is None or self._busy0 is None or self._own0 is None:
            return None
        wall = time.monotonic() - self._t0
        busy, own = _cpu_busy_s(), (_proc_cpu_s(self._pid) if self._pid else 0.0)
        self._t0 = None
        if busy is None or own is None or wall <= 0.05:
            return None
        others = max(0.0, (busy - self._busy0) - (own - self._own0)) / wall
        out = {"cores": cores(), "others_cores": round(others, 2), "worker_cores": round((own - self._own0) / wall, 2),
               "seconds": round(wall, 2)}
        try:
            out["loadavg_1m"] = round(os.getloadavg()[0], 2)
        except OSError:
            pass
        return out


# ---- the GPU, from nvidia-smi (the parent never initialises CUDA) ---------------------------------
def _smi(args: list[str], timeout: float = 5.0) -> str | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        r = subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout if r.returncode == 0 else None


def _ours(pid: int, root: int) -> bool:
    """Whether ``pid`` is one of this evaluator's workers (timing, profiling, spares): a descendant of
    ``root`` running ``kernelskill.evaluate.worker``. Anything else on the GPU competes, the caller's
    other children included."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if b"kernelskill.evaluate.worker" not in f.read():
                return False
    except OSError:
        return False
    for _ in range(64):
        if pid == root:
            return True
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            return False
        if pid <= 1:
            return False
    return False


def gpu_state(uuid: str | None, worker_pid: int | None) -> dict | None:
    """Clocks, throttling and other processes' SM use on one GPU, or None without nvidia-smi.

    ``uuid`` names the GPU (torch's ``get_device_properties().uuid``); processes that are not the
    caller's descendants and used its SMs in the last sample are listed in ``foreign``."""
    target = f"GPU-{uuid}" if uuid and not str(uuid).startswith("GPU-") else uuid
    q = _smi(["--query-gpu=uuid,index,clocks.sm,clocks.max.sm,clocks_event_reasons.active,temperature.gpu,"
              "power.draw", "--format=csv,noheader,nounits"])
    if q is None:
        return None
    out: dict = {}
    index = None
    for line in q.strip().splitlines():
        f = [x.strip() for x in line.split(",")]
        if len(f) < 7 or (target and f[0] != target):
            continue
        index = f[1]
        out.update(sm_clock_mhz=_num(f[2]), max_sm_clock_mhz=_num(f[3]), temperature_c=_num(f[5]), power_w=_num(f[6]))
        try:
            bits = int(f[4], 16)
        except ValueError:
            bits = 0
        out["throttled"] = [why for bit, why in THROTTLE.items() if bits & bit]
        break
    if index is None:
        return out or None
    pm = _smi(["pmon", "-c", "1", "-s", "u", "-i", index]) or ""
    me = os.getpid()
    active, seen_worker = [], False
    for line in pm.splitlines():
        f = line.split()
        if line.startswith("#") or len(f) < 4 or not f[1].isdigit():
            continue
        pid, sm = int(f[1]), f[3]
        seen_worker |= pid == worker_pid
        if sm.isdigit() and int(sm) > 0:
            active.append({"pid": pid, "sm": int(sm), "name": f[-1]})
    # Process ids are comparable only where nvidia-smi sees ours (no other pid namespace).
    visible = seen_worker or worker_pid is None
    out["foreign"] = [p for p in active if not _ours(p["pid"], me)] if visible else []
    out["processes_visible"] = visible
    return out


def _num(s: str) -> float | None:
    try:
        return float(s)
    except ValueError:
        return None


# ---- this process's temporary folders -----------------------------------------------------------
# Every folder made for a worker, a spare, a zygote or a shipped job lies under one folder per
# process, <tmp>/kernelskill-run-<pid>-<start time>. A process that exits removes it (atexit); one
# that is killed (SIGKILL, out of memory, a test that kills it on purpose) cannot, so the next
# process that makes its own removes those of processes that are gone. The start time tells a reused
# pid from the process that made the folder.
RUN_PREFIX = "kernelskill-run-"
_run: tuple[int, Path] | None = None
_run_lock = threading.Lock()


def _started(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc), None when it is gone or unknown."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def run_dir() -> Path:
    """This process's temporary folder (made on first use; a forked child makes its own)."""
    global _run
    with _run_lock:
        if _run is not None and _run[0] == os.getpid():
            return _run[1]
        tmp = Path(tempfile.gettempdir())
        started = _started(os.getpid())
        if started is not None:           # without /proc nothing tells a dead owner from a live one
            _remove_orphans(tmp)
        root = tmp / f"{RUN_PREFIX}{os.getpid()}-{started or 'unknown'}"
        root.mkdir(mode=0o700, exist_ok=True)
        _run = (os.getpid(), root)
        return root


def _remove_orphans(tmp: Path) -> None:
    """Remove the run folders (this user's) of processes that no longer run."""
    for d in tmp.glob(RUN_PREFIX + "*"):
        pid, _, started = d.name[len(RUN_PREFIX):].partition("-")
        try:
            mine = d.is_dir() and d.stat().st_uid == os.getuid()
        except OSError:
            continue
        if mine and pid.isdigit() and _started(int(pid)) != started:
            shutil.rmtree(d, ignore_errors=True)


def temp_dir(prefix: str) -> Path:
    """A fresh folder under this process's run folder."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=run_dir()))


@atexit.register
def _remove_run_dir() -> None:
    # Registered before isolation's atexit (which imports this module), so it runs after the spares,
    # zygotes and live workers are stopped. A forked child never removes its parent's folder.
    if _run is not None and _run[0] == os.getpid():
        shutil.rmtree(_run[1], ignore_errors=True)
