"""Measurement quality: whether a timing is good enough to act on, and why not.

Every timed evaluation gets a verdict (``assess``):

  good       the samples are tight and nothing else competed for the machine
  noisy      the samples themselves say the measurement is unreliable: a wide interval of the
             speedup, a median far above the minimum, the interleaved reference drifting between
             the blocks of the run
  contended  something else was measured competing: other processes' CPU time while the worker
             timed (``HostSampler``, from /proc), another process running kernels on the same
             GPU, thermal or hardware throttling (``gpu_state``, from nvidia-smi)

The evaluator re-times a measurement that is not good (with backoff, ``TimingConfig.retimes``)
and reports the best round; a result that stays bad says so, and never becomes a best node, a
bottleneck class, a skill statistic or a fast_p count. All of this runs in the trusted parent.

The tool's own background builds (a precompiled header's detached maker, `kernelskill warm`) never
run beside a timing: while an evaluation times, they are paused (``RoundJudge.pause_own_builds``,
own_builds.pause) and continued when it is done; one that started after the pause (or could not be
paused) makes its round contended and, re-times left, is paused before the next round. The quality's
reasons say which builds were paused.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np

GOOD, NOISY, CONTENDED = "good", "noisy", "contended"
QUALITIES = (GOOD, NOISY, CONTENDED)
RANK = {GOOD: 0, NOISY: 1, CONTENDED: 2}

# Limits of a good measurement, (CPU, GPU). Calibrated on quiet machines (docs/evaluator.md,
# "Measurement quality"): quiet runs stay well inside them, contended ones land far outside.
SPEEDUP_CI_REL = (0.08, 0.02)      # half-width of the speedup's 95 % interval, relative
MEDIAN_OVER_MIN = (2.0, 1.3)       # median ÷ minimum of a model's samples
DRIFT = (0.5, 0.1)                 # spread of the reference's block medians over the run
DRIFT_BLOCKS = 4
OTHERS_SPARE = 0.5                 # CPU cores other processes may use beyond the free ones
QUANTILE = 0.10                    # the decision statistic: contention only ever adds time

# nvidia-smi's clock event reasons that mean the GPU was slowed by something outside the code.
THROTTLE = {0x8: "hardware slowdown", 0x20: "software thermal slowdown", 0x40: "hardware thermal slowdown",
            0x80: "hardware power brake"}


def low_quantile(ms: list[float], q: float = QUANTILE) -> float:
    """The q-quantile of a model's samples: what the code runs at when nothing interferes."""
    return float(np.quantile(np.asarray(ms, dtype=float), q))


def _drift(ms: list[float]) -> float | None:
    """Spread of the block medians, in order of time (None when too few samples)."""
    if len(ms) < 4 * DRIFT_BLOCKS:
        return None
    meds = [float(np.median(b)) for b in np.array_split(np.asarray(ms, dtype=float), DRIFT_BLOCKS)]
    return max(meds) / min(meds) - 1.0 if min(meds) > 0 else None


def baseline_noise_only(quality, device: str) -> bool:
    """A noisy round whose candidate timed cleanly: the candidate's own samples keep within the
    median ÷ minimum limit, and what failed is a baseline's (eager's or torch.compile's spread, or
    the reference drifting). Never a contended one: the machine, not a baseline, was the cause.
    Such a candidate is re-timed, not left out of decisions (issue 48, item 2)."""
    if quality is None or quality.verdict != NOISY:
        return False
    k = 1 if device.startswith("cuda") else 0
    m = quality.metrics or {}
    own = m.get("candidate_median_over_min")
    if own is None or own > MEDIAN_OVER_MIN[k]:
        return False
    return any((m.get(f"{b}_median_over_min") or 0) > MEDIAN_OVER_MIN[k] for b in ("eager", "compile")) \
        or (m.get("reference_drift") or 0) > DRIFT[k]


