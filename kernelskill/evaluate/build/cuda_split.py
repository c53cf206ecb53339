"""Keep torch's headers out of nvcc: a candidate's CUDA source as a device unit and a host unit.

nvcc has no precompiled header and parses what ``cuda.cu`` includes three times (host
preprocessing and cudafe++, the device front end, the host compile): with ATen's Tensor class that
is ~11 s of a 2-core machine's and ~17 s of the H100 host's cold CUDA build, for a source whose
kernels need none of it. Split here:

``cuda.cu`` (nvcc)
    the kernels (``__global__``), ``__device__`` / ``__host__ __device__`` functions and
    ``__constant__`` data, every declaration that names nothing of torch's (macros, structs,
    constants), and one *launcher* per launch site: ``void __ks_launch_3(dim3, dim3, size_t,
    cudaStream_t, <the kernel's parameters>)`` that launches the kernel — a template with explicit
    instantiations where the kernel is one. It includes ``cuda.h`` and ``cuda_runtime.h`` only.
``cuda_host.cpp`` (the C++ compiler, the precompiled light header)
    the host functions, each ``kernel<<<g, b, s, st>>>(args)`` rewritten as
    ``__ks_launch_3(g, b, s, st, args)``, the launchers declared, and the same declarations.

``#line`` directives keep every line where it was in the joined CUDA source, so the compilers'
messages map into the candidate as before. What the split does not take raises ``CannotSplit``
and the unit is built whole (the light nvcc header, then torch/types.h): preprocessor
conditionals, namespaces and ``extern "C"`` blocks, device code that names torch (tensor
accessors, ``c10::Half``), a template kernel launched with deduced arguments, a launch in a
top-level macro, dispatch macros
other than the floating ones (``AT_DISPATCH_FLOATING_TYPES[_AND_HALF]``,
``AT_DISPATCH_REDUCED_FLOATING_TYPES``: for these the device unit includes c10's small Half and
BFloat16 headers), a launch outside a host function.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

DEVICE_PRELUDE = "#include <cuda.h>\n#include <cuda_runtime.h>\n"
HOST_PRELUDE = "#include <torch/extension.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n"
# What a host unit may name and a device unit may not.
TORCH = re.compile(r"\b(?:torch|at|c10|caffe2)::|\bAT_[A-Z_]+|\bTORCH_[A-Z_]+|\bC10_[A-Z_]+|\bTensor\b")
TORCH_INCLUDE = re.compile(r"#\s*include\s*[<\"](?:torch|ATen|c10|caffe2|pybind11)/")
CONDITIONAL = re.compile(r"#\s*(?:if|ifdef|ifndef|elif|else|endif)\b")
# Headers and namespaces of device code only: their headers declare nothing outside nvcc (mma.h and
# cooperative_groups.h are empty to a C++ compiler), so an include of them, or a using-directive or
# alias naming their namespaces, goes to the device unit alone (in the host unit `using namespace
# nvcuda;` fails and the source was built whole, the split's seconds lost).
DEVICE_INCLUDE = re.compile(r"#\s*include\s*[<\"](?:mma\.h|cooperative_groups(?:\.h|/)|cuda_pipeline|cuda_awbarrier"
                            r"|cuda/(?:pipeline|barrier|annotated_ptr)|cub/|cute/|cutlass/)")
DEVICE_NAMESPACE = re.compile(r"\s*(?:using\s+namespace\s+|namespace\s+\w+\s*=\s*)(?:::)?"
                              r"(?:nvcuda|cooperative_groups|cub|cute|cutlass)\b[\w:]*\s*;\s*$")
# The types a dispatch macro runs its lambda with (scalar_t); others are not split.
DISPATCH_TYPES = {"AT_DISPATCH_FLOATING_TYPES": ("float", "double"),
                  "AT_DISPATCH_FLOATING_TYPES_AND_HALF": ("float", "double", "c10::Half"),
                  "AT_DISPATCH_REDUCED_FLOATING_TYPES": ("c10::Half", "c10::BFloat16")}
# What the device unit includes for torch's scalar types in a launcher's instantiation (small,
# header-only: the dispatch macros' at::Half is c10::Half).
SCALAR_HEADERS = {"c10::Half": "#include <c10/util/Half.h>\n", "c10::BFloat16": "#include <c10/util/BFloat16.h>\n"}
_IDENT = re.compile(r"[A-Za-z_]\w*")


def whole_after_split(unit: str) -> str:
    """The build's step when a split unit failed and the candidate is not certainly at fault."""
    return f"{unit}: the split build failed where the whole source may not; cuda.cu whole"


