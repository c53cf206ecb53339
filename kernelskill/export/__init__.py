"""Export a verified candidate as a package you can ship (issue 47, item 2).

``export(source, task, out_dir)`` turns a candidate that builds its kernels with ``load_inline``
into a small Python package (docs/export.md):

- the kernel sources as files (``<pkg>/csrc/``), compiled ahead of time by ``setup.py``
  (``CppExtension``/``CUDAExtension`` + ``BuildExtension``): ``pip install --no-build-isolation DIR``
  builds it, nothing is compiled at import;
- one ``torch.library`` custom op per function of ``load_inline(functions=[...])``, defined and
  implemented in C++ (``TORCH_LIBRARY_FRAGMENT`` / ``TORCH_LIBRARY_IMPL`` under the CPU or CUDA key),
  its schema derived from the C++ signature, with a fake (meta) implementation registered from
  Python so ``torch.compile(fullgraph=True)`` traces through it;
- the fake implementation's output shapes are RECORDED: export runs the candidate once on the
  task's verified inputs and, for each output dimension, finds the input dimension it equals in
  every recorded call (``out.shape[j] == args[i].shape[d]``); a dimension no input explains is a
  constant of the recorded shapes, and the fake refuses other input shapes (NotImplementedError)
  rather than guess;
- ``ModelNew``: the candidate's own class with each ``load_inline(...)`` call replaced by the
  package's ops, and a fallback: in eager mode a RuntimeError/ValueError from a kernel (a
  ``TORCH_CHECK`` that refuses the inputs) runs the task's reference ``Model`` with the same
  weights instead (under torch.compile there is no fallback: the error is raised);
- ``test_exported.py``: the package against the reference at the verified shapes, and under
  ``torch.compile(fullgraph=True)``.

Backends: cpp fully; cuda where the same shape holds (sources split as load_inline splits them;
on a machine without a GPU the outputs cannot be recorded, so the fake implementations refuse
until exported again on a GPU); triton through ``torch.library.triton_op`` (export/triton.py: no
build, launches wrapped so torch.compile traces the kernels).
"""
from __future__ import annotations

import ast
import json
import re
import time
import types
from dataclasses import dataclass, field
from pathlib import Path

from ..candidate import Candidate, parse_python
from .errors import ExportError
from .calls import record_call
from .source import insert_import, positions, replace_spans
from kernelskill.evaluate.build.direct import split_params
from .templates import render_package, render_triton_package

__all__ = ["ExportError", "Extension", "OpSpec", "export", "parse_params", "resolve_source"]


# C++ parameter types the schema can carry: (schema type, the wrapper's parameter type).
_TENSOR = re.compile(r"^(?:const\s+)?(?:(?:torch|at)::)?Tensor\s*&?$")
_INTS = {"int64_t", "int", "long", "long int", "long long", "int32_t", "unsigned", "unsigned int", "size_t",
         "std::int64_t", "std::int32_t", "std::size_t", "uint32_t", "uint64_t", "short"}
_FLOATS = {"double", "float"}


@dataclass
class Param:
    name: str
    cpp_type: str      # as the source declares it, without const/&
    schema: str        # Tensor | int | float | bool


@dataclass
class OpSpec:
    """One exported function: its C++ signature, its op's schema and the recorded calls."""
    function: str               # the name Python calls (load_inline's functions=[...])
    op: str                     # the op's name in the package's namespace
    returns: str                # the C++ return type
    returns_schema: str         # Tensor | Tensor[] | (Tensor, Tensor, ...)
    params: list[Param]
    samples: list[dict] = field(default_factory=list)

    @property
    def schema(self) -> str:
        args = ", ".join(f"{p.schema} {p.name}" for p in self.params)
        return f"{self.op}({args}) -> {self.returns_schema}"


@dataclass
class Extension:
    """One ``load_inline`` call of the candidate."""
    name: str                    # load_inline's name
    module: str                  # the compiled module's name in the package (_C_<name>)
    cpp: list[str]
    cuda: list[str]
    functions: list[str]
    cflags: list[str]
    cuda_cflags: list[str]
    ldflags: list[str]
    include_paths: list[str]
    ops: list[OpSpec] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)     # function -> why it is not an op


def _ident(text: str) -> str:
    s = re.sub(r"\W", "_", text)
    return s if s and not s[0].isdigit() else "_" + s