def assess(times: dict, device: str, speedup: float | None, speedup_ci: list[float],
           host: dict | None = None, gpu: dict | None = None, threads: int | None = None) -> dict:
    """The quality record of one timing round: {"verdict", "reasons", "metrics"}.

    ``times``: {model: {"ms": [...]}} as the worker timed them (interleaved); ``host`` from
    ``HostSampler.stop``; ``gpu`` from ``gpu_state``."""
    k = 1 if device.startswith("cuda") else 0
    stat, env, metrics = [], [], {}
    if speedup and len(speedup_ci) == 2:
        rel = (speedup_ci[1] - speedup_ci[0]) / 2 / speedup
        metrics["speedup_ci_rel"] = round(rel, 4)
        if rel > SPEEDUP_CI_REL[k]:
            stat.append(f"the speedup's 95 % interval is ±{rel:.1%} wide (limit ±{SPEEDUP_CI_REL[k]:.0%})")
    for name, t in times.items():
        ms = t["ms"]
        if not ms:
            continue
        m = float(np.median(ms)) / max(min(ms), 1e-12)
        metrics[f"{name}_median_over_min"] = round(m, 3)
        if m > MEDIAN_OVER_MIN[k]:
            stat.append(f"{name}'s median is {m:.2f}× its minimum (limit {MEDIAN_OVER_MIN[k]:g}×)")
    base = times.get("eager", {}).get("ms") or []
    d = _drift(base)
    if d is not None:
        metrics["reference_drift"] = round(d, 4)
        if d > DRIFT[k]:
            stat.append(f"the interleaved reference drifted {d:.1%} between blocks of the run "
                        f"(limit {DRIFT[k]:.0%})")
    if host:
        metrics.update({f"host_{a}": b for a, b in host.items()})
        others, cores = host.get("others_cores"), host.get("cores") or 1
        if others is not None:
            # The cores the timed work needs: its threads on a CPU, one launching thread on a GPU.
            need = 1 if k else min(threads or cores, cores)
            free = cores - need
            if others > free + OTHERS_SPARE:
                env.append(f"other processes used {others:.1f} of {cores} CPU cores while "
                           + (f"the worker's {need} thread(s) were timed" if not k else "the GPU was timed"))
    if gpu:
        metrics.update({f"gpu_{a}": b for a, b in gpu.items() if a != "foreign"})
        for p in gpu.get("foreign") or []:
            env.append(f"another process (pid {p['pid']}, {p['name']}) ran kernels on the GPU "
                       f"({p['sm']} % of its SMs)")
        for why in gpu.get("throttled") or []:
            env.append(f"the GPU was throttled: {why}")
    verdict = CONTENDED if env else NOISY if stat else GOOD
    return {"verdict": verdict, "reasons": env + stat, "metrics": metrics}


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


# ---- the tool's own background builds ----------------------------------------------------------------
def own_builds_now(cache: Path | None = None) -> list[dict]:
    """The tool's own background builds running now, not paused (``own_builds.own_builds``)."""
    from .own_builds import own_builds
    return [b for b in own_builds(cache) if not b["paused"]]


def paused_text(builds: list[dict], during: str = "the timing") -> str:
    """One reason line: which of the tool's own builds were paused, and for what."""
    what = sorted({b["what"] for b in builds})
    names = ", ".join(what[:3]) + (f" and {len(what) - 3} more" if len(what) > 3 else "")
    return f"paused the tool's own background build ({names}) during {during}; it went on afterwards"


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


# ---- the rounds of one evaluation ----------------------------------------------------------------
# Rounds whose speedups differ by more than this (CPU, GPU), relative, with disjoint intervals,
# contradict each other (below it, two tight rounds may exclude each other by chance and it does not
# matter: the goal for a rerun is medians within 1 %).
ROUNDS_APART = (0.04, 0.01)


def disjoint(rounds: list[dict], device: str = "cuda") -> list[tuple[int, int]]:
    """The pairs of rounds that contradict each other: their own speedup intervals do not overlap
    and their speedups differ by more than ROUNDS_APART. One of them saw something the other did not
    (a disturbance, a placement). While re-times are left such rounds are timed once more, so that
    the median of the rounds' speedups stands on a majority (an H100 conv epilogue: one round
    1.567× [1.554–1.579] beside 1.619× [1.617–1.621], the rounds after it 1.62×)."""
    apart = ROUNDS_APART[1 if device.startswith("cuda") else 0]
    out = []
    for i, a in enumerate(rounds):
        for b in rounds[i + 1:]:
            (alo, ahi), (blo, bhi) = a["speedup_ci"], b["speedup_ci"]
            far = max(a["speedup"], b["speedup"]) / min(a["speedup"], b["speedup"]) - 1 > apart
            if far and (ahi < blo or bhi < alo):
                out.append((a["round"], b["round"]))
    return out