class CannotSplit(Exception):
    """This source is built whole (the reason is the message)."""


@dataclass
class Kernel:
    name: str
    template: str              # "template <typename T, int N>" or ""
    tparams: list[str]         # the template parameters' names, in order
    params: str                # the parameter list as written (with names)
    names: list[str]           # the parameters' names


@dataclass
class Split:
    device: str
    host: str
    kernels: list[str] = field(default_factory=list)
    launches: int = 0
    host_only: str = ""            # the items only the host unit has (comments blanked)
    device_only: str = ""          # the items only the device unit has


# A name the compiler does not know (nvcc's words, then gcc's), and a syntax error.
_Q, _P = "[\u2018']", "[\u2019']"
_MISSING = re.compile(r'identifier "(\w+)" is undefined|namespace "[\w:]+" has no member (?:class |function )?"(\w+)"'
                      rf"|{_Q}(\w+){_P} was not declared in this scope|{_Q}(\w+){_P} is not a member of"
                      rf"|{_Q}(\w+){_P} does not name a type|{_Q}(\w+){_P} has not been declared")
_SYNTAX = re.compile(r"error: expected\b")
# CUDA's own names, which nvcc knows and the host compiler may not (a __host__ __device__ helper).
CUDA_NAME = re.compile(r"__|(?:thread|block)Idx$|(?:block|grid)Dim$|warpSize$|atomic[A-Z]|make_\w+\d$|"
                       r"(?:float|int|uint|half|double)\d$|cuda[A-Z]|__nv_|rsqrtf?$|fdividef?$")
_ERROR = re.compile(r"^(?P<file>[^:(\n]+?)(?:\((?P<l1>\d+)\):|:(?P<l2>\d+):\d+:)\s*(?:fatal )?error:?(?P<msg>.*)$", re.M)


def missing_launchers(host_obj: Path, device_obj: Path) -> set[str]:
    """The launchers the host object calls that the device object does not define (an
    instantiation the split did not foresee): the whole build then decides, rather than a module
    that fails to load. Empty when ``nm`` is not there to say."""
    import shutil
    import subprocess
    if not shutil.which("nm"):
        return set()

    def syms(obj: Path, flag: str) -> set[str]:
        out = subprocess.run(["nm", flag, str(obj)], capture_output=True, text=True).stdout
        return {ln.split()[-1] for ln in out.splitlines() if "__ks_launch_" in ln}
    return syms(host_obj, "-u") - syms(device_obj, "--defined-only")


_UP_FRONT = re.compile(r"\s*(?:$|#\s*(?:include|line|pragma)\b|//)")


def includes_up_front(text: str, header: str) -> bool:
    """Whether ``text`` includes ``header`` before any line other than includes, ``#line``,
    ``#pragma``, comments and blank lines: precompiling it in front of the unit changes nothing."""
    for line in text.splitlines():
        if not _UP_FRONT.match(line):
            return False
        if re.match(rf"\s*#\s*include\s*[<\"]{re.escape(header)}[>\"]", line):
            return True
    return False


