"""Short-term memory: the search tree of one run, rooted at the reference.

A ``Node`` (``kernelskill.node``) is one attempt: the code, the plan and skill that made it, its
evaluation (an ``EvalResult``, parsed once when the node is made or read back), and the LLM calls it
cost. The tree answers what the loop asks: has this (parent, skill,
mechanism) been tried, was this exact code evaluated before, what did the debugger already try on
this lineage, what counts as success for the skill statistics. ``Trajectory.apply`` rebuilds the tree
from a run's events: the one replay, for resume, the run store's readers and the dashboard.
"""
from __future__ import annotations

from typing import Iterator

from .events import BaselineMeasured, BestImproved, CandidateEvaluated, Event, NodeRetimed
from .mechanisms import similar, spans_overlap
from .node import LLMCall, Node
from .vocab import NodeStatus

# Node and LLMCall are defined below the events (kernelskill.node) and named here too, beside the tree.
__all__ = ["INVALID", "LLMCall", "Node", "Trajectory"]

INVALID = NodeStatus.invalid         # the agents produced no usable candidate (malformed, blocked)


class Trajectory:
    """The tree: nodes by id in creation order, children linked to parents."""

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.best_id: str | None = None     # set by promote(): the best is a decision, not a max

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes.values())

    def __contains__(self, node_id: str) -> bool:
        return node_id in self.nodes

    @property
    def root(self) -> Node:
        return next(iter(self.nodes.values()))

    def get(self, node_id: str) -> Node:
        return self.nodes[node_id]

    def apply(self, event: Event) -> bool:
        """Fold one event of a run into the tree; True when the tree changed.

        The one replay of events.jsonl (``runs.load_run`` for resume and ``runs show``, the TUI's
        ``RunView`` live and replayed). Events about anything but the tree are ignored, and so is a
        node the tree holds already: applying a run's events twice builds the same tree."""
        if isinstance(event, BaselineMeasured):
            if len(self.nodes):
                return False
            self.add(event.node.snapshot())         # the tree's own copy: it will change it
            return True
        if isinstance(event, CandidateEvaluated):
            if event.node.id in self.nodes:
                return False
            self.add(event.node.snapshot())
            return True
        if isinstance(event, BestImproved) and event.node_id in self.nodes and event.node_id != self.best_id:
            self.promote(event.node_id)
            return True
        if isinstance(event, NodeRetimed) and event.node_id in self.nodes:
            # A node re-timed after it was added (the planner asked): the race is part of it now.
            race = {"against": event.against, "why": event.why, **(event.race.to_dict() if event.race else {})}
            if event.against is None:
                race["winner"] = None
            node = self.nodes[event.node_id]
            changed = node.race != race
            node.race = race
            return changed
        return False

    def new_id(self) -> str:
        return f"n{len(self.nodes)}"

    def add(self, node: Node) -> Node:
        """Insert a node under its parent (the first node added is the root)."""
        if node.id in self.nodes:
            raise ValueError(f"node {node.id} is already in the tree")
        if node.parent is not None:
            self.nodes[node.parent].children.append(node.id)
        self.nodes[node.id] = node
        return node

    # ---- neighbourhoods --------------------------------------------------------------------
    def children(self, node_id: str) -> list[Node]:
        return [self.nodes[c] for c in self.nodes[node_id].children]

    def siblings(self, node_id: str) -> list[Node]:
        parent = self.nodes[node_id].parent
        return [] if parent is None else [n for n in self.children(parent) if n.id != node_id]

    def lineage(self, node_id: str) -> list[Node]:
        """The node and its ancestors, nearest first."""
        out, cur = [], self.nodes.get(node_id)
        while cur is not None:
            out.append(cur)
            cur = self.nodes.get(cur.parent) if cur.parent else None
        return out

    # ---- memory rules ----------------------------------------------------------------------
    def find_code(self, code_hash: str) -> Node | None:
        """The node that evaluated this exact code, if any (the root counts: it is the reference)."""
        for n in self.nodes.values():
            if n.code_hash == code_hash and n.result is not None and n.duplicate_of is None:
                return n
        return None

    def repeats(self, parent_id: str, skill_id: str | None, mechanism: str,
                changed: list[int] = ()) -> list[Node]:
        """The earlier attempts a plan repeats, by meaning (``mechanisms``): plans from the same
        parent with the same skill, a similar mechanism and overlapping spans, whatever their outcome;
        then plans anywhere else in the tree with the same skill and a similar mechanism that failed
        for good (no repair made them correct). Nearest first."""
        here = [c for c in self.children(parent_id) if c.kind == "plan" and c.skill_id == skill_id
                and similar(c.mechanism, mechanism) and spans_overlap(c.changed, changed)]
        elsewhere = [n for n in self.nodes.values() if n.kind == "plan" and n.parent != parent_id
                     and n.skill_id == skill_id and similar(n.mechanism, mechanism) and self.failed_for_good(n)]
        return here[::-1] + elsewhere[::-1]

    def failed_for_good(self, n: Node) -> bool:
        """A plan node that failed and whose repairs never produced a correct candidate."""
        if not n.failed:
            return False
        stack = [n]
        while stack:
            cur = stack.pop()
            if cur.ok:
                return False
            stack += [c for c in self.children(cur.id) if c.kind == "repair"]
        return True

    def last_repair(self, n: Node) -> Node:
        """The newest node of ``n``'s repair chain (``n`` itself when it was never repaired)."""
        while True:
            repairs = [c for c in self.children(n.id) if c.kind == "repair"]
            if not repairs:
                return n
            n = repairs[-1]

    def distance(self, a: str, b: str) -> int:
        """Edges between two nodes in the tree."""
        up = {n.id: i for i, n in enumerate(self.lineage(a))}
        for j, n in enumerate(self.lineage(b)):
            if n.id in up:
                return up[n.id] + j
        return len(up) + j + 1

    def repair_chain(self, node_id: str) -> list[Node]:
        """The failed attempts of this lineage the debugger already saw, oldest first: the node and its
        ancestors back to (and including) the plan node that started the failure."""
        chain = []
        for n in self.lineage(node_id):
            if not n.failed:
                break
            chain.append(n)
            if n.kind != "repair":
                break
        return list(reversed(chain))

    def base_of(self, node_id: str) -> Node:
        """The nearest correct ancestor (what a new candidate is compared with)."""
        for n in self.lineage(node_id)[1:]:
            if n.ok or n.parent is None:
                return n
        return self.root

    def speedup_of(self, node: Node) -> float:
        """The node's speedup over the reference; the root is 1 by definition."""
        return 1.0 if node.parent is None else (node.speedup or 0.0)

    def outcome(self, node: Node) -> str:
        """success (correct and faster than its base), no_gain (correct, not faster), failure."""
        if not node.ok:
            return "failure"
        base = self.speedup_of(self.base_of(node.id))
        return "success" if (node.speedup or 0.0) > base else "no_gain"

    def promote(self, node_id: str) -> None:
        """Make ``node_id`` the best: the optimizer decided it is faster with confidence (or the
        finalists' head-to-head re-time picked it)."""
        self.best_id = node_id

    def best(self) -> Node | None:
        """The best correct candidate (not the root), or None: the last one promoted; in a tree
        without promotions, the fastest one measured with good quality."""
        if self.best_id is not None and self.best_id in self.nodes:
            return self.nodes[self.best_id]
        ok = [n for n in self.candidates() if n.measured_well]
        return max(ok, key=lambda n: (n.speedup, -self.index(n.id))) if ok else None

    def candidates(self) -> list[Node]:
        """Every correct, timed, first-of-its-code candidate (not the root)."""
        return [n for n in self.nodes.values() if n.ok and n.parent is not None and n.duplicate_of is None
                and n.speedup is not None]

    def leaders(self, k: int, exclude: set[str] = frozenset()) -> list[Node]:
        """The ``k`` best correct candidates outside ``exclude``, by the low end of their interval
        (a noisy 5× does not lead a well-measured 3×)."""
        ok = [n for n in self.candidates() if n.id not in exclude]
        return sorted(ok, key=lambda n: (-n.conservative, self.index(n.id)))[:k]

    def closed(self, node_id: str, close_after: int) -> bool:
        """A node whose more than ``close_after`` children all failed is closed."""
        kids = self.children(node_id)
        return len(kids) > close_after and not any(k.ok for k in kids)

    def index(self, node_id: str) -> int:
        """Creation order of a node (n7 → 7)."""
        return int(node_id[1:]) if node_id[1:].isdigit() else 0
