"""The link check where CUDA cannot run (issue 44, item 5).

On a machine without a CUDA torch the CUDA candidate is only compiled (``build._compile_only``):
no module is linked or imported, so a symbol that no library exports went unseen until the
extension was imported on a GPU. ``x.data_ptr<long long>()`` is the usual one: it compiles (the
template is declared for every type), but libtorch instantiates ``data_ptr<int64_t>``, which is
``long`` on Linux, and ``long long`` is another type with another symbol.

After the objects compile, their undefined symbols (``nm --undefined-only``) are resolved as the
dynamic loader would resolve the module's: against each other, the libraries the extension is
linked with (torch/lib's ``-l`` libraries and their neighbours: libc10, libtorch, libtorch_cpu,
libtorch_python, libgomp), the C and C++ runtimes (libstdc++, libgcc_s, libc, libm and the static
parts every shared link adds: libgcc.a, libc_nonshared.a), Python, and the CUDA runtime of the nvcc
installation (``libcudart.so``). What a CPU torch cannot say is taken as provided, never reported:

- C names of the CUDA libraries torch loads on a GPU (``cu*`` driver calls, cuBLAS, cuDNN, cuSPARSE,
  cuSOLVER, cuRAND, cuFFT, NCCL, NVRTC, NVTX), and ``cuda*``/``__cuda*`` where no ``libcudart.so``
  is found beside nvcc (where one is, they are checked against its exports);
- the device link's symbols (``__cudaRegisterLinkedBinary*``, ``__fatbinwrap*``, ``__nv_*``);
- C++ names under CUDA's own namespaces (thrust, cub, cutlass, cute, nvcuda, cooperative_groups,
  ``cuda::``), and torch's names that libtorch_cuda/libc10_cuda hold when torch/lib has no
  libtorch_cuda.so: ``at::``/``c10::``/``torch::`` names with a CUDA word in them (``at::cuda::``,
  ``c10::cuda::``, ``at::detail::empty_cuda``, ``CUDAGeneratorImpl``, cuDNN's and cuBLAS's
  handles, …) and ``at::native::`` (where libtorch_cuda's kernels live).

Each symbol left is a compile diagnostic (an error) at the candidate's line that uses it (the
template written as the symbol names it, else the declaration of the candidate's own function,
else the first line naming it), with what to do: ``libtorch exports data_ptr<int64_t> (long); use
data_ptr<int64_t>()``. The libraries' exports are read once per file (its path, size and time) and
kept under the build cache (``_exports/``): the check then costs a few tens of milliseconds.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from kernelskill.results import Diagnostic

VERSION = "1"            # in the compile-only marker: a check made before this one counts for nothing
# Defined by the linker itself or by the start files of every shared link (crtbeginS.o, …).
LINKER_DEFINED = {"_GLOBAL_OFFSET_TABLE_", "__dso_handle", "_DYNAMIC", "__TMC_END__", "__ehdr_start",
                  "__executable_start", "_etext", "etext", "_edata", "edata", "_end", "end", "__bss_start",
                  "__init_array_start", "__init_array_end", "__fini_array_start", "__fini_array_end",
                  "__preinit_array_start", "__preinit_array_end", "__GNU_EH_FRAME_HDR", "__gmon_start__"}
CUDART_C = re.compile(r"^(?:__)?cuda")
CUDA_LIBS_C = re.compile(r"^(?:cu[A-Z]|cublas|cudnn|cusparse|cusolver|curand|cufft|nccl|nvrtc|nvtx|nvjpeg|cutensor"
                         r"|nvJitLink|nvml)")
DEVICE_LINK = ("__cudaRegisterLinkedBinary", "__fatbinwrap", "__nv_")
CUDA_WORD = re.compile(r"(?i)cuda|cudnn|cublas|cusparse|cusolver|curand|cufft|nccl|nvrtc|magma|cutlass")
TORCH_ROOTS = {"at", "c10", "torch", "caffe2"}
CUDA_ROOTS = {"thrust", "cub", "cutlass", "cute", "nvcuda", "cooperative_groups", "cuda", "nvtx3"}
STD_ROOTS = {"std", "__gnu_cxx", "__cxxabiv1"}
# torch/lib libraries no extension is linked with (tests and examples of torch's own)
NOT_LINKED = re.compile(r"test|backend_with_compiler|aoti_custom_ops|shm_windows")
# The types people write where libtorch instantiated another: (what to write, the type it is).
TYPE_FIX = {"long long": ("int64_t", "long"), "long long int": ("int64_t", "long"),
            "unsigned long long": ("uint64_t", "unsigned long"), "unsigned long long int": ("uint64_t", "unsigned long"),
            "char": ("int8_t", "signed char"), "__half": ("at::Half", "c10::Half"),
            "half": ("at::Half", "c10::Half"), "__nv_bfloat16": ("at::BFloat16", "c10::BFloat16"),
            "nv_bfloat16": ("at::BFloat16", "c10::BFloat16")}
# Spellings of the types libtorch does instantiate (to skip a use that is not the missing one).
ALIASES = {"int64_t": "long", "uint64_t": "unsigned long", "int32_t": "int", "uint32_t": "unsigned int",
           "int16_t": "short", "uint16_t": "unsigned short", "int8_t": "signed char", "uint8_t": "unsigned char",
           "at::Half": "c10::Half", "torch::Half": "c10::Half", "at::BFloat16": "c10::BFloat16",
           "torch::BFloat16": "c10::BFloat16", "size_t": "unsigned long", "ptrdiff_t": "long"}


@dataclass
class Providers:
    """What the extension's module would be resolved against where it is imported."""
    names: set[str]                     # every symbol the libraries export (unversioned)
    torch: list[str]                    # torch's own exports (for the variants of a missing one)
    cudart: set[str] | None             # libcudart.so's exports; None: none found beside nvcc
    cuda_torch: bool                    # torch/lib holds libtorch_cuda.so: at::cuda:: names are checked too
    libs: list[str] = field(default_factory=list)
    torch_version: str = ""