# ---- the candidate: which candidate, its load_inline calls ---------------------------------------
def resolve_source(spec: str, runs_dir: str | Path = "runs") -> tuple[str, Path | None, dict]:
    """``RUN[/NODE]`` (best.py, or the node's code; a node must be verified) or a candidate file:
    (source, path, provenance)."""
    p = Path(spec)
    if p.is_file():
        return p.read_text(), p.resolve(), {"candidate": str(p)}
    from ..runs import find_run, load_run
    run_spec, _, node_id = spec.partition("/")
    if p.suffix == ".py":
        raise ExportError(f"{spec}: no such candidate file")
    run = find_run(run_spec, runs_dir)
    state = load_run(run)
    info = state.info.get("run", {})
    prov = {"run": run.name, "task": info.get("task"), "preset": info.get("preset"),
            "overrides": info.get("overrides") or {}}
    if node_id:
        if node_id not in state.tree:
            known = ", ".join(n.id for n in state.tree)
            raise ExportError(f"run {run.name} has no node {node_id!r} (nodes: {known})")
        node = state.tree.get(node_id)
        if node.parent is None:
            raise ExportError(f"{run.name}/{node_id} is the reference itself: there is no kernel to export")
        if not node.ok:
            why = f": {node.message.splitlines()[0][:200]}" if node.message else ""
            raise ExportError(f"{run.name}/{node_id} is not a verified candidate (status {node.status}{why}); "
                              f"export a node whose status is ok (kernelskill runs show {run.name})")
        path = run / "nodes" / f"{node_id}.py"
        prov["node"] = node_id
        source = node.code or (path.read_text() if path.is_file() else "")
    else:
        best = state.tree.best()
        path = run / "best.py"
        if best is None or not path.is_file():
            raise ExportError(f"run {run.name} has no verified candidate (no best.py); nothing to export")
        prov["node"] = best.id
        source = path.read_text()
    return source, path, prov


def _capture(source: str, path: Path | None):
    """Run the candidate's module with ``load_inline`` captured, each extension built through the
    evaluator's cached build: ([(args, kwargs, recorder)], the module, compile_only). ``compile_only``:
    a CUDA extension on a machine without a GPU passed nvcc's compile-only check and was not built."""
    import torch.utils.cpp_extension as cpp_ext
    from kernelskill.evaluate.build.extensions import BuildFailed, BuildLog, CompileOnly, install
    calls: list = []
    state = {"compile_only": False}
    install(source, BuildLog())
    inner = cpp_ext.load_inline

    def load_inline(name, cpp_sources, cuda_sources=None, *args, **kwargs):
        try:
            built = inner(name, cpp_sources, cuda_sources, *args, **kwargs)
        except CompileOnly:
            built, state["compile_only"] = _Stub(name), True
        except BuildFailed as e:
            first = "; ".join(str(d) for d in e.diagnostics[:2]) or str(e)
            raise ExportError(f"extension {name!r} does not build: {first}") from None
        rec = _Recorder(built)
        calls.append(((name, cpp_sources, cuda_sources) + args, dict(kwargs), rec))
        return rec

    mod = types.ModuleType(f"kernelskill_export_{abs(hash(source)) % 10**8}")
    mod.__file__ = str(path or "candidate.py")
    cpp_ext.load_inline = load_inline
    try:
        exec(compile(source, str(path or "candidate.py"), "exec"), mod.__dict__)
    finally:
        cpp_ext.load_inline = inner
    if not hasattr(mod, "ModelNew"):
        raise ExportError(f"{path or 'candidate'}: no ModelNew defined")
    return calls, mod, state["compile_only"]


class _Stub:
    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        raise ExportError(f"extension {self._name!r} was not built on this machine")


class _Recorder:
    """The built extension, each function call recorded (input shapes and dtypes, output shapes)."""

    def __init__(self, module):
        self._module, self.calls = module, {}

    def __getattr__(self, attr):
        fn = getattr(self._module, attr)
        if not callable(fn):
            return fn
        rec = self

        def call(*args):
            out, record = record_call(list(args), lambda: fn(*args))
            rec.calls.setdefault(attr, []).append(record)
            return out
        return call


