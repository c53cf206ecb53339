"""The Planner: picks an allowed skill (a second one optional; or says why none fits) and anchors the
spans to change, or asks for a re-time of a node whose time it doubts.

Its JSON object must match ``parsing.PLAN_SCHEMA`` (given in its prompt); ``plan`` is a list of
steps, stored on the node one per line. At the root (the reference, no kernel yet) it marks nothing:
the reply is the JSON object alone, its plan describes the new module, and the coder writes it whole.
"""
from __future__ import annotations

from typing import Any, Callable

from .base import Agent, AgentResult, OutputError
from .parsing import PLAN_SCHEMA, AnchorError, check_echo, extract_code, extract_json, parse_anchors, schema_problems

NO_SKILL = ("", "none", "null", "no", "n/a")


class Planner(Agent):
    """Returns data: skill_id, secondary_skill, mechanism, differs, plan, anchored_code, anchors; or
    {"retime": node_id} when it asks for a node's re-time instead of a plan."""
    role = "planner"
    trims = (("context", 0), ("tried", 0), ("skills", 1), ("node", 1))

    def __init__(self, *args, allowed: list[str] = (), blocked: Callable[[dict[str, Any]], str | None]
                 | None = None, base: str | None = None, retimable: list[str] = (), **kw):
        super().__init__(*args, **kw)
        self.allowed = list(allowed)
        self.retimable = list(retimable)     # nodes the planner may ask to re-time instead of planning
        self.blocked = blocked
        self.base = base            # the node's code: the echo must be it, plus anchors and advice

    def parse(self, text: str) -> dict[str, Any]:
        head = extract_json(text)
        if head is None:
            raise OutputError("no JSON object with skill, mechanism and plan")
        again = str(head.get("retime") or "").strip()
        if again:
            if again not in self.retimable:
                can = ", ".join(self.retimable) or "none now"
                raise OutputError(f"retime {again!r}: only a timed candidate not re-timed before can be ({can}); "
                                  f"name one of them, or leave retime out and plan")
            return {"retime": again}
        problems = schema_problems(head, PLAN_SCHEMA)
        if problems:
            raise OutputError("the JSON object does not match the schema: " + "; ".join(problems))
        skill = head["skill"].strip()
        skill_id = None if skill.lower() in NO_SKILL else skill
        if skill_id is not None and skill_id not in self.allowed:
            raise OutputError(f"skill {skill_id!r} is not among the allowed skills ({', '.join(self.allowed) or 'none'});"
                              f" choose one of them or say \"none\" and why")
        why_no_skill = str(head.get("why_no_skill") or "").strip()
        if skill_id is None and self.allowed and not why_no_skill:
            raise OutputError("skill is \"none\" but why_no_skill does not say why no allowed skill fits")
        secondary = str(head.get("secondary") or "").strip()
        secondary = None if secondary.lower() in NO_SKILL else secondary
        if secondary is not None and (skill_id is None or secondary == skill_id or secondary not in self.allowed):
            raise OutputError(f"secondary {secondary!r}: a second skill must be another allowed skill "
                              f"({', '.join(x for x in self.allowed if x != skill_id) or 'none'}) beside a first "
                              f"one; or leave it empty")
        mechanism = head["mechanism"].strip()
        plan = "\n".join(step.strip() for step in head["plan"])
        differs = str(head.get("differs") or "").strip()
        code, anchors, changed = "", [], []
        if not self.root:                   # at the root nothing is marked: a code block is not read
            code = extract_code(text, prefer="IMPROVE")
            if code is None:
                raise OutputError("no ```python block with the current code")
            try:
                anchors = parse_anchors(code)
                changed = check_echo(self.base, code) if self.base is not None else []
            except AnchorError as e:
                raise OutputError(str(e)) from None
        data = {"skill_id": skill_id, "secondary_skill": secondary, "mechanism": mechanism, "differs": differs, "plan": plan,
                "why_no_skill": why_no_skill, "anchored_code": code,
                "anchors": [a.to_dict() for a in anchors], "changed": changed}
        if self.blocked is not None:
            why = self.blocked(data)
            if why:
                raise OutputError(why)
        return data

    def run(self, **values: str) -> AgentResult:
        return self.converse(values)
