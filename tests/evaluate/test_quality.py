"""Measurement quality: noise and contention are detected, reported, and never taken for a result.

Real workers, real busy threads (started and stopped here), real /proc sampling."""
from __future__ import annotations

import hashlib
import subprocess
import sys

import numpy as np
import pytest

from kernelskill import Candidate
from kernelskill.evaluate import evaluate
from kernelskill.evaluate.api import Options
from kernelskill.evaluate.judge.quality import CONTENDED, GOOD, NOISY, RoundJudge, assess
from kernelskill.evaluate.host import HostSampler
from kernelskill.evaluate.race import race
from kernelskill.evaluate.worker.timing import TimingConfig, speedup_ci
from kernelskill.results import EvalResult

from helpers import RELU_TASK, Busy, toolkit_candidate

GOOD_SRC = toolkit_candidate("return ext.relu2(x)")
SLOW_SRC = toolkit_candidate("y = ext.relu2(x)\nfor _ in range(40):\n    y = ext.relu2(x)\nreturn y")


def _samples(rng, center: float, n: int, spread: float = 0.005) -> list[float]:
    return list(center * (1 + np.abs(rng.normal(0, spread, n))))


# ---- the verdict from data ----------------------------------------------------------------------
def test_tight_samples_on_a_quiet_host_are_good():
    rng = np.random.default_rng(0)
    times = {"eager": {"ms": _samples(rng, 1.0, 60)}, "candidate": {"ms": _samples(rng, 0.5, 60)}}
    sp, ci = speedup_ci(times["eager"]["ms"], times["candidate"]["ms"])
    q = assess(times, "cpu", sp, ci, host={"cores": 2, "others_cores": 0.05}, threads=2)
    assert q["verdict"] == GOOD and q["reasons"] == []
    assert q["metrics"]["host_others_cores"] == 0.05


def test_spikes_and_drift_make_a_measurement_noisy():
    rng = np.random.default_rng(1)
    eager = _samples(rng, 1.0, 60)
    eager[30:] = [x * 1.8 for x in eager[30:]]            # the machine changed halfway through
    cand = _samples(rng, 0.5, 60)
    cand[::3] = [x * 6 for x in cand[::3]]                 # a third of the calls preempted
    times = {"eager": {"ms": eager}, "candidate": {"ms": cand}}
    sp, ci = speedup_ci(eager, cand)
    q = assess(times, "cpu", sp, ci, host={"cores": 2, "others_cores": 0.0}, threads=2)
    assert q["verdict"] == NOISY
    text = " ".join(q["reasons"])
    assert "drifted" in text and "interval" in text


def test_other_processes_on_the_workers_cores_mean_contended():
    rng = np.random.default_rng(2)
    times = {"eager": {"ms": _samples(rng, 1.0, 60)}, "candidate": {"ms": _samples(rng, 0.5, 60)}}
    sp, ci = speedup_ci(times["eager"]["ms"], times["candidate"]["ms"])
    q = assess(times, "cpu", sp, ci, host={"cores": 2, "others_cores": 1.6}, threads=2)
    assert q["verdict"] == CONTENDED and "1.6 of 2 CPU cores" in q["reasons"][0]
    # The same load on a 16-core host where the worker uses 2 threads leaves it its cores.
    assert assess(times, "cpu", sp, ci, host={"cores": 16, "others_cores": 1.6}, threads=2)["verdict"] == GOOD
    # A GPU process that used the device, and thermal throttling, are contention too.
    gpu = {"foreign": [{"pid": 4242, "sm": 63, "name": "python3"}], "throttled": ["hardware thermal slowdown"]}
    q = assess(times, "cuda", sp, ci, gpu=gpu)
    assert q["verdict"] == CONTENDED and any("pid 4242" in r for r in q["reasons"])


def test_the_host_sampler_sees_busy_threads_and_not_the_worker():
    worker = subprocess.Popen([sys.executable, "-c", "import time\nt=time.time()\nwhile time.time()-t<30: pass"])
    try:
        s = HostSampler()
        with Busy(2):
            s.start(worker.pid)
            for _ in range(2000):
                hashlib.sha256(b"y" * (1 << 16)).digest()      # some wall time with the threads running
            seen = s.stop()
    finally:
        worker.kill()
        worker.wait()
    assert seen is not None
    # Two busy threads are at least one core of competition; the worker's own spinning is excluded.
    assert seen["others_cores"] >= 1.0, seen
    # The worker's own CPU is counted apart, never as competition (however little it got under load).
    assert seen["worker_cores"] > 0 and seen["others_cores"] + seen["worker_cores"] <= seen["cores"] + 0.3, seen


