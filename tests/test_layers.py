"""The package's layers point one way and its modules import no circle.

Layers, lowest first: base types → evaluate → memory → agents → loop → bench → front ends. A module
may import its own layer and the layers below it, never one above. The front ends (the CLI, the TUI,
the MCP server) import none of each other: ``kernelskill`` finds the TUI's and the MCP server's
command groups by module name at run time (``cli.main.COMMAND_MODULES``), as plugins.

The graph is read from the source (every ``import``, the ones inside functions too), so a lazy
import that would close a circle at run time is caught as well.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Source folders and the package names they install as (setup.py maps tui/ and mcp_server/ under kernelskill).
FOLDERS = {"kernelskill": "kernelskill", "tui": "kernelskill.tui", "mcp_server": "kernelskill.mcp_server"}

LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("kernelskill", "kernelskill.errors", "kernelskill.vocab", "kernelskill.paths", "kernelskill.results",
              "kernelskill.candidate", "kernelskill.patterns", "kernelskill.features", "kernelskill.task",
              "kernelskill.node", "kernelskill.events")),
    ("evaluate", ("kernelskill.evaluate",)),
    ("memory", ("kernelskill.skills", "kernelskill.mechanisms", "kernelskill.trajectory", "kernelskill.search")),
    ("agents", ("kernelskill.llm", "kernelskill.agents")),
    ("loop", ("kernelskill.config", "kernelskill.optimizer", "kernelskill.runs")),
    ("bench", ("kernelskill.bench", "kernelskill.export")),
    ("front ends", ("kernelskill.cli", "kernelskill.__main__", "kernelskill.tui", "kernelskill.mcp_server")),
]
FRONT_ENDS = ("kernelskill.cli", "kernelskill.tui", "kernelskill.mcp_server")


def modules() -> dict[str, Path]:
    """Every module of the package, by its installed name."""
    out = {}
    for folder, package in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            rel = path.relative_to(ROOT / folder).with_suffix("").parts
            if any(part.startswith(".") for part in rel) or (folder == "kernelskill" and rel[0] in ("tui", "mcp_server")):
                continue
            parts = rel[:-1] if rel[-1] == "__init__" else rel
            out[".".join((package, *parts))] = path
    return out


def _known(name: str, mods: dict[str, Path]) -> str | None:
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def imports(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """The package's modules that ``name`` imports (``from . import x`` names module x, not the package)."""
    found = set()
    is_pkg = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = name.split(".") if is_pkg else name.split(".")[:-1]
                pkg = pkg[:len(pkg) - (node.level - 1)]
                base = ".".join(pkg + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
        else:
            continue
        for target in targets:
            if target.startswith("tui") or target.startswith("mcp_server"):
                target = "kernelskill." + target
            known = _known(target, mods)
            if known and known != name:
                found.add(known)
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports(name, path, mods) for name, path in mods.items()}


def layer_of(module: str) -> int:
    best, best_len = None, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best_len and \
                    (p != "kernelskill" or module == "kernelskill"):
                best, best_len = i, len(p)
    if best is None:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS in tests/test_layers.py")
    return best


def front_end(module: str) -> str | None:
    return next((f for f in FRONT_ENDS if module == f or module.startswith(f + ".")), None)


