"""The Debugger: diagnosis and a fixed source, from the evaluator's report and the repair chain."""
from __future__ import annotations

from typing import Any

from .base import Agent, AgentResult
from .coder import candidate_code
from .parsing import extract_json, fenced_blocks


class Debugger(Agent):
    """Returns data: code, diagnosis, fix."""
    role = "debugger"
    trims = (("context", 0), ("chain", 0), ("base", 0), ("failure", 1))

    def parse(self, text: str) -> dict[str, Any]:
        code = candidate_code(text)
        head = extract_json(text) or {}
        diagnosis = str(head.get("diagnosis") or "").strip()
        if not diagnosis:       # prose around the code block is the diagnosis
            prose = text
            for _, body in fenced_blocks(text):
                prose = prose.replace(body, "")
            diagnosis = " ".join(prose.replace("```", " ").split())[:600]
        return {"code": code, "diagnosis": diagnosis, "fix": str(head.get("fix") or "").strip()}

    def run(self, **values: str) -> AgentResult:
        return self.converse(values)
