"""The example suite: every task loads, every solution gets its expected verdict on its backend.

C++ solutions run here at the `small` preset; CUDA and Triton ones on the GPU machine
(`pytest -m gpu_suite`, ~40 builds and evaluations: kept out of the quicker `pytest -m gpu`; `kernelskill bench
examples --include-wrong` gives the same verdicts with parallel builds). Running every C++ build is `slow` (about 30 s each on two cores); the default
run keeps a representative pair.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelskill import Candidate, Task
from kernelskill.evaluate import evaluate
from kernelskill.evaluate.api import Options
from kernelskill.evaluate.worker.timing import TimingConfig

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TASKS = sorted(p for p in EXAMPLES.iterdir() if (p / "task.toml").exists())
DEFAULT = {"softmax_rows/solutions/cpp_softmax_openmp.py", "sum_reduce/solutions/wrong/cpp_wrong_axis.py"}


def solutions(prefix: str) -> list[Path]:
    return sorted(EXAMPLES.glob(f"*/solutions/{prefix}_*.py")) + sorted(EXAMPLES.glob(f"*/solutions/wrong/{prefix}_*.py"))


def expected(path: Path) -> str:
    m = re.match(r"#\s*expect:\s*(\w+)", path.read_text())
    return m.group(1) if m else "ok"


def _param(path: Path, slow_unless_default: bool = True):
    rel = str(path.relative_to(EXAMPLES))
    marks = [pytest.mark.slow] if slow_unless_default and rel not in DEFAULT else []
    return pytest.param(path, id=rel, marks=marks)


def test_suite_shape():
    assert len(TASKS) >= 24
    levels = {Task.load(t).level for t in TASKS}
    assert levels == {1, 2, 3}
    for t in TASKS:
        assert list((t / "solutions").glob("cuda_*.py")), f"{t.name} has no CUDA solution"
    assert len({p.parent.parent.name for p in EXAMPLES.glob("*/solutions/cpp_*.py")}) >= 8
    assert len({p.parent.parent.name for p in EXAMPLES.glob("*/solutions/triton_*.py")}) >= 4


@pytest.mark.parametrize("task", TASKS, ids=lambda p: p.name)
def test_task_loads_at_both_sizes(task):
    small = Task.load(task, preset="small").summary()
    full = Task.load(task).summary()         # traced on meta tensors: cheap even at H100 sizes
    assert small["op_classes"] and small["inputs"] and full["flops"] >= small["flops"]


@pytest.mark.parametrize("path", [_param(p) for p in solutions("cpp")])
def test_cpp_solution_verdict(path):
    task = Task.load(_task_of(path), preset="small")
    opts = Options(device="cpu", timing=TimingConfig(warmup=1, min_reps=5, max_reps=30, time_cap_s=1.0, retimes=0))
    r = evaluate(task, Candidate.from_file(path), opts=opts)
    assert r.status == expected(path), (r.status, r.message, r.flags)
    if r.status == "ok":
        assert r.profile.custom_share > 0.5 and not [f for f in r.flags if not f.startswith("review")]


def _task_of(path: Path) -> Path:
    return path.parent.parent if path.parent.name == "solutions" else path.parent.parent.parent


@pytest.mark.gpu_suite
@pytest.mark.parametrize("path", [pytest.param(p, id=str(p.relative_to(EXAMPLES)))
                                  for p in solutions("cuda") + solutions("triton")])
def test_gpu_solution_verdict(path):
    opts = Options(device="cuda", timing=TimingConfig(warmup=2, min_reps=10, max_reps=100, time_cap_s=2.0))
    r = evaluate(Task.load(_task_of(path)), Candidate.from_file(path), opts=opts)
    assert r.status == expected(path), (r.status, r.message, r.flags)
