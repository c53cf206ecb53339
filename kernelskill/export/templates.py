"""The files of an exported package (kernelskill/export/__init__.py says what each is for)."""
from __future__ import annotations

import json

from .errors import ExportError

CPP_PRELUDE = "#include <torch/extension.h>\n"
CUDA_PRELUDE = "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n"


def infer_rule(op) -> dict:
    """The fake implementation's rule for ``op`` from its recorded calls (``op.samples``).

    ``outputs``: per output a list of dims, each ``["in", i, d]`` (the size of argument i's dim d in
    every recorded call) or ``["const", n]``; and its dtype, ``["in", i]`` or ``["const", name]``.
    ``guard``: the recorded argument shapes, when a dim other than 1 is a constant no argument
    explains: the fake then refuses other shapes rather than guess."""
    samples = op.samples
    if not samples:
        return {"outputs": None, "kind": None, "guard": None, "ranks": []}
    first = samples[0]["out"]
    kind = "tensor" if "shape" in first else first.get("kind")
    if kind not in ("tensor", "list", "tuple"):
        raise ExportError(f"{op.function}: returned {first.get('value', '?')}, not tensors")

    def outs(s):
        o = s["out"]
        return [o] if "shape" in o else o["items"]
    n_out = len(outs(samples[0]))
    if any(len(outs(s)) != n_out for s in samples):
        raise ExportError(f"{op.function}: returns a different number of tensors per call; its fake "
                          "implementation cannot be derived")
    rules, guarded = [], False
    for p in range(n_out):
        ndim = len(outs(samples[0])[p]["shape"])
        if any(len(outs(s)[p]["shape"]) != ndim for s in samples):
            raise ExportError(f"{op.function}: output {p} has a different rank per call")
        dims = []
        for j in range(ndim):
            cands = None
            for s in samples:
                size = outs(s)[p]["shape"][j]
                here = {(i, d) for i, a in enumerate(s["args"]) if "shape" in a
                        for d, n in enumerate(a["shape"]) if n == size}
                cands = here if cands is None else cands & here
            if cands:
                # The same position of an argument of the same rank first (elementwise), then the first.
                def key(c):
                    i, d = c
                    return (not (d == j and len(samples[0]["args"][i]["shape"]) == ndim), i, d)
                i, d = min(cands, key=key)
                dims.append(["in", i, d])
                # Two argument dims of the same size in every call (a square input): which one the output
                # follows is a guess, so the fake answers only the recorded shapes.
                # Two argument dims equal in every call: if that size moved between the recorded shapes
                # they move together (a layernorm's x and weight), and any of them is right; if it
                # never moved, the match may be a coincidence, so the fake answers only the recorded shapes.
                guarded |= len(cands) > 1 and len({outs(s)[p]["shape"][j] for s in samples}) == 1
            else:
                sizes = {outs(s)[p]["shape"][j] for s in samples}
                if len(sizes) != 1:        # a function of the shapes (a pool's output height): a table
                    dims.append(["table", [[[a.get("shape") for a in s["args"]], outs(s)[p]["shape"][j]]
                                           for s in samples]])
                    guarded = True
                    continue
                size = sizes.pop()
                guarded |= size != 1
                dims.append(["const", size])
        dt = outs(samples[0])[p]["dtype"]
        same = [i for i, a in enumerate(samples[0]["args"]) if all(
            "shape" in s["args"][i] and s["args"][i]["dtype"] == outs(s)[p]["dtype"] for s in samples)]
        dtype = ["in", same[0]] if same else ["const", dt]
        rules.append({"dims": dims, "dtype": dtype})
    guard = None
    if guarded:
        guard = []
        for s in samples:
            shapes = [a.get("shape") for a in s["args"]]
            if shapes not in guard:
                guard.append(shapes)
    ranks = []
    for s in samples:
        r = [len(a["shape"]) if "shape" in a else None for a in s["args"]]
        if r not in ranks:
            ranks.append(r)
    return {"outputs": rules, "kind": kind, "guard": guard, "ranks": ranks}


