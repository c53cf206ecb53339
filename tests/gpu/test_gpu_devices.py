"""A GPU other than the first, as the bench's pool uses them (``cuda:N``): the worker's CUDA
events, synchronisation and memory statistics must belong to GPU N. Before the fix they stayed on
GPU 0, so on cuda:1 the events bracketed none of the work (KernelBench on a 4-GPU pool: eager
below its roofline floor, 0.00 ms medians next to torch.compile) and the memory plan saw no peak.

Needs two GPUs (skips otherwise). Run on the GPU machine: python3 -m pytest -m gpu -q
"""
from __future__ import annotations

import textwrap

import pytest
import torch

from kernelskill import Candidate
from kernelskill.evaluate import evaluate
from kernelskill.evaluate.api import Options
from kernelskill.evaluate.worker.timing import TimingConfig

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2,
                                 reason="needs two GPUs")]

# A float32 GEMM without TF32: 2 × 4096³ FLOPs, milliseconds on an H100, whose floor (FLOPs at
# the measured peak) no honest timing can beat.
TASK = textwrap.dedent("""\
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def forward(self, a, b):
            return a @ b

    n = 4096

    def get_inputs():
        return [torch.randn(n, n), torch.randn(n, n)]

    def get_init_inputs():
        return []
    """)
SAME = TASK.replace("class Model(", "class ModelNew(")


def _eval(tmp_path, device: str):
    task = tmp_path / "gemm.py"
    task.write_text(TASK)
    opts = Options(device=device, timing=TimingConfig(warmup=3, min_reps=10, max_reps=40, time_cap_s=1.0),
                   build_timeout=300, run_timeout=300)
    return evaluate(task, Candidate.from_source(SAME), opts=opts, baseline="both")


def test_the_second_gpu_times_its_own_work(tmp_path):
    first, second = _eval(tmp_path, "cuda:0"), _eval(tmp_path, "cuda:1")
    for r in (first, second):
        assert r.ok, r.message
        roof = r.profile.roofline
        # Events that bracket the work: never faster than the floor, and no review note.
        assert r.profile.baseline.min_ms >= 0.8 * roof.floor_ms, (r.env.device, r.profile.baseline, roof)
        assert r.profile.candidate.min_ms >= 0.8 * roof.floor_ms, (r.env.device, r.profile.candidate, roof)
        assert r.profile.compile_baseline.min_ms >= 0.8 * roof.floor_ms, r.profile.compile_baseline
        assert not any(f.startswith("review:") for f in r.flags), r.flags
        assert r.verify.memory_plan.get("peak_bytes", 0) > 0, r.verify.memory_plan   # GPU N's statistics
    # The same GEMM on two identical GPUs takes the same time.
    ratio = second.profile.baseline.median_ms / first.profile.baseline.median_ms
    assert 0.8 < ratio < 1.25, (first.profile.baseline, second.profile.baseline)
