"""Timing: the loops that run inside the worker, and the statistics the trusted parent computes.

GPU: warm-up, L2 flush before each call, input sets rotated, CUDA events plus a host clock after
a full synchronize, baseline and candidate interleaved, adaptive repetitions. CPU: the same on
``perf_counter`` with the thread count pinned.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from kernelskill.results import TimingStats


@dataclass
class TimingConfig:
    warmup: int = 3
    min_reps: int = 30            # fewer left repeated medians spread beyond the 1 % goal
                                  # (figures: docs/evaluator.md, "Measurements behind the code")
    max_reps: int = 200
    time_cap_s: float = 10.0      # per timed model, excluding warm-up
    warmup_s: float = 0.1         # and warm up at least this long (GPU clocks settle; caches fill)
    # A GPU that idled (the trials' comparison, a backoff) is warmed up this long before its first
    # round: with only warmup_s, first rounds on an idle GPU read off the rounds timed right after
    # them; with this, none did (figures: docs/evaluator.md, "Measurements behind the code").
    gpu_idle_warmup_s: float = 1.0
    rotate: int = 3               # input sets the timed calls rotate through (each re-checked after)
    # Stop when the median's 95 % interval is within ± this. None: ±0.25 % on a GPU, where the
    # CPU's ±1 % stop left repeated medians further apart than the 1 % goal, and ±1 % on a CPU
    # (figures: docs/evaluator.md, "Measurements behind the code").
    target_rel_ci: float | None = None
    flush_l2: bool = True
    # GPU: spin before each timed call while the host enqueues it, so launch gaps are not timed;
    # the call then costs max(device time, host enqueue time).
    hide_launch: bool = True
    # A round whose quality is not good (quality.py) is timed again, up to this many more times,
    # after backoff_s, 2·backoff_s, … of waiting; the best round is reported.
    retimes: int = 2
    backoff_s: float = 1.0
    # Timed in at least this many rounds, each on fresh allocations of the inputs, before a
    # measurement can be good; the interval spans every round's speedup. None: 2 on a GPU (one
    # allocation's placement moved a median by more than its own interval: docs/evaluator.md,
    # "Intervals that hold on a rerun"), 1 on a CPU. 0 means None (a TOML file has no None).
    rounds: int | None = None
    # Timed in this many worker processes: after the evaluation's own worker, others (a race of the
    # candidate alone against eager, its timed outputs re-checked) time it again, and the speedup
    # and its interval span them. Only a good measurement is timed again. Not the default: on a GPU
    # it cost seconds an evaluation, and the two processes of one evaluation agreed where
    # evaluations did not (figures: docs/evaluator.md, "Measurements behind the code"). None or 0: 1.
    processes: int | None = None
    # The speedup's interval spans the eager medians of this task's last evaluations here (good
    # ones, same GPU and environment), which is what a rerun's eager reads. None: on a GPU.
    eager_runs: bool | None = None

    def min_rounds(self, device: str) -> int:
        if self.rounds:
            return max(1, self.rounds)
        return 2 if device.startswith("cuda") else 1

    def worker_processes(self, device: str) -> int:
        return max(1, self.processes or 1)

    def span_eager_runs(self, device: str) -> bool:
        return device.startswith("cuda") if self.eager_runs is None else self.eager_runs

    def target(self, device: str) -> float:
        if self.target_rel_ci is not None:
            return self.target_rel_ci
        return 0.0025 if device.startswith("cuda") else 0.01


def _ci_halfwidth_rel(xs: list[float]) -> float:
    """Relative half-width of a distribution-free 95 % interval of the median."""
    a = np.sort(np.asarray(xs))
    n = len(a)
    if n < 6:
        return float("inf")
    k = int(np.floor(n / 2 - 0.98 * np.sqrt(n)))
    lo, hi = a[max(k, 0)], a[min(n - 1 - k, n - 1)]
    med = float(np.median(a))
    return float((hi - lo) / 2 / med) if med > 0 else float("inf")


def time_pair(models: dict, input_sets: list[list], device: str, cfg: TimingConfig, reseed=None,
              idle: bool = True, keep=None) -> dict:
    """Time each callable in ``models`` interleaved; return raw per-call times in ms.

    ``idle``: the GPU may have idled since it last ran (a first round, one after a backoff): it is
    warmed up for ``gpu_idle_warmup_s`` (a round right after another needs only ``warmup_s``).

    ``reseed(set_index)``, when given, runs before each timed call, outside both clocks: a model
    that draws random numbers then gives the outputs its verified trial gave for that input set.

    ``keep``: the models whose last output per input set is returned (re-checked afterwards); all
    of them when None. Every other output is dropped as soon as its call is timed: KernelBench's
    level1/63 conv returns 8 GiB, and eager's, the candidate's and torch.compile's on three input
    sets held most of a GPU's memory (the memory plan counts one output per set; figures:
    docs/evaluator.md, "Measurements behind the code").

    Returns {name: {"ms": [...], "host_ms": [...]}, "reps": n, "last_outputs": {name: {set: out}}}.
    """
    import torch
    cuda = device.startswith("cuda")
    names = list(models)
    target = cfg.target(device)
    flush = None
    if cuda and cfg.flush_l2:
        l2 = torch.cuda.get_device_properties(torch.device(device)).L2_cache_size or (50 << 20)
        flush = torch.empty(int(l2 * 2) // 4, dtype=torch.float32, device=device)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    with torch.no_grad():
        # Warm-up: compilation, autotuning, module loads, and clocks that settle under load. Each
        # call's enqueue time (the host's, until the call returns) is kept: it sizes the spin below.
        start, i = time.perf_counter(), 0
        enqueue = {n: [] for n in names}
        warm_s = max(cfg.warmup_s, cfg.gpu_idle_warmup_s) if cuda and idle else cfg.warmup_s
        while i < cfg.warmup or time.perf_counter() - start < warm_s:
            for name in names:
                h = time.perf_counter()
                models[name](*input_sets[i % len(input_sets)])
                enqueue[name].append(time.perf_counter() - h)
                sync()
            i += 1
            if i >= 1000 and time.perf_counter() - start >= warm_s:
                break
        spin, spin_ms = _spin_cycles(torch, device, enqueue) if cuda and cfg.hide_launch else (0, 0.0)
        times = {n: {"ms": [], "host_ms": []} | ({"device_ms": [], "enqueue_ms": []} if cuda else {}) for n in names}
        held = set(names) if keep is None else set(keep) & set(names)
        last = {n: {} for n in held}
        spent = {n: 0.0 for n in names}
        rep = 0
        while rep < cfg.max_reps:
            order = names if rep % 2 == 0 else names[::-1]
            idx = rep % len(input_sets)
            for name in order:
                args = input_sets[idx]
                if reseed is not None:
                    reseed(idx)
                sync()
                if cuda:
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    h0 = time.perf_counter()
                    # The flush is queued ahead of the start event: while the GPU clears L2 the host
                    # launches the call, so the events don't count the GPU idling for the launch.
                    if flush is not None:
                        flush.zero_()
                    if spin:
                        # The GPU spins while the host enqueues the whole call: the events then time
                        # the call's kernels back to back, not the host's launch gaps between them
                        # (with them a several-kernel median moved within one process and between
                        # processes; figures: docs/evaluator.md, "Measurements behind the code").
                        torch.cuda._sleep(spin)
                    start.record()
                    h1 = time.perf_counter()
                    out = models[name](*args)
                    enq = (time.perf_counter() - h1) * 1e3
                    end.record()
                    torch.cuda.synchronize()
                    host = (time.perf_counter() - h0) * 1e3
                    dev = start.elapsed_time(end)
                    # Repeated calls cost the larger of the device's time and the host's launch
                    # time: a launch-bound candidate is never timed below what its host needs. A
                    # host that returned only after the spin waited on the GPU (a sync inside the
                    # call): the spin is not its own time.
                    ms = (max(dev, enq) if enq < 0.9 * spin_ms else max(dev, enq - spin_ms)) if spin else dev
                    times[name]["device_ms"].append(dev)
                    times[name]["enqueue_ms"].append(enq)
                else:
                    h0 = time.perf_counter()
                    out = models[name](*args)
                    host = ms = (time.perf_counter() - h0) * 1e3
                times[name]["ms"].append(ms)
                times[name]["host_ms"].append(host)
                spent[name] += host / 1e3
                if name in held:
                    last[name][idx] = out      # re-checked against the reference afterwards
                out = None
            rep += 1
            if rep >= cfg.min_reps and (rep % 5 == 0):
                stable = all(_ci_halfwidth_rel(times[n]["ms"]) <= target for n in names)
                if stable or max(spent.values()) >= cfg.time_cap_s:
                    break
    return {"times": times, "reps": rep, "last_outputs": last, "spin_ms": round(spin_ms, 4)}


SPIN_MAX_MS = 2.0           # a call whose host needs longer is launch-bound: max(device, enqueue) says so


def _spin_cycles(torch, device: str, enqueue: dict) -> int:
    """GPU clock cycles to spin before each timed call: twice the slowest model's typical enqueue
    time (warm-up calls after the first) plus 20 µs, at most ``SPIN_MAX_MS``; one length for every
    model, so their host-vs-events gaps stay comparable (the timer-mismatch check). Returns (cycles,
    ms); (0, 0) where torch has no spin kernel."""
    if not hasattr(torch.cuda, "_sleep"):
        return 0, 0.0
    typical = [float(np.percentile(v[1:] or v, 90)) * 1e3 for v in enqueue.values() if v]
    want_ms = min(SPIN_MAX_MS, 2 * max(typical, default=0.0) + 0.02)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    torch.cuda._sleep(200_000)
    e.record()
    torch.cuda.synchronize()
    per_ms = 200_000 / max(s.elapsed_time(e), 1e-3)
    return int(per_ms * want_ms), want_ms


def _round_slices(n: int, rounds: list[int] | None) -> list[slice]:
    """The samples' split into timing rounds as slices; [] when there is one round or the split
    does not fit the samples (never half-applied)."""
    if not rounds or len(rounds) < 2 or sum(rounds) != n:
        return []
    edges = np.cumsum([0] + list(rounds))
    return [slice(int(i), int(j)) for i, j in zip(edges[:-1], edges[1:]) if j > i]


def stats(ms: list[float], rounds: list[int] | None = None) -> TimingStats:
    """Median, IQR, min and mean of the samples. With ``rounds`` (the samples' split into timing
    rounds), the median is the median of the rounds' medians: a round the worker sampled longer
    (it was noisy, so it ran to its time cap) does not outweigh the others."""
    a = np.asarray(ms, dtype=float)
    q1, med, q3 = np.percentile(a, [25, 50, 75])
    parts = _round_slices(len(a), rounds)
    if parts:
        med = np.median([np.median(a[s]) for s in parts])
    return TimingStats(median_ms=float(med), iqr_ms=float(q3 - q1), n=int(len(a)),
                       min_ms=float(a.min()), mean_ms=float(a.mean()))


def speedup_ci(base: list[float], cand: list[float], n_boot: int = 2000, seed: int = 0,
               rounds: list[int] | None = None) -> tuple[float, list[float]]:
    """Speedup = median(base)/median(cand) with a bootstrap 95 % interval.

    ``rounds``: the samples' split into timing rounds (each on fresh allocations; the samples of
    both lists interleaved, so the split is the same): the speedup is then the median of the
    rounds' own speedups (a round sampled longer, because it was noisy, does not outweigh the
    others: one disturbed round sampled to its cap beside a clean one put a pooled speedup off the
    clean rounds'; figures: docs/evaluator.md, "Measurements behind the code"), and the interval
    also spans every round's speedup. A
    bootstrap of pooled samples sees only the variation within a round; the variation between
    allocations (or processes) is what a rerun sees."""
    b, c = np.asarray(base, dtype=float), np.asarray(cand, dtype=float)
    point = float(np.median(b) / np.median(c))
    rng = np.random.default_rng(seed)
    bi = rng.integers(0, len(b), size=(n_boot, len(b)))
    ci = rng.integers(0, len(c), size=(n_boot, len(c)))
    ratios = np.median(b[bi], axis=1) / np.median(c[ci], axis=1)
    lo, hi = (float(x) for x in np.percentile(ratios, [2.5, 97.5]))
    parts = _round_slices(len(b), rounds) if len(b) == len(c) else []
    if parts:
        each = [float(np.median(b[s]) / np.median(c[s])) for s in parts]
        point = float(np.median(each))
        lo, hi = min([lo] + each), max([hi] + each)
    return point, [lo, hi]


SAMPLE_KEYS = ("ms", "host_ms", "device_ms", "enqueue_ms")


def merge_rounds(rounds: list[dict]) -> dict:
    """One timing from several rounds' ``{model: {"ms": [...], ...}}``: the samples concatenated in
    round order, ``"rounds"`` the count each round gave (``speedup_ci``'s split)."""
    if len(rounds) == 1:
        return rounds[0]
    merged = {}
    for name in rounds[0]:
        t = {k: [x for r in rounds for x in r[name].get(k, [])] for k in SAMPLE_KEYS if k in rounds[0][name]}
        t["rounds"] = [len(r[name]["ms"]) for r in rounds]
        merged[name] = t
    return merged


def fresh_allocations(sets: list[list]) -> None:
    """Each input set, in place, copied to new allocations (one set at a time, so the extra memory
    is one set's while nothing else holds the old one): the next round times the models on other
    addresses, as a rerun would place them."""
    for i, s in enumerate(sets):
        sets[i] = [x.clone() if hasattr(x, "clone") and hasattr(x, "data_ptr") else x for x in s]
