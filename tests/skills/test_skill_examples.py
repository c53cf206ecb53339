"""Every skill example is real code: CUDA compiles with nvcc for sm_90 (and sm_90a where the skill
needs it) without warnings, C++ compiles with g++ -fopenmp and its main() checks itself, Triton
and Python examples parse, and every Python example runs as a script and checks its own claim
(at least one assert is executed: an example that checks nothing fails).

Compilation runs once per session in a pool of 2 workers; each skill then gets its own test.
GPU execution of the examples against CPU references lives in skills/_gpu_check/run.sh.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

SKILLS = Path(__file__).resolve().parents[2] / "skills"
EXAMPLES = {p.stem: tomllib.loads(p.read_text()) for p in sorted(SKILLS.glob("*.toml"))}


def by_lang(*langs: str) -> list[str]:
    return [sid for sid, d in EXAMPLES.items() if d["example_lang"] in langs]


CUDA, CPP, PY = by_lang("cuda"), by_lang("cpp"), by_lang("triton", "python")
ALLOWED_CUDA_HEADERS = {"cuda_runtime.h", "cuda_fp16.h", "cuda_bf16.h", "mma.h",
                        "cooperative_groups.h", "cuda_pipeline.h", "stdint.h", "math.h",
                        "math_constants.h", "cstdint", "cmath"}


def _run(cmd: list[str], cwd: Path, timeout: int = 180) -> tuple[int, str]:
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    return r.returncode, (r.stdout + r.stderr).strip()


def _build_cuda(sid: str, work: Path) -> list[str]:
    src = work / f"{sid}.cu"
    src.write_text(EXAMPLES[sid]["example"])
    problems = []
    flags = [["-arch=sm_90"]]
    if "sm_90a" in EXAMPLES[sid].get("arch", []):
        flags.append(["-gencode=arch=compute_90a,code=sm_90a"])
    for f in flags:
        rc, log = _run(["nvcc", "-std=c++17", *f, "-c", src.name, "-o", f"{sid}.o"], work)
        if rc != 0 or "warning" in log.lower():
            problems.append(f"nvcc {' '.join(f)} (rc={rc}):\n{log[-3000:]}")
    return problems


def _build_cpp(sid: str, work: Path) -> list[str]:
    (work / f"{sid}.cpp").write_text(EXAMPLES[sid]["example"])
    rc, log = _run(["g++", "-O2", "-std=c++17", "-fopenmp", "-Wall", "-Werror", f"{sid}.cpp",
                    "-o", sid], work)
    if rc != 0:
        return [f"g++ (rc={rc}):\n{log[-3000:]}"]
    rc, log = _run([str(work / sid)], work, timeout=60)
    return [] if rc == 0 else [f"self-check exited {rc}:\n{log[-2000:]}"]


def test_every_language_is_covered():
    assert len(CUDA) >= 25 and len(CPP) >= 4 and len(PY) >= 5


@pytest.mark.parametrize("sid", CUDA)
def test_cuda_example_uses_only_cuda_headers(sid):
    headers = set(re.findall(r'#include\s*[<"]([^>"]+)[>"]', EXAMPLES[sid]["example"]))
    assert headers <= ALLOWED_CUDA_HEADERS, headers - ALLOWED_CUDA_HEADERS
    assert "torch" not in EXAMPLES[sid]["example"] and "cublas" not in EXAMPLES[sid]["example"]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("sid", CUDA)
def test_cuda_example_compiles(tmp_path, sid):
    # Built in the test itself: each xdist worker builds only the examples it runs (a session
    # fixture that built every collected example was run by both workers, twice the compiles).
    problems = _build_cuda(sid, tmp_path)
    assert problems == [], "\n".join(problems)


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not installed")
@pytest.mark.parametrize("sid", CPP)
def test_cpp_example_compiles_and_checks_itself(tmp_path, sid):
    assert "int main(" in EXAMPLES[sid]["example"]
    problems = _build_cpp(sid, tmp_path)
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("sid", PY)
def test_python_and_triton_examples_parse(sid):
    tree = ast.parse(EXAMPLES[sid]["example"], filename=f"{sid}.py")
    if EXAMPLES[sid]["example_lang"] == "triton":
        src = EXAMPLES[sid]["example"]
        assert "@triton.jit" in src and "import triton.language as tl" in src
    assert any(isinstance(n, (ast.FunctionDef, ast.ClassDef)) for n in ast.walk(tree))


class _CountAsserts(ast.NodeTransformer):
    """Precede every ``assert`` with a count of it, so a run can tell that it checked something."""

    def visit_Assert(self, node: ast.Assert) -> list[ast.stmt]:
        count = ast.parse("__asserts_run__[0] += 1").body[0]
        return [ast.copy_location(count, node), node]


def run_counting_asserts(source: str, filename: str) -> int:
    """Run ``source`` as ``__main__``; return how many assert statements it executed."""
    tree = ast.fix_missing_locations(_CountAsserts().visit(ast.parse(source, filename=filename)))
    ran = [0]
    exec(compile(tree, filename, "exec"), {"__name__": "__main__", "__asserts_run__": ran})
    return ran[0]


def test_an_example_that_checks_nothing_is_caught():
    quiet = "import torch\n\nif __name__ == '__main__':\n    print(torch.ones(2) * 2)\n"
    assert run_counting_asserts(quiet, "quiet.py") == 0
    unreached = "def f(x):\n    assert x\n\nclass M:\n    pass\n"          # an assert that never runs
    assert run_counting_asserts(unreached, "unreached.py") == 0
    assert run_counting_asserts("for i in range(3):\n    assert i < 3\n", "loop.py") == 3


@pytest.mark.parametrize("sid", by_lang("python"))
def test_python_examples_run_and_check_themselves(sid):
    pytest.importorskip("torch")
    checked = run_counting_asserts(EXAMPLES[sid]["example"], f"{sid}.py")
    assert checked > 0, (f"the {sid} example ran no assert: give it an `if __name__ == \"__main__\":` block "
                         "that checks its claim against a plain PyTorch reference")


def test_every_cuda_example_has_a_gpu_harness():
    """skills/_gpu_check/harnesses.py (run on a GPU by run.sh) parses, and holds one harness per CUDA
    example and none for a skill that is gone: a rewritten example has its harness rewritten too."""
    import runpy
    harnesses = runpy.run_path(str(SKILLS / "_gpu_check" / "harnesses.py"), run_name="harnesses")["H"]
    assert set(harnesses) == set(CUDA)
    assert "run_steps(" in harnesses["cuda-graphs"] and "run_steps(" in EXAMPLES["cuda-graphs"]["example"]


# ---------------------------------------------------------------- the evaluator's guards

def candidate_views(sid: str) -> list[tuple[str, str]]:
    """The example as the evaluator's static check would meet it in a candidate: (label, source).

    Python and Triton examples as they are, less their ``if __name__ == "__main__":`` self-check
    (test code, which seeds the RNG and builds references); each class with a ``forward`` renamed
    ``ModelNew`` in turn, since the state checks read ModelNew's methods. CUDA and C++ examples as
    the source string a candidate hands to load_inline, where the native checks look."""
    data = EXAMPLES[sid]
    if data["example_lang"] not in ("python", "triton"):
        return [("native source", f"from torch.utils.cpp_extension import load_inline\n\nSRC = r'''\n"
                                  f"{data['example']}\n'''\n")]
    tree = ast.parse(data["example"])
    tree.body = [n for n in tree.body if not (isinstance(n, ast.If) and "__main__" in ast.unparse(n.test))]
    views = [("as written", ast.unparse(tree))]
    for cls in [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name != "ModelNew"]:
        if any(isinstance(f, ast.FunctionDef) and f.name == "forward" for f in cls.body):
            renamed, cls.name = cls.name, "ModelNew"
            views.append((f"{renamed} as ModelNew", ast.unparse(tree)))
            cls.name = renamed
    return views


def cheat_flags(source: str) -> list[str]:
    from kernelskill.evaluate.judge.static import check_source, is_cheat
    return [f for f in check_source(source) if is_cheat(f)]


@pytest.mark.parametrize("sid", sorted(EXAMPLES))
def test_example_passes_the_evaluators_static_guard(sid):
    """A skill's example is what an agent copies: it must not be what the evaluator fails as a cheat
    (state kept across calls, .data_ptr() in Python, caches, a second stream, ...). Parameters
    derived from the weights belong in __init__ (non-persistent buffers), never results."""
    for label, source in candidate_views(sid):
        assert not cheat_flags(source), f"{sid} ({label}): {cheat_flags(source)}"


# What avoid-host-sync-and-allocation showed before issue 44: a fold cached at the first call,
# keyed on the weights' addresses and versions.
_CACHE_KEYED_ON_WEIGHTS = '''
import torch
import torch.nn as nn


class Folded(nn.Module):
    def __init__(self, n: int, s: float):
        super().__init__()
        self.linear, self.s, self._folded, self._key = nn.Linear(n, n), s, None, None

    def _folded_params(self):
        w = self.linear.weight
        key = (w.data_ptr(), w._version)
        if self._key != key:
            self._folded = (w * self.s).t()
            self._key = key
        return self._folded

    def forward(self, x):
        return x @ self._folded_params()


if __name__ == "__main__":
    torch.manual_seed(0)
'''


def test_the_guard_test_catches_a_cache_filled_in_forward(monkeypatch):
    """The check above can fail: a weight cache filled in forward and keyed on data_ptr is flagged
    once its class is seen as ModelNew, and a native second stream is flagged too; the __main__
    self-check (which seeds the RNG) is not what is checked."""
    monkeypatch.setitem(EXAMPLES, "cached", {"example": _CACHE_KEYED_ON_WEIGHTS, "example_lang": "python"})
    views = dict(candidate_views("cached"))
    assert set(views) == {"as written", "Folded as ModelNew"} and "manual_seed" not in views["as written"]
    assert [f.split(":")[0] for f in cheat_flags(views["as written"])] == ["data-ptr"]   # anywhere
    flags = [f.split(":")[0] for f in cheat_flags(views["Folded as ModelNew"])]
    assert "stateful-forward" in flags and "data-ptr" in flags                  # state: ModelNew's methods
    monkeypatch.setitem(EXAMPLES, "side-stream", {"example_lang": "cuda", "example": (
        "#include <cuda_runtime.h>\nvoid go() { cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); }\n")})
    assert [f.split(":")[0] for f in cheat_flags(candidate_views("side-stream")[0][1])] == ["stream"]
