"""References that draw random numbers: each reference and candidate call is seeded alike, so a
reference with dropout in training mode (KernelBench level2 66_Matmul_Dropout_Softmax) verifies
against itself, with a note; a reference that differs from itself under one seed gets the
``stochastic`` verdict, never a silent ``incorrect``."""
from __future__ import annotations

import pytest

from kernelskill import Candidate, Task
from kernelskill.evaluate import evaluate

from helpers import DROPOUT_TASK, RELU_TASK

HEAD = '''import os
import random
import time

import torch
import torch.nn as nn

batch_size = 16
in_features = 32
out_features = 24

'''
TAIL = '''

def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
'''

DROPOUT = DROPOUT_TASK.read_text()

# A generator seeded from the clock on every call: no seed set from outside reproduces it.
CLOCK_SEEDED = HEAD + '''
class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)

    def forward(self, x):
        g = torch.Generator().manual_seed(time.perf_counter_ns())
        y = self.matmul(x)
        return y + torch.rand(y.shape, generator=g)
''' + TAIL

# Python's random, reseeded from the OS inside the call.
URANDOM_SEEDED = HEAD + '''
class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)

    def forward(self, x):
        rng = random.Random(os.urandom(16))
        return self.matmul(x) * rng.uniform(0.5, 1.5)
''' + TAIL

# torch.nn.functional.dropout: no module to name, the same stream as the reference's nn.Dropout.
FUNCTIONAL_DROPOUT = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, dropout_p):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.p = dropout_p

    def forward(self, x):
        return torch.softmax(F.dropout(self.matmul(x), self.p, training=True), dim=1)
'''


def task_file(tmp_path, source: str) -> Task:
    path = tmp_path / "level2" / "66_Matmul_Dropout_Softmax.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    return Task.load(path)


def as_candidate(task_source: str) -> Candidate:
    """The reference itself as the candidate (what the optimizer's baseline evaluates)."""
    return Candidate.from_source(task_source + "\n\nModelNew = Model\n")


def random_flags(r) -> list[str]:
    return [f for f in r.flags if f.startswith("random-reference:")]


def test_dropout_reference_verifies_against_itself_with_a_note(tmp_path, fast):
    r = evaluate(task_file(tmp_path, DROPOUT), as_candidate(DROPOUT), opts=fast)
    assert r.status == "ok", (r.status, r.message, r.flags)
    assert r.verify.correct and r.profile is not None
    # The timed calls are seeded like their trials, so the replay re-check holds.
    assert not [f for f in r.flags if f.startswith("replay")], r.flags
    (note,) = random_flags(r)
    assert "self.dropout: Dropout(p=0.5) in training mode" in note
    assert "torch's RNG stream" in note and "eval()" in note


def test_same_stream_from_another_call_passes_and_a_deterministic_candidate_fails(tmp_path, fast):
    task = task_file(tmp_path, DROPOUT)
    same = evaluate(task, Candidate.from_source(FUNCTIONAL_DROPOUT), opts=fast, timing=None)
    assert same.status == "ok", (same.status, same.message)
    no_dropout = FUNCTIONAL_DROPOUT.replace("training=True", "training=False")
    wrong = evaluate(task, Candidate.from_source(no_dropout), opts=fast, timing=None)
    assert wrong.status == "incorrect"
    assert random_flags(wrong), wrong.flags     # the reason is named where the failure is read


@pytest.mark.parametrize("source", [CLOCK_SEEDED, URANDOM_SEEDED], ids=["clock-seeded", "urandom-seeded"])
def test_reference_that_differs_from_itself_is_stochastic(tmp_path, fast, source):
    task = task_file(tmp_path, source)
    r = evaluate(task, as_candidate(source), opts=fast)
    assert r.status == "stochastic", (r.status, r.message)
    assert not r.ok and r.verify is None
    assert str(task.path) in r.message and "not reproducible" in r.message
    assert "same seed" in r.message and "Make it deterministic" in r.message


def test_deterministic_reference_gets_no_note(fast):
    src = RELU_TASK.read_text()
    r = evaluate(RELU_TASK, as_candidate(src), opts=fast, timing=None)
    assert r.status == "ok" and not random_flags(r), (r.status, r.flags)


def test_cli_eval_of_a_stochastic_task_exits_2_and_says_why(tmp_path, capsys):
    from kernelskill.cli import main
    task = task_file(tmp_path, URANDOM_SEEDED)
    cand = tmp_path / "cand.py"
    cand.write_text(URANDOM_SEEDED + "\n\nModelNew = Model\n")
    assert main(["eval", str(task.path), str(cand), "--device", "cpu", "--no-timing"]) == 2
    out = capsys.readouterr().out
    assert out.startswith("⚠ stochastic: ") and "compile" not in out      # the candidate never ran


def test_optimizer_stops_on_a_stochastic_baseline(tmp_path):
    from kernelskill.config import load_config
    from kernelskill.errors import StochasticTask
    from kernelskill.llm import ScriptedLLM
    from kernelskill.optimizer import Optimizer
    config = load_config({"eval.device": "cpu", "eval.trials": 2, "eval.warmup": 1, "eval.min_reps": 5,
                          "eval.max_reps": 10, "eval.time_cap_s": 0.3, "budget.attempts": 1,
                          "runs_dir": str(tmp_path / "runs")})
    task = task_file(tmp_path, CLOCK_SEEDED)
    with pytest.raises(StochasticTask, match="not reproducible") as e:
        Optimizer(task, llm=ScriptedLLM([]), config=config).run()
    assert str(task.path) in str(e.value)


def test_bench_verdict_of_a_stochastic_task(tmp_path, capsys):
    import json

    from kernelskill.cli import main

    from helpers import toolkit_candidate
    level = tmp_path / "suite" / "level1"
    (level / "solutions" / "5_relu_noisy").mkdir(parents=True)
    # relu × 2, times a factor drawn from a generator seeded by the OS: no seed reproduces it.
    noisy = RELU_TASK.read_text().replace("import torch\n", "import os\nimport random\nimport torch\n", 1) \
        .replace("return torch.relu(x) * 2.0", "return torch.relu(x) * 2.0 * random.Random(os.urandom(8)).random()")
    assert noisy != RELU_TASK.read_text()
    (level / "5_relu_noisy.py").write_text(noisy)
    (level / "solutions" / "5_relu_noisy" / "cpp_relu2.py").write_text(toolkit_candidate("return ext.relu2(x)"))
    main(["bench", str(tmp_path / "suite"), "--executor", "local", "--out", str(tmp_path / "out"), "--json",
          "--time-cap", "0.3", "--trials", "2", "--device", "cpu"])
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    (row,) = doc["tasks"]
    assert row["status"] == "stochastic" and "not reproducible" in row["message"], row
    assert doc["summary"]["statuses"] == {"stochastic": 1}