def circles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], 0
    for start in g:
        if start in index:
            continue
        work = [(start, iter(sorted(g[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_the_graph_sees_what_python_sees():
    """The reader must resolve the forms the code uses, or the checks below would pass on nothing."""
    g = graph()
    assert "kernelskill.evaluate.api" in g["kernelskill.cli.evaluate"]           # from ..evaluate.api import
    assert "kernelskill.evaluate.launch.isolation" in g["kernelskill.evaluate.api"]   # from .launch.isolation import
    assert "kernelskill.evaluate.worker.core" in g["kernelskill.evaluate.worker.run"]  # from .core import (…)
    assert "kernelskill.features" in g["kernelskill.task"]                      # from .features import
    assert "kernelskill.patterns" in g["kernelskill.features"]                  # from . import patterns
    assert "kernelskill.runs" in g["kernelskill.tui.app"]                       # from kernelskill.runs import
    assert "kernelskill.tui.screens.run" in g["kernelskill.tui.app"]            # from .screens.run import
    assert len(g) > 100


def test_a_circle_and_an_upward_import_are_caught():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []
    assert layer_of("kernelskill.evaluate.api") < layer_of("kernelskill.optimizer") < layer_of("kernelskill.cli.bench")
    with pytest.raises(AssertionError, match="in no layer"):
        layer_of("kernelskill.somewhere_new")


def test_no_import_circles():
    assert circles(graph()) == [], "modules that import each other, directly or through others"


def test_lower_layers_import_nothing_above_them():
    wrong = [f"{m} ({LAYERS[layer_of(m)][0]}) imports {t} ({LAYERS[layer_of(t)][0]})"
             for m, targets in sorted(graph().items()) for t in sorted(targets) if layer_of(t) > layer_of(m)]
    assert wrong == []


def test_no_front_end_imports_another():
    wrong = [f"{m} imports {t}" for m, targets in sorted(graph().items()) for t in sorted(targets)
             if front_end(m) and front_end(t) and front_end(m) != front_end(t)]
    assert wrong == []


def test_the_top_level_stays_small():
    """About 19 modules at the top; a group that grows becomes a package (cli/, bench/, evaluate/, …)."""
    top = sorted(p.stem for p in (ROOT / "kernelskill").glob("*.py") if p.stem not in ("__init__", "__main__"))
    assert len(top) <= 19, top


# Inside the evaluator: rooms and the steps that use them (README's tree, kernelskill/evaluate/).
EVALUATE = "kernelskill.evaluate"
ROOMS = ("build", "launch", "worker", "judge")
STEPS = ("api", "evaluation", "reference", "race", "ncu", "shapes")       # each runs workers and decides
WORKER_MODES = ("__main__", "core", "candidate", "reference", "run", "refserve", "probes")


def _room(module: str) -> str | None:
    rest = module[len(EVALUATE) + 1:].split(".") if module.startswith(EVALUATE + ".") else []
    return rest[0] if rest and (rest[0] in ROOMS or rest[0] in STEPS) else None


def test_the_evaluator_rooms_use_no_step_and_launch_stands_alone():
    """build/, launch/, worker/ and judge/ serve the steps (api, evaluation, reference, race, ncu,
    shapes) and never import one; launch/ imports no other room."""
    g = graph()
    wrong = []
    for m, targets in sorted(g.items()):
        here = _room(m)
        if here not in ROOMS:
            continue
        for t in sorted(targets):
            there = _room(t)
            if there in STEPS or (here == "launch" and there in ROOMS and there != "launch"):
                wrong.append(f"{m} imports {t}")
    assert wrong == []
    assert any(_room(m) == r for m in g for r in ROOMS if m != f"{EVALUATE}.{r}")   # the rooms exist


def test_only_the_worker_imports_its_modes():
    """The worker's modes run candidate code; the trusted parent reads worker/timing and worker/trials
    and never imports a mode (its process would then hold what only a worker may)."""
    modes = {f"{EVALUATE}.worker.{m}" for m in WORKER_MODES}
    g = graph()
    assert modes <= set(g), sorted(modes - set(g))
    wrong = [f"{m} imports {t}" for m, targets in sorted(g.items()) for t in sorted(targets)
             if t in modes and not m.startswith(f"{EVALUATE}.worker.")]
    assert wrong == []


# ---- comments say why; measurements and their history live in docs/ (issue 45) ----------------------
# Folders whose comments are checked: all of the package's source.
COMMENT_FOLDERS = ("kernelskill", "tui", "mcp_server")
_HARDWARE = (r"\b(?:[ABHV]100|H200|H800|A800|A10G|A30|A40|A6000|L4|L40S?|T4|B200|GB200|GH200|RTX ?\d{4}"
             r"|Xeon|EPYC|Ryzen|Threadripper|Graviton)\b")
_UNIT = r"\s?(?:ms|µs|us|ns|s|%|[GT]B/s|[GT]FLOP/s)(?![\w/])"
_NUM = r"\d+(?:[.,]\d+)?"
# A round number with a unit is a setting or a threshold (a 3 s cap, within 5 %) and may stay; a
# measured figure shows itself by a fraction, a range, an approximation, a throughput or a part-of.
MEASUREMENT = re.compile("|".join((
    _HARDWARE,
    r"\b20\d\d-[01]\d-[0-3]\d\b",                                   # a date
    r"(?<![±\w.,])\d+\.\d+" + _UNIT,                                # 6.6 s, 0.44 % (not ±0.25 %)
    _NUM + r"\s?[–-]\s?" + _NUM + _UNIT,                            # 4–5 s, 1.4–3.6 %
    r"(?:~|≈|\babout |\baround )" + _NUM + _UNIT,                   # ~5 s, about 10 ms
    _NUM + r"\s?(?:[GT]B/s|[GT]FLOP/s)",                            # 26 GB/s, 989 TFLOP/s
    _NUM + _UNIT + r" of (?:its|the|a|an) " + r"\d",               # 17 s of its 25 s
)))


def measurement_comments(text: str) -> list[tuple[int, str]]:
    """(line, comment) of every comment in ``text`` that names a machine or carries a measurement.
    Only a file with a suspect line after a '#' is tokenized (tokenizing every file takes seconds);
    the tokenizer then tells a comment from a '#' inside a string."""
    import io
    import tokenize
    if not any(MEASUREMENT.search(line, line.index("#")) for line in text.splitlines() if "#" in line):
        return []
    return [(t.start[0], t.string) for t in tokenize.generate_tokens(io.StringIO(text).readline)
            if t.type == tokenize.COMMENT and MEASUREMENT.search(t.string)]


def test_comments_carry_no_measurement_history():
    """A source comment says why; the figures behind it (timings, percentages, the GPU or CPU they
    were taken on, the date) belong in docs/ — docs/evaluator.md, docs/optimizer.md, docs/bench.md
    and docs/mcp.md, "Measurements behind the code" — where they can be dated and the machine named."""
    found = []
    for folder in COMMENT_FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            text = path.read_text(encoding="utf-8")
            found += [f"{rel}:{line}: {c}" for line, c in measurement_comments(text)]
    assert found == [], "move these figures to docs/ and keep the reason:\n" + "\n".join(found)