def _extensions(calls) -> list[Extension]:
    from kernelskill.evaluate.build.direct import Unsupported, _strip_comments, signature
    exts, used_ops = [], set()
    for args, kwargs, rec in calls:
        name = args[0] if args else kwargs.get("name")
        cpp = args[1] if len(args) > 1 else kwargs.get("cpp_sources")
        cuda = args[2] if len(args) > 2 else kwargs.get("cuda_sources")
        cpp = [cpp] if isinstance(cpp, str) else list(cpp or [])
        cuda = [cuda] if isinstance(cuda, str) else list(cuda or [])
        functions = kwargs.get("functions")
        if not functions:
            raise ExportError(f"load_inline({name!r}) has no `functions=[...]`: the sources bind themselves "
                              "(PYBIND11_MODULE), which export cannot turn into ops")
        functions = [functions] if isinstance(functions, str) else list(functions)
        ext = Extension(name=name, module="_C_" + _ident(name), cpp=cpp, cuda=cuda, functions=functions,
                        cflags=list(kwargs.get("extra_cflags") or []),
                        cuda_cflags=list(kwargs.get("extra_cuda_cflags") or []),
                        ldflags=list(kwargs.get("extra_ldflags") or []),
                        include_paths=list(kwargs.get("extra_include_paths") or []))
        text = _strip_comments("\n".join(cpp))
        for fn in functions:
            try:
                try:
                    head, params = signature(fn, text)
                except Unsupported as e:
                    raise ExportError(f"function {fn!r} of load_inline({name!r}): {e}") from None
                spec = OpSpec(function=fn, op="", returns=head, returns_schema=_return_schema(fn, head),
                              params=parse_params(fn, params), samples=rec.calls.get(fn, []))
            except ExportError as e:
                if rec.calls.get(fn):       # the verified forward calls it: it must be an op
                    raise
                ext.skipped[fn] = str(e)    # never called on the verified inputs: left out, said so
                continue
            spec.op = fn if fn not in used_ops else f"{_ident(name)}_{fn}"
            used_ops.add(spec.op)
            for s in spec.samples:
                if s["mutated"]:
                    raise ExportError(f"function {fn!r} writes into its argument(s) {s['mutated']}: an op that "
                                      "mutates its inputs is not supported by export yet")
            ext.ops.append(spec)
        exts.append(ext)
    return exts


def _strip_type(t: str) -> str:
    return " ".join(t.replace("&", " ").split())


def _return_schema(fn: str, head: str) -> str:
    t = re.sub(r"\b(?:inline|extern|static|__host__)\b", "", head)
    t = _strip_type(t).replace("const ", "")
    if re.fullmatch(r"(?:(?:torch|at)::)?Tensor", t):
        return "Tensor"
    if re.fullmatch(r"std::vector\s*<\s*(?:(?:torch|at)::)?Tensor\s*>", t):
        return "Tensor[]"
    m = re.fullmatch(r"std::tuple\s*<(.*)>", t)
    if m:
        parts = [x.strip() for x in m.group(1).split(",")]
        if all(re.fullmatch(r"(?:(?:torch|at)::)?Tensor", x) for x in parts):
            return "(" + ", ".join("Tensor" for _ in parts) + ")"
    raise ExportError(f"function {fn!r} returns `{head}`: export supports torch::Tensor, "
                      "std::vector<torch::Tensor> and std::tuple<torch::Tensor, ...> returns")


def parse_params(fn: str, params: str) -> list[Param]:
    """The parameters of ``fn`` as schema arguments; any type but a tensor, an integer, a floating
    point number or a bool is refused with the function's and the parameter's name."""
    out: list[Param] = []
    for i, part in enumerate(x.split("=")[0].strip() for x in split_params(params)):
        if not part or part == "void":
            continue
        m = re.fullmatch(r"(?P<type>.*?[\w>*&])\s*\b(?P<name>[A-Za-z_]\w*)", part)
        ctype, name = (m["type"].strip(), m["name"]) if m else (part, f"arg{i}")
        bare = _strip_type(ctype.replace("const ", "").replace("__restrict__", "")).strip()
        if "*" in bare:
            schema = None
        elif _TENSOR.match(ctype.replace("__restrict__", "").strip()) or re.fullmatch(
                r"(?:(?:torch|at)::)?Tensor", bare):
            schema = "Tensor"
        elif bare in _INTS:
            schema = "int"
        elif bare in _FLOATS:
            schema = "float"
        elif bare == "bool":
            schema = "bool"
        else:
            schema = None
        if schema is None:
            raise ExportError(f"function {fn!r}: parameter `{part}` has a type export does not map to an op "
                              "schema (supported: torch::Tensor, integers, double/float, bool)")
        if name in {"self", "out", "input"} or name in {p.name for p in out}:
            name = f"{name}_{i}"
        out.append(Param(name=name, cpp_type=bare, schema=schema))
    return out


