"""Backend flags on a real GPU (issue 43): eager as the user runs it (cuDNN convolutions in TF32),
correctness against a strict fp32 reference, and a tolerance no tighter than the user's eager.

Run on the GPU machine: python3 -m pytest -m gpu -q tests/gpu/test_gpu_flags.py
"""
from __future__ import annotations

import dataclasses
import json
import textwrap

import pytest

from kernelskill.evaluate import evaluate
from kernelskill.evaluate.api import Options
from kernelskill.evaluate.reference import reference_dir
from kernelskill.evaluate.worker.timing import TimingConfig
from kernelskill.task import Task
from kernelskill.vocab import Status

pytestmark = pytest.mark.gpu

CONV_TASK = textwrap.dedent('''
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(64, 128, 3, padding=1)

        def forward(self, x):
            return self.conv(x)


    def get_inputs():
        return [torch.randn(8, 64, 56, 56)]


    def get_init_inputs():
        return []
''')

CANDIDATE = textwrap.dedent('''
    import torch
    import torch.nn as nn
    import torch.nn.functional as F


    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(64, 128, 3, padding=1)

        def forward(self, x):
            w, b = self.conv.weight, self.conv.bias
            return {expr}
''')

CUDNN = CANDIDATE.replace("{expr}", "F.conv2d(x, w, b, padding=1)")                 # the user's eager's own path
FP64 = CANDIDATE.replace("{expr}", "F.conv2d(x.double(), w.double(), b.double(), padding=1).float()")
BF16 = CANDIDATE.replace("{expr}", "F.conv2d(x.bfloat16(), w.bfloat16(), b.bfloat16(), padding=1).float()")


@pytest.fixture
def task(tmp_path):
    path = tmp_path / "conv_tf32.py"
    path.write_text(CONV_TASK)
    return Task.load(path)


@pytest.fixture
def gpu():
    return Options(device="cuda", timing=TimingConfig(warmup=2, min_reps=10, max_reps=50, time_cap_s=1.0),
                   profile=False, build_timeout=600, run_timeout=300)


def test_default_flag_eager_differs_from_the_strict_reference_and_both_accuracies_pass(task, gpu):
    verify = dataclasses.replace(gpu, timing=None)
    cudnn = evaluate(task, CUDNN, opts=verify)
    assert cudnn.status == Status.ok, cudnn.message
    meta = json.loads((reference_dir(task, "cuda", verify) / "meta.json").read_text())
    assert meta["accuracy"]["flags_differ"] and meta["accuracy"]["eager_flags"]["cudnn.allow_tf32"] is True
    (tol,) = cudnn.verify.tolerances
    assert tol["measured"] and tol["eager_ratio"] > 0.05, tol       # TF32 convolutions are not the strict ones
    strict = evaluate(task, FP64, opts=verify)
    assert strict.status == Status.ok, strict.message
    coarse = evaluate(task, BF16, opts=verify)
    assert coarse.status == Status.incorrect, coarse.message


def test_eager_is_timed_under_the_users_flags_and_strict_says_so(task, gpu):
    default = evaluate(task, CUDNN, opts=gpu)
    strict = evaluate(task, CUDNN, opts=dataclasses.replace(gpu, flags="strict"))
    assert default.status == strict.status == Status.ok, (default.message, strict.message)
    assert default.env.flags["cudnn.allow_tf32"] is True and strict.env.flags["cudnn.allow_tf32"] is False
    # A TF32 convolution on Hopper is much faster than the fp32 one: the strict eager is not what users run.
    assert strict.profile.baseline.median_ms > 1.3 * default.profile.baseline.median_ms, \
        (strict.profile.baseline, default.profile.baseline)
    assert "strict fp32 flags" in strict.profile.speedup_text()
    assert "strict" not in default.profile.speedup_text()
