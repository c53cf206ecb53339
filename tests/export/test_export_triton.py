"""``kernelskill export`` of a Triton candidate (kernelskill/export/triton.py, docs/export.md): its
launches wrapped for torch.compile, its launchers as torch.library.triton_op ops.

Without triton (CI) the tests here run the rewrite on every shipped Triton solution, the schema from
recorded calls, and the generated ``_ops.py`` for real: a package rendered around a launcher written in
plain torch (which triton_op traces like a Triton one) is imported, called, compiled with
fullgraph=True and opchecked. The whole way with real Triton kernels is the GPU test at the end."""
from __future__ import annotations

import ast
import importlib
import inspect
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from kernelskill.cli import main
from kernelskill.export import ExportError
from kernelskill.export.calls import return_schema
from kernelskill.export import triton as tr
from kernelskill.export.templates import render_triton_package
from kernelskill.task import Task

ROOT = Path(__file__).resolve().parents[2]
GELU = ROOT / "examples" / "relu_gelu"
SOLUTIONS = sorted(ROOT.glob("examples/*/solutions/triton_*.py"))
# What each shipped Triton solution launches from: module-level launchers, or ModelNew's methods.
LAUNCHERS = {"gemm_bias_relu": ["linear_bias_relu"], "add_layernorm": ["add_layernorm"], "mlp": ["gemm_bias_act"],
             "gemm_gelu_scale": ["gemm_bias_act"], "softmax_rows": [], "relu_gelu": [], "rmsnorm": []}


def _raw_launch_sites(source: str) -> int:
    tree = ast.parse(source)
    return len(tr._launches(tree, tr.kernel_names(tree, source)))


# ---- the rewrite, on every shipped Triton solution --------------------------------------------------------
@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: f"{p.parents[1].name}/{p.stem}")
def test_every_launch_is_wrapped_and_the_launchers_are_found(path):
    source = path.read_text()
    sites = _raw_launch_sites(source)
    assert sites >= 1
    out, kernels, launchers, in_methods = tr.wrap_launches(source)
    assert kernels and all(k.startswith("_") for k in kernels)
    # every launch site now goes through wrap_triton, none is left raw, and the module still parses
    assert _raw_launch_sites(out) == 0
    assert out.count("_ks_wrap_triton(") == sites + 1            # the launches, and its definition
    for k in kernels:
        assert f"_ks_wrap_triton({k})[" in out or k not in {n.id for n in ast.walk(ast.parse(source))
                                                               if isinstance(n, ast.Name)}
    tree = ast.parse(out)
    imp = [s for s in tree.body if isinstance(s, ast.ImportFrom) and s.module == "torch.library"]
    assert len(imp) == 1 and imp[0].names[0].name == "wrap_triton"
    assert isinstance(tree.body[0], ast.Expr)                    # the docstring stays first
    assert out.count(tr.WRAP_IMPORTS) == 1 and out.count(tr.WRAP_DEF) == 1
    # the function follows the module's opening imports: nothing but imports (and the docstring) before it
    at = next(i for i, st in enumerate(tree.body) if isinstance(st, ast.FunctionDef) and st.name == "_ks_wrap_triton")
    assert at >= 2 and all(isinstance(st, (ast.Import, ast.ImportFrom)) for st in tree.body[1:at])
    assert not isinstance(tree.body[at + 1], (ast.Import, ast.ImportFrom))
    assert launchers == LAUNCHERS[path.parents[1].name]
    assert in_methods == ([] if launchers else ["ModelNew.forward"])
    # the rest of the source is untouched: undo the rewrite and get the original back
    undone = out.replace(tr.WRAP_IMPORTS, "", 1).replace(tr.WRAP_DEF, "", 1)
    for k in kernels:
        undone = undone.replace(f"_ks_wrap_triton({k})[", f"{k}[")
    assert undone == source


