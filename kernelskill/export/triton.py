"""Export of a Triton candidate (docs/export.md, "Triton").

A Triton kernel is Python: nothing to build ahead of time (Triton compiles each specialisation on
its first launch and caches it, as the candidate did). What export adds is what makes it shippable
and traceable:

- every launch ``kernel[grid](...)`` of a ``@triton.jit`` (or autotuned) kernel of the module is
  rewritten ``wrap_triton(kernel)[grid](...)``: torch.compile traces the kernel itself, in the
  op's body and in ``ModelNew.forward`` alike;
- every module-level function that launches a kernel and that the verified forward calls (a
  *launcher*) becomes a ``torch.library.triton_op``, ``torch.ops.<pkg>.<name>``: its schema from
  the calls recorded on the task's inputs (tensors, ints, floats, bools, optional tensors), its
  fake implementation the launcher's own code run on fake tensors (triton_op traces it), so no
  shape rule is recorded or guessed. ``ModelNew`` calls the ops;
- launches written inside ``ModelNew``'s methods stay there, traced by torch.compile through
  ``wrap_triton``; they are no named op (a note says so and how to get one).
"""
from __future__ import annotations

import ast
import inspect
import os

from .calls import record_call, return_schema
from .errors import ExportError
from .source import insert_after_imports, insert_import, positions, replace_spans
from kernelskill.candidate import parse_python

def kernel_names(tree: ast.Module, source: str) -> set[str]:
    """Module-level functions decorated ``@triton.jit`` (through autotune/heuristics too): the
    evaluator's own finder of a candidate's kernels, kept to the names a launch can refer to."""
    from kernelskill.evaluate.worker.guards import own_kernel_names
    return own_kernel_names(source) & {s.name for s in tree.body if isinstance(s, ast.FunctionDef)}


def _launches(node: ast.AST, kernels: set[str]) -> list[ast.Name]:
    """The kernel names launched as ``K[grid](...)`` within ``node``."""
    return [n.func.value for n in ast.walk(node)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript)
            and isinstance(n.func.value, ast.Name) and n.func.value.id in kernels]


def launchers(tree: ast.Module, kernels: set[str]) -> list[str]:
    """Module-level plain functions (not kernels) that launch a kernel of the module."""
    return [s.name for s in tree.body if isinstance(s, ast.FunctionDef) and s.name not in kernels
            and _launches(s, kernels)]


# What the rewritten launches call: torch's wrap_triton, except where the package's eager forward
# turned wrapping off, where the kernel itself is returned without wrap_triton's imports on every
# call (docs/export.md, "Eager speed": small kernels feel them). The imports go after the
# docstring, the function after the module's opening imports.
WRAP_IMPORTS = """\
from torch._library.triton import is_wrap_triton_enabled as _ks_wrapping  # kernelskill export: launches
from torch.compiler import is_compiling as _ks_compiling  # that torch.compile, torch.export and make_fx trace
from torch.library import wrap_triton as _ks_torch_wrap_triton
"""
WRAP_DEF = """\


def _ks_wrap_triton(kernel):
    return _ks_torch_wrap_triton(kernel) if _ks_compiling() or _ks_wrapping() else kernel
"""


def wrap_launches(source: str) -> tuple[str, set[str], list[str], list[str]]:
    """``source`` with each ``K[grid](...)`` of a module kernel K written ``_ks_wrap_triton(K)[grid](...)``
    and that function added: (source, kernels, launchers, the classes' methods that launch kernels)."""
    try:
        tree = parse_python(source)
    except SyntaxError as e:
        raise ExportError(f"the candidate does not parse: line {e.lineno}: {e.msg}") from None
    kernels = kernel_names(tree, source)
    if not kernels:
        raise ExportError("the candidate defines no @triton.jit kernel at module level; nothing to export")
    pos = positions(source)
    out = replace_spans(source, [(pos(n.lineno, n.col_offset), pos(n.end_lineno, n.end_col_offset),
                                  f"_ks_wrap_triton({n.id})") for n in _launches(tree, kernels)])
    in_methods = [f"{c.name}.{m.name}" for c in tree.body if isinstance(c, ast.ClassDef)
                  for m in c.body if isinstance(m, ast.FunctionDef) and _launches(m, kernels)]
    out = insert_after_imports(insert_import(out, WRAP_IMPORTS), WRAP_DEF)
    return out, kernels, launchers(tree, kernels), in_methods