@dataclass
class Symbol:
    mangled: str
    demangled: str = ""
    root: str | None = None             # None: a C name; "": C++'s global namespace
    qualified: str = ""                 # the demangled name without its parameters and return type
    name: str = ""                      # its last component, without template arguments
    targs: str = ""                     # that component's template arguments, as demangled


# ---- the libraries ------------------------------------------------------------------------------
def _exports(lib: Path, cache: Path, dynamic: bool) -> list[str]:
    """The symbols ``lib`` defines (its dynamic table for a shared library, every member's for an
    archive), read once per file version and kept under ``cache``."""
    st = lib.stat()
    key = hashlib.sha256(f"{lib.resolve()}|{st.st_size}|{st.st_mtime_ns}|{dynamic}".encode()).hexdigest()[:20]
    kept = cache / f"{key}.txt"
    if kept.exists():
        return kept.read_text().split("\n")
    proc = subprocess.run(["nm", *(["-D"] if dynamic else ["-A"]), "--defined-only", "--format=posix", str(lib)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise OSError(f"nm could not read {lib}: {proc.stderr.strip()[-200:]}")
    names = []
    for line in proc.stdout.splitlines():
        if not dynamic:
            line = line.rsplit("]: ", 1)[-1] if "]: " in line else line.split(": ", 1)[-1]
        parts = line.split()
        if len(parts) >= 2 and parts[1] != "A":       # A: a version's name, no symbol
            names.append(parts[0].split("@", 1)[0])
    cache.mkdir(parents=True, exist_ok=True)
    tmp = kept.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text("\n".join(names))
    os.replace(tmp, kept)
    return names


def _loaded() -> dict[str, Path]:
    """The shared libraries this process has mapped (the worker has imported torch: its C and C++
    runtimes and Python's are among them), by file name."""
    out: dict[str, Path] = {}
    try:
        for line in Path("/proc/self/maps").read_text().splitlines():
            parts = line.split(None, 5)
            if len(parts) == 6 and parts[5].startswith("/") and ".so" in parts[5]:
                out.setdefault(os.path.basename(parts[5]), Path(parts[5]))
    except OSError:
        pass
    return out


def _cxx_file(name: str, store: Path | None = None) -> Path | None:
    """A file the C++ compiler links by default (``-print-file-name``), or None; kept in ``store``
    per compiler (a driver's start is ~10 ms)."""
    from .tools import cxx as _compiler
    cxx = _compiler()
    kept = None
    if store is not None:
        exe = shutil.which(cxx) or cxx
        try:
            st = os.stat(os.path.realpath(exe))
            key = hashlib.sha256(f"{os.path.realpath(exe)}|{st.st_mtime_ns}|{name}".encode()).hexdigest()[:20]
            kept = store / f"cxx-{key}.txt"
            if kept.exists():
                text = kept.read_text()
                return Path(text) if text and os.path.exists(text) else None
        except OSError:
            kept = None
    flag = "-print-libgcc-file-name" if name == "libgcc.a" else f"-print-file-name={name}"
    try:
        out = subprocess.run([cxx, flag], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    found = Path(out) if out and os.path.isabs(out) and os.path.exists(out) else None
    if kept is not None:
        store.mkdir(parents=True, exist_ok=True)
        tmp = kept.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(str(found or ""))
        os.replace(tmp, kept)
    return found


def cudart_path(nvcc: str | None = None) -> Path | None:
    """The CUDA runtime (libcudart.so) of the nvcc that compiled the objects, where it has one."""
    from .tools import cuda_include_dir
    from .tools import nvcc as _nvcc
    nvcc = nvcc or _nvcc()
    if not nvcc:
        return None
    inc = cuda_include_dir(str(nvcc))
    for d in (inc.parent / "lib64", inc.parent / "lib", Path(nvcc).resolve().parent.parent / "lib64",
              Path(nvcc).resolve().parent.parent / "lib"):
        found = sorted(d.glob("libcudart.so*")) if d.is_dir() else []
        if found:
            return found[0]
    return None


_PROVIDERS: dict = {}


def providers(cache: Path, nvcc: str | None = None) -> Providers | None:
    """The exports the module would be resolved against, or None where a library the check needs
    is not found (the check is then skipped, never guessed). Once per process and cache."""
    key = (str(cache), nvcc)
    if key not in _PROVIDERS:
        _PROVIDERS[key] = _providers(cache, nvcc)
    return _PROVIDERS[key]


def _providers(cache: Path, nvcc: str | None) -> Providers | None:
    import torch
    if not shutil.which("nm"):
        return None
    torch_lib = Path(torch.__file__).parent / "lib"
    torch_libs = sorted(p for p in torch_lib.glob("lib*.so*") if not NOT_LINKED.search(p.name) and p.is_file())
    have = {p.name for p in torch_libs}
    if not {"libc10.so", "libtorch_cpu.so"} <= have:
        return None
    loaded = _loaded()
    store = cache / "_exports"
    system, static = [], []
    for name in ("libstdc++.so.6", "libgcc_s.so.1", "libc.so.6", "libm.so.6"):
        # mapped under its real name (libstdc++.so.6.0.30), linked under its soname
        path = next((p for n, p in sorted(loaded.items()) if n.startswith(name)), None) or _cxx_file(name, store)
        if path is None:
            return None
        system.append(path)
    for name in ("libpthread.so.0", "libdl.so.2", "librt.so.1"):
        if name in loaded:
            system.append(loaded[name])
    system += [p for n, p in loaded.items() if n.startswith(("ld-linux", "libpython"))]
    for name in ("libgcc.a", "libc_nonshared.a"):
        path = _cxx_file(name, store)
        if path is not None:
            static.append(path)
    exe = Path(os.path.realpath(sys.executable))
    torch_names: list[str] = []
    names: set[str] = set()
    try:
        for p in torch_libs:
            got = _exports(p, store, True)
            torch_names += got
            names.update(got)
        for p in [*system, exe]:
            names.update(_exports(p, store, True))
        for p in static:
            names.update(_exports(p, store, False))
        rt = cudart_path(nvcc)
        cudart = set(_exports(rt, store, True)) if rt else None
    except OSError:
        return None
    return Providers(names=names, torch=torch_names, cudart=cudart,
                     cuda_torch="libtorch_cuda.so" in have,
                     libs=[str(p) for p in [*torch_libs, *system, exe, *static]],
                     torch_version=torch.__version__)


# ---- the objects --------------------------------------------------------------------------------
def undefined_and_defined(objects: list[Path]) -> tuple[set[str], set[str]]:
    """(symbols the objects need, strong references only; symbols they define): one ``nm``."""
    proc = subprocess.run(["nm", "-A", "--format=posix", *map(str, objects)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise OSError(proc.stderr.strip()[-300:])
    need, have = set(), set()
    for line in proc.stdout.splitlines():
        parts = line.split(": ", 1)[-1].split()
        if len(parts) < 2:
            continue
        kind = parts[1]
        if kind == "U":
            need.add(parts[0])
        elif kind not in ("w", "v"):       # w, v: weak references, which may stay unresolved
            have.add(parts[0])
    return need, have


def demangle(names: list[str]) -> dict[str, str]:
    if not names:
        return {}
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True,
                             timeout=30).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        out = []
    return {n: (out[i] if i < len(out) and out[i] else n) for i, n in enumerate(names)}


def root_of(mangled: str) -> str | None:
    """The outermost namespace of a mangled C++ name ("" for the global one), None for a C name."""
    if not mangled.startswith("_Z"):
        return None
    s = mangled[2:]
    s = re.sub(r"^(?:T[VTIS]|GV|GR|TH|TW)", "", s)                 # vtable, typeinfo, guard variable, …
    s = re.sub(r"^T[hv](?:n?\d+_){1,2}", "", s)                     # thunks
    if s.startswith("L"):
        s = s[1:]
    nested = s.startswith("N")
    if nested:
        s = re.sub(r"^[rVK]*[RO]?", "", s[1:])
    if re.match(r"S[tabsiod]", s):
        return "std"
    m = re.match(r"(\d+)", s)
    if not m:
        return ""
    first = s[len(m.group(1)):len(m.group(1)) + int(m.group(1))]
    return first if nested else ""


def _top_split(text: str, sep: str) -> list[str]:
    """``text`` split at ``sep`` outside <>, () and []."""
    parts, depth, cur, i = [], 0, "", 0
    while i < len(text):
        ch = text[i]
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        if depth == 0 and text.startswith(sep, i):
            parts.append(cur)
            cur, i = "", i + len(sep)
            continue
        cur += ch
        i += 1
    parts.append(cur)
    return parts


def describe(mangled: str, demangled: str) -> Symbol:
    """The parts of a symbol's demangled name the check and its messages use."""
    sym = Symbol(mangled, demangled, root_of(mangled))
    text = re.sub(r"^(?:vtable|typeinfo|typeinfo name|VTT|guard variable|construction vtable|"
                  r"(?:non-)?virtual thunk|covariant return thunk|reference temporary #\d+) (?:for|to) ", "", demangled)
    text = re.sub(r" \[clone [^\]]*\]$", "", text)
    if sym.root is None or re.search(r"\boperator\W", text):
        sym.qualified = text.split("(")[0]
        sym.name = sym.qualified.split("::")[-1]
        return sym
    text = re.sub(r"(?:\s*(?:const|volatile|&&|&|noexcept))*$", "", text)
    if text.endswith(")"):                        # the parameter list: back to its opening parenthesis
        depth = 0
        for i in range(len(text) - 1, -1, -1):
            depth += (text[i] == ")") - (text[i] == "(")
            if depth == 0:
                text = text[:i]
                break
    qualified = _top_split(text.strip(), " ")[-1]     # past a template's return type
    sym.qualified = qualified
    last = _top_split(qualified, "::")[-1]
    m = re.match(r"(?P<name>[^<]*)(?:<(?P<args>.*)>)?$", last)
    sym.name = (m["name"] if m else last).strip()
    sym.targs = (m["args"] or "").strip() if m else ""
    return sym


def _plain(qualified: str) -> str:
    """A qualified name without its template arguments (``at::cuda::blas::gemm<float>`` ->
    ``at::cuda::blas::gemm``)."""
    out, depth = "", 0
    for ch in qualified:
        depth += (ch == "<") - (ch == ">")
        if depth == 0 and ch != ">":
            out += ch
    return out


def provided_elsewhere(sym: Symbol, prov: Providers) -> bool:
    """Whether a symbol this machine's libraries lack is one a GPU machine's CUDA libraries provide
    (see the module's doc), so that it is not reported."""
    m = sym.mangled
    if sym.root is None:
        if m.startswith(DEVICE_LINK) or CUDA_LIBS_C.match(m):
            return True
        if CUDART_C.match(m):
            return prov.cudart is None
        return False
    if sym.root in CUDA_ROOTS:
        return True
    if sym.root in TORCH_ROOTS and not prov.cuda_torch:
        plain = _plain(sym.qualified) or sym.demangled
        return bool(CUDA_WORD.search(plain)) or plain.startswith("at::native::")
    return False


def missing(objects: list[Path], prov: Providers) -> tuple[list[Symbol], set[str]]:
    """The objects' strong undefined symbols that nothing resolves, and what the objects define."""
    need, have = undefined_and_defined(objects)
    left = sorted(s for s in need - have if s not in prov.names and s not in LINKER_DEFINED
                  and not s.startswith(("__start_", "__stop_")))
    if prov.cudart is not None:
        left = [s for s in left if s not in prov.cudart]
    names = demangle(left)
    syms = [describe(s, names[s]) for s in left]
    return [s for s in syms if not provided_elsewhere(s, prov)], have


# ---- the diagnostics ----------------------------------------------------------------------------
def _variants(sym: Symbol, prov: Providers) -> list[Symbol]:
    """torch's exports of the same name under other template arguments or parameters."""
    if not sym.name or not re.fullmatch(r"[A-Za-z_]\w*", sym.name):
        return []
    token = f"{len(sym.name)}{sym.name}"
    at = sym.mangled.find(token)
    if at < 0:
        return []
    prefix = sym.mangled[:at + len(token)]
    found = sorted({e for e in prov.torch if e.startswith(prefix) and e != sym.mangled})[:200]
    names = demangle(found)
    return [describe(f, names[f]) for f in found]


def _norm(t: str) -> str:
    return " ".join(t.replace("*", " * ").replace("&", " & ").split())


def _advice(sym: Symbol, prov: Providers, declared: bool) -> str:
    if sym.root in TORCH_ROOTS:
        lib = f"libtorch (torch {prov.torch_version})"
        variants = _variants(sym, prov)
        args = sorted({v.targs for v in variants if v.targs})
        if sym.targs and args:
            fix = TYPE_FIX.get(_norm(sym.targs))
            if fix and fix[1] in args:
                extra = f" (then reinterpret_cast the pointer to {sym.targs}*)" if fix[0].startswith("at::") else ""
                call = f"{sym.name}<{fix[0]}>" + ("()" if "(" in sym.demangled else "")
                return (f"{lib} exports {sym.name}<{fix[0]}> ({fix[1]}), not {sym.name}<{sym.targs}>; "
                        f"use {call}{extra}")
            shown = ", ".join(args[:12]) + (", …" if len(args) > 12 else "")
            return f"{lib} exports {sym.name}<…> only for {shown}; use one of those types"
        if variants:
            return (f"{lib} exports {sym.name} only as " + "; ".join(v.demangled for v in variants[:3])
                    + ": call it with those types")
        return f"{lib} does not export it"
    if sym.root in STD_ROOTS:
        return "this machine's libstdc++ does not export it (a template the headers declare but do not define?)"
    if sym.root is None and CUDART_C.match(sym.mangled):
        return "the CUDA runtime beside nvcc (libcudart.so) does not export it"
    if declared:
        return f"`{sym.name}` is declared but defined nowhere in the sources; define it, or link the library that holds it"
    return "no library the extension is linked with exports it"


def _pieces(sources: list[str], candidate: str):
    """(first line of each source string in the candidate's file or None, its lines without comments)."""
    from .direct import _strip_comments, locate
    for piece in sources:
        yield locate(piece, candidate), piece.splitlines(), _strip_comments(piece).splitlines()


def _declaration(name: str) -> re.Pattern:
    return re.compile(rf"^\s*(?!(?:return|throw|else|do|case|new|delete)\b)(?:extern\s+\"C\"\s+)?"
                      rf"[A-Za-z_][\w:<>,\s*&]*[\s*&]{re.escape(name)}\s*\([^;{{}}]*\)?\s*;?\s*$")


def locate_use(sym: Symbol, sources: list[str], candidate: str, variants: list[Symbol] = ()) -> tuple[int, str] | None:
    """(line in the candidate's file, its text) of the source line that uses ``sym``: the template
    as the symbol names it, the declaration of the candidate's own function, a use of the name with
    template arguments libtorch does not export, or the first line naming it."""
    name = sym.name
    if not name or not re.fullmatch(r"[A-Za-z_~]\w*", name):
        return None
    pats = []
    if sym.targs:
        args = r"\s*".join(re.escape(t) for t in re.findall(r"\w+|[^\w\s]", sym.targs))
        pats.append(re.compile(rf"\b{re.escape(name)}\s*<\s*{args}\s*>"))
    if sym.root not in TORCH_ROOTS | STD_ROOTS:
        pats.append(_declaration(name))
    good = {_norm(v.targs) for v in variants if v.targs}
    good |= {k for k, v in ALIASES.items() if v in good}

    def unexported(line: str) -> bool:
        uses = re.findall(rf"\b{re.escape(name)}\s*<([^<>]*)>", line)
        return any(_norm(u) not in good and _norm(u).split("::")[-1] not in good for u in uses)
    tests = [p.search for p in pats] + ([unexported] if good else []) + [re.compile(rf"\b{re.escape(name)}\b").search]
    pieces = list(_pieces(sources, candidate))
    for test in tests:
        for offset, lines, clean in pieces:
            for i, text in enumerate(clean):
                if test(text):
                    line = (offset + i + 1) if offset is not None else None
                    return (line, lines[i] if i < len(lines) else text) if line else None
    return None


def diagnostics(syms: list[Symbol], prov: Providers, sources: list[str], candidate: str) -> list[Diagnostic]:
    """One error per missing symbol, at the candidate's line that uses it, saying what to do."""
    out, seen = [], set()
    text = "\n".join(sources)
    for sym in syms:
        variants = _variants(sym, prov) if sym.root in TORCH_ROOTS else []
        declared = bool(sym.name) and bool(re.fullmatch(r"[A-Za-z_]\w*", sym.name)) and any(
            _declaration(sym.name).search(ln) for ln in text.splitlines())
        shown = sym.demangled if sym.demangled != sym.mangled else sym.mangled
        msg = f"undefined symbol: {shown} — {_advice(sym, prov, declared)} (it compiles, but would not load on a GPU)"
        where = locate_use(sym, sources, candidate, variants)
        diag = Diagnostic("error", msg, origin="link")
        if where:
            diag.line, diag.source_line = where
        key = (diag.line, sym.name, sym.targs)
        if key in seen:
            continue
        seen.add(key)
        out.append(diag)
    return sorted(out, key=lambda d: (d.line is None, d.line or 0))[:20]


def bound_but_undefined(functions, defined: set[str], cpp: list[str], candidate: str) -> list[Diagnostic]:
    """A function ``load_inline`` binds (``functions=``) that no object defines: the bindings would
    not load on a GPU either. At the function's declaration."""
    names = list(functions) if isinstance(functions, (list, tuple, dict)) else [functions] if functions else []
    out = []
    for fn in names:
        if not isinstance(fn, str) or not re.fullmatch(r"[A-Za-z_]\w*", fn):
            continue
        if fn in defined or any(d.startswith(f"_Z{len(fn)}{fn}") for d in defined):
            continue
        diag = Diagnostic("error", f"undefined symbol: {fn} — `{fn}` is bound (load_inline's functions=) but defined "
                          "nowhere in the sources; define it (it compiles, but would not load on a GPU)", origin="link")
        sym = Symbol(fn, fn, "", fn, fn)
        where = locate_use(sym, cpp, candidate)
        if where:
            diag.line, diag.source_line = where
        out.append(diag)
    return out


def check(objects: list[Path], sources: list[str], candidate: str, cache: Path, *, functions=None,
          cpp: list[str] | None = None, own_known: bool = True, only_if: str | None = None,
          step=lambda _: None) -> list[Diagnostic]:
    """The link check of a compile-only build: errors for the symbols of ``objects`` that the
    module's libraries would not resolve (and for bound functions that no object defines), empty
    when every one resolves or when the check cannot be made here (a step says so).

    ``own_known``: every unit of the candidate's is among ``objects`` (its C++ sources were
    compiled, or hold no definition); otherwise only library symbols are judged. ``only_if``: a
    symbol the loader named; nothing is reported unless it is among the missing ones."""
    prov = providers(cache)
    if prov is None:
        step("link check skipped: nm, torch's libraries or the C/C++ runtimes were not found")
        return []
    try:
        syms, defined = missing(objects, prov)
    except OSError as e:
        step(f"link check skipped: {e}")
        return []
    if only_if is not None and only_if not in {s.mangled for s in syms}:
        return []
    if not own_known:
        syms = [s for s in syms if s.root in TORCH_ROOTS | STD_ROOTS or s.root is None and CUDART_C.match(s.mangled)]
    diags = diagnostics(syms, prov, sources, candidate)
    if own_known and functions:
        diags += bound_but_undefined(functions, defined, cpp or [], candidate)
    return diags