def test_a_launch_is_wrapped_unless_the_packages_eager_forward_turned_wrapping_off():
    """The inserted _ks_wrap_triton: torch's wrap_triton (what tracing needs) by default and while
    compiling; the kernel itself inside set_wrap_triton_enabled(False), the package's eager forward."""
    from torch._library.triton import set_wrap_triton_enabled
    ns: dict = {}
    exec(tr.WRAP_IMPORTS + tr.WRAP_DEF, ns)
    wrapped = []
    ns["_ks_torch_wrap_triton"] = lambda k: wrapped.append(k) or ("wrapped", k)
    kernel = object()
    assert ns["_ks_wrap_triton"](kernel) == ("wrapped", kernel)
    with set_wrap_triton_enabled(False):
        assert ns["_ks_wrap_triton"](kernel) is kernel
        ns["_ks_compiling"] = lambda: True                       # under torch.compile: always wrapped
        assert ns["_ks_wrap_triton"](kernel) == ("wrapped", kernel)
    assert wrapped == [kernel, kernel]


def test_a_candidate_without_kernels_or_that_does_not_parse_is_refused():
    with pytest.raises(ExportError, match="no @triton.jit kernel"):
        tr.wrap_launches("import torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n")
    with pytest.raises(ExportError, match="line 1"):
        tr.wrap_launches("def broken(:\n")


# ---- the op's schema, from the calls recorded at export ----------------------------------------------------
def _t(shape):
    return {"shape": shape, "dtype": "float32", "device": "cpu"}


def test_schema_from_recorded_calls_and_defaults():
    def launcher(x, w, bias, act, scale=1.0, eps=1e-5, relu=True, out_dtype=None):
        pass
    none = {"value": None}                      # what the recorder writes for None
    calls = [{"args": [_t([4, 8]), _t([8, 16]), _t([16]), {"value": 1}, {"value": 2}, {"value": 1e-5},
                       {"value": True}, none], "out": _t([4, 16])},
             {"args": [_t([2, 8]), _t([8, 16]), none, {"value": 0}, {"value": 0.5}, {"value": 1e-6},
                       {"value": False}, none], "out": _t([2, 16])}]
    params, returns = tr.launcher_schema("launcher", inspect.signature(launcher), calls)
    # a tensor or None: optional; ints and floats: float; the launcher's defaults kept where they fit
    assert tr.schema_text(params, returns) == ("(Tensor x, Tensor w, Tensor? bias, int act, float scale=1.0, "
                                               "float eps=1e-05, bool relu=True, Tensor? out_dtype=None) -> Tensor")
    src = tr.typed_wrapper("launcher", params, returns)
    assert src.startswith("def launcher(x: torch.Tensor, w: torch.Tensor, bias: Optional[torch.Tensor], act: int, "
                          "scale: float = 1.0, eps: float = 1e-05, relu: bool = True, "
                          "out_dtype: Optional[torch.Tensor] = None) -> torch.Tensor:")
    assert "return LAUNCHERS['launcher'](x, w, bias, act, scale, eps, relu, out_dtype)" in src


def test_the_recorder_binds_keywords_applies_defaults_and_sees_what_a_launcher_writes():
    """Recorded as the launcher's parameters (a keyword call records like a positional one, defaults
    filled in), with the output described and the tensor arguments it wrote into named."""
    import types
    mod = types.SimpleNamespace()

    def scaled(x, out, scale=2.0):
        out.copy_(x * scale)
        return out

    def pure(x, *, shift=1):
        return x + shift
    mod.scaled, mod.pure = scaled, pure
    rec = tr.LauncherRecorder(mod, ["scaled", "pure"])
    x, out = torch.ones(3, 4), torch.zeros(3, 4)
    assert torch.equal(mod.scaled(x, out=out), torch.full((3, 4), 2.0))
    mod.pure(x[:2], shift=3)
    (s,), (p,) = rec.calls["scaled"], rec.calls["pure"]
    assert s["args"] == [_t([3, 4]), _t([3, 4]), {"value": 2.0}] and s["mutated"] == [1]
    assert s["out"] == {**_t([3, 4]), "contiguous": True}
    assert p["args"] == [_t([2, 4]), {"value": 3}] and p["mutated"] == [] and p["out"]["shape"] == [2, 4]


