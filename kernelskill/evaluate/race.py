"""Head-to-head re-timing: candidates verified before, timed in one worker, interleaved with
eager and with each other, in rounds judged like an evaluation's (quality.RoundJudge).

The optimizer asks it when a child's interval overlaps the best's (does it really beat it?) and
at the end of a run for the finalists; ``race`` returns which one is faster *with confidence*.
"""
from __future__ import annotations

import contextlib
import dataclasses
import shutil
import time


from ..candidate import Candidate
from ..results import MeasurementQuality, RaceEntry, RaceResult
from ..vocab import RaceStatus
from .launch.isolation import run_worker
from .launch.reply import ReferenceMeta, Samples
from .options import Options, request, resolve, resolve_device, workdir
from .judge.quality import GOOD, RoundJudge
from .reference import reference, reference_server
from .worker.timing import TimingConfig, speedup_ci, stats
from .judge.verdict import reference_outputs, replay_flags

MIN_GAIN = (0.02, 0.01)      # (CPU, GPU): a confident win must also be at least this much faster
NOISY_GAIN = 0.5             # ... and in a round that was not good, at least this much by the interval's low end


def race(task, candidates: list, *, opts: Options | None = None, server=None) -> RaceResult:
    """Time ``candidates`` (sources or Candidates, all of one backend) head to head.

    ``winner`` is the index of the fastest when it beats every other with confidence: the 95 %
    interval of the ratio of medians above 1 + MIN_GAIN in a round of good quality. With exactly
    two candidates, ``ratio`` > 1 means the second is faster. ``server``: a reference server the
    caller holds open already (an evaluation timing its candidate in a second process), used
    instead of starting another."""
    started = time.perf_counter()
    opts = opts or Options()
    task, _ = resolve(task, None)
    cands = [c if isinstance(c, Candidate) else Candidate.from_source(str(c)) for c in candidates]
    if not cands:
        return RaceResult(status=RaceStatus.failed, message="no candidates to race")
    device = resolve_device(opts.device, cands[0].backend)
    timing = opts.timing or TimingConfig()
    ref_dir = reference(task, device, opts)
    meta = ReferenceMeta.load(ref_dir)
    base = workdir(opts)
    paths = []
    for i, c in enumerate(cands):
        path = base / f"race_{i}.py"
        path.write_text(c.source)
        paths.append(str(path))
    req = request("race", task, None, device, opts, base, candidate_paths=paths, ref_dir=str(ref_dir),
                  timing=dataclasses.asdict(timing))
    names = [f"c{i}" for i in range(len(cands))]
    pair = (names[0], names[1]) if len(names) > 1 else ("eager", names[0])
    judge = RoundJudge(device, req.threads, timing.retimes, timing.backoff_s, pair=pair,
                       min_rounds=timing.min_rounds(device))
    with contextlib.nullcontext(server) if server is not None else \
            reference_server(task, device, opts, ref_dir, meta) as server:
        try:
            return _run(task, cands, names, device, opts, req, judge, ref_dir, meta, base, server, started)
        finally:
            judge.resume_own_builds()        # paused at the first round's start; however the race ended


def _run(task, cands, names, device, opts, req, judge, ref_dir, meta, base, server, started) -> RaceResult:
    try:
        out = run_worker(req, opts, judge, keep=base)
        reply = out.result
        why = out.failure()
        if why:
            return RaceResult(status=RaceStatus.failed, message=f"race failed: {why}"[:1000],
                              seconds=round(time.perf_counter() - started, 3))
        times = reply.timing.times
        ref_outs, dists = reference_outputs(ref_dir, server), meta.distributions
        entries = []
        for c, name in zip(cands, names):
            sp, ci = speedup_ci(times["eager"].ms, times[name].ms, rounds=times[name].rounds)
            flags = replay_flags(out.out_dir, task, ref_outs, dists, live=False, file=f"timed_outputs_{name}.pt")
            entries.append(RaceEntry(candidate_hash=c.hash, stats=stats(times[name].ms, times[name].rounds),
                                     speedup=sp, speedup_ci=ci, flags=flags))
    finally:
        if opts.keep_dir is None:
            shutil.rmtree(base, ignore_errors=True)
    q = judge.summary(reply.timing.kept_rounds())
    result = RaceResult(status=RaceStatus.ok, entries=entries, quality=MeasurementQuality.from_dict(q) if q else None)
    if len(names) > 1:
        result.ratio, result.ratio_ci = speedup_ci(times[names[0]].ms, times[names[1]].ms,
                                                   rounds=times[names[1]].rounds)
    result.winner = _winner(times, names, entries, device, result.quality)
    result.message = _describe(result)
    result.seconds = round(time.perf_counter() - started, 3)
    return result


def _winner(times: dict[str, Samples], names: list[str], entries: list[RaceEntry], device: str,
            q: MeasurementQuality | None) -> int | None:
    """The entry faster than every other with confidence, in a good round; else None."""
    ok = [i for i, e in enumerate(entries) if not e.flags]
    if not ok:
        return None
    if len(ok) == 1:
        return ok[0] if q is None or q.verdict == GOOD else None
    # In a round that was not good only a difference far beyond any noise seen counts: the low end
    # of the interval 50 % above the other (a 10× kernel against a slow one is still a decision).
    gain = MIN_GAIN[1 if device.startswith("cuda") else 0] if q is None or q.verdict == GOOD else NOISY_GAIN
    best = min(ok, key=lambda i: stats(times[names[i]].ms, times[names[i]].rounds).median_ms)
    for j in ok:
        if j != best:
            _, (lo, _hi) = speedup_ci(times[names[j]].ms, times[names[best]].ms,
                                      rounds=times[names[best]].rounds)
            if lo < 1.0 + gain:
                return None
    return best


def _describe(r: RaceResult) -> str:
    parts = [f"#{i} {e.speedup:.3f}× [{e.speedup_ci[0]:.3f}–{e.speedup_ci[1]:.3f}]" + (" (replay!)" if e.flags else "")
             for i, e in enumerate(r.entries)]
    q = r.quality.label() if r.quality else "quality unknown"
    who = f"#{r.winner} is faster with confidence" if r.winner is not None else "no candidate is faster with confidence"
    return f"{who}; " + ", ".join(parts) + f"; measurement {q}"
