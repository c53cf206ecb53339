"""``kernelskill export``: a verified candidate as a package with AOT-built kernels as torch.library ops
(docs/export.md). The slow test builds the package in a fresh venv, runs its own tests, compares it
with the reference and runs it under torch.compile(fullgraph=True)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernelskill.cli import main
from kernelskill.export import ExportError, parse_params
from kernelskill.export.templates import infer_rule

ROOT = Path(__file__).resolve().parents[2]
GELU = ROOT / "examples" / "relu_gelu"
STORED_RUN = ROOT / "tests" / "tui" / "data" / "stored_runs" / "20250101-120000-relu_task-0001"


def _export(argv, capsys):
    rc = main(["export"] + argv)
    out, err = capsys.readouterr()
    return rc, out, err


# ---- the CLI's errors ----------------------------------------------------------------------------------
def test_bad_run_id(tmp_path, capsys):
    rc, _, err = _export(["no-such-run", "--runs-dir", str(tmp_path), "--to", str(tmp_path / "pkg")], capsys)
    assert rc == 2 and "no run 'no-such-run'" in err
    assert not (tmp_path / "pkg").exists()


def test_failed_node_and_reference_node_are_refused(tmp_path, capsys):
    runs = tmp_path / "runs"
    shutil.copytree(STORED_RUN, runs / STORED_RUN.name)
    rc, _, err = _export([f"{STORED_RUN.name}/n1", "--runs-dir", str(runs), "--to", str(tmp_path / "p")], capsys)
    assert rc == 2 and "n1 is not a verified candidate (status incorrect" in err
    rc, _, err = _export([f"{STORED_RUN.name}/n3", "--runs-dir", str(runs), "--to", str(tmp_path / "p")], capsys)
    assert rc == 2 and "status crashed" in err
    rc, _, err = _export([f"{STORED_RUN.name}/n0", "--runs-dir", str(runs), "--to", str(tmp_path / "p")], capsys)
    assert rc == 2 and "the reference itself" in err
    rc, _, err = _export([f"{STORED_RUN.name}/n9", "--runs-dir", str(runs), "--to", str(tmp_path / "p")], capsys)
    assert rc == 2 and "has no node 'n9' (nodes: n0, n1, n2, n3, n4)" in err


def test_candidate_file_needs_a_task_and_an_empty_dir(tmp_path, capsys):
    cand = str(GELU / "solutions" / "cpp_gelu_openmp.py")
    rc, _, err = _export([cand, "--to", str(tmp_path / "p")], capsys)
    assert rc == 2 and "--task is required" in err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    rc, _, err = _export([cand, "--task", str(GELU), "--to", str(tmp_path / "full")], capsys)
    assert rc == 2 and "not empty (pass --force" in err


def test_plain_pytorch_candidate_has_nothing_to_export(tmp_path, capsys):
    cand = tmp_path / "plain.py"
    cand.write_text("import torch.nn as nn\nimport torch.nn.functional as F\n\n\nclass ModelNew(nn.Module):\n"
                    "    def forward(self, x):\n        return F.gelu(x, approximate='tanh')\n")
    rc, _, err = _export([str(cand), "--task", str(GELU), "--to", str(tmp_path / "p")], capsys)
    assert rc == 2 and "no kernel to export" in err


def test_a_run_exports_its_best_with_the_runs_task(tmp_path, capsys, monkeypatch):
    """RUN: best.py, at the task and sizes the run verified it on; functions never called and of a type no
    schema carries (void) are left out, said in a note."""
    monkeypatch.chdir(ROOT)                     # run.toml names its task relative to a checkout
    runs = tmp_path / "runs"
    shutil.copytree(STORED_RUN, runs / STORED_RUN.name)
    rc, out, err = _export(["20250101", "--runs-dir", str(runs), "--to", str(tmp_path / "p"), "--json"], capsys)
    assert rc == 0, err
    res = json.loads(out.strip().splitlines()[-1])
    assert res["package"] == "ks_relu_task" and "ks_relu_task::relu2" in res["ops"]
    assert "ks_relu_task::segfault" not in res["ops"]
    assert any(n.startswith("segfault: not exported (never called") for n in res["notes"])
    meta = json.loads((tmp_path / "p" / "ks_relu_task" / "export.json").read_text())
    assert meta["provenance"]["run"] == STORED_RUN.name and meta["provenance"]["node"] == "n2"
    relu2 = next(o for o in meta["ops"] if o["op"] == "relu2")
    assert relu2["schema"] == "relu2(Tensor x) -> Tensor" and relu2["samples"]
    assert relu2["rule"]["outputs"][0]["dims"] == [["in", 0, 0], ["in", 0, 1]]
    cpp = (tmp_path / "p" / "ks_relu_task" / "csrc" / "_C_ks_test_toolkit.cpp").read_text()
    assert 'm.def("relu2(Tensor x) -> Tensor");' in cpp and "TORCH_LIBRARY_IMPL(ks_relu_task, CPU, m)" in cpp


@pytest.mark.slow
def test_a_cuda_candidate_is_compile_checked_without_a_gpu(tmp_path, capsys):
    import torch
    if torch.cuda.is_available() or not shutil.which("nvcc"):
        pytest.skip("the compile-only path: a machine with nvcc and no GPU")
    rc, out, err = _export([str(GELU / "solutions" / "cuda_gelu_vec4.py"), "--task", str(GELU), "--to",
                            str(tmp_path / "p"), "--json"], capsys)
    assert rc == 0, err
    res = json.loads(out.strip().splitlines()[-1])
    assert res["backend"] == "cuda" and not res["recorded"] and "compile-only check" in res["notes"][0]
    pkg = tmp_path / "p" / "ks_relu_gelu"
    assert "CUDAExtension" in (tmp_path / "p" / "setup.py").read_text()
    assert "__global__" in (pkg / "csrc" / "_C_relu_gelu_cuda_vec4_cuda.cu").read_text()
    assert "TORCH_LIBRARY_IMPL(ks_relu_gelu, CUDA, m)" in (pkg / "csrc" / "_C_relu_gelu_cuda_vec4.cpp").read_text()


# ---- schemas and fake shapes ----------------------------------------------------------------------------
def test_schema_from_the_cpp_signature():
    ps = parse_params("f", "const torch::Tensor& x, at::Tensor w, int64_t n, int k = 3, double eps, float a, bool flag")
    assert [(p.name, p.schema) for p in ps] == [("x", "Tensor"), ("w", "Tensor"), ("n", "int"), ("k", "int"),
                                               ("eps", "float"), ("a", "float"), ("flag", "bool")]
    with pytest.raises(ExportError, match=r"function 'g': parameter `std::vector<int64_t> sizes`"):
        parse_params("g", "torch::Tensor x, std::vector<int64_t> sizes")
    with pytest.raises(ExportError, match="function 'h': parameter `float\\* p`"):
        parse_params("h", "float* p")


class _Op:
    def __init__(self, samples):
        self.function, self.samples = "f", samples


def _t(shape, dtype="float32"):
    return {"shape": shape, "dtype": dtype, "device": "cpu"}


def test_fake_rule_follows_input_dims_and_guards_constants():
    # A matmul (M, K) x (K, N) -> (M, N), two recorded calls: each output dim is an input's dim.
    mm = infer_rule(_Op([{"args": [_t([4, 8]), _t([8, 16])], "out": _t([4, 16])},
                         {"args": [_t([3, 5]), _t([5, 7])], "out": _t([3, 7])}]))
    assert mm["outputs"] == [{"dims": [["in", 0, 0], ["in", 1, 1]], "dtype": ["in", 0]}] and mm["guard"] is None
    assert mm["ranks"] == [[2, 2]]            # the fake refuses arguments of other ranks
    # A row reduction keeping its dim (B, N) -> (B, 1): 1 is a constant needing no guard.
    red = infer_rule(_Op([{"args": [_t([64, 4096])], "out": _t([64, 1])}]))
    assert red["outputs"][0]["dims"] == [["in", 0, 0], ["const", 1]] and red["guard"] is None
    # A conv (N, C, 32, 32) -> (N, 8, 30, 30): 8 and 30 are no input's dims: constants, guarded.
    conv = infer_rule(_Op([{"args": [_t([2, 3, 32, 32]), _t([8, 3, 3, 3]), {"value": 1}],
                            "out": _t([2, 8, 30, 30], "float32")}]))
    assert conv["outputs"][0]["dims"] == [["in", 0, 0], ["in", 1, 0], ["const", 30], ["const", 30]]
    assert conv["guard"] == [[[2, 3, 32, 32], [8, 3, 3, 3], None]]
    # An argmax's int64 output: its dtype is recorded as a constant.
    am = infer_rule(_Op([{"args": [_t([16, 128])], "out": _t([16], "int64")}]))
    assert am["outputs"][0]["dtype"] == ["const", "int64"]
    assert infer_rule(_Op([]))["outputs"] is None


def test_fake_rule_ambiguity_and_tables():
    # A layernorm: out (B, H) from x (B, H), weight (H). At one shape H matches x's dim 1 and weight's
    # dim 0 (and B might too): a guess, so guarded; with H moved between calls they move together: no guard.
    one = [{"args": [_t([8, 16]), _t([16])], "out": _t([8, 16])}]
    assert infer_rule(_Op(one))["guard"] == [[[8, 16], [16]]]
    moved = one + [{"args": [_t([8, 32]), _t([32])], "out": _t([8, 32])},
                   {"args": [_t([4, 16]), _t([16])], "out": _t([4, 16])}]
    rule = infer_rule(_Op(moved))
    assert rule["outputs"][0]["dims"] == [["in", 0, 0], ["in", 0, 1]] and rule["guard"] is None
    # A pool: the output height is a function of the shapes no rule here expresses: a table, guarded.
    pool = infer_rule(_Op([{"args": [_t([2, 4, 64, 64]), {"value": 2}], "out": _t([2, 4, 32, 32])},
                           {"args": [_t([2, 4, 32, 64]), {"value": 2}], "out": _t([2, 4, 16, 32])}]))
    assert pool["outputs"][0]["dims"][2] == ["table", [[[[2, 4, 64, 64], None], 32], [[[2, 4, 32, 64], None], 16]]]
    assert pool["guard"] == [[[2, 4, 64, 64], None], [[2, 4, 32, 64], None]]


def test_model_rewrite_calls_the_ops_and_drops_the_jit(tmp_path):
    from kernelskill.export import Extension, rewrite_model
    src = textwrap.dedent('''\
        """doc"""
        from __future__ import annotations
        import torch.nn as nn
        from torch.utils.cpp_extension import load_inline

        SRC = "torch::Tensor f(torch::Tensor x) { return x * 2; }"
        ext = load_inline(name="my_ext", cpp_sources=SRC, functions=["f"])


        class ModelNew(nn.Module):
            def forward(self, x):
                return ext.f(x)
        ''')
    e = Extension(name="my_ext", module="_C_my_ext", cpp=[], cuda=[], functions=["f"], cflags=[], cuda_cflags=[],
                  ldflags=[], include_paths=[])
    out = rewrite_model(src, [e], "ks_demo")
    assert "ext = _ks_extension('_C_my_ext')" in out and "load_inline" not in out.split("# (load_inline")[0]
    assert "SRC = " not in out and "# SRC: the kernel source, exported to ks_demo/csrc/_C_my_ext*" in out
    lines = out.splitlines()
    assert lines[1] == "from __future__ import annotations"
    assert lines[2].startswith("from ks_demo._ops import extension as _ks_extension")


# ---- the whole way: export, build in a fresh venv, test, compile ----------------------------------------
def _fresh_venv(where: Path) -> Path:
    """A venv that sees this interpreter's torch (benchmarks/export_cost.py's, which times the same way)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from export_cost import fresh_venv
    return fresh_venv(where)