def test_a_keyword_only_parameter_stays_keyword_only():
    def launcher(x, *, eps=1e-6):
        pass
    calls = [{"args": [_t([4]), {"value": 1e-5}], "out": _t([4])}]
    params, returns = tr.launcher_schema("launcher", inspect.signature(launcher), calls)
    assert tr.schema_text(params, returns) == "(Tensor x, *, float eps=1e-06) -> Tensor"
    src = tr.typed_wrapper("launcher", params, returns)
    assert src.startswith("def launcher(x: torch.Tensor, *, eps: float = 1e-06) -> torch.Tensor:")
    assert "LAUNCHERS['launcher'](x, eps=eps)" in src
    ns = {"torch": torch, "LAUNCHERS": {"launcher": lambda x, *, eps: x * eps}}
    exec(src, ns)
    assert torch.equal(ns["launcher"](torch.ones(2), eps=2.0), torch.full((2,), 2.0))


def test_schema_refusals_name_the_launcher_and_the_parameter():
    def f(x, mode):
        pass
    with pytest.raises(ExportError, match=r"launcher 'f': parameter `mode` was passed 'fast'"):
        tr.launcher_schema("f", inspect.signature(f), [{"args": [_t([2]), {"value": "'fast'"}], "out": _t([2])}])
    with pytest.raises(ExportError, match=r"parameter `mode` was passed \['Tensor', 'bool'\]"):
        tr.launcher_schema("f", inspect.signature(f), [{"args": [_t([2]), {"value": True}], "out": _t([2])},
                                                       {"args": [_t([2]), _t([2])], "out": _t([2])}])

    def g(*xs):
        pass
    with pytest.raises(ExportError, match=r"takes \*xs"):
        tr.launcher_schema("g", inspect.signature(g), [{"args": [_t([2])], "out": _t([2])}])
    with pytest.raises(ExportError, match="returned 3, not tensors"):
        return_schema("h", [{"out": {"value": "3"}}])
    assert return_schema("h", [{"out": {"kind": "tuple", "items": [_t([1]), _t([2])]}}]) == "(Tensor, Tensor)"
    assert return_schema("h", [{"out": {"kind": "list", "items": [_t([1])]}}]) == "Tensor[]"


# ---- the generated package's ops, for real (a launcher triton_op traces, in plain torch) --------------------
MODEL = '''"""GELU (tanh) through a launcher, as a Triton solution is laid out."""
import torch
import torch.nn as nn


def gelu_launch(x, approximate_tanh=True, scale=1.0):
    y = torch.empty_like(x)
    y.copy_(torch.nn.functional.gelu(x, approximate="tanh" if approximate_tanh else "none") * scale)
    return y


class ModelNew(nn.Module):
    def forward(self, x):
        return gelu_launch(x.contiguous(), True, scale=1.0)
'''


def _launcher_package(tmp_path, pkg: str, task, model_source: str, function: str, signature, calls) -> dict:
    """The Triton package of ``model_source`` with its one launcher ``function`` as an op, as export
    writes it (from the recorded ``calls``), written under ``tmp_path``: its files."""
    params, returns = tr.launcher_schema(function, signature, calls)
    ops = [{"function": function, "op": function, "schema": function + tr.schema_text(params, returns),
            "wrapper": tr.typed_wrapper(function, params, returns), "samples": calls}]
    files = render_triton_package(pkg=pkg, ops=ops, device="cpu", model_source=model_source, task=task,
                                  provenance={"candidate": "test", "exported": "now"})
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return files