def test_the_round_judge_times_again_with_backoff_then_reports_the_best_round(tmp_path, monkeypatch):
    import json
    # A cache of its own: a header maker another test started must not make these rounds contended.
    monkeypatch.setenv("KERNELSKILL_CACHE", str(tmp_path / "cache"))
    judge = RoundJudge("cpu", 2, retimes=2, backoff_s=0.5)
    rng = np.random.default_rng(3)
    noisy = {"eager": {"ms": _samples(rng, 1.0, 60, 0.5)}, "candidate": {"ms": _samples(rng, 0.5, 60, 0.5)}}
    quiet = {"eager": {"ms": _samples(rng, 1.0, 60)}, "candidate": {"ms": _samples(rng, 0.5, 60)}}
    (tmp_path / "timing_0.json").write_text(json.dumps({"times": noisy}))
    (tmp_path / "timing_1.json").write_text(json.dumps({"times": quiet}))
    assert judge.round(tmp_path, 0) == "again 0.5"
    assert judge.round(tmp_path, 1) == "done 1"
    s = judge.summary()
    assert s["verdict"] == GOOD and s["rounds"] == 2 and s["chosen_round"] == 1
    assert [h["verdict"] for h in s["history"]] == [NOISY, GOOD]


# ---- rounds on fresh allocations (issue 43, item 4) ---------------------------------------------
def test_the_interval_over_rounds_spans_every_rounds_speedup():
    rng = np.random.default_rng(5)
    # Two rounds, each tight on its own, whose speedups differ by 4 % (as two placements did).
    b = _samples(rng, 1.00, 60) + _samples(rng, 1.04, 60)
    c = _samples(rng, 0.50, 60) + _samples(rng, 0.50, 60)
    pooled, (lo, hi) = speedup_ci(b, c)
    each = [np.median(b[:60]) / np.median(c[:60]), np.median(b[60:]) / np.median(c[60:])]
    # The pooled bootstrap alone misses one round's speedup: the interval a rerun would fall out of.
    assert not (lo <= min(each) and max(each) <= hi)
    sp, (lo2, hi2) = speedup_ci(b, c, rounds=[60, 60])
    assert sp == pytest.approx(np.median(each)) and lo2 <= min(each) and max(each) <= hi2 and lo2 <= lo and hi2 >= hi
    # A split that does not fit the samples is ignored, never half-applied.
    assert speedup_ci(b, c, rounds=[60, 50]) == (pooled, [lo, hi])


def test_a_round_sampled_longer_does_not_outweigh_the_others():
    from kernelskill.evaluate.worker.timing import stats
    rng = np.random.default_rng(6)
    # As on an H100 (a conv epilogue): a disturbed round, noisy so sampled to its cap (170 calls, the
    # candidate 5 % slow), beside a clean one of 60, then a third clean one.
    b = _samples(rng, 0.66, 170) + _samples(rng, 0.66, 60) + _samples(rng, 0.66, 60)
    c = _samples(rng, 0.428, 170, 0.03) + _samples(rng, 0.4075, 60) + _samples(rng, 0.4075, 60)
    split = [170, 60, 60]
    pooled, _ = speedup_ci(b, c)
    sp, (lo, hi) = speedup_ci(b, c, rounds=split)
    each = [np.median(b[i:j]) / np.median(c[i:j]) for i, j in ((0, 170), (170, 230), (230, 290))]
    assert sp == pytest.approx(np.median(each))
    assert abs(sp / each[1] - 1) < 0.005 < abs(pooled / each[1] - 1)   # the pooled samples follow the long round
    assert lo <= min(each) and max(each) <= hi
    # The reported median too: the median of the rounds' medians, not of the pooled samples.
    m = stats(c, split)
    assert m.median_ms == pytest.approx(np.median([np.median(c[:170]), np.median(c[170:230]), np.median(c[230:])]))
    assert m.n == 290 and m.min_ms == min(c)
    assert stats(c, [170, 60]).median_ms == stats(c).median_ms       # a split that does not fit: pooled