@pytest.mark.slow
def test_export_build_and_run_the_package(tmp_path, capsys):
    pkg_dir = tmp_path / "gelu_pkg"
    rc, out, err = _export([str(GELU / "solutions" / "cpp_gelu_openmp.py"), "--task", str(GELU), "--preset", "small",
                            "--to", str(pkg_dir), "--json"], capsys)
    assert rc == 0, err
    res = json.loads(out.strip().splitlines()[-1])
    assert res["ops"] == ["ks_relu_gelu::gelu_tanh_forward"] and res["recorded"]
    assert "batch_size=32 (half), dim=2048 (half)" in res["notes"][0]       # the derived shapes recorded
    src = pkg_dir / "ks_relu_gelu"
    assert "gelu_tanh_forward" in (src / "csrc" / "_C_relu_gelu_cpp_openmp.cpp").read_text()
    assert "load_inline(" not in (src / "model.py").read_text()
    assert "CppExtension" in (pkg_dir / "setup.py").read_text()

    py = _fresh_venv(tmp_path / "venv")
    env = dict(os.environ, PYTHONPATH="")
    build = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps", str(pkg_dir)],
                           capture_output=True, text=True, env=env, cwd=tmp_path)
    assert build.returncode == 0, build.stdout + build.stderr
    # Its own tests: ops registered from the built .so, matches the reference, fullgraph compile, opcheck.
    t = subprocess.run([str(py), "-m", "pytest", "-q", "-p", "no:cacheprovider", "--pyargs", "ks_relu_gelu"],
                       capture_output=True, text=True, env=env, cwd=tmp_path)
    assert t.returncode == 0 and "4 passed" in t.stdout, t.stdout + t.stderr
    check = textwrap.dedent('''\
        import sys, warnings
        import torch, torch.nn.functional as F
        import torch.utils.cpp_extension as ce
        ce.load_inline = lambda *a, **k: sys.exit("JIT at import")
        import ks_relu_gelu as pkg
        assert "site-packages" in pkg.__file__
        torch.manual_seed(0)
        x = torch.randn(64, 4096)
        m = pkg.ModelNew()
        assert torch.allclose(m(x), F.gelu(x, approximate="tanh"), atol=1e-4, rtol=1e-4)
        # torch.compile(fullgraph=True) raises on any graph break; explain counts none.
        c = torch.compile(m, fullgraph=True, backend="aot_eager")
        assert torch.allclose(c(x), m(x))
        assert torch._dynamo.explain(m)(x).graph_break_count == 0
        # A refused input (float64: TORCH_CHECK) falls back to the reference, warning once.
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            y = m(x.double())
        assert y.dtype == torch.float64 and torch.allclose(y, F.gelu(x.double(), approximate="tanh"))
        assert "refused these inputs (x must be float32)" in str(w[0].message)
        print("ok")
        ''')
    r = subprocess.run([str(py), "-c", check], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr


def test_the_generated_fake_follows_its_rule():
    """The package's _ops.py fake, run on plain tensors: dims from the arguments, a table, the guards."""
    import torch

    from kernelskill.export.templates import OPS
    code = OPS.format(ns="ks_t", modules="x", ext_map={}, skipped={}, rules="{}")
    code = code.replace("from . import x  # noqa: F401  (importing a built extension registers its ops)", "")
    env: dict = {}
    exec(compile(code, "_ops.py", "exec"), env)
    fake = env["_fake"]
    rule = infer_rule(_Op([{"args": [_t([2, 4, 64, 64]), {"value": 2}], "out": _t([2, 4, 32, 64])},
                           {"args": [_t([3, 4, 32, 64]), {"value": 2}], "out": _t([3, 4, 16, 64])}]))
    f = fake("pool", rule)
    assert f(torch.empty(3, 4, 32, 64), 2).shape == (3, 4, 16, 64)
    with pytest.raises(NotImplementedError, match="recorded argument shapes"):
        f(torch.empty(3, 4, 48, 64), 2)
    with pytest.raises(NotImplementedError, match="ranks \\[3, None\\] were never recorded"):
        f(torch.empty(3, 4, 48), 2)
    g = fake("ew", infer_rule(_Op([{"args": [_t([8, 16])], "out": _t([8, 16])},
                                   {"args": [_t([4, 16])], "out": _t([4, 16])},
                                   {"args": [_t([8, 32])], "out": _t([8, 32])}])))
    assert g(torch.empty(5, 7, dtype=torch.float64)).shape == (5, 7)
    assert g(torch.empty(5, 7, dtype=torch.float64)).dtype == torch.float64
    with pytest.raises(NotImplementedError, match="no output shapes were recorded"):
        fake("never", infer_rule(_Op([])))(torch.empty(2))


class _NoCalls:
    calls: dict = {}


TUPLE_SRC = """
#include <tuple>
#include <vector>
std::tuple<torch::Tensor, torch::Tensor> split2(torch::Tensor x, int k, float s, bool flag) {
    return {x * s, flag ? x + k : x - k};
}
std::vector<torch::Tensor> many(const torch::Tensor& x, int64_t n) { return std::vector<torch::Tensor>(n, x); }
"""


def _tuple_extension():
    from kernelskill.export import _extensions
    kwargs = {"functions": ["split2", "many"], "extra_cflags": ["-O2"]}
    return _extensions([(("tuple_ext", TUPLE_SRC, None), kwargs, _NoCalls())])[0]


def test_registration_casts_scalars_and_returns_tuples_and_lists():
    from kernelskill.export.templates import _cpp_registration
    ext = _tuple_extension()
    assert [o.schema for o in ext.ops] == ["split2(Tensor x, int k, float s, bool flag) -> (Tensor, Tensor)",
                                           "many(Tensor x, int n) -> Tensor[]"]
    cpp = _cpp_registration(ext, "ks_t", "CPU")
    assert "std::tuple<at::Tensor, at::Tensor> out = split2(t0, static_cast<int>(a1), static_cast<float>(a2), " \
           "static_cast<bool>(a3));" in cpp
    assert "static std::vector<at::Tensor> ks_op_many(const at::Tensor& a0, int64_t a1)" in cpp
    assert 'm.impl("split2", TORCH_FN(ks_op_split2));' in cpp and "TORCH_LIBRARY_IMPL(ks_t, CPU, m)" in cpp


@pytest.mark.slow
def test_the_registration_unit_compiles(tmp_path):
    from kernelskill.export import syntax_check
    from kernelskill.export.templates import CPP_PRELUDE, _cpp_registration
    ext = _tuple_extension()
    unit = tmp_path / "unit.cpp"
    unit.write_text(CPP_PRELUDE + TUPLE_SRC + _cpp_registration(ext, "ks_t", "CPU"))
    syntax_check(unit, ext.cflags)            # raises ExportError with the first error line
