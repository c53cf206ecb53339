"""Backend flags as the user has them, a strict reference for correctness, and a tolerance no
tighter than the user's own eager (issue 43, items 1-2; shared/EVALUATION.md "Backend flags").

A CPU has no TF32, so the task here does what a TF32 cuDNN convolution does to its inputs when
``torch.backends.cudnn.allow_tf32`` is on (PyTorch's default): it rounds them to TF32's 10-bit
mantissa. Under the strict flags (TF32 off) it computes in full fp32. Every component is the real
one: the reference worker, the candidate's worker, the parent's verdict.
"""
from __future__ import annotations

import dataclasses
import json
import textwrap

import pytest

from kernelskill.errors import TaskError
from kernelskill.evaluate.api import evaluate
from kernelskill.evaluate.reference import reference_dir
from kernelskill.task import Task
from kernelskill.vocab import Status

TF32_TASK = textwrap.dedent('''
    import torch
    import torch.nn as nn

    N, K, M = 32, 256, 48


    def _round(t, drop):
        """Round to nearest, keeping 23 - drop mantissa bits (drop 13: TF32, 16: bfloat16)."""
        i = t.contiguous().view(torch.int32)
        return ((i + (1 << (drop - 1))) & -(1 << drop)).view(torch.float32)


    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(K, M))

        def forward(self, x):
            w = self.w
            if torch.backends.cudnn.allow_tf32:      # what a TF32 convolution does to its operands
                x, w = _round(x, 13), _round(w, 13)
            return x @ w


    def get_inputs():
        return [torch.randn(N, K)]


    def get_init_inputs():
        return []
''')

CANDIDATE = textwrap.dedent('''
    import torch
    import torch.nn as nn


    def _round(t, drop):
        i = t.contiguous().view(torch.int32)
        return ((i + (1 << (drop - 1))) & -(1 << drop)).view(torch.float32)


    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(256, 48))

        def forward(self, x):
            w = self.w
            {body}
            return x @ w
''')


def candidate(body: str) -> str:
    return CANDIDATE.replace("{body}", body)


# Full fp32, whatever the flags: as accurate as the strict reference.
STRICT_KERNEL = candidate("pass")
# What the user's eager does (a kernel calling cuDNN under the default flags).
LIKE_EAGER = candidate("if torch.backends.cudnn.allow_tf32:\n            x, w = _round(x, 13), _round(w, 13)")
# bfloat16 operands: 8× the rounding of TF32, beyond twice the user's eager's deviation.
COARSER = candidate("x, w = _round(x, 16), _round(w, 16)")
# Flips a backend flag where no static check reads it.
FLIPS_FLAG = candidate("import importlib\n        setattr(importlib.import_module('torch.backends.'"
                       " + 'cudnn'), 'allow_' + 'tf32', False)")


@pytest.fixture
def task(tmp_path):
    path = tmp_path / "tf32_matmul.py"
    path.write_text(TF32_TASK)
    return Task.load(path)


@pytest.fixture
def verify_only(fast):
    return dataclasses.replace(fast, timing=None, profile=False)


def test_a_candidate_as_accurate_as_the_strict_reference_or_as_the_users_eager_is_correct(task, verify_only):
    strict = evaluate(task, STRICT_KERNEL, opts=verify_only)
    assert strict.status == Status.ok, strict.message
    like_eager = evaluate(task, LIKE_EAGER, opts=verify_only)
    assert like_eager.status == Status.ok, like_eager.message
    # The user's eager really differs from the strict reference by more than the task's tolerance:
    # without the raise, LIKE_EAGER would fail the task's own 1e-4.
    (tol,) = like_eager.verify.tolerances
    assert tol["eager_ratio"] > 1.0 and tol["raised"]
    assert tol["effective_atol"] == pytest.approx(tol["atol"] * 2 * tol["eager_ratio"])
    assert like_eager.verify.max_abs_err > tol["atol"] + tol["rtol"] * 1.0
    # The reference worker ran the strict and the default-flag eager side by side and kept both flag sets.
    meta = json.loads((reference_dir(task, "cpu", verify_only) / "meta.json").read_text())
    assert meta["accuracy"]["flags_differ"] is True
    assert meta["accuracy"]["eager_flags"]["cudnn.allow_tf32"] is True