def _op_calls(pkg: str, fn) -> int:
    """How many times ``fn`` called an op of namespace ``pkg`` through the dispatcher (the profiler
    records every dispatched op, custom ones too)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn()
    return sum(1 for e in prof.events() if e.name.startswith(f"{pkg}::"))


def test_the_generated_ops_register_trace_and_pass_opcheck(tmp_path, monkeypatch):
    task = Task.load(GELU, preset="small")
    calls = [{"args": [_t([4, 64]), {"value": True}, {"value": 1.0}], "out": _t([4, 64]), "mutated": []}]
    pkg = "ks_triton_layout_check"
    files = _launcher_package(tmp_path, pkg, task, MODEL, "gelu_launch",
                              inspect.signature(lambda x, approximate_tanh=True, scale=1.0: None), calls)
    assert "install_requires=[\"torch\", \"triton\"]" in files["setup.py"] and "ext_modules" not in files["setup.py"]
    meta = json.loads(files[f"{pkg}/export.json"])
    assert meta["backend"] == "triton" and meta["ops"][0]["schema"] == (
        "gelu_launch(Tensor x, bool approximate_tanh=True, float scale=1.0) -> Tensor")
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = __import__(pkg)
    op = getattr(torch.ops, pkg).gelu_launch
    assert mod.model.gelu_launch.op is op                  # ModelNew's calls reach the op ...
    assert mod._ops.LAUNCHERS["gelu_launch"].__module__ == f"{pkg}.model"
    x = torch.randn(8, 64)
    expected = torch.nn.functional.gelu(x, approximate="tanh")
    m = mod.ModelNew()
    assert torch.allclose(m(x), expected)
    # ... wherever something traces; in plain eager mode the launcher runs without the op's dispatch
    # (tens of microseconds a call: the exported package once ran at 0.46-0.83x of its solution)
    assert _op_calls(pkg, lambda: m(x)) == 0
    assert _op_calls(pkg, lambda: mod.model.gelu_launch(x)) == 1          # outside ModelNew: the op
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode() as fake:                                        # fake tensors: the op (its fake)
        out = m(fake.from_tensor(x))
    assert out.shape == x.shape and type(out).__name__ == "FakeTensor"
    assert mod._ops._tracing((out,), {}) and not mod._ops._tracing((x,), {"w": torch.nn.Parameter(x)})
    from torch.fx.experimental.proxy_tensor import make_fx
    graph = make_fx(m)(x).code
    assert f"{pkg}.gelu_launch" in graph, graph                           # make_fx: the op, in the graph
    assert torch.allclose(op(x), expected) and torch.allclose(op(x, False, scale=2.0), 2 * torch.nn.functional.gelu(x))
    torch._dynamo.reset()
    explain = torch._dynamo.explain(m)(x)
    assert explain.graph_break_count == 0, explain.break_reasons
    assert torch.allclose(torch.compile(m, fullgraph=True, backend="aot_eager")(x), expected)
    torch.library.opcheck(op.default, (x, True, 1.0))
    # the fallback: a refused input runs the reference with a warning; the package's tests turn it off
    with pytest.warns(RuntimeWarning, match="running the reference Model"):
        monkeypatch.setattr(mod.model, "gelu_launch", lambda *a, **k: (_ for _ in ()).throw(ValueError("no")))
        assert torch.allclose(m(x), expected)
    assert "pkg.FALLBACK = False" in files[f"{pkg}/test_exported.py"]


AFFINE = '''"""x * scale (+ bias) through a launcher with an optional tensor, as gemm_gelu_scale's solution."""
import torch
import torch.nn as nn


def affine_launch(x, bias, scale=1.0):
    y = torch.empty_like(x)
    y.copy_(x * scale if bias is None else x * scale + bias)
    return y


class ModelNew(nn.Module):
    def forward(self, x):
        return affine_launch(x.contiguous(), None, 0.5)