def test_good_rounds_that_contradict_each_other_get_a_third_that_decides(tmp_path, monkeypatch):
    import json
    from kernelskill.evaluate.judge.quality import disjoint
    monkeypatch.setenv("KERNELSKILL_CACHE", str(tmp_path / "cache"))
    rng = np.random.default_rng(10)
    judge = RoundJudge("cuda", None, retimes=2, backoff_s=0.5, min_rounds=2)
    # Each round tight and good; the first 1.5 % slow: its interval excludes the second's speedup,
    # though the interval over both (±0.8 %) is within the limit.
    for k, cand in enumerate((0.5075, 0.5, 0.5)):
        (tmp_path / f"timing_{k}.json").write_text(json.dumps({"times": {
            "eager": {"ms": _samples(rng, 1.0, 200, 0.001)}, "candidate": {"ms": _samples(rng, cand, 200, 0.001)}}}))
    assert judge.round(tmp_path, 0) == "again 0"
    assert judge.rounds[0]["verdict"] == GOOD
    assert judge.round(tmp_path, 1) == "again 0", "two good rounds apart: a third decides, at once"
    assert disjoint(judge.rounds) == [(0, 1)]
    assert judge.round(tmp_path, 2) == "done 0,1,2"
    c = judge.combined([0, 1, 2])
    speeds = sorted(r["speedup"] for r in judge.rounds)
    assert c["speedup"] == pytest.approx(speeds[1], rel=1e-3)      # the majority's, not the mean
    assert c["speedup_ci"][0] <= speeds[0] + 1e-4 and speeds[2] - 1e-4 <= c["speedup_ci"][1]
    # Agreeing rounds never ask for a third.
    judge2 = RoundJudge("cuda", None, retimes=2, backoff_s=0.5, min_rounds=2)
    for k in range(2):
        _write_round(tmp_path, k, 1.0, 0.5, rng, n=200)
    assert judge2.round(tmp_path, 0) == "again 0" and judge2.round(tmp_path, 1) == "done 0,1"


def test_rounds_merge_keeps_every_sample_and_the_split():
    from kernelskill.evaluate.worker.timing import merge_rounds
    r0 = {"eager": {"ms": [1.0, 1.1], "host_ms": [1.2, 1.3]}, "candidate": {"ms": [0.5, 0.6], "host_ms": [0.7, 0.8]}}
    r1 = {"eager": {"ms": [1.2], "host_ms": [1.4]}, "candidate": {"ms": [0.4], "host_ms": [0.5]}}
    m = merge_rounds([r0, r1])
    assert m["eager"] == {"ms": [1.0, 1.1, 1.2], "host_ms": [1.2, 1.3, 1.4], "rounds": [2, 1]}
    assert m["candidate"]["ms"] == [0.5, 0.6, 0.4] and m["candidate"]["rounds"] == [2, 1]
    assert merge_rounds([r0]) is r0


def test_fresh_allocations_move_every_input_and_keep_its_values():
    import torch
    from kernelskill.evaluate.worker.timing import fresh_allocations
    sets = [[torch.randn(1000), 3, torch.arange(7)], [torch.randn(1000), "x", torch.arange(7)]]
    before = [[x.data_ptr() if isinstance(x, torch.Tensor) else x for x in s] for s in sets]
    values = [[x.clone() if isinstance(x, torch.Tensor) else x for x in s] for s in sets]
    kept = [list(s) for s in sets]        # the old tensors stay alive: their addresses stay taken
    fresh_allocations(sets)
    for s, old, want in zip(sets, before, values):
        for x, p, w in zip(s, old, want):
            if isinstance(x, torch.Tensor):
                assert x.data_ptr() != p and torch.equal(x, w)
            else:
                assert x == p
    del kept


def _write_round(path, k, eager, cand, rng, n=60):
    import json
    (path / f"timing_{k}.json").write_text(json.dumps({"times": {"eager": {"ms": _samples(rng, eager, n)},
                                                                 "candidate": {"ms": _samples(rng, cand, n)}}}))


