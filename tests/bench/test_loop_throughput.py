"""benchmarks/loop_throughput.py at KernelBench's sizes (issue 48, item 5): the candidates it hands
the evaluator wrap the problem's reference with one custom kernel, so they must be correct and
really built; the table reports the first and the warm evaluations apart."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import loop_throughput  # noqa: E402

from helpers import kernelbench_file  # noqa: E402


@pytest.mark.slow       # a KernelBench problem at its size, built and timed: 80 s on 2 cores
def test_a_wrapped_candidate_is_correct_built_and_each_token_is_a_new_source(tmp_path):
    from kernelskill import Candidate, Task
    from kernelskill.evaluate import evaluate
    from kernelskill.evaluate.options import Options
    from kernelskill.evaluate.worker.timing import TimingConfig
    task = Task.load(kernelbench_file(tmp_path))
    a = loop_throughput.wrapped_candidate(task.source, "cpp", "tok1")
    assert a != loop_throughput.wrapped_candidate(task.source, "cpp", "tok2")       # a new build each time
    assert "class ModelNew(Model)" in a and "ks_loop_tok1" in a
    opts = Options(device="cpu", timing=TimingConfig(warmup=1, min_reps=5, max_reps=10, time_cap_s=0.3, retimes=0))
    r = evaluate(task, Candidate.from_source(a), opts=opts)
    assert r.status == "ok", r.message
    assert r.compile.ok and r.compile.backend == "cpp" and r.profile.custom_share > 0
    # its weights are the reference's (a subclass of Model): the copy kernel changes nothing
    assert r.verify.correct and all(t.max_abs_err == 0 for t in r.verify.trials)


def _row(label: str, seconds: float, build: float, phases: dict, status: str = "ok") -> dict:
    return {"label": label, "status": status, "message": "", "seconds": seconds, "build_s": build, "phases": phases}


def test_the_table_keeps_the_first_evaluation_apart_from_the_warm_ones():
    results = [{"task": "level1/40_LayerNorm", "rows": [
        _row("first", 44.0, 35.0, {"reference": 6.0, "build": 35.0}),
        _row("warm 1", 7.0, 4.0, {"build": 4.0, "time": 1.0, "profile": 2.0}),
        _row("warm 2", 9.0, 6.0, {"build": 6.0, "time": 1.0, "profile": 1.0}),
        _row("warm 3", 8.0, 5.0, {"build": 5.0, "time": 3.0}, status="incorrect")]}]
    table = loop_throughput.kernelbench_table(results)
    row = table.splitlines()[2]
    assert row.startswith("| level1/40_LayerNorm | 3/4 | 44.0 | 8.0 | 5.0 | build 5.00, time 1.00, profile 1.00")
    assert "reference" not in row           # a step only the first evaluation had


def test_a_size_must_be_name_equals_value():
    assert loop_throughput._overrides(["batch_size=2", "mode=fast"]) == {"batch_size": 2, "mode": "fast"}
    with pytest.raises(SystemExit, match="expected NAME=VALUE"):
        loop_throughput._overrides(["batch_size"])
