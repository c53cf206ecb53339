"""Candidate: a source that defines ``ModelNew``; its backend and content hash."""
from __future__ import annotations

import ast
import hashlib
import threading
from dataclasses import dataclass
from pathlib import Path

from .errors import UserError

MAX_SOURCE_BYTES = 1_000_000


@dataclass(frozen=True)
class Candidate:
    source: str
    backend: str          # cuda | triton | cpp | none (plain PyTorch, no custom kernel)
    hash: str
    path: Path | None = None

    @classmethod
    def from_source(cls, source: str, path: Path | None = None) -> "Candidate":
        if not source.strip():
            raise UserError(f"{path or 'candidate'}: the source is empty")
        if len(source.encode()) > MAX_SOURCE_BYTES:
            raise UserError(f"{path or 'candidate'}: the source is {len(source.encode())} bytes; "
                            f"the limit is {MAX_SOURCE_BYTES}")
        return cls(source=source, backend=detect_backend(source), hash=source_hash(source), path=path)

    @classmethod
    def from_file(cls, path: str | Path) -> "Candidate":
        p = Path(path)
        if not p.is_file():
            raise UserError(f"{path}: no such candidate file")
        return cls.from_source(p.read_text(), path=p.resolve())

    @property
    def label(self) -> str:
        """How messages name this candidate: its file (relative to the working directory when it lies
        under it), or "candidate" for source that came without one."""
        if self.path is None:
            return "candidate"
        try:
            return str(self.path.relative_to(Path.cwd()))
        except ValueError:
            return str(self.path)

    @property
    def name(self) -> str:
        return self.path.name if self.path else f"candidate-{self.hash[:8]}"


def source_hash(source: str) -> str:
    """Hash of the source with trailing whitespace normalised (identical code, identical hash)."""
    norm = "\n".join(line.rstrip() for line in source.strip().splitlines())
    return hashlib.sha256(norm.encode()).hexdigest()[:16]


_PARSE_LOCK = threading.Lock()


def parse_python(source: str, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    """``ast.parse``, one thread at a time: CPython 3.11 builds the tree with a recursion counter
    shared by the interpreter's threads, and two parses at once can fail with "SystemError: AST
    constructor recursion depth mismatch" (python/cpython#106905). The bench pool, the MCP server
    and the optimizer evaluate from several threads."""
    with _PARSE_LOCK:
        return ast.parse(source, filename=filename, mode=mode)


def detect_backend(source: str) -> str:
    """cuda when load_inline gets CUDA sources, triton for @triton.jit kernels, cpp for C++ only."""
    try:
        tree = parse_python(source)
    except SyntaxError:
        return _detect_by_text(source)
    has_triton = has_inline = has_cuda = False
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
            has_triton |= any(n == "triton" or n.startswith("triton.") for n in names)
        elif isinstance(node, ast.Call):
            fname = _call_name(node.func)
            if fname in ("load_inline", "load"):
                has_inline = True
                kw = {k.arg for k in node.keywords}
                cuda_kw = next((k.value for k in node.keywords if k.arg == "cuda_sources"), None)
                if (cuda_kw is not None and not _is_none(cuda_kw)) or len(node.args) >= 3:
                    has_cuda = True
                if fname == "load" and any(isinstance(a, ast.Constant) and str(a.value).endswith(".cu")
                                           for a in ast.walk(node)):
                    has_cuda = True
                has_cuda |= "with_cuda" in kw and any(k.arg == "with_cuda" and _is_true(k.value)
                                                      for k in node.keywords)
    if has_cuda:
        return "cuda"
    if has_triton:
        return "triton"
    return "cpp" if has_inline else "none"


def _detect_by_text(source: str) -> str:
    if "cuda_sources" in source or "__global__" in source:
        return "cuda"
    if "triton" in source:
        return "triton"
    return "cpp" if "load_inline" in source else "none"


def _call_name(func: ast.expr) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _is_true(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is True