class LauncherRecorder:
    """The candidate's launchers, each call recorded as the C++ path records an extension's functions
    (arguments bound to the launcher's parameters, defaults applied, so keyword calls record too)."""

    def __init__(self, mod, names: list[str]):
        self.calls: dict[str, list] = {}
        self.signatures = {}
        for name in names:
            fn = getattr(mod, name)
            sig = inspect.signature(fn)
            self.signatures[name] = sig

            def call(*args, _fn=fn, _sig=sig, _name=name, **kwargs):
                bound = _sig.bind(*args, **kwargs)
                bound.apply_defaults()
                out, record = record_call(list(bound.arguments.values()), lambda: _fn(*args, **kwargs))
                self.calls.setdefault(_name, []).append(record)
                return out
            setattr(mod, name, call)


def _param_schema(fn: str, name: str, index: int, samples: list[dict]) -> str:
    """The schema type of parameter ``index`` from what every recorded call passed."""
    kinds = set()
    for s in samples:
        a = s["args"][index]
        if "shape" in a:
            kinds.add("Tensor")
        elif a["value"] is None:
            kinds.add("None")
        elif isinstance(a["value"], bool):
            kinds.add("bool")
        elif isinstance(a["value"], int):
            kinds.add("int")
        elif isinstance(a["value"], float):
            kinds.add("float")
        else:
            raise ExportError(f"launcher {fn!r}: parameter `{name}` was passed {a['value']}: export maps "
                              "tensors, ints, floats, bools and None to an op schema")
    if kinds == {"int", "float"}:
        return "float"
    if kinds <= {"Tensor", "None"}:
        return "Tensor?" if "None" in kinds else "Tensor"
    if len(kinds) == 1:
        return kinds.pop()
    raise ExportError(f"launcher {fn!r}: parameter `{name}` was passed {sorted(kinds)} in different calls; "
                      "an op's schema needs one type")


def _default(value, schema: str) -> str | None:
    if value is inspect.Parameter.empty:
        return None
    if value is None and schema.endswith("?"):
        return "None"
    if schema == "bool" and isinstance(value, bool):
        return str(value)
    if schema == "int" and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if schema == "float" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return repr(float(value))
    return None


def launcher_schema(fn: str, sig: inspect.Signature, samples: list[dict]) -> tuple[list[tuple], str]:
    """([(name, schema type, default or None, keyword-only)], return schema) from the recorded calls and the
    launcher's defaults: ``(Tensor x, float eps=1e-05) -> Tensor``."""
    params = []
    for i, (name, p) in enumerate(sig.parameters.items()):
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise ExportError(f"launcher {fn!r} takes *{name}: an op needs named parameters")
        schema = _param_schema(fn, name, i, samples)
        params.append((name, schema, _default(p.default, schema), p.kind == p.KEYWORD_ONLY))
    return params, return_schema(fn, samples)


def _with_star(items: list[str], params: list[tuple]) -> list[str]:
    """``*`` before the first keyword-only parameter, as Python and the schema both write it."""
    k = next((i for i, p in enumerate(params) if p[3]), None)
    return items if k is None else items[:k] + ["*"] + items[k:]


def schema_text(params: list[tuple], returns: str) -> str:
    items = [f"{t} {n}" + (f"={d}" if d is not None else "") for n, t, d, _ in params]
    return "(" + ", ".join(_with_star(items, params)) + f") -> {returns}"


_ANNOTATION = {"Tensor": "torch.Tensor", "Tensor?": "Optional[torch.Tensor]", "int": "int", "float": "float",
               "bool": "bool", "Tensor[]": "list[torch.Tensor]"}


def typed_wrapper(name: str, params: list[tuple], returns: str) -> str:
    """The source of a function with the launcher's parameters, annotated (triton_op infers the op's
    schema from annotations), that calls the launcher."""
    ret = _ANNOTATION.get(returns) or ("tuple[" + ", ".join(["torch.Tensor"] * returns.count("Tensor")) + "]")
    args = ", ".join(_with_star([f"{n}: {_ANNOTATION[t]}" + (f" = {d}" if d is not None else "")
                                 for n, t, d, _ in params], params))
    call = ", ".join(f"{n}={n}" if kw_only else n for n, _, _, kw_only in params)
    return (f"def {name}({args}) -> {ret}:\n"
            f"    return LAUNCHERS[{name!r}]({call})\n")


def device_for_export() -> str:
    """Where a Triton candidate runs here: the GPU, or the CPU under Triton's interpreter."""
    import torch
    if torch.cuda.is_available():
        return "cuda"
    if os.environ.get("TRITON_INTERPRET") == "1":
        return "cpu"
    raise ExportError("a Triton candidate runs on a GPU: export it on one, or set TRITON_INTERPRET=1 to run "
                      "its kernels on the CPU through Triton's interpreter (slow, for testing)")