def test_two_agreeing_rounds_make_one_good_measurement(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELSKILL_CACHE", str(tmp_path / "cache"))
    rng = np.random.default_rng(7)
    judge = RoundJudge("cuda", None, retimes=2, backoff_s=0.5, min_rounds=2)
    _write_round(tmp_path, 0, 1.0, 0.5, rng, n=200)
    _write_round(tmp_path, 1, 1.0, 0.5, rng, n=200)
    # A good first round is not enough: the next allocation is timed at once, without backoff.
    assert judge.round(tmp_path, 0) == "again 0"
    assert judge.round(tmp_path, 1) == "done 0,1"
    s = judge.summary([0, 1])
    assert s["verdict"] == GOOD and s["chosen_rounds"] == [0, 1] and s["rounds"] == 2
    assert s["metrics"]["rounds_merged"] == 2 and s["metrics"]["rounds_spread"] < 0.02


def test_rounds_that_disagree_are_timed_again_then_reported_noisy_with_an_interval_over_all(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELSKILL_CACHE", str(tmp_path / "cache"))
    rng = np.random.default_rng(8)
    judge = RoundJudge("cuda", None, retimes=1, backoff_s=0.5, min_rounds=2)
    for k, eager in enumerate((1.0, 1.06, 1.0)):       # each round tight, the second 6 % apart
        _write_round(tmp_path, k, eager, 0.5, rng, n=200)
    assert judge.round(tmp_path, 0) == "again 0"
    assert judge.round(tmp_path, 1) == "again 0"        # every round good, but they disagree: at once
    assert judge.round(tmp_path, 2) == "done 0,1,2"     # no re-time left
    s = judge.summary([0, 1, 2])
    assert s["verdict"] == NOISY and any("fresh allocations, differ by" in r for r in s["reasons"]), s["reasons"]
    c = judge.combined([0, 1, 2])
    lo, hi = c["speedup_ci"]
    # (the history's speedups are rounded to 4 decimals)
    assert all(lo - 1e-4 <= h["speedup"] <= hi + 1e-4 for h in s["history"])


def test_one_good_round_where_two_are_needed_is_not_good(tmp_path, monkeypatch):
    import json
    monkeypatch.setenv("KERNELSKILL_CACHE", str(tmp_path / "cache"))
    rng = np.random.default_rng(9)
    judge = RoundJudge("cuda", None, retimes=0, backoff_s=0.5, min_rounds=2)
    _write_round(tmp_path, 0, 1.0, 0.5, rng, n=200)
    wide = {"eager": {"ms": _samples(rng, 1.0, 60, 0.5)}, "candidate": {"ms": _samples(rng, 0.5, 60, 0.5)}}
    (tmp_path / "timing_1.json").write_text(json.dumps({"times": wide}))
    assert judge.round(tmp_path, 0) == "again 0"
    assert judge.round(tmp_path, 1) == "done 0"
    s = judge.summary([0])
    assert s["verdict"] == NOISY and any("only 1 of the 2 rounds" in r for r in s["reasons"]), s["reasons"]


def test_an_evaluation_in_two_rounds_reports_both_merged():
    t = TimingConfig(warmup=2, min_reps=30, max_reps=60, time_cap_s=0.5, retimes=1, backoff_s=0.1, rounds=2)
    r = evaluate(RELU_TASK, Candidate.from_source(GOOD_SRC), opts=Options(device="cpu", timing=t))
    assert r.ok, r.message
    q, p = r.profile.quality, r.profile
    assert q.rounds >= 2 and len(q.chosen_rounds) >= 1
    if q.good:
        assert len(q.chosen_rounds) >= 2 and q.metrics["rounds_merged"] == len(q.chosen_rounds)
    # The reported samples are the chosen rounds' together, and the interval spans each one's speedup.
    chosen = [h for h in q.history if h["round"] in q.chosen_rounds]
    assert p.candidate.n >= 30 * len(chosen)
    if len(chosen) > 1:
        lo, hi = p.speedup_ci
        assert all(lo <= h["speedup"] * (1 + 1e-3) and h["speedup"] <= hi * (1 + 1e-3) for h in chosen)
        assert q.metrics["speedup_ci_rel"] == pytest.approx((hi - lo) / 2 / p.speedup, abs=1e-3)


# ---- the whole evaluator ------------------------------------------------------------------------
def _opts(**kw) -> Options:
    t = TimingConfig(warmup=2, min_reps=30, max_reps=200, time_cap_s=1.0, retimes=1, backoff_s=0.1)
    return Options(device="cpu", timing=t, build_timeout=600, run_timeout=120, **kw)


def test_competing_busy_threads_are_reported_never_a_confident_speedup():
    cand = Candidate.from_source(GOOD_SRC)
    evaluate(RELU_TASK, cand, opts=_opts(), timing=None, profile=False)      # build and reference first
    with Busy(2):
        r = evaluate(RELU_TASK, cand, opts=_opts())
    assert r.ok, r.message
    q = r.profile.quality
    assert q.verdict in (NOISY, CONTENDED), q
    assert q.rounds == 2, "a measurement that is not good is timed again"
    assert any("CPU cores" in why for why in q.reasons), q.reasons
    # Wherever a person reads it, the speedup carries its interval and its quality.
    assert f"({q.verdict})" in r.message and "[" in r.message
    assert any(n.startswith("measurement ") for n in r.profile.notes)
    # ...and the JSON says it at the top level for scripts.
    d = r.to_dict()
    assert d["quality"] == q.verdict and EvalResult.from_dict(d).profile.quality.verdict == q.verdict
    # A contended timing never classifies the task beyond what its arithmetic intensity says.
    if r.profile.bottleneck:
        assert r.profile.bottleneck in ("memory-bound", "compute-bound")


def test_an_idle_run_is_not_flagged_for_contention():
    """On a quiet machine nothing is flagged. On a busy one (CI), the only reasons allowed are the
    load this test measures itself around the evaluation."""
    cand = Candidate.from_source(GOOD_SRC)
    evaluate(RELU_TASK, cand, opts=_opts(), timing=None, profile=False)
    watch = HostSampler()
    watch.start(None)          # every process: the machine's whole load during the evaluation
    r = evaluate(RELU_TASK, cand, opts=_opts())
    assert r.ok, r.message
    q = r.profile.quality
    if q.verdict == CONTENDED:
        busy = watch.stop()
        # The worker's own cores are in this count: more than its threads means someone else ran.
        assert busy and busy["others_cores"] > busy["cores"] * 0.5, (q.reasons, busy)
    else:
        assert q.verdict in (GOOD, NOISY)
        assert not any("CPU cores" in why for why in q.reasons)


def test_byte_identical_candidates_are_never_significantly_different():
    a = Candidate.from_source(GOOD_SRC)
    b = Candidate.from_source(GOOD_SRC)
    res = race(RELU_TASK, [a, b], opts=_opts())
    assert res.status == "ok", res.message
    assert res.winner is None, res.message
    assert len(res.entries) == 2 and res.ratio is not None


def test_the_race_finds_a_clearly_faster_candidate():
    res = race(RELU_TASK, [SLOW_SRC, GOOD_SRC], opts=_opts())
    assert res.status == "ok", res.message
    # Forty extra launches against one: when the round is good the second wins; when the machine
    # is busy there is no confident winner, never the slow one.
    assert res.winner in (1, None), res.message
    if res.quality.good:
        assert res.winner == 1
    assert res.ratio > 1.0


@pytest.mark.parametrize("retimes", [0])
def test_retimes_zero_reports_the_first_round(retimes):
    t = TimingConfig(warmup=1, min_reps=5, max_reps=20, time_cap_s=0.3, retimes=retimes)
    with Busy(2):
        r = evaluate(RELU_TASK, Candidate.from_source(GOOD_SRC), opts=Options(device="cpu", timing=t))
    assert r.ok and r.profile.quality.rounds == 1


def test_only_our_workers_are_ours_on_the_gpu_a_callers_other_child_competes():
    from kernelskill.evaluate.host import _ours
    import os
    code = "import time\nprint('up', flush=True)\ntime.sleep(30)"
    worker = subprocess.Popen([sys.executable, "-c", code, "-m", "kernelskill.evaluate.worker"],
                              stdout=subprocess.PIPE)
    other = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)  # ours, no worker
    try:
        # until the exec, /proc/PID/cmdline is still this (pytest) process's: wait for both to run
        assert worker.stdout.readline() == b"up\n" and other.stdout.readline() == b"up\n"
        assert _ours(worker.pid, os.getpid()) and not _ours(other.pid, os.getpid())
        assert not _ours(worker.pid, other.pid)                 # not a descendant of that root
    finally:
        for p in (worker, other):
            p.kill()
            p.wait()
            p.stdout.close()


def test_a_benchmark_says_when_its_host_was_busy(monkeypatch):
    """build_cost and loop_throughput print whether the machine was quiet around their run: a busy
    process is seen as a busy core, and the line then says the figures are a busy machine's."""
    from kernelskill.evaluate import host
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        busy = host.host_busy_cores(0.5)
    finally:
        spinner.kill()
        spinner.wait()
    assert busy is not None and busy >= 0.8, busy
    monkeypatch.setattr(host, "cores", lambda: 64)
    assert host.host_line(30.0, "before the run").startswith("host before the run: BUSY (30.0 of 64 cores")
    assert host.host_line(2.0) == "host: quiet (2.0 of 64 cores busy)"
    assert "busy machine's figures" in host.host_line(7.0)        # over a tenth of the cores


def _cgroup(root, rel: str, **files: str) -> None:
    d = root / rel
    d.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (d / name.replace("_", ".", 1)).write_text(text)


def test_a_cgroup_cpu_quota_is_read_on_the_way_up_v2_and_v1(tmp_path):
    """A container given 4 CPUs on a 64-core host sees 64 cores: the quota (cgroup v2 cpu.max, or
    v1's cfs quota over its period) is what its threads get, and the tightest level up the tree wins."""
    from kernelskill.evaluate import host
    v2 = tmp_path / "v2"
    _cgroup(v2, "", cpu_max="max 100000\n")
    _cgroup(v2, "kube/pod", cpu_max="400000 100000\n", cpu_stat="usage_usec 9\nthrottled_usec 2500000\n")
    assert host.cpu_quota(v2, "0::/kube/pod\n") == 4.0
    assert host.cpu_throttled_s(v2, "0::/kube/pod\n") == 2.5
    _cgroup(v2, "kube", cpu_max="150000 100000\n")             # the parent allows less
    assert host.cpu_quota(v2, "0::/kube/pod\n") == 1.5
    assert host.cpu_quota(v2, "0::/\n") is None            # unlimited at the root: no quota
    v1 = tmp_path / "v1"
    _cgroup(v1, "cpu,cpuacct/docker/abc", cpu_cfs_quota_us="200000\n", cpu_cfs_period_us="100000\n",
            cpu_stat="nr_periods 5\nnr_throttled 2\nthrottled_time 750000000\n")
    proc = "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n"
    assert host.cpu_quota(v1, proc) == 2.0
    assert host.cpu_throttled_s(v1, proc) == 0.75
    _cgroup(v1, "cpu,cpuacct/docker/abc", cpu_cfs_quota_us="-1\n")
    assert host.cpu_quota(v1, proc) is None
    assert host.cpu_quota(tmp_path / "none", proc) is None  # nothing mounted there: nothing says


def test_cores_and_the_host_line_follow_the_quota(monkeypatch):
    from kernelskill.evaluate import host
    from kernelskill.evaluate.launch import isolation
    monkeypatch.setattr(host, "_affinity", lambda: 64)
    monkeypatch.setattr(host, "cpu_quota", lambda: 3.5)
    assert host.cores() == 4                                # 3.5 CPUs of quota: four threads, not 64
    assert isolation.worker_threads() == 4
    assert isolation.worker_threads(2) == 2                    # an explicit count stays
    line = host.host_line(0.2, "before the run")
    assert line == "host before the run: quiet (0.2 of 4 cores busy; a CPU quota of 3.5 cores for 64 visible)", line
    monkeypatch.setattr(host, "cpu_quota", lambda: None)
    assert host.cores() == 64 and "quota" not in host.host_line(0.2)


# ---- several worker processes (issue 43, item 4) --------------------------------------------------
def _timed(sp: float, ci: list[float], verdict: str = GOOD):
    from kernelskill.results import MeasurementQuality, ProfileResult, TimingStats
    return ProfileResult(device="cuda", candidate=TimingStats(median_ms=0.3, iqr_ms=0.001, n=60, min_ms=0.29,
                                                              mean_ms=0.3),
                         speedup=sp, speedup_ci=list(ci),
                         quality=MeasurementQuality(verdict=verdict, rounds=2, chosen_rounds=[0, 1],
                                                    history=[{"round": 0, "verdict": verdict, "speedup": sp},
                                                             {"round": 1, "verdict": verdict, "speedup": sp}]))


def _raced(sp: float, ci: list[float], verdict: str = GOOD, reasons=(), flags=()):
    from kernelskill.results import MeasurementQuality, RaceEntry, RaceResult
    q = MeasurementQuality(verdict=verdict, reasons=list(reasons),
                           history=[{"round": 0, "verdict": verdict, "speedup": sp, "speedup_ci": ci}])
    return RaceResult(status="ok", entries=[RaceEntry(candidate_hash="h", speedup=sp, speedup_ci=list(ci),
                                                      flags=list(flags))], quality=q)


def test_two_processes_that_agree_make_one_good_speedup_spanning_both():
    from kernelskill.evaluate.judge.verdict import fold_processes
    # KernelBench's LayerNorm on an H100: the same kernel, eager 1.5 % apart between processes.
    prof = _timed(27.44, [27.42, 27.46])
    assert fold_processes(prof, [_raced(27.06, [27.03, 27.09])], "cuda") == []
    q = prof.quality
    assert q.good and prof.speedup == pytest.approx((27.44 + 27.06) / 2)
    assert prof.speedup_ci == [27.03, 27.46]
    assert q.metrics["processes"] == 2 and q.metrics["processes_spread"] == pytest.approx(27.44 / 27.06 - 1, abs=1e-4)
    assert [h.get("process", 0) for h in q.history] == [0, 0, 1]
    assert any(n.startswith("timed in 2 worker processes: 27.440× [27.420–27.460] and 27.060×") for n in prof.notes)


def test_processes_that_disagree_or_fail_make_no_decision():
    from kernelskill.evaluate.judge.verdict import fold_processes
    from kernelskill.results import RaceResult
    prof = _timed(1.62, [1.61, 1.63])
    fold_processes(prof, [_raced(1.50, [1.49, 1.51])], "cuda")
    q = prof.quality
    assert q.verdict == NOISY and prof.speedup_ci == [1.49, 1.63]
    assert any("the speedups of 2 worker processes differ by 8.0%" in r for r in q.reasons), q.reasons
    assert any("counts for no decision" in n for n in prof.notes)
    # A second process that could not time it: the variation between processes is unmeasured.
    prof = _timed(1.62, [1.61, 1.63])
    fold_processes(prof, [RaceResult(status="failed", message="race failed: worker crashed")], "cuda")
    assert prof.quality.verdict == NOISY and prof.speedup == 1.62 and prof.speedup_ci == [1.61, 1.63]
    assert any("worker process 2 did not time it (race failed: worker crashed)" in r for r in prof.quality.reasons)
    # A contended second process: the measurement is contended, and says where.
    prof = _timed(1.62, [1.61, 1.63])
    fold_processes(prof, [_raced(1.62, [1.61, 1.63], CONTENDED, ["other processes used 1.2 of 2 CPU cores"])], "cuda")
    assert prof.quality.verdict == CONTENDED
    assert "worker process 2: other processes used 1.2 of 2 CPU cores" in prof.quality.reasons
    # What the second worker's timed outputs raised comes back to the verdict.
    prof = _timed(1.62, [1.61, 1.63])
    assert fold_processes(prof, [_raced(1.62, [1.61, 1.63], flags=["replay: timed output 1 differs"])],
                          "cuda") == ["replay: timed output 1 differs"]


def test_a_good_measurement_is_timed_again_in_a_second_worker_process(monkeypatch):
    """The wiring, for real: a second worker (a race of the candidate alone) times it after the
    evaluation's own, and the speedup spans both. The parent's round verdicts are forced good so
    that a busy machine cannot skip the second process (only a good measurement gets one)."""
    from kernelskill.evaluate.judge import quality as quality_mod
    real = quality_mod.assess

    def always_good(*a, **kw):
        q = real(*a, **kw)
        q["verdict"], q["reasons"] = GOOD, []
        return q
    monkeypatch.setattr(quality_mod, "assess", always_good)
    t = TimingConfig(warmup=2, min_reps=30, max_reps=60, time_cap_s=0.5, retimes=0, processes=2)
    seen = []
    r = evaluate(RELU_TASK, Candidate.from_source(GOOD_SRC), opts=Options(device="cpu", timing=t),
                 on_phase=seen.append)
    assert r.ok, r.message
    p, q = r.profile, r.profile.quality
    assert "process" in seen and "process" in r.phases
    assert q.metrics["processes"] == 2, q.metrics
    second = [h for h in q.history if h.get("process") == 1]
    assert len(second) == 1 and second[0]["speedup"] > 0
    lo, hi = p.speedup_ci
    assert lo <= second[0]["speedup"] * (1 + 1e-3) and second[0]["speedup"] <= hi * (1 + 1e-3)
    assert any(n.startswith("timed in 2 worker processes") for n in p.notes)
    # One process where it was not asked for (the CPU's default).
    r1 = evaluate(RELU_TASK, Candidate.from_source(GOOD_SRC),
                  opts=Options(device="cpu", timing=TimingConfig(warmup=2, min_reps=30, max_reps=60, time_cap_s=0.5,
                                                                 retimes=0)))
    assert "process" not in r1.phases and "processes" not in r1.profile.quality.metrics


# ---- eager's spread between evaluations (issue 43, item 4) -----------------------------------------
def test_the_interval_spans_eagers_medians_of_earlier_evaluations(tmp_path):
    from kernelskill.evaluate.judge.verdict import EAGER_RUNS, EAGER_RUNS_KEPT, eager_runs, record_eager_run, span_eager_runs
    from kernelskill.results import TimingStats
    here = {"gpu": "NVIDIA H100 80GB HBM3", "fingerprint": "f", "flags": "default"}
    # KernelBench's LayerNorm on an H100: eager 8.22 ms in four evaluations, 8.09 ms in one.
    for ms in (8.22, 8.09, 8.21):
        record_eager_run(tmp_path, here, ms)
    record_eager_run(tmp_path, {**here, "gpu": "NVIDIA H200"}, 7.0)        # another GPU: not this one's
    (tmp_path / EAGER_RUNS).open("a").write('{"gpu": "NVIDIA H100 80GB HB')  # a line cut by a crash
    assert eager_runs(tmp_path, here) == [8.22, 8.09, 8.21]
    prof = _timed(27.40, [27.37, 27.43])
    prof.baseline = TimingStats(median_ms=8.22, iqr_ms=0.01, n=60, min_ms=8.2, mean_ms=8.22)
    prof.candidate = TimingStats(median_ms=0.3, iqr_ms=0.001, n=60, min_ms=0.29, mean_ms=0.3)
    span_eager_runs(prof, eager_runs(tmp_path, here))
    lo, hi = prof.speedup_ci
    # A rerun reading 8.09 ms of eager (26.97×) falls inside; the point and the verdict stay.
    assert lo == pytest.approx(8.09 / 0.3) and hi == 27.43 and prof.speedup == 27.40 and prof.quality.good
    assert prof.quality.metrics["eager_runs"] == 4
    assert prof.quality.metrics["eager_runs_spread"] == pytest.approx(8.22 / 8.09 - 1, abs=1e-4)
    assert any("spans eager's medians in this task's last 4 evaluations here (8.09–8.22 ms" in n for n in prof.notes)
    # No earlier evaluation: nothing changes.
    prof2 = _timed(27.40, [27.37, 27.43])
    span_eager_runs(prof2, [])
    assert prof2.speedup_ci == [27.37, 27.43] and "eager_runs" not in prof2.quality.metrics
    # Only the last EAGER_RUNS_KEPT count.
    for i in range(EAGER_RUNS_KEPT + 5):
        record_eager_run(tmp_path, here, 9.0 + i)
    assert eager_runs(tmp_path, here) == [9.0 + i for i in range(5, EAGER_RUNS_KEPT + 5)]


def test_good_evaluations_record_eager_and_the_next_spans_it(monkeypatch, tmp_path):
    """For real, on the CPU where it is asked for: the first good evaluation records its eager
    median beside the cached reference; the second's interval spans both evaluations' eager."""
    from kernelskill.evaluate.judge import quality as quality_mod
    from kernelskill.evaluate.reference import reference_dir
    from kernelskill.evaluate.judge.verdict import EAGER_RUNS
    from kernelskill.task import Task
    # A reference no evaluation has cached (the task's own copy, its hash new), in the suite's build
    # cache: a cache of its own built its precompiled header and the candidate again (120 s of 2 cores).
    import uuid
    task_path = tmp_path / "relu_task.py"
    task_path.write_text(RELU_TASK.read_text() + f"\n# this test's own reference: {uuid.uuid4().hex}\n")
    real = quality_mod.assess

    def always_good(*a, **kw):
        q = real(*a, **kw)
        q["verdict"], q["reasons"] = GOOD, []
        return q
    monkeypatch.setattr(quality_mod, "assess", always_good)
    t = TimingConfig(warmup=2, min_reps=30, max_reps=60, time_cap_s=0.5, retimes=0, eager_runs=True)
    opts = Options(device="cpu", timing=t)
    cand = Candidate.from_source(GOOD_SRC)
    r1 = evaluate(task_path, cand, opts=opts)
    assert r1.ok and r1.profile.quality.good, r1.message
    assert "eager_runs" not in r1.profile.quality.metrics
    runs = reference_dir(Task.load(task_path), "cpu", opts) / EAGER_RUNS
    assert len(runs.read_text().splitlines()) == 1
    r2 = evaluate(task_path, cand, opts=opts)
    assert r2.ok, r2.message
    p = r2.profile
    assert p.quality.metrics["eager_runs"] == 2 and len(runs.read_text().splitlines()) == 2
    e1, e2 = r1.profile.baseline.median_ms, p.baseline.median_ms
    lo, hi = p.speedup_ci
    c = p.candidate.median_ms
    assert lo <= min(e1, e2) / c * (1 + 1e-9) and max(e1, e2) / c <= hi * (1 + 1e-9)
    # Off (the CPU's default): nothing recorded, nothing spanned.
    r3 = evaluate(task_path, cand, opts=Options(device="cpu", timing=TimingConfig(warmup=2, min_reps=30, max_reps=60,
                                                                                   time_cap_s=0.5, retimes=0)))
    assert "eager_runs" not in r3.profile.quality.metrics and len(runs.read_text().splitlines()) == 2


def test_a_gpu_interval_is_never_narrower_than_what_a_rerun_moves():
    from kernelskill.evaluate.judge.verdict import RERUN_FLOOR, rerun_floor
    # Two evaluations of one kernel on a quiet H100: 27.504× [27.46–27.538] and 27.564× [27.543–27.603],
    # each sure of a speedup the other excludes, 0.2 % apart.
    a, b = _timed(27.504, [27.46, 27.538]), _timed(27.564, [27.543, 27.603])
    assert a.speedup_ci[1] < b.speedup_ci[0]
    for p in (a, b):
        p.speedup_vs_compile, p.speedup_vs_compile_ci = 1.1, [1.099, 1.101]
        rerun_floor(p, "cuda")
        assert p.speedup_ci[0] == pytest.approx(p.speedup * (1 - RERUN_FLOOR[1]))
        assert p.speedup_vs_compile_ci == pytest.approx([1.1 * (1 - RERUN_FLOOR[1]), 1.1 * (1 + RERUN_FLOOR[1])])
    assert a.speedup_ci[1] >= b.speedup_ci[0]
    # A wider interval stays as it is; a CPU's is not touched (its floor is not measured).
    wide = _timed(2.0, [1.8, 2.3])
    rerun_floor(wide, "cuda")
    assert wide.speedup_ci == [1.8, 2.3]
    cpu = _timed(2.0, [1.999, 2.001])
    rerun_floor(cpu, "cpu")
    assert cpu.speedup_ci == [1.999, 2.001]
