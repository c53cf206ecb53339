"""The direct build of a candidate's extension: errors in seconds, objects cached per translation
unit, precompiled headers from the first build, every step reported.

torch's ``load_inline`` writes one ``main.cpp`` — ``<torch/extension.h>`` (torch's whole C++ API and
pybind11: ~19 s of parsing on a 2-core machine), the candidate's C++ and the Python bindings — and
builds it through ninja; nothing is reported until the whole build ends, a typo included. Here the
same call becomes three translation units:

``kernel.cpp``
    the candidate's C++ exactly as ``load_inline`` would compile it (its implicit include first),
    except that ``<torch/extension.h>`` resolves to a light header (``torch/types.h``: ATen and
    torch's tensor API) when the sources use nothing else; that header is precompiled once per flag
    set, so the unit's front end — the pre-check — answers in about two seconds;
``bind.cpp`` and ``names.cpp``
    the bindings: torch's Python bindings (``BIND_HEADER``), the functions' declarations (read from
    the sources) under generic names with their parameters unnamed, the ``PYBIND11_MODULE``; its
    object depends on the functions' types only, so every candidate with the same signatures shares
    one, whatever it calls its functions (the generic symbols are renamed to the candidate's before
    the link); the Python names are a unit of their own (milliseconds);
``cuda.cu`` and ``cuda_host.cpp``
    the CUDA sources, when there are any, split (``cuda_split.py``): the kernels and device code
    with one generated launcher per launch site through nvcc, with CUDA's headers only; the host
    functions, their launches calling those launchers, through the C++ compiler against the
    precompiled light header. A source the split does not take is ``cuda.cu`` whole: nvcc takes no
    precompiled header, so ``<torch/extension.h>`` and ``<torch/types.h>`` resolve to a header
    made for this source: the Tensor class, the dispatch macros and the headers of the ATen
    operators it names (a name it lacks, as nvcc's errors show and torch's headers hold, sends
    the unit back to torch/types.h). nvcc's host and device front ends run side by side
    (``nvcc_phases.py``).

Every object is cached by its text, command and environment (``$KERNELSKILL_CACHE/objects``): a
child that changes one kernel rebuilds that unit only. The candidate's own unit starts first and at
full priority; the others beside it at low priority; the first unit to fail ends the build with its
diagnostics. A precompiled header not made yet is made by a detached process while this build goes
on without it (``kernelskill warm`` makes the common ones ahead).

What this path does not take — sources that use pybind11 or the full C++ frontend, a call without
``functions``, functions it cannot declare, arguments it does not know — goes to torch's
``load_inline`` unchanged (``Unsupported``), as does any failure of the bindings or the link
(``BuildLog.fallback`` says why).
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import inspect
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import cuda_split
from .pch import detached_env, make_pch, make_pch_detached, maker_slots
from .tools import cxx, nvcc_or_default
# The tool's own background builds are marked, so that no timing runs beside them (own_builds.py).
from .own_builds import own_build

LIGHT_HEADER = ("#pragma once\n// kernelskill: <torch/extension.h> for sources that use ATen and torch's tensor "
                "API only\n#include <torch/types.h>\n")
# The bindings' unit: pybind11 and torch's Python bindings over the light header — what PYBIND11_MODULE
# and the Tensor casters need, without the C++ frontend: a smaller precompiled header, faster to
# compile with than the whole <torch/extension.h> (figures: docs/evaluator.md, "Measurements behind the code").
BIND_HEADER = ("#pragma once\n// kernelskill: <torch/extension.h> for the bindings' unit\n#include <torch/types.h>\n"
               "#include <torch/python.h>\n")
# A CUDA host unit whose sources include ATen/cuda/CUDAContext.h up front (most do, for the current
# stream) parses it — and CUDA's runtime, cuBLAS's, cuSPARSE's and cuSOLVER's headers with it — on
# every build: this header precompiles them with the light one (figures: docs/evaluator.md, "the
# header with CUDA's context").
CUDA_HOST_HEADER = (LIGHT_HEADER + "#include <cuda.h>\n#include <cuda_runtime.h>\n"
                    "#include <ATen/cuda/CUDAContext.h>\n")
HEADERS = {"light": LIGHT_HEADER, "bind": BIND_HEADER, "cudahost": CUDA_HOST_HEADER}
# What the light header does not declare: such sources get torch's full header (torch's own build).
HEAVY = re.compile(r"\bpy::|\bpybind11|\bPYBIND11_|torch/torch\.h|torch/all\.h|torch/python\.h|torch/script\.h"
                   r"|\btorch::(?:nn|optim|jit|data|autograd|fft|linalg|special|nested|sparse|serialize|cuda|"
                   r"python|indexing)\b|\bTHP\w+")
BIND_FLAGS = ["-O2"]            # the bindings' own flags (docs/evaluator.md: the glue's level, measured)
KNOWN = {"functions", "extra_cflags", "extra_cuda_cflags", "extra_ldflags", "extra_include_paths",
         "build_directory", "verbose", "with_cuda", "is_python_module", "with_pytorch_error_handling",
         "keep_intermediates", "use_pch", "no_implicit_headers", "is_standalone", "extra_sycl_cflags",
         "sycl_sources", "cuda_sources"}


class Unsupported(Exception):
    """This call goes to torch's own build (the reason is the message)."""