def _cpp_registration(ext, ns: str, key: str) -> str:
    lines = ["", "", "// ---- kernelskill export: each function as a torch.library op (schema from its signature) ----"]
    defs, impls = [], []
    for op in ext.ops:
        ret = {"Tensor": "at::Tensor", "Tensor[]": "std::vector<at::Tensor>"}.get(
            op.returns_schema, "std::tuple<" + ", ".join(["at::Tensor"] * op.returns_schema.count("Tensor")) + ">")
        params, args, locals_ = [], [], []
        for k, p in enumerate(op.params):
            if p.schema == "Tensor":
                params.append(f"const at::Tensor& a{k}")
                locals_.append(f"    at::Tensor t{k} = a{k};")
                args.append(f"t{k}")
            else:
                ctype = {"int": "int64_t", "float": "double", "bool": "bool"}[p.schema]
                params.append(f"{ctype} a{k}")
                args.append(f"static_cast<{p.cpp_type}>(a{k})")
        lines.append(f"static {ret} ks_op_{op.op}({', '.join(params)}) {{")
        lines += locals_
        lines.append(f"    {ret} out = {op.function}({', '.join(args)});")
        if op.returns_schema == "Tensor":
            for k, p in enumerate(op.params):
                if p.schema == "Tensor":   # an op's output may not alias an input: a copy where it does
                    lines.append(f"    if (out.defined() && out.is_alias_of(a{k})) out = out.clone();")
        lines += ["    return out;", "}"]
        defs.append(f'    m.def("{op.schema}");')
        impls.append(f'    m.impl("{op.op}", TORCH_FN(ks_op_{op.op}));')
    lines.append(f"TORCH_LIBRARY_FRAGMENT({ns}, m) {{")
    lines += defs + ["}", f"TORCH_LIBRARY_IMPL({ns}, {key}, m) {{"] + impls + ["}", ""]
    lines.append("PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {")
    lines.append(f'    m.doc() = "the ops of extension {ext.name} (registered in torch.ops.{ns} at import)";')
    lines.append("}")
    return "\n".join(lines) + "\n"


SETUP = '''"""{doc}"""
from setuptools import setup
{imports}
setup(
    name={dist!r},
    version="0.1.0",
    description="Exported by kernelskill: {task}",
    packages=[{pkg!r}],
    package_data={{{pkg!r}: {data!r}}},
{build})
'''


PYPROJECT = '''[build-system]
requires = ["setuptools>=61", "torch"]
build-backend = "setuptools.build_meta"
'''

OPS = '''"""The package's ops: torch.ops.{ns}.<op>, one per exported function, each with a fake
implementation (for torch.compile) derived from the calls recorded at export. Generated by kernelskill."""
import contextlib
import json
import types

import torch

from . import {modules}  # noqa: F401  (importing a built extension registers its ops)

NAMESPACE = {ns!r}
EXTENSIONS = {ext_map!r}           # extension module -> {{python function name: op name}}
SKIPPED = {skipped!r}             # extension module -> {{function: why it is not an op}}
RULES = json.loads({rules!r})


def eager(args, kwargs) -> contextlib.AbstractContextManager:
    """What ModelNew's eager forward runs in: nothing (the ops' eager dispatch is the extension's)."""
    return contextlib.nullcontext()


def extension(module: str) -> types.ModuleType:
    """What the candidate's `load_inline(...)` returned: its functions, now the package's ops."""
    ns = types.ModuleType(module)
    for fn, op in EXTENSIONS[module].items():
        setattr(ns, fn, getattr(getattr(torch.ops, NAMESPACE), op))
    for fn, why in SKIPPED.get(module, {{}}).items():
        setattr(ns, fn, _not_exported(fn, why))
    return ns


def _not_exported(fn: str, why: str):
    def call(*args, **kwargs):
        raise NotImplementedError(f"{{fn}} was not exported: {{why}}")
    return call


def _lookup(table, args):
    shapes = [list(a.shape) if isinstance(a, torch.Tensor) else None for a in args]
    return next(size for recorded, size in table if recorded == shapes)


def _fake(op: str, rule: dict):
    def fake(*args):
        if rule["outputs"] is None:
            raise NotImplementedError(f"{{NAMESPACE}}::{{op}}: no output shapes were recorded at export (never "
                                      "called on the verified inputs, or exported without the device): no fake "
                                      "implementation; eager calls work")
        ranks = [a.dim() if isinstance(a, torch.Tensor) else None for a in args]
        if ranks not in rule["ranks"]:
            raise NotImplementedError(f"{{NAMESPACE}}::{{op}}: the arguments' ranks {{ranks}} were never recorded "
                                      f"(recorded: {{rule['ranks']}}); no output shape rule for them")
        if rule["guard"] is not None:
            shapes = [list(a.shape) if isinstance(a, torch.Tensor) else None for a in args]
            if shapes not in rule["guard"]:
                raise NotImplementedError(f"{{NAMESPACE}}::{{op}}: an output dim was a constant at the recorded "
                                          f"argument shapes {{rule['guard']}}; got {{shapes}}")
        device = next(a.device for a in args if isinstance(a, torch.Tensor))
        outs = []
        for o in rule["outputs"]:
            shape = [args[d[1]].shape[d[2]] if d[0] == "in" else _lookup(d[1], args) if d[0] == "table" else d[1]
                     for d in o["dims"]]
            dtype = args[o["dtype"][1]].dtype if o["dtype"][0] == "in" else getattr(torch, o["dtype"][1])
            outs.append(torch.empty(shape, dtype=dtype, device=device))
        return outs[0] if rule["kind"] == "tensor" else (outs if rule["kind"] == "list" else tuple(outs))
    fake.__name__ = f"fake_{{op}}"
    return fake


for _op, _rule in RULES.items():
    torch.library.register_fake(f"{{NAMESPACE}}::{{_op}}")(_fake(_op, _rule))
'''

