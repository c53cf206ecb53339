"""Measurement quality on a real GPU: a second process launching kernels on the same device
during an evaluation is detected, and an evaluation on a quiet device is not flagged for it.

Run on the GPU machine: python3 -m pytest -m gpu -q
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kernelskill import Candidate
from kernelskill.evaluate import evaluate
from kernelskill.evaluate.api import Options
from kernelskill.evaluate.judge.quality import CONTENDED, NOISY
from kernelskill.evaluate.race import race
from kernelskill.evaluate.worker.timing import TimingConfig

pytestmark = pytest.mark.gpu

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TASK = EXAMPLES / "softmax_rows"
SOLUTION = TASK / "solutions" / "cuda_softmax_regcache.py"

HOG = """
import torch
x = torch.randn(8192, 8192, device="cuda")
print("ready", flush=True)
while True:
    for _ in range(10):
        y = x @ x
    torch.cuda.synchronize()
"""


@pytest.fixture
def opts():
    return Options(device="cuda", timing=TimingConfig(time_cap_s=2.0, retimes=1, backoff_s=0.2),
                   build_timeout=600, run_timeout=300)


def test_a_second_process_running_kernels_on_the_gpu_is_detected(opts):
    cand = Candidate.from_file(SOLUTION)
    evaluate(TASK, cand, opts=opts, timing=None, profile=False)        # build and reference first
    hog = subprocess.Popen([sys.executable, "-c", HOG], stdout=subprocess.PIPE, text=True)
    try:
        assert hog.stdout.readline().strip() == "ready"
        r = evaluate(TASK, cand, opts=opts)
    finally:
        hog.kill()
        hog.wait()
    assert r.ok, r.message
    q = r.profile.quality
    assert q.verdict in (CONTENDED, NOISY), q
    # Every round it was allowed (two on fresh allocations, one re-time): none was good.
    assert q.rounds == opts.timing.min_rounds("cuda") + opts.timing.retimes
    assert any(f"pid {hog.pid}" in why for why in q.reasons), q.reasons
    assert f"({q.verdict})" in r.message


def test_a_quiet_gpu_is_not_flagged_for_other_processes(opts):
    r = evaluate(TASK, Candidate.from_file(SOLUTION), opts=opts)
    assert r.ok, r.message
    q = r.profile.quality
    assert not any("another process" in why for why in q.reasons), q.reasons
    assert q.metrics.get("gpu_processes_visible") is True


def test_a_gpu_measurement_is_two_rounds_on_fresh_allocations_merged(opts):
    r = evaluate(TASK, Candidate.from_file(SOLUTION), opts=opts)
    assert r.ok, r.message
    q, p = r.profile.quality, r.profile
    assert q.rounds >= 2, q
    # (the first worker's rounds; another worker process's, where one timed it, say "process")
    chosen = [h for h in q.history if h["round"] in q.chosen_rounds and not h.get("process")]
    if q.good:
        assert len(chosen) >= 2 and q.metrics["rounds_merged"] == len(chosen)
    if len(chosen) > 1:
        lo, hi = p.speedup_ci
        assert all(lo - 1e-3 <= h["speedup"] <= hi + 1e-3 for h in chosen), (p.speedup_ci, chosen)


def test_identical_cuda_candidates_race_to_no_winner(opts):
    src = SOLUTION.read_text()
    res = race(TASK, [src, src], opts=opts)
    assert res.status == "ok", res.message
    assert res.winner is None and 0.95 < res.ratio < 1.05, res.message