def test_a_kernel_off_by_more_than_the_users_eager_is_incorrect_and_the_report_says_what_was_raised(task, verify_only):
    r = evaluate(task, COARSER, opts=verify_only)
    assert r.status == Status.incorrect, r.message
    assert "raised to atol=" in r.verify.mismatch and "default-flag eager" in r.verify.mismatch


def test_flags_are_recorded_and_a_candidate_that_changes_one_is_flagged(task, verify_only):
    ok = evaluate(task, STRICT_KERNEL, opts=verify_only)
    # PyTorch's defaults, as a user's process has them: TF32 for cuDNN on, for matmuls off.
    assert ok.env.flags_mode == "default"
    assert ok.env.flags["cudnn.allow_tf32"] is True and ok.env.flags["cuda.matmul.allow_tf32"] is False
    flipped = evaluate(task, FLIPS_FLAG, opts=verify_only)
    assert flipped.status == Status.flagged, flipped.message
    assert any(f.startswith("backend-flag:") and "cudnn.allow_tf32" in f for f in flipped.flags), flipped.flags


def test_strict_flags_time_under_tf32_off_and_say_so(task, fast):
    opts = dataclasses.replace(fast, flags="strict", profile=False)
    r = evaluate(task, LIKE_EAGER, opts=opts)
    assert r.status == Status.ok, r.message
    assert r.env.flags_mode == "strict" and r.env.flags["cudnn.allow_tf32"] is False
    # Eager is the strict reference here: nothing to raise the tolerance for.
    assert r.verify.tolerances and not any(t["raised"] for t in r.verify.tolerances)
    assert r.profile.baseline_flags == "strict" and "strict fp32 flags" in r.profile.speedup_text()
    # Each flag set has its own reference (the eager beside the strict outputs differs).
    assert reference_dir(task, "cpu", opts) != reference_dir(task, "cpu", fast)


CANCELLING_TASK = textwrap.dedent('''
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        """A sum whose fp32 rounding is far above the tolerance: 4096 terms shifted by 1000, then
        the shift taken off again."""
        def forward(self, x):
            return (x + 1000.0).sum(dim=1) - 1000.0 * x.shape[1]


    def get_inputs():
        return [torch.randn(8, 4096)]


    def get_init_inputs():
        return []
''')


def test_a_tolerance_below_the_references_own_rounding_is_said_with_the_numbers(tmp_path, verify_only):
    path = tmp_path / "cancel.py"
    path.write_text(CANCELLING_TASK)
    task = Task.load(path)
    same = CANCELLING_TASK.replace("class Model(", "class ModelNew(")
    r = evaluate(task, same, opts=verify_only)
    assert r.status == Status.ok, r.message          # it rounds exactly like the reference
    assert r.verify.notes, "the strict reference misses its own tolerance against float64: the result must say so"
    note = r.verify.notes[0]
    assert "below the reference's own rounding" in note and "float64" in note and "trial" in note


def test_a_well_conditioned_task_has_no_rounding_note(task, verify_only):
    r = evaluate(task, STRICT_KERNEL, opts=verify_only)
    assert r.verify.notes == []


def test_task_toml_flags(tmp_path):
    d = tmp_path / "t"
    d.mkdir()
    (d / "reference.py").write_text(TF32_TASK)
    (d / "task.toml").write_text('flags = "strict"\n')
    assert Task.load(d).flags_mode == "strict"
    (d / "task.toml").write_text('[flags]\nmatmul_tf32 = true\nfloat32_matmul_precision = "high"\n')
    t = Task.load(d)
    assert t.flags == {"cuda.matmul.allow_tf32": True, "float32_matmul_precision": "high"} and t.allow_tf32
    (d / "task.toml").write_text("allow_tf32 = true\n")
    assert Task.load(d).flags == {"cuda.matmul.allow_tf32": True, "cudnn.allow_tf32": True}
    (d / "task.toml").write_text("[flags]\ntf32 = true\n")
    with pytest.raises(TaskError, match=r"flags\.tf32.*allowed: .*cudnn_tf32"):
        Task.load(d)
    (d / "task.toml").write_text('[flags]\ncudnn_tf32 = "yes"\n')
    with pytest.raises(TaskError, match="expected true or false"):
        Task.load(d)
    (d / "task.toml").write_text('flags = "fast"\n')
    with pytest.raises(TaskError, match="must be"):
        Task.load(d)
