"""A node of the search tree: one attempt as data (its code, the plan and skill that made it, its
evaluation, the LLM calls it cost) and its JSON form.

Below the tree (``trajectory``) and the events, so that an event can carry a ``Node``: events.jsonl
holds ``Node.to_dict()`` and ``events.event_from_dict`` reads a ``Node`` back.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

from .results import EvalResult, ProfileResult
from .vocab import FAILURES, NodeStatus, Status


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

    def snapshot(self) -> "Node":
        """A copy of the node as it stands now, with no children: what an event carries and what a
        tree adds from an event. The tree that made the node goes on changing it (its children, a
        later re-time's ``race``), and an event must say what happened when it was emitted, to a
        subscriber that reads it later on another thread (the TUI) as to the run store; and a tree
        rebuilt from events must not share nodes with another tree (``add`` appends to the
        parent's ``children``)."""
        return dataclasses.replace(self, anchors=[dict(a) for a in self.anchors], changed=list(self.changed),
                                   race=dict(self.race) if self.race is not None else None,
                                   calls=list(self.calls), children=[])

    @classmethod
    def from_dict(cls, d: dict) -> "Node":
        names = {f.name for f in dataclasses.fields(cls)} - {"children"}
        node = cls(**{k: v for k, v in d.items() if k in names})
        node.calls = [c if isinstance(c, LLMCall) else LLMCall(**c) for c in node.calls]
        return node