INIT = '''"""{task}: the exported kernel of {what} (kernelskill export, {exported}).

ModelNew: the candidate's module, its kernels the package's torch.library ops (torch.ops.{ns}),
{how}. In eager mode a kernel that refuses its inputs (a RuntimeError or ValueError:
a TORCH_CHECK or an assert's check) falls back to the task's reference Model, warning once;
under torch.compile there is no such fallback. The kernels are forward-only (no autograd formula):
where autograd would record a call (grad mode on and a parameter or input that requires grad), the
reference Model runs instead, on ModelNew's own parameters and buffers, so gradients reach them
(eager and torch.compile alike); under torch.no_grad() or torch.inference_mode() the kernels run.
Model, get_inputs, get_init_inputs: the reference at the verified shapes. test_exported.py checks
the package against it.
"""
import warnings

import torch

from . import _ops  # registers the ops and their fake implementations
from . import reference
from .model import ModelNew as KernelModelNew
from .reference import Model, get_init_inputs, get_inputs  # noqa: F401

FALLBACK = True          # set False to let a refused input raise, and a call that wants gradients


def _wants_grad(module, args, kwargs) -> bool:
    """Autograd would record this call, and the kernels have no backward."""
    if not torch.is_grad_enabled():
        return False
    tensors = [*module.parameters(), *(a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor))]
    return any(t.requires_grad for t in tensors)


def _shell(args, kwargs):
    """The reference Model on the meta device (no memory: every call gives it ModelNew's tensors);
    None where its __init__ cannot run there, or it keeps tensors that are neither parameters nor
    buffers (those would stay on the meta device): it is then built for real when first needed."""
    try:
        with torch.device("meta"):
            ref = reference.Model(*args, **kwargs)
    except Exception:  # noqa: BLE001 - any failure: built for real later
        return None
    if any(isinstance(v, torch.Tensor) for m in ref.modules() for v in vars(m).values()):
        return None
    return ref


class ModelNew(KernelModelNew):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        object.__setattr__(self, "_ks_init", (args, kwargs))
        object.__setattr__(self, "_ks_reference", _shell(args, kwargs))

    def forward(self, *args, **kwargs):
        if _wants_grad(self, args, kwargs):
            if not FALLBACK:
                raise RuntimeError(f"{{type(self).__module__}}: the exported kernels are forward-only (no autograd "
                                   "formula): call the model under torch.no_grad() or torch.inference_mode(), or "
                                   "set FALLBACK = True to run the reference Model where gradients are wanted")
            if not torch.compiler.is_compiling():
                warnings.warn(f"{{type(self).__module__}}: autograd is on and the kernels have no backward; running "
                              "the reference Model on this module's parameters (torch.no_grad() runs the kernels)",
                              RuntimeWarning, stacklevel=2)
            return self._reference_call(None, args, kwargs)
        if torch.compiler.is_compiling():
            return super().forward(*args, **kwargs)
        try:
            with _ops.eager(args, kwargs):
                return super().forward(*args, **kwargs)
        except (RuntimeError, ValueError) as e:
            if not FALLBACK:
                raise
            warnings.warn(f"{{type(self).__module__}}: the kernel refused these inputs ({{str(e).splitlines()[0]}}); "
                          "running the reference Model instead", RuntimeWarning, stacklevel=2)
            return self._reference_call(e, args, kwargs)

    def _reference_call(self, error, args, kwargs):
        """The reference Model's forward on this module's current parameters and buffers (never a
        copy: a later load_state_dict or optimizer step is what it computes with, and gradients
        reach this module's tensors)."""
        state = dict(self.named_parameters())
        state.update(self.named_buffers())
        ref = self._ks_reference
        if ref is None:
            args0, kwargs0 = self._ks_init
            ref = reference.Model(*args0, **kwargs0)
            p = next(iter(state.values()), None)
            ref = ref.to(p.device) if p is not None else ref
            object.__setattr__(self, "_ks_reference", ref)
        theirs = {{k: v.shape for k, v in (*ref.named_parameters(), *ref.named_buffers())}}
        if theirs != {{k: v.shape for k, v in state.items()}}:
            raise RuntimeError("no fallback: the reference Model's parameters and buffers differ from ModelNew's "
                               "in names or shapes") from error
        if ref.training != self.training:
            ref.train(self.training)
        return torch.func.functional_call(ref, state, args, kwargs)
'''

