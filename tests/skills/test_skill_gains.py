"""benchmarks/skill_gains.py and its tasks, on the CPU: the script's --help and its refusal without
CUDA, each task's reference (it loads and runs at its small preset), and each solution (it parses,
defines ModelNew with the reference's constructor, calls load_inline once, and passes the
evaluator's static guard), and that the shipped example pair differs only in tl.dot's precision.
The solutions themselves run on a GPU:
`python3 benchmarks/skill_gains.py --device cuda`."""
from __future__ import annotations

import ast
import inspect
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "skill_gains.py"
TASKS = ROOT / "benchmarks" / "skill_gains"
sys.path.insert(0, str(ROOT / "benchmarks"))

import skill_gains  # noqa: E402

DIRS = sorted(p for p in TASKS.iterdir() if p.is_dir())


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def test_help():
    r = _run("--help")
    assert r.returncode == 0, r.stderr
    assert "--device" in r.stdout and "--json" in r.stdout and "with_skill.py" in r.stdout


def test_without_cuda_it_says_so_and_exits_2():
    r = _run("--device", "cpu")
    assert r.returncode == 2 and "Traceback" not in r.stderr and "CUDA" in r.stderr, r.stderr
    if skill_gains.cuda_problem() is None:
        pytest.skip("this machine has CUDA")
    r = _run("--device", "cuda")
    assert r.returncode == 2 and "Traceback" not in r.stderr and "no usable CUDA device" in r.stderr, r.stderr


def test_every_task_names_a_shipped_skill_and_has_both_solutions():
    assert [p.name for p in DIRS] == sorted(skill_gains.SKILLS)
    for d in DIRS:
        assert (ROOT / "skills" / f"{skill_gains.SKILLS[d.name]}.toml").exists(), d.name
        assert {p.name for p in (d / "solutions").glob("*.py")} == {"with_skill.py", "without.py"}, d.name
        assert tomllib.loads((d / "task.toml").read_text())["name"] == d.name


@pytest.mark.parametrize("task", [p.name for p in DIRS])
def test_reference_loads_and_runs_at_its_small_preset(task):
    import torch
    from kernelskill.task import Task
    t = Task.load(TASKS / task, preset="small")
    mod = t.module()
    torch.manual_seed(0)
    model = t.build_model(mod)
    with torch.no_grad():
        out = model(*t.inputs(mod))
    assert torch.isfinite(out).all()
    assert t.atol == pytest.approx(1e-4) and t.rtol == pytest.approx(1e-4)


@pytest.mark.parametrize("task", [p.name for p in DIRS])
@pytest.mark.parametrize("solution", ["with_skill", "without"])
def test_solution_parses_defines_model_new_and_passes_the_static_guard(task, solution):
    from kernelskill.evaluate.judge.static import check_source, is_cheat
    from kernelskill.task import Task
    source = (TASKS / task / "solutions" / f"{solution}.py").read_text()
    tree = ast.parse(source)
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    assert "ModelNew" in classes
    methods = {f.name: f for f in classes["ModelNew"].body if isinstance(f, ast.FunctionDef)}
    assert {"__init__", "forward"} <= set(methods)
    ref = Task.load(TASKS / task).module().Model
    want = [p for p in inspect.signature(ref.__init__).parameters if p != "self"]
    assert [a.arg for a in methods["__init__"].args.args[1:]] == want
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "load_inline"]
    assert len(calls) == 1 and {k.arg for k in calls[0].keywords} >= {"name", "cuda_sources", "functions"}
    name = next(k.value.value for k in calls[0].keywords if k.arg == "name")
    assert name.startswith("skill_gain_")
    assert [f for f in check_source(source) if is_cheat(f)] == []


def _code(source: str) -> str:
    """The module without its docstring, as the AST prints it: what runs."""
    tree = ast.parse(source)
    if tree.body and isinstance(tree.body[0], ast.Expr) and isinstance(tree.body[0].value, ast.Constant):
        tree.body = tree.body[1:]
    return ast.unparse(tree)


def _precisions(source: str) -> list[str]:
    return [k.value.value for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)
            for k in n.keywords if k.arg == "input_precision"]


def test_the_gemm_bias_relu_example_holds_a_3xtf32_twin_pair():
    """docs/skills.md reads the 3xTF32 skill's gain off the shipped gemm_bias_relu example's two
    Triton solutions, timed in one bench run on the H100: a twin pair only if nothing but tl.dot's
    precision differs between them."""
    d = ROOT / "examples" / "gemm_bias_relu" / "solutions"
    ieee, split = (d / "triton_fused_epilogue.py").read_text(), (d / "triton_tf32x3_fused_epilogue.py").read_text()
    assert _precisions(ieee) == ["ieee"] and _precisions(split) == ["tf32x3"]
    assert _code(split).replace("'tf32x3'", "'ieee'") == _code(ieee)


def test_extension_names_are_unique():
    names = [next(k.value.value for n in ast.walk(ast.parse(p.read_text())) if isinstance(n, ast.Call)
                  and getattr(n.func, "id", "") == "load_inline" for k in n.keywords if k.arg == "name")
             for p in TASKS.glob("*/solutions/*.py")]
    assert len(names) == len(set(names)) == 2 * len(DIRS)


def test_rows_are_the_tasks_then_the_example_pairs_and_unknown_names_are_refused():
    rows = skill_gains.pairs()
    assert [r.name for r in rows] == [*skill_gains.SKILLS, *skill_gains.EXAMPLE_PAIRS]
    for r in rows:
        assert r.task.is_dir() and r.with_skill.is_file() and r.without.is_file(), r
        assert (ROOT / "skills" / f"{r.skill}.toml").exists(), r.skill
    (pair,) = skill_gains.pairs("gemm_bias_relu")
    assert pair.task == ROOT / "examples" / "gemm_bias_relu" and pair.path("without").name == "triton_fused_epilogue.py"
    with pytest.raises(SystemExit, match=r"unknown task\(s\) nonesuch; the tasks are .*gemm_bias_relu"):
        skill_gains.pairs("gemm_bias_relu,nonesuch")


def test_gain_from_speedups_and_the_table():
    class P:
        def __init__(self, s, ci):
            self.speedup, self.speedup_ci = s, ci
    gain, ci = skill_gains.speedup_gain(P(3.0, [2.8, 3.2]), P(1.5, [1.4, 1.6]))
    assert gain == pytest.approx(2.0) and ci == pytest.approx([2.8 / 1.6, 3.2 / 1.4])
    assert skill_gains.speedup_gain(P(3.0, []), None) == (None, [])
    row = {"skill": "s", "task": "t", "with_skill_verdict": "correct", "without_verdict": "correct",
           "eager_ms": 1.0, "with_skill_ms": 0.5, "without_ms": 1.0, "gain": 2.0, "gain_ci": [1.9, 2.1],
           "gain_from": "head to head (race)"}
    text = skill_gains.table([row])
    assert "| `s` | t | correct | correct | 1 | 0.5 | 1 | 2.00× [1.90–2.10] | head to head (race) |" in text
    noisy = dict(row, race_quality="contended")
    assert "| head to head (race), contended |" in skill_gains.table([noisy])