def candidates_error(output: str, unit: str, sp: Split, in_torch) -> bool:
    """Whether a split unit's errors are the candidate's own — what building the source whole would
    say too — so that they are reported at once: every error in the candidate's lines (cuda.cu),
    each a syntax error or a name nobody declares (not torch's, ``in_torch(name)``; not one that only
    the other unit has: a ``__constant__`` the host copies to, a host helper a kernel calls). Anything
    else — an error in the generated launchers, a type the host compiler sees otherwise than nvcc —
    builds the source whole to decide."""
    errors = list(_ERROR.finditer(output))
    said = [ln for ln in output.splitlines() if re.search(r"\berror\b", ln) and not _ERROR.match(ln)
            and not re.search(r"errors? detected in the compilation", ln)]
    if not errors or said:                  # an error line of another shape: not judged here
        return False
    other = sp.device_only if unit.endswith(".cpp") else sp.host_only
    decisive = False
    for e in errors:
        if Path(e["file"].strip()).name != "cuda.cu":
            return False
        miss = _MISSING.search(e.group(0))
        if miss:
            name = next(g for g in miss.groups() if g)
            if re.search(rf"\b{re.escape(name)}\b", other) or CUDA_NAME.match(name) or in_torch(name):
                return False
            decisive = True
        elif _SYNTAX.search(e.group(0)):
            decisive = True
        elif "<error-type>" not in e.group(0):     # nvcc's follow-on errors of an undeclared name
            return False
    return decisive


def mask(text: str) -> str:
    """The text with comments and string/char literals blanked (same length, newlines kept): what
    the scanner reads, so that a brace in a string or a comment is never one."""
    out, i, n = list(text), 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif c in "\"'" and not (c == "'" and i and (text[i - 1].isalnum())):   # 1'000 digit separators
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            for k in range(i + 1, j - 1):
                if out[k] != "\n":
                    out[k] = " "
            i = j
            continue
        else:
            i += 1
            continue
        for k in range(i, j):
            if out[k] != "\n":
                out[k] = " "
        i = j
    return "".join(out)


def _items(m: str) -> list[tuple[int, int]]:
    """The top-level items of the masked text: (start, end) of each preprocessor line (with its
    continuations), declaration (to its ``;``) or definition (to its closing brace)."""
    items, i, n = [], 0, len(m)
    while i < n:
        while i < n and m[i].isspace():
            i += 1
        if i >= n:
            break
        start = i
        if m[i] == "#":
            while i < n and m[i] != "\n":
                i += 2 if m[i] == "\\" else 1
            items.append((start, i))
            continue
        depth = 0
        while i < n:
            c = m[i]
            if c in "({[":
                depth += 1
            elif c in ")}]":
                depth -= 1
                if depth < 0:
                    raise CannotSplit("unbalanced brackets")
                if c == "}" and depth == 0:
                    j = i + 1
                    while j < n and m[j] in " \t\r\n":
                        j += 1
                    head = m[start:m.find("{", start)]
                    # `struct S {...} s;`, `x = {...};`: the item goes on to its semicolon; a function's
                    # or a namespace's body ends it
                    if j < n and m[j] == ";":
                        i = j
                    elif re.search(r"\b(?:struct|class|union|enum)\b|=", head) and \
                            not re.search(r"\)\s*(?:const\s*)?(?:noexcept\s*)?(?:->[^{]*)?$", head.strip()):
                        while i < n and m[i] != ";":
                            i += 1
                    i += 1
                    break
            elif c == ";" and depth == 0:
                i += 1
                break
            i += 1
        else:
            if depth:
                raise CannotSplit("unbalanced brackets")
        items.append((start, i))
    return items


