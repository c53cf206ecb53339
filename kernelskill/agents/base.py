"""What every agent shares: one conversation with the LLM, with one corrective round-trip.

An agent builds a system and a user message from its prompt templates, calls the LLM, and parses
the reply. A reply that cannot be used (no code block, no anchors, no ModelNew, a plan that does
not match its schema, a blocked repeat) gets one corrective message; a second unusable reply makes
the attempt fail, as data. ``root``: the node is the root (the reference, no kernel), and the
templates' root_ fragments replace the IMPROVE-span instructions.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ..llm import LLM, LLMResponse, estimate_tokens
from ..trajectory import LLMCall
from .parsing import strip_think
from .templates import Prompt


class OutputError(ValueError):
    """A reply the agent cannot use; the message is what the model is told."""


@dataclass
class AgentResult:
    role: str
    ok: bool
    data: dict[str, Any] = field(default_factory=dict)
    calls: list[LLMCall] = field(default_factory=list)
    text: str = ""                      # the last raw reply
    error: str = ""                     # why the output was unusable (when not ok)


def call_of(role: str, resp: LLMResponse) -> LLMCall:
    return LLMCall(role=role, model=resp.model, prompt_tokens=resp.prompt_tokens,
                   completion_tokens=resp.completion_tokens, cost=resp.cost, seconds=resp.seconds,
                   estimated=resp.estimated, reply=resp.text)

BUDGET_NOTE = "left out to fit this role's prompt budget (llm.roles.{role}.prompt_tokens)"


class Agent:
    """Base of Planner, Coder and Debugger: ``run(**values)`` → AgentResult.

    ``budget_tokens`` caps the prompt (system + user, estimated at 4 characters per token): over it,
    the values named in ``trims`` are shortened in that order — each loses its later lines, halving
    until the prompt fits or only its given least number is left (the planner keeps its best-ranked
    skill), with a line that says how many were left out — and what was cut is kept on
    the call (``LLMCall.trimmed``). The task, the reference and the code are never cut: a prompt that
    still does not fit goes as it is, and the call says so."""
    role = ""
    trims: tuple[tuple[str, int], ...] = ()       # (value, the fewest lines it keeps), first cut first

    def __init__(self, llm: LLM, prompt: Prompt, on_delta: Callable[[str, str], None] | None = None,
                 on_call: Callable[[LLMCall], None] | None = None, budget_tokens: int | None = None,
                 root: bool = False):
        self.llm, self.prompt = llm, prompt
        self.root = root
        self.on_delta = on_delta
        self.on_call = on_call
        self.budget_tokens = budget_tokens
        self.trimmed = ""

    def parse(self, text: str) -> dict[str, Any]:  # pragma: no cover - every agent overrides it
        raise NotImplementedError

    def messages(self, values: dict[str, str]) -> list[dict[str, str]]:
        system = self.prompt.render("system", root=self.root).strip()
        user = self.prompt.render("user", root=self.root, **values).strip()
        self.trimmed = ""
        budget = self.budget_tokens
        size = lambda: estimate_tokens(system) + estimate_tokens(user)  # noqa: E731
        if budget and size() > budget:
            values, cuts = dict(values), []
            note = BUDGET_NOTE.format(role=self.role)
            for key, least in self.trims:
                lines = str(values.get(key, "")).splitlines()
                keep = len(lines)
                while keep > least and size() > budget:
                    keep = max(keep // 2, least)
                    values[key] = "\n".join(lines[:keep] + [f"(… {len(lines) - keep} more lines {note})"]) \
                        if keep else f"({note})"
                    user = self.prompt.render("user", root=self.root, **values).strip()
                if keep < len(lines):
                    cuts.append(f"{key} {len(lines)}→{keep} lines")
                if size() <= budget:
                    break
            over = size() - budget
            self.trimmed = "; ".join(cuts) + (f"{'; ' if cuts else ''}still {over} tokens over the budget of {budget}"
                                               if over > 0 else "")
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def converse(self, values: dict[str, str]) -> AgentResult:
        """Ask, parse, and on an unusable reply ask once more with what was wrong."""
        messages = self.messages(values)
        result = AgentResult(role=self.role, ok=False)
        stream = (lambda piece: self.on_delta(self.role, piece)) if self.on_delta else None
        for round_trip in range(2):
            resp = self.llm.complete(messages, role=self.role, stream_cb=stream)
            call = call_of(self.role, resp)
            call.trimmed = self.trimmed
            result.calls.append(call)
            if self.on_call:
                self.on_call(call)
            result.text = resp.text
            try:
                result.data = self.parse(strip_think(resp.text))
                result.ok, result.error = True, ""
                return result
            except OutputError as e:
                result.error = call.error = str(e)      # kept on the node's call for audit
                if round_trip == 0:
                    messages = messages + [{"role": "assistant", "content": resp.text},
                                           {"role": "user", "content": self.prompt.render(
                                               "corrective", root=self.root, problem=str(e)).strip()}]
        return result
