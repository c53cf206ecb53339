"""Events of a run, and the bus that hands them to subscribers (run store, CLI, TUI, MCP).

Every event is a dataclass that round-trips through JSON (``to_dict`` / ``event_from_dict``); the
run store appends them to ``events.jsonl`` and a resumed run rebuilds its tree from them. In memory a
node is a ``Node`` and a race a ``RaceResult``; on the wire, their ``to_dict()``.
``AgentDelta`` (streamed text) and ``EvaluationStep`` (a build's steps) are for live displays and are
not stored.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

from .node import Node
from .results import RaceResult


@dataclass
class Event:
    persist: ClassVar[bool] = True
    # Fields that hold a typed object (a Node, a RaceResult): written as its to_dict(), read back by the
    # class's from_dict. None is written as {} and {} is read as None, as the fields' old default was {}.
    objects: ClassVar[dict[str, type]] = {}
    t: float = field(default_factory=time.time, kw_only=True)

    @property
    def name(self) -> str:
        return type(self).__name__

    def to_dict(self) -> dict[str, Any]:
        # Shallow but for the typed objects: the other fields are plain data already, and a deep copy
        # per event costs more than the write.
        d = {"event": self.name, **{f.name: getattr(self, f.name) for f in dataclasses.fields(self)}}
        for key in self.objects:
            d[key] = d[key].to_dict() if d[key] is not None else {}
        return d


@dataclass
class RunStarted(Event):
    run_id: str
    task: str
    task_hash: str
    backend: str
    device: str
    policy: str
    config: dict = field(default_factory=dict)
    resumed: bool = False


@dataclass
class BaselineMeasured(Event):
    objects: ClassVar[dict[str, type]] = {"node": Node}
    node: Node                    # the root (reference code, its EvalResult), as it was measured
    seconds: float = 0.0


@dataclass
class NodeSelected(Event):
    node_id: str
    action: str                   # expand | repair
    reason: str = ""
    attempt: int = 0


@dataclass
class AgentStarted(Event):
    role: str
    node_id: str                  # the node the agent works from
    attempt: int = 0


@dataclass
class AgentDelta(Event):
    persist: ClassVar[bool] = False
    role: str
    text: str


@dataclass
class AgentFinished(Event):
    role: str
    node_id: str
    ok: bool
    call: dict = field(default_factory=dict)     # LLMCall of the last round-trip
    text: str = ""                # the reply (the last one when a corrective round-trip was made)
    error: str = ""


@dataclass
class CandidateEvaluated(Event):
    objects: ClassVar[dict[str, type]] = {"node": Node}
    node: Node                    # the full node as it was then, result included: what resume rebuilds from
    evaluated: bool = True        # False: invalid output, or identical code evaluated before

    @property
    def status(self) -> str:
        return self.node.status


@dataclass
class EvaluationStep(Event):
    """A step of a candidate's evaluation while it runs (a build unit compiled, the link): for live
    displays, not stored."""
    persist: ClassVar[bool] = False
    node_id: str
    text: str
    seconds: float = 0.0          # since the evaluation began


@dataclass
class BestImproved(Event):
    node_id: str
    speedup: float
    previous: float | None = None
    why: str = ""                 # intervals apart | head-to-head re-time | finalists | first correct


@dataclass
class NodeRetimed(Event):
    """A candidate re-timed head to head during the run: its eager drifted from the best's, its
    baseline was noisy, or the planner asked (``why``); costs no attempt."""
    objects: ClassVar[dict[str, type]] = {"race": RaceResult}
    node_id: str
    against: str | None = None                    # the best it raced, None when alone against eager
    why: str = ""
    race: RaceResult | None = None


@dataclass
class FinalistsRetimed(Event):
    """The run's top candidates, re-timed head to head at its end (evaluate.race)."""
    objects: ClassVar[dict[str, type]] = {"race": RaceResult}
    node_ids: list
    race: RaceResult | None = None
    winner: str | None = None                     # the node faster with confidence, else None


@dataclass
class BudgetUpdate(Event):
    attempts: int
    tokens: int
    usd: float
    seconds: float
    limits: dict = field(default_factory=dict)


@dataclass
class RunFinished(Event):
    reason: str                   # attempts | tokens | usd | minutes | exhausted | stopped
    best_node: str | None = None
    best_speedup: float | None = None
    attempts: int = 0
    best_speedup_ci: list = field(default_factory=list)
    best_quality: str | None = None   # the measurement quality behind best_speedup


@dataclass
class RunError(Event):
    message: str
    kind: str = "UserError"
    traceback: str = ""     # an unexpected exception's (kind "crash"); the store keeps it in traceback.txt


EVENTS: dict[str, type[Event]] = {cls.__name__: cls for cls in (
    RunStarted, BaselineMeasured, NodeSelected, AgentStarted, AgentDelta, AgentFinished,
    CandidateEvaluated, EvaluationStep, BestImproved, NodeRetimed, FinalistsRetimed, BudgetUpdate, RunFinished,
    RunError)}


def event_from_dict(data: dict[str, Any]) -> Event:
    """Rebuild an event from ``to_dict`` output (unknown fields are ignored; a node or a race is
    read back as a ``Node`` or a ``RaceResult``)."""
    cls = EVENTS.get(data.get("event", ""))
    if cls is None:
        raise ValueError(f"unknown event {data.get('event')!r}")
    names = {f.name for f in dataclasses.fields(cls)}
    kwargs = {k: v for k, v in data.items() if k in names}
    for key, typ in cls.objects.items():
        if isinstance(kwargs.get(key), dict):
            kwargs[key] = typ.from_dict(kwargs[key]) if kwargs[key] else None
    return cls(**kwargs)


Subscriber = Callable[[Event], None]


class EventBus:
    """Hands each event to every subscriber in order. A subscriber's exception stops the run:
    the store has already kept what came before."""

    def __init__(self) -> None:
        self._subscribers: list[Subscriber] = []

    def subscribe(self, fn: Subscriber, first: bool = False) -> Callable[[], None]:
        """Add a subscriber (``first``: ahead of the others); returns a function that removes it."""
        if first:
            self._subscribers.insert(0, fn)
        else:
            self._subscribers.append(fn)
        return lambda: self._subscribers.remove(fn) if fn in self._subscribers else None

    def emit(self, event: Event) -> Event:
        for fn in list(self._subscribers):
            fn(event)
        return event