def _split_top(text: str, sep: str = ",") -> list[str]:
    """``text`` split at top-level ``sep`` (outside (), [], {} and <> of templates)."""
    parts, depth, cur = [], 0, []
    for c in text:
        if c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth -= 1
        if c == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def _kernel(text: str, masked: str) -> Kernel:
    head = masked[:masked.find("{")] if "{" in masked else masked.rstrip(";")
    blank = lambda m: " " * len(m.group(0))  # noqa: E731
    head = re.sub(r"\b__launch_bounds__\s*\([^()]*\)|\b__attribute__\s*\(\([^()]*\)\)", blank, head)
    m = re.search(r"\b__global__\b.*?\b(\w+)\s*\(", head, re.S)
    if not m:
        raise CannotSplit("a __global__ function whose name was not found")
    name = m.group(1)
    open_ = m.end() - 1
    depth, close = 0, -1
    for k in range(open_, len(head)):
        depth += head[k] == "("
        depth -= head[k] == ")"
        if depth == 0:
            close = k
            break
    params = " ".join(text[open_ + 1:close].split())
    template, tparams = "", []
    t = re.match(r"\s*template\s*<", head)
    if t:
        depth, k = 1, t.end()
        while k < len(head) and depth:
            depth += head[k] == "<"
            depth -= head[k] == ">"
            k += 1
        template = " ".join(text[t.start():k].split())
        for p in _split_top(template[template.find("<") + 1:-1]):
            words = _IDENT.findall(p.split("=")[0])
            if not words:
                raise CannotSplit(f"template parameter `{p}` of `{name}`")
            tparams.append(words[-1])
    names = []
    for p in _split_top(params):
        if "[" in p or "(" in p or p == "void":
            if p == "void":
                continue
            raise CannotSplit(f"parameter `{p}` of `{name}`")
        words = _IDENT.findall(p.split("=")[0])
        if len(words) < 2:
            raise CannotSplit(f"an unnamed parameter of `{name}`")
        names.append(words[-1])
    return Kernel(name, template, tparams, params, names)


def _line(text: str, pos: int, offset: int, file: str) -> str:
    return f'#line {text.count(chr(10), 0, pos) + 1 + offset} "{file}"\n'


# What a template argument may name for the device unit to instantiate it, besides the source's own
# top-level names.
BUILTIN = {"float", "double", "int", "unsigned", "signed", "long", "short", "char", "bool", "true", "false", "const",
           "size_t", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t",
           "half", "__half", "__nv_bfloat16", "float2", "float4", "int2", "int4", "sizeof"}


def _top_names(text: str) -> set[str]:
    """The names a top-level item shared by both units defines (macros, types, constants)."""
    pats = (r"#\s*define\s+(\w+)", r"\b(?:struct|class|union|enum(?:\s+class)?)\s+(\w+)", r"\busing\s+(\w+)\s*=",
            r"\btypedef\b[^;]*?\b(\w+)\s*;", r"\b(?:constexpr|const)\b[^;=(]*?\b(\w+)\s*(?:=|\{|\[)")
    names = {n for p in pats for n in re.findall(p, text)}
    for body in re.findall(r"\benum\b[^{;]*\{([^}]*)\}", text):        # the enumerators
        names |= {m.group(0) for part in body.split(",") if (m := _IDENT.search(part))}
    return names


