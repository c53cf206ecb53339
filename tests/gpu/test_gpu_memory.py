"""The memory plan on a real GPU, at KernelBench's shipped level-1 size: relu on 4096 × 393216 fp32
(6.4 GB per tensor, level1/19_ReLU's shape), where storing every trial's inputs and outputs took
77 GB and killed the reference worker. Inputs come from seeds on the device, reference outputs are
recomputed by a trusted worker, and the verdicts are the same as at a small size.

Run on the GPU machine: python3 -m pytest -m gpu -q
"""
from __future__ import annotations

import pytest

from kernelskill import Candidate
from kernelskill.evaluate import evaluate
from kernelskill.evaluate.api import Options, reference
from kernelskill.evaluate.worker.timing import TimingConfig
from kernelskill.task import Task

from gpu.test_gpu_backends import CUDA
from helpers import RELU_TASK

pytestmark = pytest.mark.gpu

BIG = {"batch_size": 4096, "dim": 393216}


@pytest.fixture
def opts():
    return Options(device="cuda", trials=5, timing=TimingConfig(warmup=2, min_reps=10, max_reps=30, time_cap_s=2.0,
                                                                retimes=0),
                   build_timeout=600, run_timeout=600)


def test_a_shipped_level1_size_is_evaluated_under_a_memory_plan(opts):
    task = Task.load(RELU_TASK, overrides=BIG)
    ref_dir = reference(task, "cuda", opts)
    assert sorted(p.name for p in ref_dir.iterdir()) == ["meta.json", "state.pt"]      # nothing else written
    r = evaluate(task, Candidate.from_source(CUDA), opts=opts)
    assert r.ok, (r.message, r.log_tail[-2000:])
    plan = r.verify.memory_plan
    assert (plan["inputs"], plan["outputs"], plan["generated_on"]) == ("seeds", "recompute", "cuda"), plan
    assert plan["handoff"] == "cuda-ipc", plan          # compared on the GPU: nothing written, nothing read back
    assert {"plan", "build", "run", "time"} <= set(r.phases), r.phases       # where the seconds went
    assert plan["input_bytes"] == 4096 * 393216 * 4 and len(r.verify.trials) == 6
    assert r.profile.speedup is not None and r.profile.quality is not None

    # The same guarantees: a kernel wrong on the last element fails, on this size too.
    wrong = Candidate.from_source(CUDA.replace("if (i < n) y[i]", "if (i < n - 1) y[i]"))
    bad = evaluate(task, wrong, opts=opts)
    assert bad.status == "incorrect", bad.message