class UnitFailed(Exception):
    """A translation unit did not compile: which one and the compiler's output."""

    def __init__(self, unit: str, output: str):
        super().__init__(f"{unit} did not compile")
        self.unit, self.output = unit, output


# ---- the plan -----------------------------------------------------------------------------------
@dataclass
class Plan:
    """What to build for one ``load_inline`` call."""
    unique: str
    build_dir: Path
    cpp: list[str]
    cuda: list[str]
    functions: dict[str, str]
    declarations: list[str]
    cflags: list[str]
    cuda_cflags: list[str]
    ldflags: list[str]
    include_paths: list[str]
    implicit: bool
    error_handling: bool
    with_cuda: bool = False
    defs: str = ""                 # the bindings' function (ks_defs_<hash of the generic declarations>)
    generic: list[str] = field(default_factory=list)    # the declarations, generic names (bind.cpp)
    sources: dict[str, tuple[list[str], int]] = field(default_factory=dict)


def plan(unique: str, build_dir: Path, cpp: list[str], cuda: list[str], args: tuple, kwargs: dict) -> Plan:
    """The split build of this call, or ``Unsupported`` with the reason."""
    if sys.platform != "linux":
        raise Unsupported("not on Linux")
    if args:
        raise Unsupported("positional arguments after cuda_sources")
    unknown = set(kwargs) - KNOWN
    if unknown:
        raise Unsupported(f"load_inline arguments it does not handle: {sorted(unknown)}")
    if kwargs.get("sycl_sources") or kwargs.get("is_standalone") or kwargs.get("is_python_module") is False:
        raise Unsupported("SYCL sources, a standalone or a non-Python-module build")
    if kwargs.get("with_cuda") is False and cuda:
        raise Unsupported("CUDA sources with with_cuda=False")
    functions = kwargs.get("functions")
    if not functions:
        raise Unsupported("no `functions`: the sources hold their own bindings")
    if isinstance(functions, str):
        functions = [functions]
    functions = dict(functions) if isinstance(functions, dict) else {f: f for f in functions}
    text = "\n".join(cpp + cuda)
    heavy = HEAVY.search(_strip_comments(text))
    if heavy:
        raise Unsupported(f"the sources use `{heavy.group(0)}`, which needs torch's full header")
    stripped = _strip_comments("\n".join(cpp))
    heads = [signature(name, stripped) for name in functions]
    declarations = [f"{head} {name}({params});" for name, (head, params) in zip(functions, heads)]
    implicit = not kwargs.get("no_implicit_headers")
    p = Plan(unique=unique, build_dir=build_dir, cpp=cpp, cuda=cuda, functions=functions,
             declarations=declarations, cflags=[f.strip() for f in kwargs.get("extra_cflags") or []],
             cuda_cflags=[f.strip() for f in kwargs.get("extra_cuda_cflags") or []],
             ldflags=[f.strip() for f in kwargs.get("extra_ldflags") or []],
             include_paths=[os.path.abspath(p) for p in kwargs.get("extra_include_paths") or []],
             implicit=implicit, error_handling=kwargs.get("with_pytorch_error_handling", True),
             with_cuda=bool(cuda) or kwargs.get("with_cuda") is True)
    # The bindings' unit declares the functions under generic names, their parameters unnamed, and
    # reads the Python names from a unit of their own: its object serves every candidate whose
    # functions have these types, whatever they are called (a rename costs no bindings build).
    p.generic = [f"{head} {GENERIC}{i}({unnamed(params)});" for i, (head, params) in enumerate(heads)]
    p.defs = "ks_defs_" + _digest([p.generic, p.error_handling])[:16]
    p.sources = {"kernel.cpp": (cpp, 1 if implicit else 0), "cuda.cu": (cuda, 3 if implicit else 0)}
    return p


def declaration(name: str, text: str) -> str:
    """The declaration of function ``name`` as the sources write it (definition or prototype)."""
    head, params = signature(name, text)
    return f"{head} {name}({params});"


# Parameters are unnamed only where the name is certain: the last word is not one of these (they
# end a type: `unsigned int`, `long long`) and what comes before it is more than these (`const T`,
# `struct T`, `unsigned T` name no parameter, or one too ambiguous to judge).
_BUILTIN_TYPES = {"int", "long", "short", "char", "double", "float", "bool", "void", "wchar_t", "char8_t",
                  "char16_t", "char32_t", "auto"}
_QUALIFIERS = {"unsigned", "signed", "const", "volatile", "struct", "class", "enum", "typename", "__restrict__",
               "__restrict", "restrict"}
GENERIC = "ks_fn_"                 # the bindings' names for the candidate's functions: ks_fn_0, ks_fn_1, ...


def split_params(params: str) -> list[str]:
    """A C++ parameter list split at its top-level commas (a template's or a default's commas stay
    inside their parameter), each part as written."""
    parts, depth, cur = [], 0, ""
    for ch in params:
        depth += (ch in "<([") - (ch in ">)]")
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return parts


def unnamed(params: str) -> str:
    """A parameter list without its parameters' names where that is certain (``torch::Tensor x,
    int64_t n`` -> ``torch::Tensor, int64_t``); a parameter it cannot read is kept as written."""
    out = []
    for part in (x.strip() for x in split_params(params)):
        m = re.fullmatch(r"(?P<type>.*?[\w>*&])\s*\b(?P<name>[A-Za-z_]\w*)", part)
        if (m and "=" not in part and m["name"] not in _BUILTIN_TYPES | _QUALIFIERS
                and not set(re.findall(r"\w+", m["type"])) <= _QUALIFIERS
                and not m["type"].rstrip().endswith("::")):
            part = m["type"].strip()
        out.append(part)
    return ", ".join(out)


