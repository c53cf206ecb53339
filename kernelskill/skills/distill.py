"""Distillation: a verified node that beat its parent with confidence becomes a draft skill.

The draft's gate comes from what the run measured: the task's op classes and features, lower bounds
on its sizes (the move paid at this size, not necessarily at much smaller ones), the dtype, the
bottleneck of the node it improved on, and the metric changes it caused. Its example is the node's
code, its guidance the planner's plan, its expected gain the measured speedup over the parent with
its interval. The draft is validated like any skill file and written to the user's skill directory
for review (a person reads it before trusting it; ``skills gate --explain`` shows where it applies).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..vocab import OP_CLASSES, TASK_FEATURES
from . import predicates
from ..paths import user_home
from .schema import Skill, _validate

SIZE_FACTS = ("gemm_m", "gemm_n", "gemm_k", "reduce_size", "output_numel")


@dataclass
class Distilled:
    skill: Skill
    node_id: str
    base_id: str
    gain: float                      # node speedup / base speedup
    gain_low: float                  # the same with the node's low and the base's high interval ends
    path: Path | None = None


def _ci(node, is_root: bool) -> tuple[float, float, float]:
    """(speedup, low, high) of a node over eager; the root is 1 exactly."""
    if is_root:
        return 1.0, 1.0, 1.0
    ci = node.speedup_ci
    sp = node.speedup or 0.0
    return sp, (ci[0] if ci else sp), (ci[1] if ci else sp)


def qualifying(tree) -> list[tuple[Any, Any, float]]:
    """Nodes that beat their base with confidence: (node, base, gain at the low end), best first."""
    out = []
    for node in tree.candidates():
        if not node.measured_well:
            continue
        base = tree.base_of(node.id)
        sp, lo, _ = _ci(node, False)
        bsp, _, bhi = _ci(base, base.parent is None)
        if lo > bhi and bsp > 0:
            out.append((node, base, lo / bhi))
    return sorted(out, key=lambda t: -t[2])


def _floor_pow2(x: float) -> int:
    return 1 << max(int(math.floor(math.log2(x))), 0) if x >= 1 else 1


def _slug(text: str, limit: int = 40) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return s[:limit].rstrip("-") or "move"


def draft(state, node_id: str | None = None, skill_id: str | None = None, book=None) -> Distilled:
    """The draft skill of ``node_id`` (default: the node with the largest confident gain) in the run
    ``state`` (``runs.load_run``); UserError saying why when the node does not qualify."""
    from ..task import Task
    tree = state.tree
    run = state.info.get("run", {})
    good = qualifying(tree)
    if not good:
        raise UserError(f"{state.path}: no node beat its parent with confidence (its speedup's interval above "
                        f"the parent's); nothing to distill yet")
    if node_id is None:
        node, base, _ = good[0]
    else:
        if node_id not in tree:
            raise UserError(f"{state.path}: no node {node_id!r}; nodes: {', '.join(n.id for n in tree)}")
        match = [t for t in good if t[0].id == node_id]
        if not match:
            n = tree.get(node_id)
            why = (f"its status is {n.status}" if not n.ok else "it was not measured well (quality "
                   f"{n.quality})" if not n.measured_well else "its speedup's interval overlaps its parent's")
            raise UserError(f"node {node_id} does not qualify: {why}. Nodes that do: "
                            f"{', '.join(t[0].id for t in good)}")
        node, base, _ = match[0]
    try:
        info = Task.load(Path(run["task"]), preset=run.get("preset")).summary()
    except (KeyError, OSError, UserError) as exc:
        raise UserError(f"{state.path}: cannot load the run's task to read its features ({exc})") from None
    backend = run.get("backend", "cuda")
    classes = [c for c in info["op_classes"] if c in OP_CLASSES] or ["*"]
    features = [f for f in info.get("features", []) if f in TASK_FEATURES]
    facts = predicates.task_facts(info)
    pre = [f"{k} >= {_floor_pow2(facts[k] / 4)}" for k in SIZE_FACTS if isinstance(facts.get(k), (int, float))
           and facts[k] >= 64]
    if "dtype" in facts:
        pre.append(f"dtype == {facts['dtype']}")
    before, after = predicates.profile_facts(base.profile), predicates.profile_facts(node.profile)
    expect = {"speedup": "up"}
    for metric in ("roofline_fraction", "launches", "custom_share", "dram_pct", "sm_pct", "achieved_occupancy_pct"):
        if before.get(metric) is not None and after.get(metric) is not None and before[metric] != after[metric]:
            expect[metric] = "up" if after[metric] > before[metric] else "down"
    sp, lo, hi = _ci(node, False)
    bsp, blo, bhi = _ci(base, base.parent is None)
    gain, gain_low = sp / bsp, lo / bhi
    parent_skill = node.skill_id or ""
    mechanism = node.mechanism.strip() or (node.plan.strip().splitlines() or ["a move"])[0]
    sid = skill_id or f"learned-{_slug(run.get('task_name', 'task'), 24)}-{_slug(mechanism, 30)}"
    plan_lines = [ln.strip(" -*\t") for ln in node.plan.splitlines() if ln.strip(" -*\t")]
    steps = plan_lines[:6] or [f"Apply the change shown in the example ({mechanism})."]
    pitfalls = ["A draft from one run on one task: check it on other shapes before trusting it.",
                f"Measured on {run.get('device', '?')}: the gain on another GPU or CPU may differ."]
    pitfalls += [f"A repair on the way: {n.diagnosis.strip().splitlines()[0]}" for n in tree.lineage(node.id)
                 if n.kind == "repair" and n.diagnosis.strip()][:2]
    where = run.get("task_name", "the task")
    data = {
        "id": sid, "title": f"{mechanism[:1].upper()}{mechanism[1:]} (learned on {where})"[:160],
        "category": _category(parent_skill, book), "backends": [backend], "applies_to": classes,
        "bottlenecks": [before["bottleneck"]] if before.get("bottleneck") else "*",
        "when": (f"a task like {where} ({', '.join(classes)}; {', '.join(features[:6]) or 'no special structure'}), "
                 f"from a {'reference' if base.parent is None else 'candidate'} at {bsp:.2f}x eager"),
        "summary": mechanism, "guidance": (node.plan.strip() or mechanism) + (
            f"\n\nDistilled from run {run.get('id', state.path.name)}, node {node.id} (parent {base.id}"
            + (f", applying skill {parent_skill}" if parent_skill else "") + f"): {sp:.2f}x eager "
            f"[{lo:.2f}-{hi:.2f}] against the parent's {bsp:.2f}x [{blo:.2f}-{bhi:.2f}]."),
        "steps": steps, "pitfalls": pitfalls,
        "expected_gain": f"{gain:.2f}x over its parent on {where} (at least {gain_low:.2f}x by the intervals), "
                         f"on {run.get('device', '?')}",
        "example": node.code, "example_lang": "python", "features": features, "preconditions": pre,
        "expect": expect,
    }
    skill = _validate(data, f"<draft {sid}>", None)
    return Distilled(skill, node.id, base.id, gain, gain_low)


def _category(parent_skill: str, book) -> str:
    """The category of the skill the node applied, else 'algorithm'."""
    skill = book.skills.get(parent_skill) if book is not None and parent_skill else None
    return skill.category if skill is not None else "algorithm"


def save(book, d: Distilled, directory: Path | str | None = None, *, force: bool = False,
         rename: str = "--force replaces it, --id names the draft") -> Path:
    """Write the draft to ``directory`` (default: the user's skill directory) through the book; a
    skill of the same id there, or a shipped one (the draft would override it), is replaced only
    with ``force``. ``rename`` tells the caller's way out (a flag, an argument)."""
    target = Path(directory) if directory else user_home() / "skills"
    sid = d.skill.id
    shipped = book.skills.get(sid) is not None and book.skills[sid].origin == "shipped"
    if not force and (target / f"{sid}.toml").exists():
        raise UserError(f"{target / f'{sid}.toml'}: a skill with id {sid!r} exists; {rename}")
    if not force and shipped:
        raise UserError(f"{sid!r} is a shipped skill's id: a draft with it would override that skill; {rename}")
    d.path = book.save_user_skill(d.skill, target)
    return d.path