TEST = '''"""The exported package against the task's reference at the verified shapes; under
torch.compile(fullgraph=True). Run: python -m pytest --pyargs {pkg}  (or python -m {pkg}.test_exported)."""
import json
import os
import pathlib

import pytest
import torch

import {pkg} as pkg

META = json.loads((pathlib.Path(pkg.__file__).parent / "export.json").read_text())
DEVICE = META["device"]
pkg.FALLBACK = False     # these tests check the kernels: a refused input fails them, never the reference
if META["backend"] == "triton" and DEVICE == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
    pytest.fail("exported on a CPU: run these tests with TRITON_INTERPRET=1 (Triton's interpreter), set before "
                "the package is imported", pytrace=False)
BACKEND = os.environ.get("KS_EXPORT_COMPILE_BACKEND", "aot_eager")   # inductor works too (slower to compile)
needs_device = pytest.mark.skipif(DEVICE == "cuda" and not torch.cuda.is_available(), reason="needs a GPU")
# Exported on a CPU, a Triton package runs in Triton's interpreter, whose kernels torch.compile and fake
# tensors cannot trace: those two tests need the package exported (and run) on a GPU.
traced = pytest.mark.skipif(META["backend"] == "triton" and DEVICE == "cpu",
                            reason="Triton's interpreter: torch.compile traces Triton kernels on a GPU only")


def models():
    init = pkg.get_init_inputs()
    torch.manual_seed(0)
    ref = pkg.Model(*init)
    torch.manual_seed(0)
    new = pkg.ModelNew(*init)
    own = new.state_dict()      # the reference's weights where names and shapes match (as the evaluator verified)
    new.load_state_dict({{k: v for k, v in ref.state_dict().items() if k in own and own[k].shape == v.shape}},
                        strict=False)
    return ref.to(DEVICE).eval(), new.to(DEVICE).eval()


def inputs():
    torch.manual_seed(1)
    return [x.to(DEVICE) if isinstance(x, torch.Tensor) else x for x in pkg.get_inputs()]


def close(a, b):
    a = a if isinstance(a, (list, tuple)) else [a]
    b = b if isinstance(b, (list, tuple)) else [b]
    atol, rtol = META["atol"], META["rtol"]
    return len(a) == len(b) and all(x.shape == y.shape and torch.allclose(x.float(), y.float(), atol=atol, rtol=rtol)
                                    for x, y in zip(a, b))


def test_ops_are_registered_ahead_of_time():
    for op in META["ops"]:
        assert hasattr(getattr(torch.ops, META["namespace"]), op["op"])
    for name in pkg._ops.EXTENSIONS:
        assert getattr(pkg._ops, name).__file__.endswith((".so", ".pyd"))


@needs_device
def test_matches_reference():
    ref, new = models()
    x = inputs()
    with torch.no_grad():
        assert close(ref(*x), new(*x))


@needs_device
@traced
def test_compile_fullgraph_no_graph_break():
    ref, new = models()
    x = inputs()
    torch._dynamo.reset()
    with torch.no_grad():
        explain = torch._dynamo.explain(new)(*x)
        assert explain.graph_break_count == 0, explain.break_reasons
        compiled = torch.compile(new, fullgraph=True, backend=BACKEND)
        assert close(ref(*x), compiled(*x))


def sample_args(sample):
    """Arguments of a recorded call's shapes and dtypes (floats random, integers zero, scalars as recorded)."""
    out = []
    for a in sample["args"]:
        if "shape" not in a:
            out.append(a["value"])
            continue
        dt = getattr(torch, a["dtype"])
        out.append(torch.randn(a["shape"], dtype=dt, device=DEVICE) if dt.is_floating_point
                   else torch.zeros(a["shape"], dtype=dt, device=DEVICE))
    return out


@needs_device
@traced
@pytest.mark.parametrize("op", [o for o in META["ops"] if o["samples"]], ids=lambda o: o["op"])
def test_opcheck_fake_matches_kernel(op):
    """torch.library.opcheck at the first recorded call's shapes: schema, fake vs real, AOT dispatch."""
    torch.manual_seed(2)
    torch.library.opcheck(getattr(getattr(torch.ops, META["namespace"]), op["op"]).default,
                          sample_args(op["samples"][0]))


if __name__ == "__main__":
    raise SystemExit(pytest.main(["-q", __file__]))
'''