'''


def test_a_recorded_none_reaches_the_packages_opcheck_as_none(tmp_path, monkeypatch):
    """A launcher called with None for an optional tensor (the shipped gemm_gelu_scale's bias): the
    recorder writes the call, the schema says Tensor?, and the package's own opcheck test, built from
    that record as export.json stores it, passes None to the op (it once passed the text 'None', and
    the exported gemm_gelu_scale failed its opcheck on the H100)."""
    import types
    ns: dict = {}
    exec(AFFINE, ns)
    mod = types.SimpleNamespace(affine_launch=ns["affine_launch"])
    rec = tr.LauncherRecorder(mod, ["affine_launch"])
    mod.affine_launch(torch.randn(4, 8), None, 0.5)
    calls = json.loads(json.dumps(rec.calls["affine_launch"]))          # through JSON, as export.json
    assert calls[0]["args"][1] == {"value": None}
    pkg = "ks_triton_optional_check"
    files = _launcher_package(tmp_path, pkg, Task.load(GELU, preset="small"), AFFINE, "affine_launch",
                              inspect.signature(ns["affine_launch"]), calls)
    assert json.loads(files[f"{pkg}/export.json"])["ops"][0]["schema"] == (
        "affine_launch(Tensor x, Tensor? bias, float scale=1.0) -> Tensor")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("TRITON_INTERPRET", "1")           # the package's tests refuse a CPU export without it
    __import__(pkg)
    tests = importlib.import_module(f"{pkg}.test_exported")
    args = tests.sample_args(tests.META["ops"][0]["samples"][0])
    assert args[0].shape == (4, 8) and args[1] is None and args[2] == 0.5
    torch.library.opcheck(getattr(torch.ops, pkg).affine_launch.default, args)


LINEAR = '''"""Linear + ReLU through a launcher that counts its calls (is the kernel running?)."""
import torch
import torch.nn as nn

CALLS = []