def signature(name: str, text: str) -> tuple[str, str]:
    """(return type and specifiers, parameters) of function ``name`` as the sources declare it."""
    pat = re.compile(r"(?:^|(?<=[;{}]))\s*(?P<head>[A-Za-z_][\w:<>,\s*&]*?)\b" + re.escape(name)
                     + r"\s*\((?P<params>[^;{}]*)\)\s*(?:noexcept\s*)?(?:[;{]|->)", re.M)
    m = pat.search(text)
    if not m:
        raise Unsupported(f"no declaration of `{name}` found in cpp_sources")
    head = " ".join(m["head"].split())
    words = set(re.findall(r"\w+", head))
    if words & {"static", "inline", "template", "constexpr", "auto", "namespace", "return", "else", "struct",
                "class", "typedef", "using"} or not head:
        raise Unsupported(f"`{name}` is declared `{head}`, which another unit cannot call")
    return head, " ".join(m["params"].split())


def _strip_comments(text: str) -> str:
    """C++ without comments and string literals (their contents never declare anything)."""
    out = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    out = re.sub(r"//[^\n]*", "", out)
    return re.sub(r'"(?:\\.|[^"\\\n])*"', '""', out)


# ---- the toolchain --------------------------------------------------------------------------------
@functools.cache
def _torch_flags(with_cuda: bool) -> tuple[list[str], list[str], list[str]]:
    """(C++ flags, nvcc flags, link flags) as torch's own build would use them."""
    import torch.utils.cpp_extension as ext
    includes = ext.include_paths("cuda" if with_cuda else "cpu")
    includes.append(sysconfig.get_path("include", scheme="posix_prefix"))
    common = ["-DTORCH_API_INCLUDE_EXTENSION_H"]
    for p in includes:
        common += ["-isystem", p]            # two arguments: nvcc takes no joined form
    # Torch's private flag helpers, where they still mean something: a deprecated one (torch marks
    # the pybind11 one so from 2.9 on, and returns nothing) is not called, so it warns nobody.
    for name in ("_get_pybind11_abi_build_flags", "_get_glibcxx_abi_build_flags"):
        helper = getattr(ext, name, None)
        if helper is not None and not getattr(helper, "__deprecated__", None):
            common += list(helper())
    cxx = common + ["-fPIC", "-std=c++20"]
    nvcc = []
    if with_cuda:
        nvcc = common + list(ext.COMMON_NVCC_FLAGS) + ["--compiler-options", "-fPIC"]
    prepare = ext._prepare_ldflags
    params = inspect.signature(prepare).parameters
    kw = {k: v for k, v in {"with_cuda": with_cuda, "with_sycl": False, "verbose": False,
                            "is_standalone": False}.items() if k in params}
    ld = ["-shared", *prepare([], **kw)]
    return cxx, nvcc, ld


def _cuda_arch_flags(cuda_cflags: list[str]) -> list[str]:
    import torch.utils.cpp_extension as ext
    return list(ext._get_cuda_arch_flags(list(cuda_cflags)))



def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


# ---- precompiled headers --------------------------------------------------------------------------
def header_dir(root: Path, kind: str, flags: list[str], make: bool = True) -> tuple[Path, bool]:
    """A directory holding ``torch/extension.h`` — the light header (``kind`` "light"), the bindings'
    ("bind"), the light one with CUDA's context for host units ("cudahost") or the light one for
    nvcc, which uses no PCH ("cuda") — and whether its precompiled
    ``.gch`` (made with ``flags``) is ready. Not ready: a detached process makes it (``make``)."""
    cmd = [cxx(), *flags]
    d = root / f"{kind}-{_digest(cmd)[:12]}"
    header = d / "torch" / "extension.h"
    if not header.exists():
        header.parent.mkdir(parents=True, exist_ok=True)
        text = HEADERS.get(kind, LIGHT_HEADER)
        tmp = header.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, header)
    gch = header.with_name("extension.h.gch")
    if kind == "cuda" or gch.exists():
        return d, gch.exists()
    if make:
        make_pch_detached(d, cmd)
    return d, False


NVCC_PHASES = Path(__file__).with_name("nvcc_phases.py")
# What torch/types.h adds in namespace torch over ATen (its dtype names), for the light nvcc header.
TORCH_DTYPES = {"kUInt8": "kByte", "kInt8": "kChar", "kInt16": "kShort", "kInt32": "kInt", "kInt64": "kLong",
                "kUInt16": "kUInt16", "kUInt32": "kUInt32", "kUInt64": "kUInt64", "kFloat16": "kHalf",
                "kFloat32": "kFloat", "kFloat64": "kDouble", "kU8": "kByte", "kU16": "kUInt16", "kU32": "kUInt32",
                "kU64": "kUInt64", "kI8": "kChar", "kI16": "kShort", "kI32": "kInt", "kI64": "kLong",
                "kF16": "kHalf", "kF32": "kFloat", "kF64": "kDouble"}
# nvcc's words for a name not declared (torch's, which the light header lacks, or a typo).
_NVCC_MISS = re.compile(r'namespace "(?:torch|at|c10)(?:::\w+)*" has no member (?:class |function )?"(\w+)"'
                        r'|identifier "(\w+)" is undefined')


