"""Fixtures of the optimizer tests: a stored run that holds only the measured baseline, copied for
each test that needs a run without paying for another evaluation of the reference."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scenario import EVAL_FLAGS, RELU_TASK  # noqa: E402


@pytest.fixture(scope="session")
def baseline_run(tmp_path_factory):
    """A run directory after the baseline and no attempt (budget of 0 attempts)."""
    from kernelskill.config import load_config
    from kernelskill.llm import ScriptedLLM
    from kernelskill.optimizer import Optimizer
    from kernelskill.task import Task
    runs = tmp_path_factory.mktemp("baseline-runs")
    config = load_config({**EVAL_FLAGS, "budget.attempts": 0, "runs_dir": str(runs), "search.seed": 7})
    outcome = Optimizer(Task.load(RELU_TASK), llm=ScriptedLLM([]), config=config).run()
    assert outcome.reason == "attempts" and outcome.attempts == 0
    return outcome.path


@pytest.fixture
def run_copy(baseline_run, tmp_path):
    """A fresh copy of the baseline run to resume from."""
    dst = tmp_path / "runs" / baseline_run.name
    shutil.copytree(baseline_run, dst)
    return dst