def _launches(item: str, masked: str, kernels: dict[str, Kernel], sites: list, known: set[str]) -> str:
    """The host item with each launch rewritten as a launcher call; ``sites`` gets (kernel, the
    template arguments' instantiations) per launch."""
    out, last = [], 0
    for m in re.finditer(r"<<<", masked):
        if m.start() < last:
            continue
        # the callee: name, then template arguments, just before <<<
        k = m.start()
        while k > 0 and masked[k - 1].isspace():
            k -= 1
        targs = None
        if masked[k - 1] == ">":
            depth, j = 0, k - 1
            while j >= 0:
                depth += masked[j] == ">"
                depth -= masked[j] == "<"
                if depth == 0:
                    break
                j -= 1
            targs = item[j + 1:k - 1]
            k = j
            while k > 0 and masked[k - 1].isspace():
                k -= 1
        nm = re.search(r"[A-Za-z_]\w*$", masked[:k])
        if not nm or nm.group(0) not in kernels:
            raise CannotSplit(f"a launch of `{nm.group(0) if nm else '?'}`, not a kernel of this source")
        kern = kernels[nm.group(0)]
        end_cfg = masked.find(">>>", m.end())
        if end_cfg < 0:
            raise CannotSplit("<<< without >>>")
        cfg = _split_top(item[m.end():end_cfg])
        if not 2 <= len(cfg) <= 4:
            raise CannotSplit(f"a launch configuration of {len(cfg)} values")
        p = end_cfg + 3
        while p < len(masked) and masked[p].isspace():
            p += 1
        if p >= len(masked) or masked[p] != "(":
            raise CannotSplit("a launch without its argument list")
        depth, q = 0, p
        while q < len(masked):
            depth += masked[q] == "("
            depth -= masked[q] == ")"
            if depth == 0:
                break
            q += 1
        args = item[p + 1:q]
        if kern.tparams and targs is None:
            raise CannotSplit(f"template kernel `{kern.name}` launched with deduced template arguments")
        insts: list | tuple = [None]
        if kern.tparams:
            unknown = set(_IDENT.findall(mask(targs))) - known - {"scalar_t"}
            host_fn = _host_template(masked)
            macro = _enclosing_macro(masked, m.start()) if unknown else None
            if unknown and host_fn and unknown <= set(host_fn[1]):
                insts = host_fn         # instantiated for each call of the host template, later
            elif unknown and macro and unknown <= set(macro[1]):
                insts = _macro_instantiations(targs, kern, *macro, known)
            elif unknown:               # a local constant, a variable
                raise CannotSplit(f"`{kern.name}` launched with `{sorted(unknown)[0]}`, which the device unit "
                                  f"cannot instantiate")
            else:
                insts = _instantiations(targs, masked[:m.start()], kern)
        i = len(sites)
        sites.append([kern, targs, insts])
        conf = [f"dim3({cfg[0]})", f"dim3({cfg[1]})", f"(size_t)({cfg[2]})" if len(cfg) > 2 else "(size_t)0",
                f"(cudaStream_t)({cfg[3]})" if len(cfg) > 3 else "(cudaStream_t)0"]
        call = f"__ks_launch_{i}" + (f"<{targs}>" if targs is not None and kern.tparams else "")
        rest = f", {args}" if args.strip() else ""
        out.append(item[last:nm.start()] + f"{call}({', '.join(conf)}{rest})")
        last = q + 1
    out.append(item[last:])
    return "".join(out)


def _host_template(masked: str) -> tuple[str, list[str]] | None:
    """(name, template parameters) of a host function template: ``template <int ACT> void f(...)``."""
    t = re.match(r"\s*template\s*<([^{;]*?)>\s*(?:static\s+|inline\s+)*[\w:<>,\s*&]*?\b(\w+)\s*\(", masked)
    if not t:
        return None
    names = [_IDENT.findall(p.split("=")[0])[-1] for p in _split_top(t.group(1)) if _IDENT.findall(p)]
    return t.group(2), names


def _enclosing_macro(masked: str, pos: int) -> tuple[str, list[str], str] | None:
    """(name, parameters, the text after it) of the function-like ``#define`` whose body holds
    ``pos`` — ``#define LAUNCH(E) k<E><<<g, b>>>(...)`` inside a host function."""
    for d in re.finditer(r"#\s*define\s+(\w+)\(([^()]*)\)", masked[:pos]):
        end = d.end()
        while end < len(masked) and masked[end] != "\n":
            end += 2 if masked[end] == "\\" else 1
        if d.start() < pos < end:
            return d.group(1), [p.strip() for p in d.group(2).split(",") if p.strip()], masked[end:]
    return None


def _macro_instantiations(targs: str, kern: Kernel, name: str, params: list[str], after: str,
                          known: set[str]) -> list[list[str]]:
    """A launch in a macro's body with the macro's parameters as template arguments: one
    instantiation per use of the macro after its definition (``LAUNCH(4); LAUNCH(8);``)."""
    out = []
    for use in re.finditer(rf"\b{re.escape(name)}\s*\(([^()]*)\)", after):
        values = _split_top(use.group(1))
        if len(values) != len(params) or set(_IDENT.findall(use.group(1))) - known:
            raise CannotSplit(f"macro `{name}` used as `{name}({use.group(1)})`, which the device unit cannot follow")
        inst = _split_top(_subst(targs, params, values))
        if inst not in out:
            out.append(inst)
    if not out:
        raise CannotSplit(f"macro `{name}` launches `{kern.name}` and is never used")
    return out


