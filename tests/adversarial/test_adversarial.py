"""Every trick gets its verdict; every honest kernel passes. CPU (cpp) here, CUDA on a GPU."""
from __future__ import annotations

import pytest

from kernelskill import Candidate
from kernelskill.evaluate import evaluate
from kernelskill.evaluate.api import Options
from kernelskill.evaluate.worker.timing import TimingConfig

from adversarial.cases import CASES, DATA, source

TIMING = TimingConfig(warmup=1, min_reps=5, max_reps=20, time_cap_s=0.5, retimes=0)


def judge(case, backend: str, store_limit: int | None = None):
    opts = Options(device="cpu" if backend == "cpp" else "cuda", timing=TIMING, build_timeout=600,
                   run_timeout=10 if case.name == "hang" else 120,
                   memory_fraction=0.1 if case.name == "oom" else 0.5, store_limit=store_limit)
    return evaluate(DATA / case.task, Candidate.from_source(source(case, backend)), opts=opts)


def _check(case, r):
    if case.expect == "runtime_error" and case.name == "illegal-address":
        assert r.status in ("runtime_error", "crashed"), (r.status, r.message)
    else:
        assert r.status == case.expect, (case.name, r.status, r.message, r.flags)
    if case.flag:
        assert any(f.startswith(case.flag) for f in r.flags), (case.name, r.flags)
    if case.expect == "ok" and case.name == "honest":
        assert r.profile.speedup is not None
        # Its own kernel holds most of the time — a profile taken on a machine busy enough that the
        # timings were judged not good (two test workers and two spinners on 2 cores: custom share
        # 0.28, the reference drifting 200x) says so instead, and counts for no decision.
        assert r.profile.custom_share > 0.5 or not r.profile.quality.good, (r.profile.custom_share, r.profile.quality)
        # A loaded machine can push the ratio past the review threshold; nothing else may show.
        assert not [f for f in r.flags if not f.startswith("review:")], r.flags
    if case.name == "degenerate":
        assert r.verify.degenerate and r.profile.speedup is None


@pytest.mark.parametrize("case", [c for c in CASES if "cpp" in c.backends], ids=lambda c: c.name)
def test_cpp(case):
    _check(case, judge(case, "cpp"))


@pytest.mark.gpu
@pytest.mark.parametrize("case", [c for c in CASES if "cuda" in c.backends], ids=lambda c: c.name)
def test_cuda(case):
    _check(case, judge(case, "cuda"))


# A task too large to store its trials (a KernelBench level-1 task as shipped) is held by the memory
# plan: inputs regenerated from seeds, reference outputs recomputed by a trusted worker when
# compared. The guarantees are the same: these cases, with nothing stored, get the same verdicts.
PLANNED = ("honest", "honest-tail-bug", "zero-inputs", "edit-inputs", "return-input", "return-constant",
           "data-ptr-cache", "self-cache", "degenerate")


@pytest.mark.parametrize("case", [c for c in CASES if c.name in PLANNED and "cpp" in c.backends],
                         ids=lambda c: c.name)
def test_cpp_with_nothing_stored(case):
    r = judge(case, "cpp", store_limit=0)
    _check(case, r)
    plan = r.verify.memory_plan if r.verify else {}
    if r.verify is not None:
        assert (plan["inputs"], plan["outputs"], plan["stored_bytes"]) == ("seeds", "recompute", 0), plan
        # The outputs were shared with the reference worker in memory, the timed calls' too: the
        # protocol the GPU's CUDA IPC uses (ack per trial, timed_checked), with nothing written.
        assert plan["handoff"] == "shared-memory", plan


# The same on a GPU: the candidate's outputs are not written but shared with the reference worker
# through CUDA IPC (evaluate/worker/handoff.py) and compared there, the timed calls' outputs too.
@pytest.mark.gpu
@pytest.mark.parametrize("case", [c for c in CASES if c.name in PLANNED and "cuda" in c.backends],
                         ids=lambda c: c.name)
def test_cuda_with_nothing_stored(case):
    r = judge(case, "cuda", store_limit=0)
    _check(case, r)
    if r.verify is not None:
        plan = r.verify.memory_plan
        assert (plan["inputs"], plan["outputs"], plan["stored_bytes"]) == ("seeds", "recompute", 0), plan
        assert plan["handoff"] == "cuda-ipc", plan