# ---- the ModelNew rewrite --------------------------------------------------------------------------
def rewrite_model(source: str, exts: list[Extension], pkg: str) -> str:
    """The candidate's source, each ``load_inline(...)`` call replaced by the package's extension object
    (``torch.ops.<ns>.<op>`` per function)."""
    tree = parse_python(source)
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name == "load_inline":
                spans.append(node)
            elif name == "load" and isinstance(f, ast.Attribute) and "cpp_extension" in ast.unparse(f):
                raise ExportError("the candidate builds with cpp_extension.load (source files), which export "
                                  "does not read yet: use load_inline")
    if len(spans) != len(exts):
        raise ExportError(f"the candidate's source has {len(spans)} load_inline call(s) but {len(exts)} ran; "
                          "export needs each call written once in the source")
    spans.sort(key=lambda n: (n.lineno, n.col_offset))
    pos = positions(source)

    by_name = {e.name: e for e in exts}
    edits = []                       # (start, end, text), applied from the end
    source_names: dict[str, str] = {}
    inside = set()
    for k, node in enumerate(spans):
        first = node.args[0] if node.args else next((kw.value for kw in node.keywords if kw.arg == "name"), None)
        ext_name = first.value if isinstance(first, ast.Constant) else None
        ext = by_name.get(ext_name) or exts[k]
        edits.append((pos(node.lineno, node.col_offset), pos(node.end_lineno, node.end_col_offset),
                      f"_ks_extension({ext.module!r})"))
        args = list(node.args[1:3]) + [kw.value for kw in node.keywords if kw.arg in ("cpp_sources", "cuda_sources")]
        for a in args:
            for n in ast.walk(a):
                if isinstance(n, ast.Name):
                    source_names[n.id] = f"{pkg}/csrc/{ext.module}*"
        inside |= {id(n) for n in ast.walk(node)}
    # A module-level source string used only by load_inline: its text lives in csrc/ now.
    used_elsewhere = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
                      and id(n) not in inside}
    for stmt in tree.body:
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                and stmt.targets[0].id in source_names and stmt.targets[0].id not in used_elsewhere):
            name = stmt.targets[0].id
            edits.append((pos(stmt.lineno, 0), pos(stmt.end_lineno, stmt.end_col_offset),
                          f"# {name}: the kernel source, exported to {source_names[name]}"))
        elif (isinstance(stmt, ast.ImportFrom) and stmt.module == "torch.utils.cpp_extension"
              and [a.name for a in stmt.names] == ["load_inline"] and "load_inline" not in used_elsewhere):
            edits.append((pos(stmt.lineno, 0), pos(stmt.end_lineno, stmt.end_col_offset),
                          "# (load_inline: the kernels are built ahead of time by setup.py)"))
    out = replace_spans(source, edits)
    return insert_import(out, f"from {pkg}._ops import extension as _ks_extension  # kernelskill export: the AOT-built ops\n")


# ---- export -----------------------------------------------------------------------------------------
@dataclass
class ExportResult:
    out_dir: Path
    package: str
    backend: str
    ops: list[str]
    recorded: bool
    notes: list[str]
    seconds: float

    def to_dict(self) -> dict:
        return {"status": "ok", "out_dir": str(self.out_dir), "package": self.package, "backend": self.backend,
                "ops": self.ops, "recorded": self.recorded, "notes": self.notes, "seconds": round(self.seconds, 2)}