def _host_instantiations(targs: str, kern: Kernel, fn: str, params: list[str], host_text: str,
                         known: set[str]) -> list[list[str]]:
    """A launch inside host template ``fn``: its template arguments for each explicit call
    ``fn<...>(`` of the host code (every call must give them all, from names the device unit knows)."""
    calls = [m.group(1) for m in re.finditer(rf"\b{re.escape(fn)}\s*<([^;{{}}()]*?)>\s*\(", host_text)]
    calls = [c for c in calls if not re.search(r"\b(?:typename|class)\b", c)]   # not its own definition
    if not calls:
        raise CannotSplit(f"host template `{fn}` is never called with explicit template arguments")
    out = []
    for call in calls:
        values = _split_top(call)
        if len(values) != len(params) or set(_IDENT.findall(call)) - known:
            raise CannotSplit(f"host template `{fn}` called as `{fn}<{call}>`, which the device unit cannot follow")
        inst = _split_top(_subst(targs, params, values))
        if len(inst) != len(kern.tparams):
            raise CannotSplit(f"`{kern.name}` launched with {len(inst)} of {len(kern.tparams)} template arguments")
        if inst not in out:
            out.append(inst)
    return out


def _instantiations(targs: str, before: str, kern: Kernel) -> list[list[str]]:
    """The template arguments the device unit instantiates a launcher with: as written, or for
    each type of the enclosing dispatch macro where they name its ``scalar_t``."""
    args = _split_top(targs)
    if len(args) != len(kern.tparams):
        raise CannotSplit(f"`{kern.name}` launched with {len(args)} of {len(kern.tparams)} template arguments")
    if not re.search(r"\bscalar_t\b", targs):
        return [args]
    macros = re.findall(r"\b(AT_DISPATCH_\w+)\s*\(", before)
    if not macros or macros[-1] not in DISPATCH_TYPES:
        raise CannotSplit(f"`scalar_t` from {macros[-1] if macros else 'no dispatch macro'}")
    return [[re.sub(r"\bscalar_t\b", t, a) for a in args] for t in DISPATCH_TYPES[macros[-1]]]


def _subst(text: str, names: list[str], values: list[str]) -> str:
    table = dict(zip(names, values))
    return re.sub(r"\b[A-Za-z_]\w*\b", lambda m: table.get(m.group(0), m.group(0)), text)


def _declaration(i: int, k: Kernel) -> str:
    """The launcher of site ``i``: the kernel's template and parameters after the configuration."""
    params = f", {k.params})" if k.params and k.params != "void" else ")"
    return (f"{k.template} " if k.template else "") + \
        f"void __ks_launch_{i}(dim3 ks_grid, dim3 ks_block, size_t ks_smem, cudaStream_t ks_stream{params};"


