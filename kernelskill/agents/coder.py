"""The Coder: rewrites the planner's anchored spans into a complete ModelNew source."""
from __future__ import annotations

from typing import Any

from .base import Agent, AgentResult, OutputError
from .parsing import defines_model_new, extract_code, strip_anchors


def candidate_code(text: str) -> str:
    """The complete candidate in a reply, anchors removed; OutputError says what is missing."""
    code = extract_code(text, prefer="class ModelNew")
    if code is None:
        raise OutputError("no ```python block with the complete file")
    code = strip_anchors(code)
    if not defines_model_new(code):
        raise OutputError("the code does not define class ModelNew(nn.Module)")
    return code


class Coder(Agent):
    """Returns data: code."""
    role = "coder"
    trims = (("context", 0), ("relatives", 0), ("skill", 0), ("machine", 0))

    def parse(self, text: str) -> dict[str, Any]:
        return {"code": candidate_code(text)}

    def run(self, **values: str) -> AgentResult:
        return self.converse(values)