def export(source: str, task, out_dir: str | Path, *, package: str | None = None, path: Path | None = None,
           provenance: dict | None = None, force: bool = False) -> ExportResult:
    """Write the package for ``source`` (a candidate verified on ``task``, a loaded Task) to ``out_dir``."""
    started = time.perf_counter()
    cand = Candidate.from_source(source, path)
    if cand.backend == "none":
        raise ExportError("the candidate builds no extension (plain PyTorch): there is no kernel to export; "
                          "best.py is already a drop-in")
    out = Path(out_dir)
    if out.exists() and any(out.iterdir()) and not force:
        raise ExportError(f"{out}: exists and is not empty (pass --force to overwrite)")
    pkg = _ident(package or f"ks_{task.name}").lower()
    if cand.backend == "triton":
        return _export_triton(source, task, out, pkg, path, dict(provenance or {}, candidate_hash=cand.hash), started)
    notes = []
    calls, mod, compile_only = _capture(source, path)
    if not calls:
        raise ExportError("the candidate's module made no load_inline call at import")
    device = "cuda" if cand.backend == "cuda" else "cpu"
    recorded = not compile_only
    if recorded:
        shapes = _record(task, mod, device, [c[2] for c in calls])
        if shapes:
            notes.append(f"output shapes recorded at the verified sizes and at {len(shapes)} derived one(s): "
                         + ", ".join(shapes))
    else:
        notes.append("CUDA candidate on a machine without a GPU: its sources passed nvcc's compile-only check "
                     "and the package's registration unit a host compiler's syntax check; the ops' output shapes "
                     "were not recorded, so their fake implementations refuse (torch.compile) until exported "
                     "again on a GPU; eager calls work")
    exts = _extensions(calls)
    for e in exts:
        for fn, why in e.skipped.items():
            notes.append(f"{fn}: not exported (never called on the verified inputs): {why}")
    if recorded:
        for e in exts:
            for op in e.ops:
                if not op.samples:
                    notes.append(f"{op.function}: never called on the verified inputs; its fake implementation "
                                 "refuses (eager calls work)")
    files = render_package(pkg=pkg, exts=exts, backend=cand.backend, model_source=rewrite_model(source, exts, pkg),
                           task=task, provenance=dict(provenance or {}, candidate_hash=cand.hash,
                                                      exported=time.strftime("%Y-%m-%dT%H:%M:%S")))
    for rel, text in files.items():
        f = out / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    if compile_only:
        for e in exts:
            syntax_check(out / pkg / "csrc" / f"{e.module}.cpp", e.cflags)
    return ExportResult(out_dir=out, package=pkg, backend=cand.backend,
                        ops=[f"{pkg}::{op.op}" for e in exts for op in e.ops], recorded=recorded, notes=notes,
                        seconds=time.perf_counter() - started)


def _export_triton(source: str, task, out: Path, pkg: str, path: Path | None, provenance: dict,
                   started: float) -> ExportResult:
    """A Triton candidate: its source with the launches wrapped, its launchers as triton_ops."""
    from . import triton as tr
    device = tr.device_for_export()
    model_source, _kernels, launcher_names, in_methods = tr.wrap_launches(source)
    import importlib.util
    if importlib.util.find_spec("triton") is None:
        raise ExportError("the candidate is a Triton one and triton is not installed here: pip install triton "
                          "(a GPU machine's torch brings it)")
    mod = types.ModuleType(f"kernelskill_export_{abs(hash(source)) % 10**8}")
    mod.__file__ = str(path or "candidate.py")
    try:
        exec(compile(model_source, str(path or "candidate.py"), "exec"), mod.__dict__)
    except Exception as e:
        raise ExportError(f"the candidate's module failed at import: {type(e).__name__}: {e}") from None
    if not hasattr(mod, "ModelNew"):
        raise ExportError(f"{path or 'candidate'}: no ModelNew defined")
    rec = tr.LauncherRecorder(mod, launcher_names)
    notes = []
    shapes = _record(task, mod, device, [rec])
    if shapes:
        notes.append(f"calls recorded at the verified sizes and at {len(shapes)} derived one(s): " + ", ".join(shapes))
    ops = []
    for name in launcher_names:
        samples = rec.calls.get(name, [])
        if not samples:
            notes.append(f"{name}: launches a kernel but the verified forward never called it: not an op")
            continue
        for s in samples:
            if s["mutated"]:
                raise ExportError(f"launcher {name!r} writes into its argument(s) {s['mutated']}: an op that "
                                  "mutates its inputs is not supported by export yet")
        params, returns = tr.launcher_schema(name, rec.signatures[name], samples)
        ops.append({"function": name, "op": name, "schema": name + tr.schema_text(params, returns),
                    "wrapper": tr.typed_wrapper(name, params, returns), "samples": samples})
    for m in in_methods:
        notes.append(f"{m} launches its kernels itself: no named op for them (torch.compile traces the launches "
                     "through wrap_triton); move a launch into a module-level function to make it an op")
    files = render_triton_package(pkg=pkg, ops=ops, device=device, model_source=model_source, task=task,
                                  provenance=dict(provenance, exported=time.strftime("%Y-%m-%dT%H:%M:%S")))
    for rel, text in files.items():
        f = out / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    return ExportResult(out_dir=out, package=pkg, backend="triton", ops=[f"{pkg}::{o['op']}" for o in ops],
                        recorded=True, notes=notes, seconds=time.perf_counter() - started)