@functools.cache
def _aten_ops() -> frozenset[str]:
    """The ATen operators that have a header of their own (ATen/ops/<name>.h)."""
    import torch.utils.cpp_extension as ext
    for inc in ext.include_paths("cpu"):
        ops = Path(inc) / "ATen" / "ops"
        if ops.is_dir():
            return frozenset(f.name[:-2] for f in ops.glob("*.h") if not f.name.endswith(("_ops.h", "_native.h")))
    return frozenset()


def nvcc_light_header(cuda: list[str]) -> str:
    """``<torch/extension.h>`` for nvcc, made for these sources: the Tensor class, the dispatch
    macros and the headers of the operators the sources name, and torch's names for them. nvcc has
    no precompiled headers: its two front ends and the host compile each parse what is included
    (torch/types.h, all of ATen: ~110k more lines), so a smaller header is a faster build."""
    text = _strip_comments("\n".join(cuda))
    names = set(re.findall(r"\b([a-z_][a-z0-9_]*)\s*(?:<[^<>;]*>)?\s*\(", text))
    names |= set(re.findall(r"\b(?:torch|at)::(\w+)", text))
    ops = sorted(names & _aten_ops())
    lines = ["#pragma once", "// kernelskill: <torch/extension.h> and <torch/types.h> for nvcc, this candidate's ops",
             "#include <ATen/core/Tensor.h>", "#include <ATen/Dispatch.h>", "#include <ATen/TensorUtils.h>",
             *[f"#include <ATen/ops/{op}.h>" for op in ops],
             "namespace torch {", "using namespace at; // NOLINT", "using Dtype = at::ScalarType;",
             *[f"constexpr auto {k} = at::{v};" for k, v in TORCH_DTYPES.items()], "}  // namespace torch"]
    return "\n".join(lines) + "\n"


def nvcc_light_dir(d: Path, cuda: list[str]) -> Path | None:
    """An include directory whose torch/extension.h and torch/types.h are the light nvcc header."""
    if not _aten_ops():
        return None
    inc = d / "_nvcc"
    text = nvcc_light_header(cuda)
    for name in ("extension.h", "types.h"):
        f = inc / "torch" / name
        if not f.exists() or f.read_text() != text:
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(text)
    return inc


def nvcc_light_miss(output: str) -> str | None:
    """The name of torch's that the light header lacked, if nvcc's errors say so: a name its errors
    call undeclared that torch's headers hold (``at::acc_type``). A name they do not hold is the
    candidate's typo (``flot``, ``torch::empty_lik``): reported at once, with no second build."""
    for m in _NVCC_MISS.finditer(output):
        name = m.group(1) or m.group(2)
        if _in_torch_headers(name):
            return name
    return None


