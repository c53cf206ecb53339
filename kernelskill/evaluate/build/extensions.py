"""Builds of candidate extensions: ``load_inline`` through ninja, cached by content hash and
environment; a compile-only nvcc check where torch has no CUDA, with a link check of its objects
(linkcheck.py); structured diagnostics.

Runs inside the worker: ``install()`` wraps ``torch.utils.cpp_extension.load_inline`` before the
candidate is imported, so the candidate's own call goes through the cache and the diagnostics
mapper without the candidate doing anything special.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import re
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass, field
from pathlib import Path

from kernelskill.errors import tail
from kernelskill.paths import cache_root
from kernelskill.results import Diagnostic
from . import cuda_split, direct as toolchain
from . import pch
from .direct import locate  # noqa: F401 — callers import it from here too
from . import tools
from .tools import cuda_include_dir

STUB_DIR = Path(__file__).parent / "cuda_stubs"
# torch's nvcc flags that change what CUDA's half headers declare (cpp_extension.COMMON_NVCC_FLAGS)
NO_HALF = ["-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__", "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
           "-D__CUDA_NO_HALF2_OPERATORS__"]
_GCC = re.compile(r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?:(?P<col>\d+):)? (?P<sev>fatal error|error|warning|note): (?P<msg>.*)$")
_NVCC = re.compile(r"^(?P<file>[^\s(][^(]*)\((?P<line>\d+)\): (?P<sev>error|warning|remark)(?: #[\w-]+)?: (?P<msg>.*)$")
_LINK = re.compile(r"(undefined (?:reference to|symbol:?) .*)")


def env_key() -> str:
    """What makes a build reusable: torch, CUDA, Python, machine and the GPU's architecture."""
    import torch
    parts = [torch.__version__, str(torch.version.cuda), sys.version.split()[0], platform.machine(),
             gpu_arch() or "nogpu", tools.nvcc() or "nonvcc"]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:12]


def gpu_arch() -> str | None:
    """The current GPU's compute capability ("9.0"), None without one. Its first call starts CUDA's
    runtime (torch's lazy init: 0.34 s on an H100 host, no context), which a spare for a GPU does
    ahead."""
    import torch
    if torch.version.cuda and torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        return f"{major}.{minor}"
    return None


def compile_arch() -> str:
    """The target of a CUDA check on a machine that cannot run it: the GPU present (a CPU build of
    torch beside one), else sm_90, the Hopper GPUs the project measures on."""
    arch = gpu_arch()
    return "sm_" + arch.replace(".", "") if arch else "sm_90"


class BuildFailed(Exception):
    """The candidate's extension did not compile or link; carries the diagnostics."""

    def __init__(self, diagnostics: list[Diagnostic], log: str):
        super().__init__(diagnostics[0].message if diagnostics else "build failed")
        self.diagnostics, self.log = diagnostics, log


class CompileOnly(Exception):
    """CUDA source compiled with nvcc on a machine that cannot run it: stop after the check."""


@dataclass
class BuildLog:
    """What the builds of one worker did."""
    seconds: float = 0.0
    cache_hit: bool = True
    compile_only: bool = False
    extensions: list[str] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    log_tail: str = ""
    path: str = ""                  # "direct" (toolchain.py) or "torch" (load_inline's own build)
    fallback: str = ""              # why torch's build was used
    units: dict = field(default_factory=dict)      # seconds per translation unit compiled
    steps: list = field(default_factory=list)      # (seconds since the build began, what it did)


def build_root(cache: Path | None = None) -> Path:
    """This environment's builds: one directory per extension, ``_pch``, ``_objects`` and ``_exports``
    (the libraries' symbols, for the compile-only build's link check: linkcheck.py)."""
    return (cache or cache_root()) / "build" / env_key()


# Errors that say the light header lacked something torch's full one has: such a unit is built again
# by torch's own build (the sources used part of the C++ API the static scan did not see).
_LIGHT_MISS = re.compile(r"is not a member of .(?:torch|at|c10|py)\b|.(?:py|pybind11). has not been declared"
                         r"|.(?:torch|pybind11)::\w+. has not been declared")