README = '''# {pkg}

Exported by `kernelskill export` on {exported} from {what} (task `{task}`, backend {backend}).

    {install}
    python -m pytest --pyargs {pkg}          # checks it against the reference, and under torch.compile

```python
import {pkg}
model = {pkg}.ModelNew(*{pkg}.get_init_inputs())      # the drop-in; its kernels are torch.ops.{ns}.*
```

Ops: {ops}. Each op's fake implementation (torch.compile) follows the output shapes recorded at export
(export.json); see kernelskill's docs/export.md for what that supports.
'''


def render_package(*, pkg: str, exts, backend: str, model_source: str, task, provenance: dict) -> dict[str, str]:
    ns = pkg
    key = "CUDA" if backend == "cuda" else "CPU"
    files: dict[str, str] = {}
    ext_lines = ""
    for e in exts:
        cpp = f"csrc/{e.module}.cpp"
        files[f"{pkg}/{cpp}"] = CPP_PRELUDE + "\n".join(e.cpp) + _cpp_registration(e, ns, key)
        sources = [f"{pkg}/{cpp}"]
        if e.cuda:
            cu = f"csrc/{e.module}_cuda.cu"
            files[f"{pkg}/{cu}"] = CUDA_PRELUDE + "\n".join(e.cuda) + "\n"
            sources.append(f"{pkg}/{cu}")
        kind = "CUDAExtension" if backend == "cuda" else "CppExtension"
        args = {"cxx": e.cflags}
        if backend == "cuda":
            args["nvcc"] = e.cuda_cflags
        ext_lines += (f"        {kind}({pkg + '.' + e.module!r}, {sources!r},\n"
                      f"            extra_compile_args={args!r},\n"
                      f"            extra_link_args={e.ldflags!r}, include_dirs={e.include_paths!r}),\n")
    kind = "CUDAExtension" if backend == "cuda" else "CppExtension"
    files["setup.py"] = SETUP.format(
        doc="Builds the exported kernels ahead of time: pip install --no-build-isolation .  (needs torch).",
        imports=f"from torch.utils.cpp_extension import BuildExtension, {kind}\n", dist=pkg.replace("_", "-"),
        pkg=pkg, task=task.name, data=["csrc/*", "export.json"],
        build=f"    ext_modules=[\n{ext_lines}    ],\n    cmdclass={{\"build_ext\": BuildExtension}},\n")
    files["pyproject.toml"] = PYPROJECT
    rules = {op.op: infer_rule(op) for e in exts for op in e.ops}
    files[f"{pkg}/_ops.py"] = OPS.format(ns=ns, modules=", ".join(e.module for e in exts),
                                         ext_map={e.module: {op.function: op.op for op in e.ops} for e in exts},
                                         skipped={e.module: e.skipped for e in exts if e.skipped},
                                         rules=json.dumps(rules))
    shared, what = _shared_files(pkg, task, provenance)
    files.update(shared)
    files[f"{pkg}/__init__.py"] = INIT.format(task=task.name, what=what, exported=provenance["exported"], ns=ns,
                                              how="built ahead of time")
    files[f"{pkg}/model.py"] = model_source
    atol, rtol = task.tolerance
    meta = {"task": task.name, "preset": task.preset, "overrides": {k: str(v) for k, v in task.overrides.items()},
            "atol": atol, "rtol": rtol, "backend": backend, "device": "cuda" if backend == "cuda" else "cpu",
            "namespace": ns, "provenance": provenance,
            "ops": [{"function": o.function, "op": o.op, "schema": o.schema, "rule": rules[o.op],
                     "samples": o.samples} for e in exts for o in e.ops]}
    files[f"{pkg}/export.json"] = json.dumps(meta, indent=1) + "\n"
    files[f"{pkg}/test_exported.py"] = TEST.format(pkg=pkg)
    files["README.md"] = README.format(pkg=pkg, exported=provenance["exported"], what=what, task=task.name,
                                       backend=backend, ns=ns, install=INSTALL_BUILD,
                                       ops=", ".join(f"`{ns}::{o.schema}`" for e in exts for o in e.ops))
    return files