@functools.cache
def _in_torch_headers(name: str) -> bool:
    import torch.utils.cpp_extension as ext
    roots = [str(Path(inc) / sub) for inc in ext.include_paths("cpu")[:1] for sub in ("ATen", "c10", "torch")]
    try:
        return subprocess.run(["grep", "-rqwF", "--include=*.h", name, *roots], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
    except OSError:
        return True           # no grep: a second build with the full header decides



# ---- the build ------------------------------------------------------------------------------------
@dataclass
class Unit:
    """One translation unit: its command, its cached object, its process while it compiles."""
    name: str
    cmd: list[str]
    obj: Path
    cached: Path
    nice: int = 0
    proc: subprocess.Popen | None = None
    out: Path | None = None
    started: float = 0.0
    seconds: float = 0.0


def bindings_command(p: Plan, cache: Path) -> list[str]:
    """The compile command of ``p``'s bindings unit (``bind.cpp``), against their precompiled header."""
    bflags = [*_torch_flags(p.with_cuda)[0], *BIND_FLAGS]
    full, _ = header_dir(cache / "_pch", "bind", bflags)
    return [cxx(), "-c", f"-I{full}", *[f"-I{i}" for i in p.include_paths], f"-DTORCH_EXTENSION_NAME={p.defs}",
            *bflags]


# The signatures most candidates bind (the shipped solutions' and KernelBench's usual ones), whose
# bindings objects `kernelskill warm` builds ahead: a first candidate of one of these types then
# builds no bindings, the slowest unit of a never-seen signature's build (figures: docs/evaluator.md,
# "Measurements behind the code").
COMMON_SIGNATURES = ["torch::Tensor x", "torch::Tensor a, torch::Tensor b", "torch::Tensor a, torch::Tensor b, "
                     "torch::Tensor c", "torch::Tensor a, torch::Tensor b, torch::Tensor c, torch::Tensor d",
                     "torch::Tensor x, double s", "torch::Tensor x, int64_t n", "torch::Tensor a, torch::Tensor b, "
                     "double s", "torch::Tensor a, torch::Tensor b, torch::Tensor c, double s"]


def common_bindings(cache: Path, work: Path, with_cuda: bool, signatures: list[str] | None = None) -> list[Unit]:
    """The bindings units of the common signatures (one function returning a tensor), as a
    candidate's build would make them, their sources under ``work``; ``unit.cached`` is where each
    object is kept."""
    units = []
    for i, params in enumerate(signatures or COMMON_SIGNATURES):
        d = work / str(i)
        d.mkdir(parents=True, exist_ok=True)
        p = plan(f"warm_{i}", d, [f"torch::Tensor f({params});"], [], (), {"functions": ["f"], "with_cuda": with_cuda})
        units.append(_unit("bind.cpp", d, bind_source(p), bindings_command(p, cache), cache / "_objects"))
    return units


def build(p: Plan, cache: Path, on_step=None, log=None) -> Path:
    """Compile, link: the path of the extension's shared library (its init is ``PyInit_<unique>``).

    Raises ``UnitFailed`` for the candidate's own units (kernel.cpp, cuda.cu) and ``Unsupported``
    when the bindings or the link fail (torch's build is then tried).
    """
    step = on_step or (lambda text: None)
    with_cuda = p.with_cuda
    cxx_flags, nvcc_flags, ld_flags = _torch_flags(with_cuda)
    pch_root = cache / "_pch"
    objects = cache / "_objects"
    d = p.build_dir
    # The candidate's units see one name per set of bindings (not the extension's own), so that their
    # objects are shared by every extension with the same sources; only the renamed init names this one.
    name_flag = f"-DTORCH_EXTENSION_NAME={p.defs}"
    # the candidate's C++
    kflags = [*cxx_flags, *p.cflags]
    light, _ = header_dir(pch_root, "light", kflags)
    kernel_src = ("#include <torch/extension.h>\n" if p.implicit else "") + "\n".join(p.cpp) + "\n"
    units = [_unit("kernel.cpp", d, kernel_src,
                   [cxx(), "-c", f"-I{light}", *[f"-I{i}" for i in p.include_paths], name_flag,
                    *kflags], objects)]
    # the bindings
    bind_cmd = bindings_command(p, cache)
    units.append(_unit("bind.cpp", d, bind_source(p), bind_cmd, objects, nice=10))
    units.append(_unit("names.cpp", d, names_source(p), [cxx(), "-c", "-fPIC", "-O0"], objects))
    # The module's init is in bind.o under the bindings' name (PyInit_<defs>) and renamed to this
    # extension's before the link (name_module): two extensions with the same bindings share bind.o,
    # never a module name (Python would hand the second one the first's module), and no unit is
    # compiled just to name the module (it was init.cpp, a unit in every build; figures: docs/evaluator.md,
    # "Measurements behind the code").
    if p.cuda:
        # nvcc has no precompiled headers: a header made for this source's ops (falling back to
        # torch/types.h when it lacks a name), and the two front ends side by side (nvcc_phases.py).
        cuda_full, _ = header_dir(pch_root, "cuda", [*nvcc_flags, *p.cuda_cflags])
        cuda_light = nvcc_light_dir(d, p.cuda) if p.implicit else None

        def nvcc_cmd(include: Path | None) -> list[str]:
            ncmd = [nvcc_or_default(), "-c", *([f"-I{include}"] if include else []), *[f"-I{i}" for i in p.include_paths],
                    name_flag, *nvcc_flags, *_cuda_arch_flags(p.cuda_cflags), *p.cuda_cflags]
            if not any(f.startswith("-std=") for f in ncmd):
                ncmd.append("-std=c++20")
            if os.environ.get("CC"):
                ncmd[1:1] = ["-ccbin", os.environ["CC"]]
            return [sys.executable, str(NVCC_PHASES), *ncmd]     # the two front ends side by side

        def cuda_unit(include: Path) -> Unit:
            src = ("#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n" if p.implicit else "") \
                + "\n".join(p.cuda) + "\n"
            return _unit("cuda.cu", d, src, nvcc_cmd(include), objects, nice=5)

        sp = split_cuda(p, step)
        if sp is not None:
            # The kernels through nvcc with CUDA's headers only, the host functions through the C++
            # compiler against a precompiled header: the light one, or the one with CUDA's context
            # (host_header_dir; cuda_split.py).
            host_header = host_header_dir(pch_root, kflags, sp.host) or light
            try:
                units = compile_split(d, sp, nvcc_cmd(None), [cxx(), "-c", f"-I{host_header}",
                                      *[f"-I{i}" for i in p.include_paths], name_flag, *kflags], objects, step, log,
                                      others=units)
            except UnitFailed as e:
                if e.unit not in ("cuda.cu", "cuda_host.cpp") or cuda_split.candidates_error(
                        e.output, e.unit, sp, _in_torch_headers):
                    raise
                step(cuda_split.whole_after_split(e.unit))
                if log is not None:
                    for name in ("cuda.cu", "cuda_host.cpp"):
                        if name in log.units:
                            log.units[f"{name} (split)"] = log.units.pop(name)
                sp = None
        if sp is None:
            _compile_cuda_whole(units, cuda_unit, cuda_light, cuda_full, step, log)
    else:
        _compile_all(units, step, log)
    bind = next(u for u in units if u.name == "bind.cpp")
    renames = bind_symbols(bind.obj, p, [u.obj for u in units if u.name not in ("bind.cpp", "names.cpp")])
    if renames is None:
        # The generic declarations do not match the candidate's definitions (a parameter type they
        # read otherwise): the bindings under the candidate's own names, as load_inline writes them.
        step("bind.cpp: the candidate's names (its definitions differ from the generic declarations)")
        units[units.index(bind)] = bind = _unit("bind.cpp", d, bind_source(p, named=True), bind_cmd, objects)
        _compile_all([bind], step, log)
        renames = {}
    name_module(bind.obj, p, renames)
    so = d / f"{p.unique}.so"
    step("link")
    tmp = so.with_suffix(f".{os.getpid()}.tmp.so")
    proc = subprocess.run([cxx(), *[str(u.obj) for u in units], *ld_flags, *p.ldflags, "-o", str(tmp)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise Unsupported("the link failed: " + (proc.stdout + proc.stderr).strip()[-600:])
    os.replace(tmp, so)
    (d / "kernelskill_module").write_text(p.unique)
    return so


def host_header_dir(pch_root: Path, flags: list[str], host: str) -> Path | None:
    """The "cudahost" header's folder for a split host unit that includes ATen/cuda/CUDAContext.h
    among its leading includes (so the unit is the same with it precompiled in front), once its
    precompiled form is ready (until then a detached process makes it and the light header serves);
    None: the light header."""
    if not cuda_split.includes_up_front(host, "ATen/cuda/CUDAContext.h"):
        return None
    d, ready = header_dir(pch_root, "cudahost", flags)
    return d if ready else None


def compile_split(d: Path, sp: "cuda_split.Split", nvcc_cmd: list[str], host_cmd: list[str], objects: Path, step,
                  log, others: list[Unit] = ()) -> list[Unit]:
    """A split source's ``cuda.cu`` and ``cuda_host.cpp``, beside ``others``, then the launcher check:
    every unit compiled, or UnitFailed for the first to fail or a launcher the device object lacks."""
    units = [*others, _unit("cuda.cu", d, sp.device, nvcc_cmd, objects, nice=5),
             _unit("cuda_host.cpp", d, sp.host, host_cmd, objects)]
    _compile_all(units, step, log)
    missing = cuda_split.missing_launchers(units[-1].obj, units[-2].obj)
    if missing:
        raise UnitFailed("cuda_host.cpp", f"launchers not instantiated: {sorted(missing)[:3]}")
    return units


def _compile_cuda_whole(units: list[Unit], cuda_unit, cuda_light, cuda_full, step, log) -> None:
    """``cuda.cu`` built whole: the light nvcc header, then torch/types.h where it lacks a name."""
    try:
        units.append(cuda_unit(cuda_light or cuda_full))
        _compile_all(units, step, log)
    except UnitFailed as e:
        miss = cuda_light is not None and e.unit == "cuda.cu" and nvcc_light_miss(e.output)
        if not miss:
            raise
        step(f"cuda.cu: the light header lacks `{miss}`; again with torch/types.h")
        if log is not None:
            log.units["cuda.cu (light header)"] = log.units.pop("cuda.cu", 0.0)
        units[-1] = cuda_unit(cuda_full)
        _compile_all(units, step, log)


def split_cuda(p: Plan, step) -> "cuda_split.Split | None":
    """The CUDA sources as a device unit and a host unit, or None (built whole) with the reason
    reported as a step."""
    if not p.implicit:
        return None
    try:
        return cuda_split.split(p.cuda, offset=3)
    except cuda_split.CannotSplit as e:
        step(f"cuda.cu built whole: {e}")
        return None


def bind_source(p: Plan, named: bool = False) -> str:
    """The bindings and the module's init, named after the bindings (``PyInit_<defs>``;
    ``name_module`` gives the object the extension's own name before the link). The functions are
    declared under generic names (``ks_fn_0``, ...: ``name_module`` points them at the candidate's)
    and bound under the Python names of ``names_source``, so the object depends on the functions'
    types alone. ``named``: the functions under their own names, for a candidate whose definitions
    the generic declarations do not match (``bind_symbols``)."""
    lines = ["#include <torch/extension.h>", *(p.declarations if named else p.generic),
             'extern "C" __attribute__((visibility("hidden"))) const char* const ks_bind_names[];',
             'extern "C" __attribute__((visibility("hidden"))) const char* const ks_bind_docs[];',
             f"static void {p.defs}(pybind11::module_& m) {{"]
    for i, fn in enumerate(p.functions):
        called = fn if named else f"{GENERIC}{i}"
        target = f"torch::wrap_pybind_function({called})" if p.error_handling else called
        lines.append(f"  m.def(ks_bind_names[{i}], {target}, ks_bind_docs[{i}]);")
    lines += ["}", f"PYBIND11_MODULE({p.defs}, m) {{ {p.defs}(m); }}"]
    return "\n".join(lines) + "\n"


def names_source(p: Plan) -> str:
    """The Python names and docstrings the bindings read: a unit of its own (a few milliseconds to
    compile), so the bindings' object does not depend on them. Hidden: each extension's own."""
    def literals(items) -> str:
        return ", ".join(_c_string(x) for x in items)
    attr = 'extern "C" __attribute__((visibility("hidden"))) const char* const'
    return (f"{attr} ks_bind_names[] = {{{literals(p.functions)}}};\n"
            f"{attr} ks_bind_docs[] = {{{literals(p.functions.values())}}};\n")


def _c_string(text: str) -> str:
    """``text`` as a C string literal (UTF-8, every byte outside printable ASCII escaped)."""
    out = []
    for b in str(text).encode():
        ch = chr(b)
        out.append("\\" + ch if ch in '"\\' else ch if 32 <= b < 127 and ch != "?" else f"\\{b:03o}")
    return '"' + "".join(out) + '"'


def bind_symbols(bind_obj: Path, p: Plan, candidate_objs: list[Path]) -> dict[str, str] | None:
    """The renames that point the generic bindings at the candidate's functions
    (``_Z7ks_fn_0N2at6TensorE`` -> ``_Z5relu2N2at6TensorE``: a free function's mangled name is its
    name's length and name, then its parameters' types), or None where a candidate object defines
    the function with other types than the generic declaration reads (then the bindings are built
    under the candidate's names). A function defined nowhere keeps its rename: its module then
    fails to load on that symbol, as it would with the named bindings."""
    undefined = _symbols(bind_obj, "--undefined-only")
    defined = set().union(*(_symbols(o, "--defined-only") for o in candidate_objs)) if candidate_objs else set()
    renames = {}
    for i, fn in enumerate(p.functions):
        gen = f"_Z{len(GENERIC) + len(str(i))}{GENERIC}{i}"
        found = [sym for sym in undefined if sym.startswith(gen)]    # the length prefix: ks_fn_1 is not ks_fn_10
        if len(found) != 1:
            return None
        real = f"_Z{len(fn)}{fn}" + found[0][len(gen):]
        if real not in defined and any(sym.startswith(f"_Z{len(fn)}{fn}") for sym in defined):
            return None
        renames[found[0]] = real
    return renames


def _symbols(obj: Path, which: str) -> set[str]:
    proc = subprocess.run(["nm", which, "--format=posix", str(obj)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise Unsupported(f"nm could not read {obj.name}: " + (proc.stdout + proc.stderr).strip()[-300:])
    return {line.split()[0] for line in proc.stdout.splitlines() if line.strip()}


def name_module(bind_obj: Path, p: Plan, renames: dict[str, str] | None = None) -> None:
    """Rename the init of ``bind_obj`` (this build's copy of the bindings' object) to the extension's:
    ``PyInit_<defs>`` becomes ``PyInit_<unique>``, the one symbol Python looks up when it imports it
    (the module takes its name from the import: pybind11's multi-phase init reads the spec); and the
    generic functions become the candidate's (``renames``, from ``bind_symbols``)."""
    args = [f"--redefine-sym=PyInit_{p.defs}=PyInit_{p.unique}",
            *[f"--redefine-sym={a}={b}" for a, b in (renames or {}).items()]]
    proc = subprocess.run(["objcopy", *args, str(bind_obj)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise Unsupported("objcopy could not name the module: " + (proc.stdout + proc.stderr).strip()[-400:])


def _unit(name: str, d: Path, text: str, cmd: list[str], objects: Path, nice: int = 0) -> Unit:
    src = d / name
    if not src.exists() or src.read_text() != text:
        src.write_text(text)
    obj = d / (name.rsplit(".", 1)[0] + ".o")
    # The key leaves out where things are (the build directory) and whether the header was
    # precompiled (the same object either way) but keeps every flag and the text.
    key = _digest([[c for c in cmd if not c.startswith("-I" + str(d))], text, name])[:24]
    return Unit(name=name, cmd=[*cmd, str(src), "-o", str(obj)], obj=obj, cached=objects / f"{key}.o", nice=nice)


def _compile_all(units: list[Unit], step, log) -> None:
    """Compile the units not cached, all at once; the first failure stops the rest."""
    todo = []
    for u in units:
        if u.cached.exists():
            shutil.copyfile(u.cached, u.obj)
            step(f"{u.name}: cached object")
            continue
        todo.append(u)
    for u in todo:
        u.out = u.obj.with_suffix(".log")
        # the exact command beside its output: a unit can be compiled again by hand (or by
        # benchmarks/probe_typo_latency.py) from its build folder
        u.obj.with_suffix(".cmd").write_text(shlex.join(u.cmd) + "\n")
        nice = u.nice
        u.started = time.monotonic()
        with open(u.out, "w") as out:
            u.proc = subprocess.Popen(u.cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                      cwd=u.obj.parent, preexec_fn=(lambda n=nice: os.nice(n)) if nice else None)
        step(f"compile {u.name}")
    try:
        pending = list(todo)
        while pending:
            for u in list(pending):
                rc = u.proc.poll()
                if rc is None:
                    continue
                pending.remove(u)
                u.seconds = time.monotonic() - u.started
                if log is not None:
                    log.units[u.name] = round(u.seconds, 3)
                if rc != 0:
                    step(f"{u.name} failed after {u.seconds:.1f} s")
                    text = u.out.read_text(errors="replace")
                    if u.name in ("bind.cpp", "names.cpp"):
                        raise Unsupported("the bindings did not compile: " + text.strip()[-600:])
                    raise UnitFailed(u.name, text)
                u.cached.parent.mkdir(parents=True, exist_ok=True)
                tmp = u.cached.with_suffix(f".{os.getpid()}.tmp")
                shutil.copyfile(u.obj, tmp)
                os.replace(tmp, u.cached)
                step(f"{u.name} compiled in {u.seconds:.1f} s")
            if pending:
                time.sleep(0.02)
    finally:
        for u in todo:
            if u.proc is not None and u.proc.poll() is None:
                _kill_tree(u.proc.pid)
                u.proc.wait()


def _kill_tree(pid: int) -> None:
    """Kill a compiler driver and what it started (nvcc runs cicc, ptxas, gcc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    todo, seen = [pid], []
    while todo:
        p = todo.pop()
        seen.append(p)
        todo.extend(children.get(p, []))
    for p in seen:
        try:
            os.kill(p, 9)
        except (ProcessLookupError, PermissionError):
            pass


def load(so: Path, modname: str):
    """Import the built library: its module is ``modname`` (the extension's unique name)."""
    spec = importlib.util.spec_from_file_location(modname, str(so))
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {so}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def warm(cache: Path, flag_sets: list[list[str]], wait: bool = True, say=print) -> None:
    """Make the precompiled headers for these C++ flag sets and the bindings' one, ``maker_slots()``
    at a time, then the bindings objects of ``COMMON_SIGNATURES``; ``cache`` is the environment's
    build root (``build.build_root()``). ``wait=False``: one
    detached process at the lowest priority makes them (its log: ``_pch/warm.log``)."""
    if not wait:
        (cache / "_pch").mkdir(parents=True, exist_ok=True)
        with open(cache / "_pch" / "warm.log", "w") as out:
            subprocess.Popen(["nice", "-n", "19", sys.executable, "-m", "kernelskill.evaluate.build.direct", "warm",
                              str(cache), json.dumps(flag_sets)], stdin=subprocess.DEVNULL, stdout=out,
                             stderr=subprocess.STDOUT, start_new_session=True, env=detached_env())
        say(f"making them in the background; its log: {cache / '_pch' / 'warm.log'}")
        return
    import torch
    cxx_flags, _, _ = _torch_flags(False)
    sets = [("bindings", "bind", cxx_flags, [*cxx_flags, *BIND_FLAGS])] + [
        ("light", "light", cxx_flags, [*cxx_flags, *f]) for f in flag_sets]
    if torch.version.cuda and torch.cuda.is_available():
        # CUDA candidates' C++ units build with the CUDA include paths: headers of their own
        cuda_flags, _, _ = _torch_flags(True)
        sets += [("CUDA bindings", "bind", cuda_flags, [*cuda_flags, *BIND_FLAGS]),
                 ("CUDA light", "light", cuda_flags, list(cuda_flags)),
                 ("CUDA host (with CUDAContext.h)", "cudahost", cuda_flags, list(cuda_flags))]
    slots = maker_slots()
    say(f"{len(sets)} headers, {slots} at a time")
    todo = []
    for i, (what, kind, base, flags) in enumerate(sets, 1):
        extra = " ".join(flags[len(base):]) or "no extra flags"
        d, ready = header_dir(cache / "_pch", kind, flags, make=False)
        if ready:
            say(f"[{i}/{len(sets)}] {what} header ({extra}): ready")
        else:
            (d / "cmd.json").write_text(json.dumps([cxx(), *flags]))
            todo.append((i, f"{what} header ({extra})", d))

    def one(item):
        i, name, d = item
        t = time.monotonic()
        ok = make_pch(d)
        say(f"[{i}/{len(sets)}] {name}: "
            + (f"made in {time.monotonic() - t:.1f} s" if ok else
               f"NOT made ({'another process is making it' if not (d / 'failed.log').exists() else d / 'failed.log'})"))

    if todo:
        say(f"making {len(todo)}…")
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(max_workers=slots) as pool:
            list(pool.map(one, todo))
    # The bindings of the common signatures, against the header just made.
    import tempfile
    for with_cuda in [False] + ([True] if torch.version.cuda and torch.cuda.is_available() else []):
        with tempfile.TemporaryDirectory(prefix="ks-bindings-") as work, \
                own_build(cache / "_pch", f"{'CUDA ' if with_cuda else ''}bindings of the common signatures"):
            _build_bindings(common_bindings(cache, Path(work), with_cuda), slots, "CUDA " if with_cuda else "", say)


def _build_bindings(every: list[Unit], slots: int, label: str, say) -> None:
    units = [u for u in every if not u.cached.exists()]
    if not units:
        say(f"{label}bindings of {len(every)} common signatures: ready")
        return
    t = time.monotonic()
    for k in range(0, len(units), slots):
        try:
            _compile_all(units[k:k + slots], lambda text: None, None)
        except (Unsupported, UnitFailed) as e:
            say(f"{label}bindings NOT built: {str(e)[-300:]}")
            return
    say(f"{label}bindings of {len(units)} common signatures: built in {time.monotonic() - t:.1f} s")


def shipped_flag_sets() -> list[list[str]]:
    """The extra_cflags of the shipped C++ solutions (examples/*/solutions/cpp_*.py)."""
    from kernelskill.paths import EXAMPLES_DIR
    sets = []
    for path in sorted(EXAMPLES_DIR.glob("*/solutions/cpp_*.py")):
        m = re.search(r"extra_cflags\s*=\s*(\[[^\]]*\])", path.read_text())
        if m:
            try:
                flags = [str(f) for f in json.loads(m.group(1).replace("'", '"'))]
            except ValueError:
                continue
            if flags not in sets:
                sets.append(flags)
    return sets


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "warm":
        warm(Path(sys.argv[2]), json.loads(sys.argv[3]), say=lambda text: print(text, flush=True))
        sys.exit(0)
    sys.exit("usage: python -m kernelskill.evaluate.build.direct warm BUILD_ROOT FLAG_SETS_JSON")



def locate(piece: str, candidate: str) -> int | None:
    """Line offset of a source string inside the candidate's text (None when not verbatim)."""
    idx = candidate.find(piece)
    if idx >= 0:
        return candidate[:idx].count("\n")
    lines = piece.splitlines()
    for i, ln in enumerate(lines):      # fall back to a distinctive line that occurs once
        s = ln.strip()
        if len(s) > 12 and candidate.count(s) == 1 and piece.count(s) == 1:
            cand_line = candidate[:candidate.find(s)].count("\n")
            return cand_line - i
    return None