def install(candidate_source: str, log: BuildLog, build_root_dir: Path | None = None, on_step=None,
            direct: bool = True, cuda_arch: str | None = None) -> None:
    """Route every ``load_inline`` call of the candidate through the cache and the mapper.

    ``on_step(text)`` hears each step of a build (a unit started, compiled or taken from the cache,
    the link) as it happens. ``direct``: the project's split build where it applies (Options.build
    "direct"), else torch's own for everything ("torch"). ``cuda_arch``: the target of a CUDA
    check on a machine that cannot run it (Options.cuda_arch; default ``compile_arch()``)."""
    import torch.utils.cpp_extension as ext
    # Installed again for a second candidate in one worker (a head-to-head race): wrap torch's own.
    original = getattr(ext.load_inline, "_kernelskill_original", ext.load_inline)
    root = build_root(build_root_dir)
    arch = gpu_arch()
    if arch and "TORCH_CUDA_ARCH_LIST" not in os.environ:
        os.environ["TORCH_CUDA_ARCH_LIST"] = arch   # build only for the GPU present

    def load_inline(name, cpp_sources, cuda_sources=None, *args, **kwargs):
        cpp = [cpp_sources] if isinstance(cpp_sources, str) else list(cpp_sources or [])
        cuda = [cuda_sources] if isinstance(cuda_sources, str) else list(cuda_sources or [])
        flags = {k: kwargs.get(k) for k in ("functions", "extra_cflags", "extra_cuda_cflags",
                                              "extra_ldflags", "extra_include_paths", "with_cuda")}
        key = hashlib.sha256(repr((name, cpp, cuda, args, sorted(flags.items(), key=str))).encode()).hexdigest()[:16]
        unique = f"{name}_{key}"
        build_dir = root / unique
        build_dir.mkdir(parents=True, exist_ok=True)
        log.extensions.append(unique)
        kwargs["build_directory"] = str(build_dir)
        kwargs["verbose"] = False
        sources = {"main.cpp": (cpp, _implicit_lines(kwargs, 1)), "cuda.cu": (cuda, _implicit_lines(kwargs, 3))}
        started = time.perf_counter()

        def step(text: str) -> None:
            log.steps.append((round(time.perf_counter() - started, 3), text))
            if on_step:
                on_step(text)
        try:
            if cuda and not _cuda_runtime():
                _compile_only(build_dir, cuda, kwargs, candidate_source, log, root, step, cpp=cpp,
                              arch=cuda_arch or compile_arch())
                raise CompileOnly()
            if direct:
                built = _direct(unique, build_dir, cpp, cuda, args, kwargs, candidate_source, log, root, step)
                if built is not None:
                    return traced(built, name)
            else:
                log.fallback = "torch's build chosen (Options.build = \"torch\")"
            hit = any(build_dir.glob(f"{unique}*.so"))
            log.cache_hit &= hit
            log.path = "torch"
            step("torch's build (load_inline): " + log.fallback)
            # Whether this extension builds against a precompiled header is decided once and
            # remembered: the include path is part of the build command, and a changed command
            # makes ninja rebuild a cached extension.
            marker = build_dir / "kernelskill_pch"
            if marker.exists():
                pch_dir = marker.read_text().strip() or None
            else:
                pch_dir = None
                if pch.supported() and not kwargs.get("use_pch"):
                    made = pch.precompiled_header(root / "_pch", kwargs.get("extra_cflags"),
                                                  kwargs.get("extra_include_paths"))
                    pch_dir = str(made) if made else None
                marker.write_text(pch_dir or "")
            if pch_dir and Path(pch_dir).exists():
                kwargs["extra_include_paths"] = [pch_dir] + list(kwargs.get("extra_include_paths") or [])
            try:
                with _build_lock(build_dir):
                    # Copies: load_inline inserts its #includes into the lists it is given.
                    return traced(original(unique, list(cpp), list(cuda) or None, *args, **kwargs), name)
            except (RuntimeError, ImportError, OSError, subprocess.SubprocessError) as e:
                text = str(e)
                diags = parse_diagnostics(text, sources, candidate_source)
                log.diagnostics.extend(diags)
                log.log_tail = tail(text)
                raise BuildFailed(diags, text) from None
        finally:
            log.seconds += time.perf_counter() - started

    load_inline._kernelskill_original = original
    ext.load_inline = load_inline