INSTALL_BUILD = "pip install --no-build-isolation .        # compiles the kernels ahead of time (torch must be installed)"
INSTALL_TRITON = "pip install --no-build-isolation .        # Python only: Triton compiles each kernel on its first launch"

TRITON_OPS = '''"""The package's ops: torch.ops.{ns}.<op>, one per launcher of the candidate (a module-level
function that launches its Triton kernels), each a torch.library.triton_op: torch.compile traces
into its body and its kernels (launched through wrap_triton), so its fake implementation is the
launcher's own code on fake tensors.

ModelNew's calls to a launcher go through its op wherever something traces (torch.compile,
torch.export, make_fx, fake tensors). In plain eager mode (real tensors, nothing tracing)
ModelNew runs in `eager()`, where the launchers run as the candidate wrote them and its launches
go straight to Triton: wrap_triton's higher-order op and an op's Python dispatch cost more a call
than a small kernel takes (kernelskill's docs/export.md, "Eager speed").
Generated by kernelskill."""
import contextlib
from typing import Optional  # noqa: F401

import torch
from torch._library import triton as _triton_state
from torch._library.triton import is_wrap_triton_enabled, set_wrap_triton_enabled

from . import model as _model

NAMESPACE = {ns!r}
SCHEMAS = {schemas!r}
EXTENSIONS = {{}}                # no ahead-of-time built extension: Triton compiles at first launch
LAUNCHERS = {{name: getattr(_model, name) for name in SCHEMAS}}     # as the candidate wrote them


# Each launcher with its parameters annotated (the op's schema, from the calls recorded at export).
{wrappers}

_dispatch_modes = torch._C._len_torch_dispatch_stack
_transforms = torch._C._are_functorch_transforms_active
_PLAIN = (torch.Tensor, torch.nn.Parameter)


def _tracing(args, kwargs) -> bool:
    """Whether anything but plain eager mode could see this call: a dispatch mode (fake tensors,
    make_fx, export), a functorch transform, or an input that is a tensor subclass."""
    if _dispatch_modes() or _transforms():
        return True
    for a in (*args, *kwargs.values()) if kwargs else args:
        if isinstance(a, torch.Tensor) and type(a) not in _PLAIN:
            return True
    return False


class _WrapOff:
    """wrap_triton off for one forward and restored after: what torch's set_wrap_triton_enabled(False)
    does to its thread-local switch, without a generator's cost on every call."""
    __slots__ = ("prev",)

    def __enter__(self):
        self.prev = is_wrap_triton_enabled()
        _triton_state.wrap_triton_enabled.value = False

    def __exit__(self, *exc):
        _triton_state.wrap_triton_enabled.value = self.prev


_NOTHING = contextlib.nullcontext()
_off = _WrapOff if hasattr(_triton_state, "wrap_triton_enabled") else (lambda: set_wrap_triton_enabled(False))


def eager(args, kwargs) -> contextlib.AbstractContextManager:
    """ModelNew's eager forward runs in this: wrap_triton off (each launch goes straight to Triton,
    as triton_op's own eager path does), so the launchers are called as they are, not through
    their ops; unchanged where something traces."""
    return _NOTHING if _tracing(args, kwargs) else _off()


def _call(name: str):
    """What ModelNew calls for launcher `name`: the op, except inside `eager()` the launcher itself."""
    op = getattr(getattr(torch.ops, NAMESPACE), name)
    launcher = LAUNCHERS[name]

    def call(*args, **kwargs):
        if torch.compiler.is_compiling() or is_wrap_triton_enabled():
            return op(*args, **kwargs)
        return launcher(*args, **kwargs)
    call.op, call.launcher, call.__name__ = op, launcher, name
    return call


for _name in SCHEMAS:
    torch.library.triton_op(f"{{NAMESPACE}}::{{_name}}", globals()[_name], mutates_args=())
    setattr(_model, _name, _call(_name))
'''