def syntax_check(cpp: Path, cflags: list[str]) -> None:
    """The package's host unit (the candidate's C++ and the op registration) through the host compiler's
    syntax check against torch's headers: what a CUDA export on a machine without a GPU can check."""
    import subprocess
    import sysconfig

    from torch.utils.cpp_extension import include_paths
    keep = [f for f in cflags if f.startswith(("-D", "-I", "-std"))]
    cmd = (["c++", "-fsyntax-only", "-std=c++17", "-DTORCH_EXTENSION_NAME=_C", "-DTORCH_API_INCLUDE_EXTENSION_H"]
           + keep + [f"-I{p}" for p in include_paths()] + [f"-I{sysconfig.get_paths()['include']}", str(cpp)])
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        first = next((ln for ln in r.stderr.splitlines() if "error" in ln), r.stderr[:500])
        raise ExportError(f"{cpp}: the exported host unit does not compile: {first}")


def _record(task, mod, device: str, recorders: list) -> list[str]:
    """Run the candidate on the task's verified inputs (its recorders note every call) and check it against
    the reference there; then again with each size constant halved, one at a time (the evaluator's
    derived shapes), so that each output dim is matched to the one input dim that moves with it. A
    derived shape where the candidate refuses or differs is dropped with its calls. The labels of the
    derived shapes kept."""
    from kernelskill.evaluate.shapes import derive_shapes
    from ..task import Task
    _run_once(task, mod, device, strict=True)
    kept = []
    for label, sets in derive_shapes(task):
        if "(half)" not in label:
            continue
        marks = [{fn: len(v) for fn, v in r.calls.items()} for r in recorders]
        try:
            ok = _run_once(Task.load(task.path, overrides=sets), mod, device, strict=False)
        except Exception:
            ok = False
        if ok:
            kept.append(label)
        else:                          # forget this shape's calls
            for r, m in zip(recorders, marks):
                for fn in list(r.calls):
                    del r.calls[fn][m.get(fn, 0):]
    return kept


def _run_once(task, mod, device: str, strict: bool) -> bool:
    import torch

    from kernelskill.evaluate.worker.guards import align_weights
    ref_mod = task.module()
    init = task.init_inputs(ref_mod)
    torch.manual_seed(0)
    ref = task.build_model(ref_mod, init=init)
    torch.manual_seed(0)
    try:
        new = mod.ModelNew(*init)
    except Exception as e:
        if not strict:
            return False
        raise ExportError(f"ModelNew({', '.join(map(repr, init))}) raised {type(e).__name__}: {e}") from None
    align_weights(new, ref.state_dict())       # the reference's weights where names and shapes match, as verified
    torch.manual_seed(1)
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in task.inputs(ref_mod)]
    ref, new = ref.to(device), new.to(device)
    with torch.no_grad():
        expected = ref(*inputs)
        try:
            got = new(*inputs)
        except Exception as e:
            if not strict:
                return False
            raise ExportError(f"the candidate failed on the task's inputs: {type(e).__name__}: {e}") from None
    atol, rtol = task.tolerance
    flat_e = expected if isinstance(expected, (list, tuple)) else [expected]
    flat_g = got if isinstance(got, (list, tuple)) else [got]
    for e, g in zip(flat_e, flat_g):
        if not (e.shape == g.shape and torch.allclose(e.float(), g.float(), atol=atol, rtol=rtol)):
            if not strict:
                return False
            raise ExportError("the candidate's output differs from the reference's on the task's inputs "
                              f"(atol {atol}, rtol {rtol}): only a verified candidate can be exported")
    return True


def export_json(exts: list[Extension]) -> str:
    return json.dumps([{"function": o.function, "op": o.op, "schema": o.schema, "samples": o.samples}
                       for e in exts for o in e.ops], indent=1)
