"""Which node to work on next, and which nodes each agent sees.

Two policies behind one ``select(tree) -> Selection | None`` protocol:
- ``StarkPolicy`` (STARK): ε-greedy over the tree — with probability ε a uniform pick among the
  expandable nodes, else the best one; the root takes at most ``root_children`` children; a node
  whose more than ``close_after`` children all failed is closed; a failed node is repaired.
- ``LinePolicy`` (KernelSkill): one line of work; the base moves only when a candidate beats it
  by ``line_ratio``× or by ``+line_gain`` speedup.
Both are deterministic given the tree and the seed.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Protocol

from .trajectory import Node, Trajectory


@dataclass
class Selection:
    node_id: str
    action: str              # expand (planner + coder) | repair (debugger)
    reason: str = ""


class Policy(Protocol):
    name: str

    def select(self, tree: Trajectory) -> Selection | None:
        """The next node and what to do with it; None when nothing is left to try."""
        ...


def repairable(tree: Trajectory, node: Node, max_repairs: int) -> bool:
    """A failed candidate with no child yet whose lineage has had fewer than ``max_repairs`` repairs."""
    if not node.failed or node.children or node.duplicate_of:
        return False
    return sum(n.kind == "repair" for n in tree.repair_chain(node.id)) < max_repairs


class StarkPolicy:
    name = "stark"

    def __init__(self, epsilon: float = 0.3, root_children: int = 5, close_after: int = 3,
                 max_repairs: int = 3, seed: int | None = None):
        self.epsilon, self.root_children, self.close_after = epsilon, root_children, close_after
        self.max_repairs = max_repairs
        self.seed = seed if seed is not None else random.randrange(2**31)

    def expandable(self, tree: Trajectory) -> list[Selection]:
        """Every node work could start from, in creation order."""
        out = []
        for n in tree:
            if n.parent is None:
                if len(n.children) < self.root_children and not tree.closed(n.id, self.close_after):
                    out.append(Selection(n.id, "expand"))
            elif n.ok and n.duplicate_of is None and not tree.closed(n.id, self.close_after):
                out.append(Selection(n.id, "expand"))
            elif repairable(tree, n, self.max_repairs):
                out.append(Selection(n.id, "repair"))
        return out

    def score(self, tree: Trajectory, sel: Selection) -> tuple:
        """Exploit order: speedup (a failed node counts at its base's), then repairs, then the newest."""
        node = tree.get(sel.node_id)
        value = tree.speedup_of(tree.base_of(node.id) if sel.action == "repair" else node)
        return value, sel.action == "repair", tree.index(node.id)

    def select(self, tree: Trajectory) -> Selection | None:
        options = self.expandable(tree)
        if not options:
            return None
        # The generator depends only on (seed, tree size): a resumed run draws what it would have.
        rng = random.Random(self.seed * 1_000_003 + len(tree))
        if rng.random() < self.epsilon and len(options) > 1:
            pick = options[rng.randrange(len(options))]
            pick.reason = f"explore (ε={self.epsilon:g}) among {len(options)}"
            return pick
        pick = max(options, key=lambda s: self.score(tree, s))
        pick.reason = "exploit: best " + ("failed node to repair" if pick.action == "repair" else "node")
        return pick


class LinePolicy:
    name = "line"

    def __init__(self, ratio: float = 1.3, gain: float = 0.3, max_repairs: int = 3):
        self.ratio, self.gain, self.max_repairs = ratio, gain, max_repairs

    def moves(self, base_speedup: float, speedup: float | None) -> bool:
        """Whether a candidate at ``speedup`` becomes the new base."""
        return speedup is not None and (speedup >= base_speedup * self.ratio or speedup >= base_speedup + self.gain)

    def base(self, tree: Trajectory) -> Node:
        """Replay the tree in creation order: the base moves on each big enough improvement."""
        base = tree.root
        on_line = {base.id}
        for n in tree:
            if n.parent is None or n.parent not in on_line:
                continue
            on_line.add(n.id)
            if n.ok and n.duplicate_of is None and self.moves(tree.speedup_of(base), n.speedup):
                base, on_line = n, {n.id}
        return base

    def select(self, tree: Trajectory) -> Selection | None:
        base = self.base(tree)
        last = list(tree)[-1]
        if last is not base and repairable(tree, last, self.max_repairs) and base in tree.lineage(last.id):
            return Selection(last.id, "repair", "line: repair the last attempt")
        return Selection(base.id, "expand", f"line: base {base.id} ({tree.speedup_of(base):.2f}×)")


def make_policy(search) -> Policy:
    """The policy named in the ``[search]`` config section (a ``config.SearchSettings``; not imported:
    the config is a layer above the search)."""
    if search.policy == "line":
        return LinePolicy(search.line_ratio, search.line_gain, search.max_repairs)
    return StarkPolicy(search.epsilon, search.root_children, search.close_after, search.max_repairs, search.seed)


# ---- what each agent sees (STARK's role-specific context windows) -------------------------------
def context(tree: Trajectory, node_id: str, role: str, limit: int = 5) -> list[Node]:
    """The nodes shown to ``role`` working on ``node_id``, the node first, at most ``limit``.

    planner: node, root, node's children, the top-2 leaders elsewhere;
    coder: node, root, children, siblings' children; debugger: node, root, siblings.
    """
    node = tree.get(node_id)
    picks: list[Node] = [node, tree.root]
    if role == "planner":
        picks += tree.children(node_id)
        near = {n.id for n in picks}
        picks += tree.leaders(2, exclude=near)
    elif role == "coder":
        picks += tree.children(node_id)
        for sib in tree.siblings(node_id):
            picks += tree.children(sib.id)
    elif role == "debugger":
        picks += tree.siblings(node_id)
    else:
        raise ValueError(f"unknown role {role!r}")
    seen, out = set(), []
    for n in picks:
        if n.id not in seen:
            seen.add(n.id)
            out.append(n)
    return out[:limit]
