"""Shape generalization (issue 47, item 1): a candidate verified at the task's sizes, checked again
at derived shapes; a wrong value anywhere fails, a clean refusal is a label. Real workers, real
builds (the C++ toolkit), the relu task at 64 x 1000."""
from __future__ import annotations

import json

import pytest

from kernelskill import Candidate
from kernelskill.cli import main
from kernelskill.errors import UserError
from kernelskill.evaluate import evaluate
from kernelskill.evaluate.api import Options
from kernelskill.evaluate.shapes import derive_shapes, prime_near
from kernelskill.task import Task

from helpers import RELU_TASK, toolkit_candidate

GOOD = toolkit_candidate("return ext.relu2(x)")
# Refuses every width but the benchmark's, cleanly (its own check).
SPECIALISED = toolkit_candidate('if x.shape[1] != 1000:\n    raise RuntimeError(f"relu2: built for dim 1000, got {x.shape[1]}")\n'
                                "return ext.relu2(x)")
# Handles the benchmark's 64 rows only: right at 64 or fewer, wrong beyond.
FIRST_ROWS = toolkit_candidate("y = torch.zeros_like(x)\ny[:64] = ext.relu2(x[:64].contiguous())\nreturn y")


def _opts(**kw) -> Options:
    return Options(device="cpu", timing=None, profile=False, trials=2, **kw)


def test_derived_shapes_vary_each_size_constant_and_take_the_presets(tmp_path):
    assert (prime_near(32), prime_near(1000), prime_near(8), prime_near(4)) == (31, 997, 7, 3)
    task = Task.load(RELU_TASK)
    labels = [label for label, _ in derive_shapes(task)]
    assert labels == ["batch_size=61 (a prime near 64)", "dim=997 (a prime near 1000)", "batch_size=32 (half)",
                      "dim=500 (half)", "batch_size=128 (double)", "dim=2000 (double)"]
    assert dict(derive_shapes(task))["dim=997 (a prime near 1000)"] == {"dim": 997}
    # A task with presets and chained constants (height = width = 128: one name at a time); small
    # constants (a kernel size) are structural and stay.
    (tmp_path / "reference.py").write_text(
        "import torch, torch.nn as nn\nbatch = 16\nheight = width = 128\nkernel_size = 3\n"
        "class Model(nn.Module):\n    def forward(self, x):\n        return x\n"
        "def get_inputs():\n    return [torch.randn(batch, height, width)]\ndef get_init_inputs():\n    return []\n")
    (tmp_path / "task.toml").write_text('name = "t"\n[presets.small]\nbatch = 8\nheight = 32\nwidth = 32\n')
    t = Task.load(tmp_path)
    shapes = dict(derive_shapes(t))
    assert shapes["preset small"] == {"batch": 8, "height": 32, "width": 32}
    assert shapes["height=127 (a prime near 128)"] == {"height": 127} and "width=127 (a prime near 128)" in shapes
    assert not any(label.startswith("kernel_size") for label in shapes)
    assert [label for label, _ in derive_shapes(t, "small")] == ["preset small"]
    with pytest.raises(UserError, match="no preset named large .*presets: small"):
        derive_shapes(t, "large")


def test_a_candidate_that_generalizes_says_so():
    r = evaluate(RELU_TASK, Candidate.from_source(GOOD), opts=_opts(shapes="auto"))
    assert r.ok, r.message
    s = r.shapes
    assert s.generalizes == "yes" and [c.verdict for c in s.shapes] == ["ok"] * 6, s
    assert s.summary == "generalizes: correct at 6 other shapes"
    data = json.loads(r.to_json())                      # what --json prints
    assert data["shapes"]["generalizes"] == "yes" and data["shapes"]["shapes"][1]["sets"] == {"dim": 997}


def test_a_clean_refusal_is_a_label_a_wrong_value_is_a_failure():
    r = evaluate(RELU_TASK, Candidate.from_source(SPECIALISED), opts=_opts(shapes="auto"))
    assert r.ok, r.message                                     # correct where it runs: a label, not a failure
    verdicts = {c.label: c.verdict for c in r.shapes.shapes}
    assert r.shapes.generalizes == "specialised"
    assert all(v == ("refused" if label.startswith("dim") else "ok") for label, v in verdicts.items()), verdicts
    refused = next(c for c in r.shapes.shapes if c.verdict == "refused")
    assert "built for dim 1000, got 997" in refused.message
    r = evaluate(RELU_TASK, Candidate.from_source(FIRST_ROWS), opts=_opts(shapes="auto"))
    assert r.status == "incorrect" and r.shapes.generalizes == "no"
    assert r.message.startswith("correct at the task's sizes, but incorrect at shape batch_size=128 (double)"), r.message
    verdicts = {c.label: c.verdict for c in r.shapes.shapes}
    assert verdicts["batch_size=61 (a prime near 64)"] == "ok" and verdicts["batch_size=128 (double)"] == "incorrect"


def test_eval_cli_prints_each_shape_and_fails_on_a_wrong_value(tmp_path, capsys):
    cand = tmp_path / "cand.py"
    cand.write_text(FIRST_ROWS)
    code = main(["eval", str(RELU_TASK), str(cand), "--device", "cpu", "--no-timing", "--trials", "2",
                 "--shapes", "auto"])
    out = capsys.readouterr().out
    assert code != 0 and "incorrect at shape batch_size=128 (double)" in out
    assert "    incorrect  batch_size=128 (double)" in out and "    ok         dim=997 (a prime near 1000)" in out
