"""Editing a candidate's source by its AST's positions, the same way for every backend's rewrite."""
from __future__ import annotations

import ast
from typing import Callable
from kernelskill.candidate import parse_python


def positions(source: str) -> Callable[[int, int], int]:
    """``pos(line, col)``: the string offset of an AST position (``col`` counts UTF-8 bytes)."""
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for ln in lines:
        offsets.append(offsets[-1] + len(ln))

    def pos(line: int, col: int) -> int:
        return offsets[line - 1] + len(lines[line - 1].encode()[:col].decode())
    return pos


def replace_spans(source: str, edits: list[tuple[int, int, str]]) -> str:
    """``source`` with each (start, end, text) span replaced; the spans do not overlap."""
    out = source
    for a, b, text in sorted(edits, reverse=True):
        out = out[:a] + text + out[b:]
    return out


def _insert_after(source: str, text: str, opening) -> str:
    """``text`` after the module's docstring and the statements that follow it while ``opening(stmt)``."""
    at = 0
    for i, stmt in enumerate(parse_python(source).body):
        if (i == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)) or opening(stmt):
            at = stmt.end_lineno
        else:
            break
    lines = source.splitlines(keepends=True)
    if at and not lines[at - 1].endswith("\n"):
        lines[at - 1] += "\n"
    return "".join(lines[:at] + [text] + lines[at:])


def insert_import(source: str, line: str) -> str:
    """``line`` (an import, newline-terminated) after the module's docstring and __future__ imports."""
    return _insert_after(source, line, lambda s: isinstance(s, ast.ImportFrom) and s.module == "__future__")


def insert_after_imports(source: str, text: str) -> str:
    """``text`` after the run of import statements that opens the module (past its docstring), so a
    definition added there follows the imports, as a reader and a linter expect."""
    return _insert_after(source, text, lambda s: isinstance(s, (ast.Import, ast.ImportFrom)))