def linear_relu_launch(x, w, b):
    CALLS.append(x.shape[0])
    y = torch.empty(x.shape[0], w.shape[0], dtype=x.dtype, device=x.device)
    y.copy_(torch.relu(x @ w.t() + b))
    return y


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return linear_relu_launch(x.contiguous(), self.linear.weight, self.linear.bias)
'''


def test_with_autograd_on_the_reference_runs_on_the_packages_own_parameters(tmp_path, monkeypatch):
    """The kernels have no backward. Where autograd records a call, the reference Model runs on
    ModelNew's own parameters: gradients reach them, eager and under torch.compile(fullgraph=True),
    and a weight changed later is the one computed with. Under no_grad the kernel runs."""
    task = Task.load(ROOT / "examples" / "gemm_bias_relu", preset="small")
    calls = [{"args": [_t([96, 320]), _t([200, 320]), _t([200])], "out": _t([96, 200]), "mutated": []}]
    pkg = "ks_triton_autograd_check"
    _launcher_package(tmp_path, pkg, task, LINEAR, "linear_relu_launch", inspect.signature(lambda x, w, b: None), calls)
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = __import__(pkg)
    kernel_calls = mod.model.CALLS
    torch.manual_seed(0)
    m = mod.ModelNew(320, 200)
    assert m._ks_reference is not None and m._ks_reference.linear.weight.is_meta    # no second copy of the weights
    ref = mod.Model(320, 200)
    ref.load_state_dict(m.state_dict())
    x = torch.randn(96, 320)

    with torch.no_grad():                                   # inference: the kernel
        assert torch.allclose(m(x), ref(x), atol=1e-5) and len(kernel_calls) == 1
    with pytest.warns(RuntimeWarning, match="kernels have no backward"):
        y = m(x)                                            # autograd on: the reference, on m's parameters
    assert len(kernel_calls) == 1 and torch.allclose(y, ref(x), atol=1e-5)
    y.sum().backward()
    ref(x).sum().backward()
    assert torch.allclose(m.linear.weight.grad, ref.linear.weight.grad, atol=1e-5)
    assert torch.allclose(m.linear.bias.grad, ref.linear.bias.grad, atol=1e-5)

    with torch.no_grad():                                   # a step: the next call computes with the new weights
        m.linear.weight.add_(0.5)
        ref.linear.weight.add_(0.5)
    m.zero_grad()
    ref.zero_grad()
    torch._dynamo.reset()
    c = torch.compile(m, fullgraph=True, backend="aot_eager")
    yc = c(x)
    assert torch.allclose(yc, ref(x), atol=1e-5) and len(kernel_calls) == 1
    yc.sum().backward()
    ref(x).sum().backward()
    assert torch.allclose(m.linear.weight.grad, ref.linear.weight.grad, atol=1e-5)
    with torch.no_grad():                                   # compiled inference traces the kernel
        assert torch.allclose(c(x), ref(x), atol=1e-5)
        assert torch._dynamo.explain(m)(x).graph_break_count == 0

    # A refused input also computes with the current weights (never a copy made at the first fallback).
    monkeypatch.setattr(mod.model, "linear_relu_launch", lambda *a: (_ for _ in ()).throw(ValueError("refused")))
    with torch.no_grad(), pytest.warns(RuntimeWarning, match="refused these inputs"):
        assert torch.allclose(m(x), ref(x), atol=1e-5)
    with torch.no_grad():
        m.linear.bias.add_(1.0)
        ref.linear.bias.add_(1.0)
        with pytest.warns(RuntimeWarning, match="refused these inputs"):
            assert torch.allclose(m(x), ref(x), atol=1e-5)
    monkeypatch.setattr(mod, "FALLBACK", False)
    with pytest.raises(RuntimeError, match="forward-only"):
        m(x)


def test_export_says_where_a_triton_candidate_can_run(tmp_path, capsys, monkeypatch):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the export goes ahead (the GPU test below)")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    rc = main(["export", str(GELU / "solutions" / "triton_gelu.py"), "--task", str(GELU), "--to", str(tmp_path / "p")])
    err = capsys.readouterr().err
    assert rc == 2 and "a Triton candidate runs on a GPU" in err and "TRITON_INTERPRET=1" in err
    assert not (tmp_path / "p").exists()


# ---- the whole way with real Triton kernels ----------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("example,solution,ops", [
    ("gemm_bias_relu", "triton_fused_epilogue", ["linear_bias_relu"]),
    ("softmax_rows", "triton_softmax", []),
])
def test_export_a_triton_solution_and_run_its_package_tests(tmp_path, example, solution, ops):
    """Export on the GPU; the package's own tests (ops registered, matches the reference with the
    fallback off, torch.compile(fullgraph=True) with no graph break, opcheck per op) in a child that
    imports it from the written directory."""
    pytest.importorskip("triton")
    out = tmp_path / "pkg"
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    r = subprocess.run([sys.executable, "-m", "kernelskill", "export", str(ROOT / "examples" / example / "solutions" /
                                                                             f"{solution}.py"),
                        "--task", str(ROOT / "examples" / example), "--preset", "small", "--to", str(out), "--json"],
                       capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    pkg = res["package"]
    assert res["backend"] == "triton" and res["ops"] == [f"{pkg}::{o}" for o in ops]
    env = dict(os.environ, PYTHONPATH=f"{out}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    t = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                        str(out / pkg / "test_exported.py")], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert t.returncode == 0 and f"{3 + len(ops)} passed" in t.stdout, t.stdout[-3000:] + t.stderr[-3000:]
    check = textwrap.dedent(f'''\
        import torch, {pkg} as pkg
        torch.manual_seed(0)
        init = pkg.get_init_inputs()
        m = pkg.ModelNew(*init).cuda()
        x = [a.cuda() if isinstance(a, torch.Tensor) else a for a in pkg.get_inputs()]
        # eager: every launch straight to Triton, no op dispatch, no wrap_triton higher-order op (each
        # costs tens of microseconds or more a call: the package once ran at 0.46x its solution)
        from torch._higher_order_ops.triton_kernel_wrap import TraceableTritonKernelWrapper as W
        hops, call = [], W.__call__
        W.__call__ = lambda self, *a, **k: hops.append(1) or call(self, *a, **k)
        with torch.no_grad(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            m(*x)
        W.__call__ = call
        assert not hops and not [e.name for e in prof.events() if e.name.startswith("{pkg}::")]
        with torch.no_grad():                          # inference: inductor (the user's default) traces the kernels
            assert torch.allclose(torch.compile(m, fullgraph=True)(*x), m(*x), atol=1e-4, rtol=1e-4)
        torch._dynamo.reset()
        y = torch.compile(m, fullgraph=True)(*x)       # autograd on: the reference, on m's own parameters
        assert torch.allclose(y, m(*x), atol=1e-4, rtol=1e-4)
        if y.requires_grad:
            y.sum().backward()
            assert all(p.grad is not None for p in m.parameters())
        print("ok")
        ''')
    r = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout[-2000:] + r.stderr[-3000:]