def _direct(unique, build_dir, cpp, cuda, args, kwargs, candidate_source, log: BuildLog, root: Path, step):
    """The extension through toolchain.py, or None when torch's build is to do it (``log.fallback``)."""
    try:
        p = toolchain.plan(unique, build_dir, cpp, cuda, args, kwargs)
    except toolchain.Unsupported as e:
        log.fallback = str(e)
        return None
    so, marker = build_dir / f"{unique}.so", build_dir / "kernelskill_module"
    log.path = "direct"
    with _build_lock(build_dir):
        if so.exists() and marker.exists() and marker.read_text() == p.unique:
            step("cached extension")
        else:
            log.cache_hit = False
            try:
                so = toolchain.build(p, root, step, log)
            except toolchain.UnitFailed as e:
                diags = parse_diagnostics(e.output, {"main.cpp": p.sources["kernel.cpp"], **p.sources},
                                          candidate_source)
                if e.unit == "kernel.cpp" and any(_LIGHT_MISS.search(d.message) for d in diags):
                    log.fallback = "the light header lacked what the sources use: " + diags[0].message[:200]
                    return None
                log.diagnostics.extend(diags)
                log.log_tail = tail(e.output)
                raise BuildFailed(diags, e.output) from None
            except toolchain.Unsupported as e:
                log.fallback = str(e)
                return None
    step("load")
    try:
        return toolchain.load(so, p.unique)
    except ImportError as e:
        undefined = _declared_never_defined(str(e), cpp + cuda, candidate_source)
        if undefined is not None:          # the candidate's own: said now, not after torch's build
            log.diagnostics.append(undefined)
            log.log_tail = tail(str(e))
            raise BuildFailed([undefined], str(e)) from None
        unresolved = [] if cuda else _unresolved_at_load(str(e), p, candidate_source, root, step)
        if unresolved:                     # a library symbol no library exports: torch's build fails the same
            log.diagnostics.extend(unresolved)
            log.log_tail = tail(str(e))
            raise BuildFailed(unresolved, str(e)) from None
        # Anything else: if this build's module is at fault, torch's build is the one that works.
        log.fallback = f"the direct build's module did not load: {str(e)[:200]}"
        return None


def _unresolved_at_load(error: str, p, candidate_source: str, root: Path, step) -> list[Diagnostic]:
    """A C++ candidate's module that did not load for a symbol its own object needs and no library
    the module is linked with exports (``x.data_ptr<long long>()``: libtorch exports ``long``'s):
    the link check's errors (linkcheck.py), at the lines that use it, rather than torch's build
    failing the same way 30 s later. Empty for anything else."""
    from . import linkcheck
    m = re.search(r"undefined symbol: (\S+)", error)
    kernel = p.build_dir / "kernel.o"
    if not m or not kernel.exists():
        return []
    own = not any(f.startswith("-l") or f.endswith((".so", ".a", ".o")) or ".so." in f for f in p.ldflags)
    return linkcheck.check([kernel], p.cpp, candidate_source, root, own_known=own, only_if=m.group(1), step=step)


