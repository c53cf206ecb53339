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

from pathlib import Path

import numpy as np

from ..host import HostSampler, gpu_state
from ..launch.isolation import Listener

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


# ---- the tool's own background builds ----------------------------------------------------------------
def own_builds_now(cache: Path | None = None) -> list[dict]:
    """The tool's own background builds running now, not paused (``own_builds.own_builds``)."""
    from ..build.own_builds import own_builds
    return [b for b in own_builds(cache) if not b["paused"]]


def paused_text(builds: list[dict], during: str = "the timing") -> str:
    """One reason line: which of the tool's own builds were paused, and for what."""
    what = sorted({b["what"] for b in builds})
    names = ", ".join(what[:3]) + (f" and {len(what) - 3} more" if len(what) > 3 else "")
    return f"paused the tool's own background build ({names}) during {during}; it went on afterwards"


# ---- the rounds of one evaluation ----------------------------------------------------------------
# Rounds whose speedups differ by more than this (CPU, GPU), relative, with disjoint intervals,
# contradict each other (below it, two tight rounds may exclude each other by chance and it does not
# matter: the goal for a rerun is medians within 1 %).
ROUNDS_APART = (0.04, 0.01)


def disjoint(rounds: list[dict], device: str = "cuda") -> list[tuple[int, int]]:
    """The pairs of rounds that contradict each other: their own speedup intervals do not overlap
    and their speedups differ by more than ROUNDS_APART. One of them saw something the other did not
    (a disturbance, a placement). While re-times are left such rounds are timed once more, so that
    the median of the rounds' speedups stands on a majority (a conv epilogue's one odd round beside
    the rounds that agreed; figures: docs/evaluator.md, "Measurements behind the code")."""
    apart = ROUNDS_APART[1 if device.startswith("cuda") else 0]
    out = []
    for i, a in enumerate(rounds):
        for b in rounds[i + 1:]:
            (alo, ahi), (blo, bhi) = a["speedup_ci"], b["speedup_ci"]
            far = max(a["speedup"], b["speedup"]) / min(a["speedup"], b["speedup"]) - 1 > apart
            if far and (ahi < blo or bhi < alo):
                out.append((a["round"], b["round"]))
    return out


class RoundJudge(Listener):
    """Judges each timing round as the worker finishes it, and answers it: time again (on fresh
    allocations) until ``min_rounds`` rounds are good and agree, after a backoff where a round was
    not good, while re-times are left; then report the rounds of the best verdict, merged.

    As ``run_worker``'s listener (a race's): ``poll(out_dir)`` (every ~50 ms while the worker runs)
    starts the host sampler when a round begins; ``round(out_dir, k)`` answers a finished round."""

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
        from ..build.own_builds import pause
        got = pause()
        self.paused += [b for b in got if b["marker"] not in {p["marker"] for p in self.paused}]
        return got

    def resume_own_builds(self) -> None:
        """The timing is over (or the worker ended): the paused builds go on. Idempotent."""
        if self.paused:
            from ..build.own_builds import resume
            resume()

    def phase(self, name: str) -> None:
        self._phase = name

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

    def round(self, out_dir: Path, k: int) -> str:
        import json

        from ..worker.timing import speedup_ci
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
        from ..worker.timing import merge_rounds, speedup_ci
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
