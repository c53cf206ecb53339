"""Plain-text views of the task, nodes, failures and skills that fill the prompt templates."""
from __future__ import annotations

from typing import Any, Iterable

from ..results import EvalResult
from ..trajectory import Node, Trajectory
from ..vocab import RUN_FAILURES
from .analyzer import _ms, analyze

MAX_LOG = 2000


def render_task(task, summary: dict[str, Any]) -> str:
    """Name, shapes, op classes, FLOPs and bytes, tolerance."""
    spec = lambda s: f"{s['dtype']}{s['shape']}" if "shape" in s else repr(s.get("value"))  # noqa: E731
    atol, rtol = task.tolerance
    lines = [f"{task.name}" + (f" — {task.description}" if task.description else ""),
             "inputs: " + ", ".join(spec(s) for s in summary.get("inputs", [])),
             "outputs: " + ", ".join(spec(s) for s in summary.get("outputs", [])),
             f"op classes: {', '.join(summary.get('op_classes', [])) or '-'}",
             f"FLOPs {summary.get('flops', 0):.3g} · compulsory bytes {summary.get('bytes', 0):.3g} · "
             f"tolerance atol {atol:g} rtol {rtol:g}"]
    return "\n".join(lines)


def speed_text(n: Node) -> str:
    """A node's speed as every prompt shows it: the speedup with its interval, its quality when not
    good, and the times themselves (the candidate's, and the eager it was divided by: ratios to
    different eager runs can disagree where the candidates' own times do not). "" when untimed."""
    if n.speedup is None:
        return ""
    ci = n.speedup_ci
    text = f"{n.speedup:.2f}×" + (f" [{ci[0]:.2f}–{ci[1]:.2f}]" if ci else "")
    if not n.measured_well:
        text += f" ({n.quality})"
    p = n.profile
    if p is not None and p.candidate is not None and p.baseline is not None:
        text += f", {_ms(p.candidate.median_ms)} vs eager {_ms(p.baseline.median_ms)}"
    return text


def headline(tree: Trajectory, n: Node) -> str:
    """One line: id, origin, skill, status, speed (``speed_text``)."""
    if n.parent is None:
        p = n.profile
        return f"{n.id} (reference): 1.00× by definition" + \
            (f", eager {_ms(p.baseline.median_ms)}" if p is not None and p.baseline is not None else "")
    origin = f"repair of {n.parent}" if n.kind == "repair" else f"from {n.parent}"
    sp = f", {speed_text(n)}" if n.speedup is not None else ""
    dup = f", same code as {n.duplicate_of}" if n.duplicate_of else ""
    return f"{n.id} ({origin}; skill {n.skill_id or 'none'}): {n.status}{sp}{dup}" + \
        (f" — {n.message[:160]}" if n.message and not n.ok else "")


def render_node(tree: Trajectory, n: Node) -> str:
    """The focal node: headline, plan, and the Analyzer's profile summary."""
    lines = [headline(tree, n)]
    if n.mechanism:
        lines.append(f"mechanism: {n.mechanism}")
    lines.append(analyze(n.result))
    return "\n".join(lines)


def render_context(tree: Trajectory, nodes: Iterable[Node], skip: str | None = None) -> str:
    """The other nodes of a role's context window, one block each (no code)."""
    blocks = []
    for n in nodes:
        if n.id == skip:
            continue
        text = headline(tree, n)
        if n.mechanism:
            text += f"\n  mechanism: {n.mechanism}"
        if n.diagnosis:
            text += f"\n  diagnosis: {n.diagnosis[:300]}"
        blocks.append(text)
    return "\n".join(blocks) or "(nothing else yet)"


def render_tried(tree: Trajectory, node_id: str, elsewhere: int = 8) -> str:
    """Skills and mechanisms already tried from a node (what repeat blocking refuses), then the
    mechanisms that failed anywhere else in the tree and why (the newest ``elsewhere`` of them),
    so a move that failed from a sibling is not planned again blind."""
    kids = [c for c in tree.children(node_id) if c.kind == "plan"]
    lines = [f"- skill {c.skill_id or 'none'} / {c.mechanism or '?'} → {c.status}"
             + (f" {speed_text(c)}" if c.speedup else "") for c in kids] or ["(nothing yet)"]
    failed = [n for n in tree if n.kind == "plan" and n.parent != node_id and tree.failed_for_good(n)]
    if failed:
        lines += ["", "Failed elsewhere in the tree (each after its repairs):"]
        lines += [f"- from {n.parent}: skill {n.skill_id or 'none'} / {n.mechanism or '?'} → {ending(tree, n)}"
                  for n in failed[-elsewhere:]]
    return "\n".join(lines)