def _shared_files(pkg: str, task, provenance: dict) -> tuple[dict[str, str], str]:
    """reference.py (the task at the verified shapes) and the provenance line, for every backend."""
    what = (f"run {provenance['run']} node {provenance.get('node')}" if provenance.get("run")
            else provenance.get("candidate", "a candidate"))
    ref = task.source.rstrip("\n") + "\n"
    if task.overrides:
        ref += f"\n\n# kernelskill export: the verified shapes (preset {task.preset or 'none'}, --set values)\n"
        ref += "".join(f"{k} = {v if isinstance(v, str) else repr(v)}\n" for k, v in task.overrides.items())
    return {f"{pkg}/reference.py": ref}, what


def render_triton_package(*, pkg: str, ops: list[dict], device: str, model_source: str, task,
                          provenance: dict) -> dict[str, str]:
    """A Triton candidate's package: the candidate (launches wrapped) as model.py, its launchers as
    triton_ops, the fallback, the reference and the test, as for the built backends."""
    ns = pkg
    files, what = _shared_files(pkg, task, provenance)
    files["setup.py"] = SETUP.format(
        doc="A Triton package: Python only (Triton compiles each kernel on first launch and caches it).",
        imports="", dist=pkg.replace("_", "-"), pkg=pkg, task=task.name, data=["export.json"],
        build='    install_requires=["torch", "triton"],\n')
    files["pyproject.toml"] = PYPROJECT
    files[f"{pkg}/_ops.py"] = TRITON_OPS.format(ns=ns, schemas={o["op"]: o["schema"] for o in ops},
                                                wrappers="\n\n".join(o["wrapper"] for o in ops))
    files[f"{pkg}/__init__.py"] = INIT.format(task=task.name, what=what, exported=provenance["exported"], ns=ns,
                                              how="Triton kernels compiled on their first launch")
    files[f"{pkg}/model.py"] = model_source
    atol, rtol = task.tolerance
    meta = {"task": task.name, "preset": task.preset, "overrides": {k: str(v) for k, v in task.overrides.items()},
            "atol": atol, "rtol": rtol, "backend": "triton", "device": device, "namespace": ns,
            "provenance": provenance,
            "ops": [{"function": o["function"], "op": o["op"], "schema": o["schema"], "samples": o["samples"]}
                    for o in ops]}
    files[f"{pkg}/export.json"] = json.dumps(meta, indent=1) + "\n"
    files[f"{pkg}/test_exported.py"] = TEST.format(pkg=pkg)
    files["README.md"] = README.format(pkg=pkg, exported=provenance["exported"], what=what, task=task.name,
                                       backend="triton", ns=ns, install=INSTALL_TRITON,
                                       ops=", ".join(f"`{ns}::{o['schema']}`" for o in ops) or
                                       "none (the kernels are launched inside ModelNew)")
    return files
