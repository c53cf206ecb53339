"""Short-term memory: the search tree of one run, rooted at the reference.

A ``Node`` is one attempt: the code, the plan and skill that made it, its evaluation (an
``EvalResult``, parsed once when the node is made or read back), and the LLM calls it cost. The tree answers what the loop asks: has this (parent, skill,
mechanism) been tried, was this exact code evaluated before, what did the debugger already try on
this lineage, what counts as success for the skill statistics. ``Trajectory.apply`` rebuilds the tree
from a run's events: the one replay, for resume, the run store's readers and the dashboard.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Iterator

from .events import BaselineMeasured, BestImproved, CandidateEvaluated, Event, NodeRetimed
from .mechanisms import similar, spans_overlap
from .results import EvalResult, ProfileResult
from .vocab import FAILURES, NodeStatus, Status

INVALID = NodeStatus.invalid         # the agents produced no usable candidate (malformed, blocked)


@dataclass
class LLMCall:
    """One model call, attributed to the node it produced."""
    role: str
    model: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    seconds: float = 0.0
    estimated: bool = False
    reply: str = ""                  # the model's whole reply, kept for audit (unusable ones too)
    error: str = ""                  # why the reply could not be used; empty when it was
    trimmed: str = ""                # what the prompt budget cut from the prompt ("context 9→4 lines; …")

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass
class Node:
    id: str
    parent: str | None
    kind: str                            # root | plan | repair
    code: str
    code_hash: str = ""
    plan: str = ""
    skill_id: str | None = None
    mechanism: str = ""
    differs: str = ""                    # what the plan says differs from an earlier try
    anchors: list[dict] = field(default_factory=list)
    anchored_code: str = ""              # the planner's code with IMPROVE anchors
    changed: list[int] = field(default_factory=list)   # lines of the parent's code inside the spans
    diagnosis: str = ""                  # the debugger's, for repairs
    result: EvalResult | None = None
    status: str = NodeStatus.pending     # a Status of its EvalResult, or a NodeStatus
    speedup: float | None = None
    message: str = ""
    duplicate_of: str | None = None      # identical code was evaluated as this node
    race: dict | None = None             # a head-to-head re-time (RaceResult.to_dict(), "against", "why")
    secondary_skill: str | None = None   # a plan's second skill, applied beside skill_id
    retime_of: str | None = None         # the planner asked to re-time this node instead of a new plan
    calls: list[LLMCall] = field(default_factory=list)
    eval_seconds: float = 0.0
    created: float = field(default_factory=time.time)
    children: list[str] = field(default_factory=list, compare=False)

    def __post_init__(self) -> None:
        # A result given as plain data (an event's node, a stored run) is parsed here, once:
        # readers use the EvalResult's attributes.
        if isinstance(self.result, dict):
            self.result = EvalResult.from_dict(self.result)

    @property
    def ok(self) -> bool:
        return self.status == Status.ok

    @property
    def failed(self) -> bool:
        return self.status in FAILURES

    @property
    def tokens(self) -> int:
        return sum(c.tokens for c in self.calls)

    @property
    def quality(self) -> str | None:
        """The measurement quality of its timing (good | noisy | contended), None if untimed."""
        return self.result.quality if self.result is not None else None

    @property
    def speedup_ci(self) -> list[float]:
        ci = self.profile.speedup_ci if self.profile is not None else []
        return list(ci) if len(ci) == 2 else []

    @property
    def profile(self) -> ProfileResult | None:
        """Its evaluation's profile (timing, roofline, bottleneck), None when it was not timed."""
        return self.result.profile if self.result is not None else None

    @property
    def measured_well(self) -> bool:
        """Timed with good quality (or before qualities existed), or re-timed head to head with good
        quality after a noisy baseline: its speedup may drive decisions."""
        if self.quality in ("good", None):
            return True
        q = (self.race or {}).get("quality") or {}
        return (self.race or {}).get("status") == "ok" and q.get("verdict") == "good"

    @property
    def conservative(self) -> float:
        """The low end of its speedup's interval (the speedup itself when it has none)."""
        ci = self.speedup_ci
        return ci[0] if ci else (self.speedup or 0.0)

    @property
    def cost(self) -> float:
        return sum(c.cost for c in self.calls)

    def to_dict(self) -> dict:
        """Plain data: what events.jsonl stores (``result`` as ``EvalResult.to_dict()``)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "children"}
        d["result"] = self.result.to_dict() if self.result is not None else None
        d["calls"] = [dataclasses.asdict(c) for c in self.calls]
        d["anchors"] = [dict(a) for a in self.anchors]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Node":
        names = {f.name for f in dataclasses.fields(cls)} - {"children"}
        node = cls(**{k: v for k, v in d.items() if k in names})
        node.calls = [c if isinstance(c, LLMCall) else LLMCall(**c) for c in node.calls]
        return node


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
            self.add(Node.from_dict(event.node))
            return True
        if isinstance(event, CandidateEvaluated):
            if event.node["id"] in self.nodes:
                return False
            self.add(Node.from_dict(event.node))
            return True
        if isinstance(event, BestImproved) and event.node_id in self.nodes and event.node_id != self.best_id:
            self.promote(event.node_id)
            return True
        if isinstance(event, NodeRetimed) and event.node_id in self.nodes:
            # A node re-timed after it was added (the planner asked): the race is part of it now.
            race = {"against": event.against, "why": event.why, **event.race}
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
