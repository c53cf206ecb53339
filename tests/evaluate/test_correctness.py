"""The trusted comparison: verdicts and the mismatch report the debugger reads."""
from __future__ import annotations

import math

import pytest

import torch

from kernelskill.evaluate.judge.correctness import compare_trial, verify_outputs


def test_exact_match_and_tolerance():
    w = torch.randn(4, 5)
    res, _ = compare_trial(0, 1, "task", [w + 5e-6], [w], 1e-4, 1e-4)
    assert res.ok and res.max_abs_err < 1e-5


def test_mismatch_report_names_worst_elements_and_fraction():
    w = torch.zeros(3, 4)
    g = w.clone()
    g[1, 2] = 7.0
    g[2, 3] = 0.5
    res, text = compare_trial(0, 1, "task", [g], [w], 1e-4, 1e-4)
    assert not res.ok and res.check == "allclose"
    assert res.mismatch_fraction == 2 / 12
    assert "2 of 12 elements" in text
    first = text.splitlines()[0]
    assert "[1, 2]" in first and "got 7" in first and "expected 0" in first   # the worst comes first


def test_shape_dtype_and_structure_checks():
    w = torch.randn(2, 3)
    assert compare_trial(0, 1, "task", [w.T], [w], 1e-4, 1e-4)[0].check == "shape"
    assert compare_trial(0, 1, "task", [w.double()], [w], 1e-4, 1e-4)[0].check == "dtype"
    assert compare_trial(0, 1, "task", [w, w], [w], 1e-4, 1e-4)[0].check == "structure"


def test_nan_where_reference_has_none_fails_and_matching_nan_passes():
    w = torch.tensor([1.0, float("nan"), float("inf")])
    ok, _ = compare_trial(0, 1, "task", [w.clone()], [w], 1e-4, 1e-4)
    assert ok.ok
    bad = w.clone()
    bad[0] = float("nan")
    res, text = compare_trial(0, 1, "task", [bad], [w], 1e-4, 1e-4)
    assert not res.ok and res.check == "nan-inf" and "first at (0,)" in text


def test_relative_error_check_catches_uniform_bias_within_atol():
    # Each element is within atol of a tiny reference, but the whole output is 50 % off.
    w = torch.full((1000,), 1e-5)
    res, text = compare_trial(0, 1, "task", [w * 1.5], [w], 1e-4, 1e-4)
    assert not res.ok and res.check == "relative-error" and "relative error" in text
    assert math.isclose(res.max_rel_err, 0.5, rel_tol=1e-6)


def test_scalar_output():
    res, _ = compare_trial(0, 1, "task", [torch.tensor(2.0)], [torch.tensor(1.0)], 1e-4, 1e-4)
    assert not res.ok and res.check == "allclose" and "got 2, expected 1" in res.message


def test_verify_outputs_summary_lists_every_trial():
    w = torch.randn(10)
    v = verify_outputs([[w], [w + 1]], [[w], [w]], [1, 2], ["task", "signed"], 1e-4, 1e-4)
    assert not v.correct and v.trials[0].ok and not v.trials[1].ok
    assert "1 of 2 trials failed" in v.mismatch and "signed inputs" in v.mismatch and "Per-trial" in v.mismatch


def test_a_mismatchs_first_line_is_whole_on_its_own():
    """The trial's message (and the MCP summary built on it) ended in `worst:` with nothing after it."""
    want = torch.zeros(4, 5)
    got = want.clone()
    got[1, 2], got[3, 4] = 0.5, 0.25
    res, report = compare_trial(0, 1, "task", [got], [want], 1e-4, 1e-4)
    assert not res.ok
    assert res.message == ("output: 2 of 20 elements (10 %) outside tolerance; worst: at [1, 2]: got 0.5, "
                           "expected 0 (|diff| 0.5)")
    assert report.splitlines()[1:] == ["  next worst:", "  at [3, 4]: got 0.25, expected 0 (|diff| 0.25)"]
    single = want.clone()
    single[0, 0] = 1.0
    one = compare_trial(0, 1, "task", [single], [want], 1e-4, 1e-4)
    assert one[0].message.endswith("; worst: at [0, 0]: got 1, expected 0 (|diff| 1)") and "\n" not in one[1]


def test_a_comparison_in_passes_gives_the_verdict_and_report_of_one_pass(monkeypatch):
    # Gigabyte outputs are compared CHUNK elements at a time (bounded temporaries on the GPU): the
    # errors, the fraction and the worst elements named must be those of a single pass.
    from kernelskill.evaluate.judge import correctness
    g = torch.Generator().manual_seed(3)
    want = torch.randn(37, 53, generator=g)
    got = want + torch.randn(37, 53, generator=g) * 1e-6
    for flat, bump in ((5, 0.5), (1000, 2.0), (1900, 1.0), (1960, 0.25)):   # four outside tolerance
        got.view(-1)[flat] += bump
    whole = compare_trial(0, 1, "task", [got], [want], 1e-4, 1e-4)
    monkeypatch.setattr(correctness, "CHUNK", 100)                          # 20 passes, bad ones in 4
    parts = compare_trial(0, 1, "task", [got], [want], 1e-4, 1e-4)
    assert not whole[0].ok and not parts[0].ok
    assert parts[1] == whole[1] and "4 of 1961 elements" in parts[1]
    assert parts[1].splitlines()[0].endswith("; worst: at [18, 46]: got " + parts[1].split("got ", 1)[1].splitlines()[0])
    assert "worst: at [18, 46]:" in parts[1].splitlines()[0]                # flat 1000, the worst
    assert parts[0].max_abs_err == pytest.approx(whole[0].max_abs_err)
    assert parts[0].max_rel_err == pytest.approx(whole[0].max_rel_err, rel=1e-5)
    assert parts[0].mismatch_fraction == whole[0].mismatch_fraction
    # A non-finite value in a later pass still takes the exact path.
    got.view(-1)[1500] = float("nan")
    assert compare_trial(0, 1, "task", [got], [want], 1e-4, 1e-4)[0].check == "nan-inf"
