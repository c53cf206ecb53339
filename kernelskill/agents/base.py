"""What every agent shares: one conversation with the LLM, with one corrective round-trip.

An agent builds a system and a user message from its prompt templates, calls the LLM, and parses
the reply. A reply that cannot be used (no code block, no anchors, no ModelNew, a blocked
repeat) gets one corrective message; a second unusable reply makes the attempt fail, as data.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ..llm import LLM, LLMResponse
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


class Agent:
    """Base of Planner, Coder and Debugger: ``run(**values)`` → AgentResult."""
    role = ""

    def __init__(self, llm: LLM, prompt: Prompt, on_delta: Callable[[str, str], None] | None = None,
                 on_call: Callable[[LLMCall], None] | None = None):
        self.llm, self.prompt = llm, prompt
        self.on_delta = on_delta
        self.on_call = on_call

    def parse(self, text: str) -> dict[str, Any]:  # pragma: no cover - every agent overrides it
        raise NotImplementedError

    def messages(self, values: dict[str, str]) -> list[dict[str, str]]:
        return [{"role": "system", "content": self.prompt.render("system").strip()},
                {"role": "user", "content": self.prompt.render("user", **values).strip()}]

    def converse(self, values: dict[str, str]) -> AgentResult:
        """Ask, parse, and on an unusable reply ask once more with what was wrong."""
        messages = self.messages(values)
        result = AgentResult(role=self.role, ok=False)
        stream = (lambda piece: self.on_delta(self.role, piece)) if self.on_delta else None
        for round_trip in range(2):
            resp = self.llm.complete(messages, role=self.role, stream_cb=stream)
            call = call_of(self.role, resp)
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
                                               "corrective", problem=str(e)).strip()}]
        return result