class RoundJudge:
    """Judges each timing round as the worker finishes it, and answers it: time again (on fresh
    allocations) until ``min_rounds`` rounds are good and agree, after a backoff where a round was
    not good, while re-times are left; then report the rounds of the best verdict, merged.

    ``poll(out_dir)`` (every ~50 ms while the worker runs) starts the host sampler when a round
    begins; ``on_round(out_dir, k)`` is ``run_worker``'s round callback."""

    def __init__(self, device: str, threads: int | None, retimes: int, backoff_s: float,
                 pair: tuple[str, str] = ("eager", "candidate"), min_rounds: int = 1):
        self.device, self.threads, self.retimes, self.backoff_s = device, threads, retimes, backoff_s
        self.pair = pair        # the ratio the round is judged on: median(pair[0]) / median(pair[1])
        # Good rounds (each on fresh allocations) a good measurement needs; re-times come on top.
        self.min_rounds = max(1, min_rounds)
        self.rounds: list[dict] = []
        self._times: dict[int, dict] = {}      # each judged round's samples, for the rounds' union
        self._sampler, self._timing, self._pid, self._uuid = HostSampler(), False, None, None
        self._gpu_start: dict = {}
        self._phase = ""
        # The tool's own background builds: paused while this evaluation times (``pause_own_builds``,
        # continued by ``resume_own_builds``), and those seen running at a round's start (``poll``).
        self.paused: list[dict] = []
        self._own_at_start: list[dict] = []

    def pause_own_builds(self) -> list[dict]:
        """Pause the tool's own background builds running now, for the timing (the evaluation calls
        it when the candidate goes to timing; a round's start calls it too: a race has no ``await``)."""
        from .own_builds import pause
        got = pause()
        self.paused += [b for b in got if b["marker"] not in {p["marker"] for p in self.paused}]
        return got

    def resume_own_builds(self) -> None:
        """The timing is over (or the worker ended): the paused builds go on. Idempotent."""
        if self.paused:
            from .own_builds import resume
            resume()

    def on_phase(self, phase: str) -> None:
        self._phase = phase

    def poll(self, out_dir) -> None:
        if self._phase == "time" and not self._timing:
            self._timing = True
            self.pause_own_builds()
            self._own_at_start = own_builds_now()      # any that could not be paused
            if self._pid is None:
                import json
                try:
                    checks = json.loads((out_dir / "checks.json").read_text())
                except (OSError, ValueError):
                    checks = {}
                self._pid, self._uuid = checks.get("pid"), checks.get("gpu_uuid")
            if self._pid:
                self._sampler.start(self._pid)
            if self.device.startswith("cuda"):
                import threading
                self._gpu_start = {}
                threading.Thread(target=lambda: self._gpu_start.update(gpu_state(self._uuid, self._pid) or {}),
                                 daemon=True).start()

    def on_round(self, out_dir, k: int) -> str:
        import json

        from .timing import speedup_ci
        self.poll(out_dir)                       # a round shorter than one poll still gets a sampler
        self._timing = False
        host = self._sampler.stop()
        gpu = gpu_state(self._uuid, self._pid) if self.device.startswith("cuda") else None
        if gpu is not None and self._gpu_start:
            seen = {p["pid"] for p in gpu.get("foreign", [])}
            gpu["foreign"] = gpu.get("foreign", []) + [p for p in self._gpu_start.get("foreign", [])
                                                       if p["pid"] not in seen]
            gpu["throttled"] = sorted(set(gpu.get("throttled", [])) | set(self._gpu_start.get("throttled", [])))
        try:
            times = json.loads((out_dir / f"timing_{k}.json").read_text())["times"]
        except (OSError, ValueError, KeyError):
            return self._done()
        sp, ci = speedup_ci(times[self.pair[0]]["ms"], times[self.pair[1]]["ms"])
        q = assess(times, self.device, sp, ci, host, gpu, self.threads)
        # The tool's own background build beside the round (seen at its start or its end): the
        # round is contended, whatever the samples say.
        own = sorted({b["what"] for b in self._own_at_start + own_builds_now()})
        if own:
            q["reasons"].insert(0, f"the tool's own background build ran during the round ({', '.join(own)})")
            q["verdict"] = CONTENDED
        entry = {"round": k, "verdict": q["verdict"], "speedup": round(sp, 4),
                 "speedup_ci": [round(x, 4) for x in ci], "reasons": q["reasons"], "metrics": q["metrics"]}
        if host and host.get("others_cores") is not None:
            entry["others_cores"] = host["others_cores"]     # what ran beside this round, kept per round
        self.rounds.append(entry)
        self._times[k] = times
        good = [r for r in self.rounds if r["verdict"] == GOOD]
        more = k + 1 < self.min_rounds + self.retimes          # the worker times at most this many
        # Good rounds that contradict each other, an even number of them: one more round decides.
        split = len(good) >= max(2, self.min_rounds) and len(good) % 2 == 0 and bool(disjoint(good, self.device))
        if not more or (len(good) >= self.min_rounds and self.combined()["verdict"] == GOOD and not split):
            return self._done()
        if own:
            # Paused before the next round (one that started during this one): not timed beside it.
            self.pause_own_builds()
        if q["verdict"] == GOOD and (len(good) < self.min_rounds or split):
            return "again 0"            # the next allocation at once: nothing to wait out
        bad = len(self.rounds) - len(good)
        return f"again {self.backoff_s * 2 ** max(bad - 1, 0):g}"

    def _done(self) -> str:
        self.resume_own_builds()
        return "done " + ",".join(str(r) for r in self.chosen())

    def chosen(self) -> list[int]:
        """The rounds to report: every round of the best verdict seen (good ones when any)."""
        if not self.rounds:
            return [0]
        best = min(RANK[r["verdict"]] for r in self.rounds)
        return [r["round"] for r in self.rounds if RANK[r["verdict"]] == best]

    def combined(self, chosen: list[int] | None = None) -> dict:
        """The reported rounds as one measurement: {"verdict", "reasons", "metrics", "speedup",
        "speedup_ci"}. Its interval is ``speedup_ci`` over their samples merged, spanning every round's
        own speedup; it is good only when ``min_rounds`` rounds were good and that interval is
        within the limit (rounds on different allocations agree)."""
        from .timing import merge_rounds, speedup_ci
        chosen = chosen or self.chosen()
        rows = [r for r in self.rounds if r["round"] in chosen] or self.rounds[-1:]
        # Reasons and metrics: the widest round's (the worst of those reported).
        worst = max(rows, key=lambda r: r["metrics"].get("speedup_ci_rel", 0.0))
        verdict, reasons, metrics = worst["verdict"], list(worst["reasons"]), dict(worst["metrics"])
        have = [self._times[r["round"]] for r in rows if r["round"] in self._times]
        sp, ci = (worst["speedup"], worst["speedup_ci"])
        if len(have) > 1:
            merged = merge_rounds(have)
            a, b = merged[self.pair[0]], merged[self.pair[1]]
            sp, ci = speedup_ci(a["ms"], b["ms"], rounds=b["rounds"])
            k = 1 if self.device.startswith("cuda") else 0
            rel = (ci[1] - ci[0]) / 2 / sp
            speeds = [r["speedup"] for r in rows]
            metrics.update(speedup_ci_rel=round(rel, 4), rounds_spread=round(max(speeds) / min(speeds) - 1, 4),
                           rounds_merged=len(have))
            if rel > SPEEDUP_CI_REL[k]:
                if verdict == GOOD:
                    verdict = NOISY
                reasons.append(f"the rounds' speedups, each on fresh allocations, differ by "
                               f"{max(speeds) / min(speeds) - 1:.1%}: the interval over them is ±{rel:.1%} "
                               f"(limit ±{SPEEDUP_CI_REL[k]:.0%})")
        if verdict == GOOD and len(rows) < self.min_rounds:
            verdict = NOISY
            reasons.append(f"only {len(rows)} of the {self.min_rounds} rounds a measurement needs was good "
                           "(the others contended or noisy): its variation between allocations is unmeasured")
        return {"verdict": verdict, "reasons": reasons, "metrics": metrics, "speedup": sp, "speedup_ci": ci}

    def summary(self, chosen: int | list[int] | None = None) -> dict | None:
        """The MeasurementQuality fields of the reported rounds (None when no round was judged)."""
        if not self.rounds:
            return None
        if chosen is None or isinstance(chosen, int):
            chosen = self.chosen() if chosen is None or chosen in self.chosen() else [chosen]
        c = self.combined(chosen)
        history = [{k: v for k, v in x.items() if k != "metrics"} for x in self.rounds]
        reasons, metrics = c["reasons"], c["metrics"]
        if self.paused:
            # Said even of a good round: what was paused, so that it could be.
            reasons.append(paused_text(self.paused))
            metrics["own_builds_paused"] = len(self.paused)
        return {"verdict": c["verdict"], "reasons": reasons, "metrics": metrics, "rounds": len(self.rounds),
                "chosen_round": chosen[0], "chosen_rounds": list(chosen), "history": history}