def ending(tree: Trajectory, n: Node, limit: int = 120) -> str:
    """How a plan's line ended (its newest repair, or itself): the status and speedup, and when it
    failed, the evaluator's message and the debugger's diagnosis."""
    last = tree.last_repair(n)
    text = last.status + (f" {speed_text(last)}" if last.speedup else "")
    if not last.ok and (last.message or "").strip():
        text += f": {last.message.strip()[:limit]}"
    if last is not n and last.diagnosis.strip():
        text += f" (debugger: {last.diagnosis.strip().splitlines()[0][:limit]})"
    return text


def _one_line(text: str, limit: int = 220) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def render_catalogue(skills, stats=None, ops=(), backend: str | None = None, arch: str | None = None) -> str:
    """The offered skills as a catalogue, best first, one line each: id, title, when it applies,
    expected gain, and its record on this task's op classes, backend and arch (``stats``: the
    SkillBook's StatsStore; a skill never tried there says so, with no rate). The chosen skill's
    full text goes to the coder."""
    if not skills:
        return "(no skill applies; say skill \"none\" and why, then plan a general improvement)"
    out = []
    for s in skills:
        record = "untried here"
        if stats is not None:
            c = stats.get(s.id).counts(ops, backend, arch)
            if c.tried:
                mean = c.mean_speedup()
                record = (f"{c.succeeded} of {c.tried} faster here" + (f", mean {mean:.2f}×" if mean else ""))
        out.append(f"[{s.id}] {s.title} — when: {_one_line(s.when)} — expected: {_one_line(s.expected_gain, 160)}"
                   f" — record: {record}")
    return "\n".join(out)


def render_relatives(tree: Trajectory, node_id: str, k: int = 3) -> str:
    """The nearest correct candidates to ``node_id`` (itself first when it is one), with their plans
    and outcomes: what worked nearby, for the coder to build on rather than rediscover."""
    near = sorted((tree.distance(node_id, n.id), -(n.speedup or 0), tree.index(n.id), n) for n in tree.candidates())
    if not near:
        return "(no correct candidate yet: only the reference has run)"
    blocks = []
    for steps, _, _, n in near[:k]:
        where = "the node you start from" if n.id == node_id else f"{steps} step{'s' if steps > 1 else ''} away"
        blocks.append(f"- {n.id} ({where}; skill {n.skill_id or 'none'}): correct, {speed_text(n)}"
                      f" — {n.mechanism or 'repair'}\n    {_one_line(n.plan or '-', 600)}")
    return "\n".join(blocks)


def render_failure(result: EvalResult | None, message: str = "") -> str:
    """What the debugger reads: status, compiler diagnostics, the mismatch report, the log tail."""
    if result is None:
        return message or "no evaluation"
    lines = [f"status: {result.status} — {result.message}"]
    comp = result.compile
    if comp.diagnostics:
        lines.append("compiler diagnostics:")
        for d in comp.diagnostics[:12]:
            where = f"line {d.line}" if d.line else d.file
            lines.append(f"  {where}: {d.severity}: {d.message}"
                         + (f"\n      {d.source_line.strip()}" if d.source_line else ""))
    if not comp.ok and not comp.diagnostics and comp.log_tail:
        lines.append("build log (tail):\n" + comp.log_tail[-MAX_LOG:])
    ver = result.verify
    if ver is not None and ver.mismatch:
        lines.append("mismatch report:\n" + ver.mismatch[-MAX_LOG:])
    for note in (ver.notes if ver is not None else []):
        lines.append(f"accuracy: {note}")
    for t in (ver.trials if ver is not None else [])[:6]:
        if not t.ok:
            lines.append(f"  trial {t.trial} ({t.distribution}): {t.check} — {t.message}")
    if result.flags:
        lines.append("flags: " + "; ".join(result.flags[:6]))
    if result.log_tail and result.status in RUN_FAILURES:
        lines.append("log (tail):\n" + result.log_tail[-MAX_LOG:])
    return "\n".join(lines)


def render_chain(chain: list[Node]) -> str:
    """The repair chain: each earlier attempt's diagnosis and how it ended."""
    if len(chain) <= 1:
        return "(none: this is the first repair of this candidate)"
    lines = []
    for n in chain[:-1]:
        what = f"diagnosis: {n.diagnosis}" if n.diagnosis else f"plan: {n.mechanism or n.plan[:200]}"
        lines.append(f"- {n.id} ({n.kind}) {what} → {n.status}: {n.message[:200]}")
    return "\n".join(lines)
