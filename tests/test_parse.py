"""``candidate.parse_python``: one parse at a time across threads (CPython 3.11's AST constructor
shares a recursion counter between threads: two parses at once raised "SystemError: AST
constructor recursion depth mismatch" in a CI run of two evaluations from two threads)."""
from __future__ import annotations

import ast
import threading

from kernelskill import candidate


def test_parses_from_many_threads_never_overlap(monkeypatch):
    inside, most, lock = [0], [0], threading.Lock()
    started = threading.Barrier(4)
    real = ast.parse

    def watched(*args, **kwargs):
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        try:
            for _ in range(200):          # a long parse: the other threads are all waiting to start one
                real("x = 1\n" * 50)
            return real(*args, **kwargs)
        finally:
            with lock:
                inside[0] -= 1

    monkeypatch.setattr(ast, "parse", watched)
    trees = []

    def work():
        started.wait()
        trees.append(candidate.parse_python("class ModelNew:\n    pass\n"))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(trees) == 4 and most[0] == 1


def test_every_parse_in_a_process_with_threads_goes_through_parse_python():
    """The lock helps only if every parse takes it: outside candidate.py, no module of the processes
    that evaluate from several threads (the bench pool, the MCP server, the optimizer, the TUI) calls
    ast.parse itself. A worker process (evaluate/worker/) parses on its one thread."""
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    raw = [f"{p.relative_to(root)}:{n}" for d in ("kernelskill", "mcp_server", "tui") for p in (root / d).rglob("*.py")
           if p.name != "candidate.py" and "worker" not in p.relative_to(root / d).parts[:-1]
           for n, line in enumerate(p.read_text().splitlines(), 1) if "ast.parse(" in line]
    assert raw == [], f"call candidate.parse_python instead of ast.parse at {raw}"