def _declared_never_defined(error: str, sources: list[str], candidate_source: str) -> Diagnostic | None:
    """The module did not load for a function the candidate declares and defines nowhere (torch's
    build says the same, 20 s later): a Diagnostic at the declaration's line; None for any other
    cause (a library symbol, say, which torch's build may resolve)."""
    m = re.search(r"undefined symbol: (\S+)", error)
    if not m:
        return None
    try:
        shown = subprocess.run(["c++filt", m.group(1)], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    name = re.sub(r"\(.*", "", shown or m.group(1)).split("::")[-1]
    if not re.fullmatch(r"[A-Za-z_]\w*", name):
        return None
    text = re.sub(r"//[^\n]*|/\*.*?\*/", "", "\n".join(sources), flags=re.S)
    # A declaration: a type before the name at the start of a line, a parameter list, ';' (a call
    # statement has no type before it; `return g(x);` is not one).
    declared = re.compile(rf"(?m)^\s*(?!(?:return|throw|else|do|case|new|delete|co_return|co_yield)\b)"
                          rf"[A-Za-z_][\w:<>,\s*&]*[\s*&]{name}\s*\([^;{{}}]*\)\s*;")
    if not declared.search(text) or re.search(rf"\b{name}\s*\([^;{{}}]*\)\s*(?:const\s*)?\{{", text):
        return None
    diag = Diagnostic("error", f"undefined symbol: {shown or m.group(1)} — `{name}` is declared but defined "
                      "nowhere in the sources (define it, or link the library that holds it)", origin="link")
    for i, line in enumerate(candidate_source.splitlines(), 1):
        if declared.search(line):
            diag.file, diag.line, diag.source_line = "candidate", i, line
            break
    return diag


@contextlib.contextmanager
def _build_lock(build_dir: Path):
    """Hold this extension's build directory for the build. torch's own lock is a file it creates and
    deletes (``FileBaton``): a worker killed mid-build (its build timeout, a cancelled run) leaves the
    file behind, and every later build of the same source waited on it forever — until its own build
    timeout. An ``flock`` dies with its process: whoever holds it is the only builder, so a torch
    lock file found then is stale, and is removed."""
    import fcntl
    with open(build_dir / "kernelskill.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        stale = build_dir / "lock"
        if stale.exists():
            stale.unlink(missing_ok=True)
            print(f"kernelskill: removed a stale build lock left by a killed build: {stale}", file=sys.stderr)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


PROFILING = {"on": False}


class _TracedExtension:
    """The extension module, its functions wrapped so the profiler can attribute time to them.

    Wrapping costs one Python call per use; the profiler scope is entered only while the
    worker profiles (``PROFILING["on"]``), so timed calls pay nothing else.
    """

    def __init__(self, module, name: str):
        self._module, self._name, self._cache = module, name, {}

    def __getattr__(self, attr):
        if attr in self._cache:
            return self._cache[attr]
        value = getattr(self._module, attr)
        if callable(value) and not isinstance(value, type):
            import torch
            label = f"kernelskill::ext::{self._name}.{attr}"
            fn = value

            def value(*args, **kwargs):
                if PROFILING["on"]:
                    with torch.profiler.record_function(label):
                        return fn(*args, **kwargs)
                return fn(*args, **kwargs)
        self._cache[attr] = value
        return value


def traced(module, name: str):
    return _TracedExtension(module, name) if module is not None else module


def _implicit_lines(kwargs: dict, n: int) -> int:
    """Lines load_inline puts before the user's source (its implicit #includes)."""
    return 0 if kwargs.get("no_implicit_headers") else n


def _cuda_runtime() -> bool:
    import torch
    return bool(torch.version.cuda) and torch.cuda.is_available()



def _compile_only(build_dir: Path, cuda: list[str], kwargs: dict, candidate_source: str, log: BuildLog,
                  root: Path, step=lambda _: None, cpp: list[str] = (), arch: str = "sm_90") -> None:
    """nvcc -c of the CUDA source with torch's headers (stubs for missing CUDA library headers);
    ``<torch/extension.h>`` is the light header where the sources need no more (toolchain.py).
    Then the C++ sources where they define something, and the link check of the objects
    (linkcheck.py): a symbol no library would resolve fails the check at the line that uses it."""
    from . import linkcheck
    cpp = list(cpp)
    log.compile_only = True
    nvcc = tools.nvcc()
    if nvcc is None:
        log.diagnostics.append(Diagnostic("error", "CUDA source, but this machine has neither a CUDA torch "
                                          "nor nvcc: it can be neither built nor checked here", origin="cuda"))
        raise BuildFailed(log.diagnostics, "")
    import torch.utils.cpp_extension as ext
    header = [] if kwargs.get("no_implicit_headers") else ["#include <torch/types.h>", "#include <cuda.h>",
                                                          "#include <cuda_runtime.h>"]
    text = "\n".join(header + cuda)
    src = build_dir / "cuda.cu"
    ok_marker = build_dir / "compile_only.ok"
    # the link check judges the C++ sources and the bound functions too (linkcheck.py)
    digest = hashlib.sha256(repr((text, cpp, kwargs.get("functions"), kwargs.get("extra_cflags"),
                                  kwargs.get("extra_ldflags"), linkcheck.VERSION)).encode()).hexdigest()
    if ok_marker.exists() and ok_marker.read_text() == digest:
        return
    log.cache_hit = False
    includes = ext.include_paths() + [sysconfig.get_paths()["include"]] + list(kwargs.get("extra_include_paths") or [])
    cuda_inc = cuda_include_dir(str(nvcc))
    if not (cuda_inc / "cusparse.h").exists():
        includes.append(str(STUB_DIR))
    nvcc_cmd = [sys.executable, str(toolchain.NVCC_PHASES), str(nvcc)]       # the two front ends side by side

    def check(header_dir: Path | None, unit: str):
        cmd = [*nvcc_cmd, "-std=c++17", f"-arch={arch}", "-c", str(src), "-o", str(build_dir / "cuda.o"),
               "-Xcompiler", "-fPIC", "-DTORCH_EXTENSION_NAME=" + build_dir.name, *NO_HALF,
               *[f"-I{p}" for p in ([header_dir] if header_dir else []) + includes],
               *(kwargs.get("extra_cuda_cflags") or [])]
        t = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        log.units[unit] = round(time.monotonic() - t, 3)
        return proc

    # The header the GPU's direct build gives this source (toolchain.nvcc_light_header: its ops
    # only), and torch/types.h where that lacks a name torch's headers hold — the same check, at
    # the same cost, as the build it stands in for.
    heavy = toolchain.HEAVY.search(toolchain._strip_comments(text))
    sources = {"cuda.cu": (cuda, len(header))}
    # The C++ sources, where they define something: compiled beside the CUDA units, as the GPU's
    # build compiles them (their symbols then count in the link check).
    kernel = _compile_only_cpp_unit(build_dir, cpp, kwargs, includes, cuda_inc, root, step)
    own_known = kernel is not None or "{" not in toolchain._strip_comments("\n".join(cpp))
    if header and not heavy:
        # The GPU's build splits the source (toolchain.split_cuda): so does its check.
        sp, out = _compile_only_split(build_dir, cuda, kwargs, includes, cuda_inc, nvcc_cmd, arch, log, root, step,
                                      others=[kernel] if kernel else [])
        if out is not None and out[1] == "kernel.cpp":
            _cpp_failed(out[0], cpp, kwargs, candidate_source, log, step)     # raises, unless the light header missed
            kernel, own_known = None, False
            sp, out = _compile_only_split(build_dir, cuda, kwargs, includes, cuda_inc, nvcc_cmd, arch, log, root, step)
        if sp is not None and out is None:
            _link_check([build_dir / "cuda.o", build_dir / "cuda_host.o", *([kernel.obj] if kernel else [])], cpp,
                        cuda, kwargs, own_known, candidate_source, log, root, step)
            ok_marker.write_text(digest)
            return
        if sp is not None and out is not None and cuda_split.candidates_error(*out, sp, toolchain._in_torch_headers):
            diags = parse_diagnostics(out[0], sources, candidate_source)
            log.diagnostics.extend(diags)
            log.log_tail = tail(out[0])
            raise BuildFailed(diags, out[0])
        if sp is not None and out is not None:
            step(cuda_split.whole_after_split(out[1]))
        for name in ("cuda.cu", "cuda_host.cpp"):
            if name in log.units:
                log.units[f"{name} (split)"] = log.units.pop(name)
    src.write_text(text)                # the whole source (the split wrote its device unit there)
    full = None if heavy else toolchain.header_dir(root / "_pch", "cuda", ["compile-only"])[0]
    light = toolchain.nvcc_light_dir(build_dir, cuda) if header and not heavy else None
    proc = check(light or full, "cuda.cu (light header)" if light else "cuda.cu")
    if proc.returncode != 0 and light is not None and toolchain.nvcc_light_miss(proc.stdout + proc.stderr):
        proc = check(full, "cuda.cu")
    if proc.returncode != 0:
        out = proc.stdout + proc.stderr
        diags = parse_diagnostics(out, sources, candidate_source)
        log.diagnostics.extend(diags)
        log.log_tail = tail(out)
        raise BuildFailed(diags, out)
    if kernel is not None:
        try:
            toolchain._compile_all([kernel], step, log)
        except toolchain.UnitFailed as e:
            _cpp_failed(e.output, cpp, kwargs, candidate_source, log, step)
            kernel, own_known = None, False
    _link_check([build_dir / "cuda.o", *([kernel.obj] if kernel else [])], cpp, cuda, kwargs, own_known,
                candidate_source, log, root, step)
    ok_marker.write_text(digest)


def _link_check(objects: list[Path], cpp: list[str], cuda: list[str], kwargs: dict, own_known: bool,
                candidate_source: str, log: BuildLog, root: Path, step) -> None:
    """The compile-only build's link check (linkcheck.py): every object's undefined symbols resolved
    against the libraries the module would be loaded with; BuildFailed with one error per symbol
    that nothing resolves, at the candidate's line that uses it. ``own_known``: every unit of the
    candidate's is among ``objects`` (else only library symbols are judged)."""
    from . import linkcheck
    # libraries or objects of the candidate's own on the link line: its own symbols may be there
    if any(f.startswith("-l") or f.endswith((".so", ".a", ".o")) or ".so." in f
           for f in (kwargs.get("extra_ldflags") or [])):
        own_known = False
    started = time.perf_counter()
    diags = linkcheck.check(objects, cpp + cuda, candidate_source, root, functions=kwargs.get("functions"), cpp=cpp,
                            own_known=own_known, step=step)
    step(f"link check: {len(diags)} unresolved symbol(s), {time.perf_counter() - started:.2f} s")
    if diags:
        log.diagnostics.extend(diags)
        text = "\n".join(str(d) for d in diags)
        log.log_tail = tail(text)
        raise BuildFailed(diags, text)


def _compile_only_cpp_unit(build_dir: Path, cpp: list[str], kwargs: dict, includes: list[str], cuda_inc: Path,
                           root: Path, step):
    """The C++ sources' unit of a compile-only build, where they define something (``kernel.cpp``
    against the precompiled light header, as the direct build compiles it), else None."""
    stripped = toolchain._strip_comments("\n".join(cpp))
    if "{" not in stripped:
        return None                       # declarations only: no symbol of theirs to resolve
    if toolchain.HEAVY.search(stripped):
        step("kernel.cpp: uses torch's full header; not compiled by the check")
        return None
    implicit = not kwargs.get("no_implicit_headers")
    extra = [os.path.abspath(p) for p in kwargs.get("extra_include_paths") or []]
    kflags = [*toolchain._torch_flags(False)[0], "-isystem", str(cuda_inc),
              *[f"-I{p}" for p in includes if p == str(STUB_DIR)], *[f.strip() for f in kwargs.get("extra_cflags") or []]]
    light, _ = toolchain.header_dir(root / "_pch", "light", kflags)
    text = ("#include <torch/extension.h>\n" if implicit else "") + "\n".join(cpp) + "\n"
    return toolchain._unit("kernel.cpp", build_dir, text, [tools.cxx(), "-c", f"-I{light}",
                           *[f"-I{p}" for p in extra], "-DTORCH_EXTENSION_NAME=" + build_dir.name, *kflags],
                           root / "_objects")


def _cpp_failed(output: str, cpp: list[str], kwargs: dict, candidate_source: str, log: BuildLog, step) -> None:
    """``kernel.cpp`` of a compile-only build failed: BuildFailed with its errors at the candidate's
    lines; returns where the light header lacked what the sources use (the GPU's build would give
    them to torch's build: not judged here)."""
    diags = parse_diagnostics(output, {"kernel.cpp": (cpp, 0 if kwargs.get("no_implicit_headers") else 1)},
                              candidate_source)
    if any(_LIGHT_MISS.search(d.message) for d in diags):
        step("kernel.cpp: the light header lacks what it uses; its symbols are not judged here")
        return
    log.diagnostics.extend(diags)
    log.log_tail = tail(output)
    raise BuildFailed(diags, output)


def _compile_only_split(build_dir: Path, cuda: list[str], kwargs: dict, includes: list[str], cuda_inc: Path,
                        nvcc_cmd: list[str], arch: str, log: BuildLog, root: Path, step=lambda _: None, others=()):
    """The split check: the device unit through nvcc, the host unit through the C++ compiler
    against the precompiled light header, side by side (toolchain.compile_split, as the GPU's
    build). (None, None) when the source is built whole; (split, None) when both compiled;
    (split, (output, unit)) for the first to fail."""
    try:
        sp = cuda_split.split(cuda, offset=3)
    except cuda_split.CannotSplit as e:
        log.steps.append((0.0, f"cuda.cu built whole: {e}"))
        return None, None
    cxx = toolchain._torch_flags(False)[0] + ["-isystem", str(cuda_inc)] + \
        [f"-I{p}" for p in includes if p == str(STUB_DIR) or p in (kwargs.get("extra_include_paths") or [])]
    light = (toolchain.host_header_dir(root / "_pch", cxx, sp.host)
             or toolchain.header_dir(root / "_pch", "light", cxx)[0])
    device_cmd = [*nvcc_cmd, "-std=c++17", f"-arch={arch}", "-c", "-Xcompiler", "-fPIC", *NO_HALF,
                  *[f for inc in includes for f in ("-isystem", inc)],     # c10's Half, if named
                  *(kwargs.get("extra_cuda_cflags") or [])]
    host_cmd = [tools.cxx(), "-c", f"-I{light}", *cxx, "-DTORCH_EXTENSION_NAME=" + build_dir.name]
    try:
        toolchain.compile_split(build_dir, sp, device_cmd, host_cmd, build_dir / "_objects", step, log,
                                others=list(others))
    except toolchain.UnitFailed as e:
        return sp, (e.output, e.unit)
    return sp, None


def parse_diagnostics(log: str, sources: dict[str, tuple[list[str], int]], candidate: str) -> list[Diagnostic]:
    """gcc / nvcc / linker messages as Diagnostics, lines mapped into the candidate file."""
    diags: list[Diagnostic] = []
    seen = set()
    for raw in log.splitlines():
        m = _GCC.match(raw.strip()) or _NVCC.match(raw.strip())
        if m:
            sev = "error" if "error" in m["sev"] else ("warning" if m["sev"] == "warning" else "note")
            base = os.path.basename(m["file"])
            line, col = int(m["line"]), int(m["col"]) if m.groupdict().get("col") else None
            origin = "cuda" if base.endswith((".cu", ".cuh")) else "cpp"
            diag = Diagnostic(sev, m["msg"].strip(), line=line, column=col, file=base, origin=origin)
            if base in sources:
                _map_into_candidate(diag, *sources[base], candidate)
        else:
            lm = _LINK.search(raw)
            if not lm:
                continue
            diag = Diagnostic("error", lm.group(1).strip(), origin="link")
        key = (diag.severity, diag.file, diag.line, diag.message)
        if key not in seen and (diag.severity != "note" or len(diags) < 40):
            seen.add(key)
            diags.append(diag)
    errors = [d for d in diags if d.severity == "error"]
    if not errors and log.strip():
        last = [ln for ln in log.strip().splitlines() if ln.strip()][-1]
        diags.append(Diagnostic("error", last.strip()[:500], origin="cpp"))
    return diags[:40]


def _map_into_candidate(diag: Diagnostic, pieces: list[str], header_lines: int, candidate: str) -> None:
    """Turn a line of main.cpp / cuda.cu into a line of the candidate's Python file."""
    line = diag.line - header_lines          # 1-based line in the joined user sources
    for piece in pieces:
        n = piece.count("\n") + 1
        if 1 <= line <= n:
            text = piece.splitlines()[line - 1] if line - 1 < len(piece.splitlines()) else ""
            offset = locate(piece, candidate)
            diag.source_line = text
            if offset is not None:
                diag.file, diag.line = "candidate", offset + line
            else:
                diag.file, diag.line = f"{diag.file} (source string)", line
            return
        line -= n
    diag.file = f"{diag.file} (generated)"