def split(cuda: list[str], offset: int = 0, file: str = "cuda.cu") -> Split:
    """The device and host units of these CUDA sources (``offset``: the lines the build puts before
    them in ``file``, so that ``#line`` keeps the numbers its diagnostics are mapped with)."""
    text = "\n".join(cuda)
    masked = mask(text)
    if "<<<" not in masked:
        raise CannotSplit("no kernel launch")
    items = _items(masked)
    kernels: dict[str, Kernel] = {}
    roles = []
    for s, e in items:
        m = masked[s:e]
        head = m[:m.find("{")] if "{" in m else m
        if m.startswith("#"):
            if CONDITIONAL.match(m):
                raise CannotSplit("preprocessor conditionals")
            if "<<<" in m:
                raise CannotSplit("a launch in a top-level macro")
            role = "host" if TORCH_INCLUDE.match(m) else ("drop" if re.match(r"#\s*pragma\s+once", m) else
                                                          "device" if DEVICE_INCLUDE.match(m) else "both")
        elif DEVICE_NAMESPACE.match(m):
            role = "device"
        elif re.match(r"\s*(?:inline\s+)?namespace\b|\s*extern\s+\"", text[s:e]):
            raise CannotSplit("a namespace or extern block")
        elif re.search(r"\b__global__\b", head):
            if "{" in m:
                k = _kernel(text[s:e], m)
                kernels[k.name] = k
            role = "device"
        elif re.search(r"\b__device__\b|\b__constant__\b|\b__shared__\b|\b__managed__\b", head):
            role = "both" if re.search(r"\b__host__\b", head) else "device"
        elif "{" in m and re.search(r"\)\s*(?:const\s*)?(?:noexcept\s*)?(?:->[^{]*)?$", head.strip()):
            role = "host"                                    # a host function's definition
        elif re.search(r"\([^()]*\)\s*;\s*$", m) and not re.search(r"=", head):
            role = "host"                                    # a host function's prototype
        elif TORCH.search(m):
            role = "host"
        elif re.search(r"\b(?:static|const|constexpr|struct|class|union|enum|typedef|using|template)\b", head):
            role = "both"                                    # internal linkage or no storage
        else:
            role = "host"                                    # a global variable: defined once
        if role in ("device", "both") and TORCH.search(m):
            raise CannotSplit("device code that names torch (" + TORCH.search(m).group(0) + ")")
        roles.append(role)
    if not kernels:
        raise CannotSplit("no __global__ definition")
    known = BUILTIN | set(kernels) | _top_names(" ".join(masked[s:e] for (s, e), r in zip(items, roles)
                                                         if r in ("both", "device")))
    dev, host, sites = [DEVICE_PRELUDE], [HOST_PRELUDE], []
    for (s, e), role in zip(items, roles):
        chunk, mchunk = text[s:e], masked[s:e]
        if role in ("device", "both"):
            dev += [_line(text, s, offset, file), chunk, "\n"]
        if role in ("host", "both"):
            first = len(sites)
            body = _launches(chunk, mchunk, kernels, sites, known) if role == "host" and "<<<" in mchunk else chunk
            host += [_declaration(i, *sites[i][:1]) + "\n" for i in range(first, len(sites))]
            host += [_line(text, s, offset, file), body, "\n"]
        elif "<<<" in mchunk and role == "device":
            raise CannotSplit("a launch from device code (dynamic parallelism)")
    if not sites:
        raise CannotSplit("no launch from a host function")
    host_text = "\n".join(masked[s:e] for (s, e), r in zip(items, roles) if r == "host")
    for site in sites:
        if isinstance(site[2], tuple):          # inside a host template: follow its calls
            site[2] = _host_instantiations(site[1], site[0], *site[2], host_text, known)
    launchers = []
    for i, (k, _targs, insts) in enumerate(sites):
        targs = f"<{', '.join(k.tparams)}>" if k.tparams else ""
        launchers.append(f"{_declaration(i, k)[:-1]} {{ {k.name}{targs}<<<ks_grid, ks_block, ks_smem, ks_stream>>>"
                         f"({', '.join(k.names)}); }}")
        for inst in insts if k.tparams else []:
            params = _subst(k.params, k.tparams, inst)
            launchers.append(f"template void __ks_launch_{i}<{', '.join(inst)}>(dim3, dim3, size_t, cudaStream_t"
                             + (f", {params});" if k.params and k.params != "void" else ");"))
    needs = "".join(h for t, h in SCALAR_HEADERS.items() if any(t in ln for ln in launchers))
    if needs:
        dev.insert(1, needs)
    dev += ['#line 1 "ks_launchers.cu"\n', "\n".join(launchers), "\n"]
    only = lambda want: "\n".join(masked[s:e] for (s, e), r in zip(items, roles) if r == want)  # noqa: E731
    return Split(device="".join(dev), host="".join(host), kernels=sorted(kernels), launches=len(sites),
                 host_only=only("host"), device_only=only("device"))
