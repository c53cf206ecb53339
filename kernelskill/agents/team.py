"""The team: runs the agents of one attempt and fills in the new node.

``expand`` gates the skills for the parent's profile, asks the Planner for a plan and anchored
code, then the Coder for the candidate; ``repair`` asks the Debugger to fix a failed node. Each
LLM call is attributed to the new node; an unusable reply (after its corrective round-trip)
leaves the node ``invalid`` with the reason, and no candidate to evaluate.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

from ..events import AgentDelta, AgentFinished, AgentStarted, Event
from ..mechanisms import concrete_change
from ..search import context
from ..skills.book import arch_key
from ..skills.predicates import gate_features, task_facts
from ..trajectory import INVALID, Node, Trajectory
from ..vocab import BOTTLENECKS
from .base import Agent, AgentResult
from .coder import Coder
from .debugger import Debugger
from .planner import Planner
from .templates import Prompt
from .views import (ending, render_catalogue, render_chain, render_context, render_failure, render_node,
                    render_relatives, render_task, render_tried)


def reference_for(reference: str, code: str) -> str:
    """The reference for a prompt that also shows ``code``: in full, unless the code is the reference."""
    if code.strip() == reference.strip():
        return "(the node to improve below is the reference itself)"
    return "```python\n" + reference.rstrip("\n") + "\n```"


PLANNER_RETIMES = 3          # re-times a run's planner may ask for: each is a race, not an attempt


def retimable(tree: Trajectory) -> list[str]:
    """The nodes a planner may ask to re-time: timed correct candidates it has not had re-timed
    before (one the optimizer raced on its own may be), while the run has re-times left."""
    def asked(n: Node) -> bool:
        return bool(n.race) and str(n.race.get("why", "")).startswith("the planner asked")
    if sum(map(asked, tree)) >= PLANNER_RETIMES:
        return []
    return [n.id for n in tree if n.parent is not None and n.ok and n.speedup is not None and not asked(n)
            and n.duplicate_of is None]


def _base_code(tree: Trajectory, failed: Node, reference: str) -> str:
    """The correct code the failed node was derived from (its nearest correct ancestor)."""
    base = tree.base_of(failed.id)
    if base.parent is None or base.code.strip() == reference.strip():
        return "(the reference above)"
    return f"{base.id}, correct at {base.speedup or 0:.2f}×:\n```python\n" + base.code.rstrip("\n") + "\n```"


def machine_now(tree: Trajectory) -> str:
    """The machine's state as the last timing saw it, when that matters: its measurement was
    contended or noisy (another process on the cores, a throttled GPU). "" when it was good."""
    last = next((n for n in reversed(list(tree)) if n.quality is not None), None)
    if last is None or last.measured_well:
        return ""
    q = last.profile.quality if last.profile is not None else None
    why = q.reasons[0] if q is not None and q.reasons else "its samples were spread"
    return (f"\nNow: the last timing ({last.id}) was {last.quality}: {why}. The machine is shared or "
            "unsteady at the moment; a small difference in speed read now means little.")


def restart_note(tree: Trajectory, parent: Node, why: str) -> str:
    """Why the search starts again from the reference late in a run ("" when it is not the root,
    or when no candidate has worked yet): so that the planner reads it as a new line of work, not
    as a step back from the best."""
    if parent.parent is not None:
        return ""
    done = [n for n in tree if n.parent is not None and n.ok and n.duplicate_of is None]
    if not done:
        return ""
    best = tree.best()
    if best is not None and best.speedup:
        lead = f"; the best so far is {best.id} at {best.speedup:.2f}×"
    else:                # none measured well enough to be the best: the fastest, with its label
        fast = max((n for n in done if n.speedup), key=lambda n: n.speedup, default=None)
        lead = f"; the fastest so far is {fast.id} at {fast.speedup:.2f}× ({fast.quality or 'unmeasured'})" \
            if fast is not None else ""
    return (f"\nWhy from the reference again: the search chose it ({why or 'its policy'}){lead}, with "
            f"{len(done)} working candidate{'s' * (len(done) != 1)} in other lines. Start a different line "
            "of work: a plan unlike those in 'What the search knows', not a step back from the best.")


class Team:
    def __init__(self, llm, prompts: dict[str, dict[str, Prompt]], backend: str, task, summary: dict[str, Any],
                 book, *, emit: Callable[[Event], Any], arch: str | None = None, skills_limit: int = 6,
                 context_nodes: int = 5, stream: bool = True, machine: str = "(not measured)",
                 budgets: dict[str, int | None] | None = None):
        self.llm, self.backend, self.task, self.book = llm, backend, task, book
        self.machine = machine                     # evaluate.machine.render: the hardware, in every prompt
        self.budgets = dict(budgets or {})         # prompt tokens per role (None: no cap)
        self.prompts = {role: table[backend] for role, table in prompts.items()}
        self.op_classes = list(summary.get("op_classes", []))
        # what the gate ranks by: the op classes and the task features (structure, kinds) traced with them
        self.features = gate_features(summary)
        self.facts = task_facts(summary)           # what the skills' preconditions read (shapes, sizes)
        self.task_text = render_task(task, summary)
        self.emit, self.arch = emit, arch
        self.skills_limit, self.context_nodes, self.stream = skills_limit, context_nodes, stream

    def allowed_skills(self, node: Node) -> list:
        """The gate's skills for the task and this node's profile: its bottleneck, roofline fraction,
        custom share, launches and Nsight Compute metrics (an unknown class gates nothing out)."""
        profile = node.profile
        if profile is not None and profile.bottleneck not in BOTTLENECKS:
            profile = dataclasses.replace(profile, bottleneck=None)
        return self.book.gate(self.features, profile, backend=self.backend, arch=self.arch, limit=self.skills_limit,
                              facts=self.facts)

    def _agent(self, cls, node: Node, **kw) -> Agent:
        on_delta = (lambda role, text: self.emit(AgentDelta(role=role, text=text))) if self.stream else None
        return cls(self.llm, self.prompts[cls.role], on_delta=on_delta, on_call=node.calls.append,
                   budget_tokens=self.budgets.get(cls.role), **kw)

    def _run(self, agent: Agent, from_id: str, attempt: int, values: dict[str, str]) -> AgentResult:
        self.emit(AgentStarted(role=agent.role, node_id=from_id, attempt=attempt))
        res = agent.converse(values)
        last = res.calls[-1] if res.calls else None
        self.emit(AgentFinished(role=agent.role, node_id=from_id, ok=res.ok, text=res.text,
                                call=dict(last.__dict__) if last else {}, error=res.error))
        return res

    def _window(self, tree: Trajectory, node_id: str, role: str) -> str:
        return render_context(tree, context(tree, node_id, role, self.context_nodes), skip=node_id)

    def expand(self, tree: Trajectory, parent: Node, node: Node, attempt: int, why: str = "") -> bool:
        """Planner then Coder from ``parent``; fills ``node`` (code, plan, skill, anchors). From the
        root (the reference: no kernel to mark) the planner describes the new module and the coder
        writes it whole: no IMPROVE spans. ``why``: the search policy's reason for this node, told
        to the planner when it starts again from the reference while candidates exist."""
        skills = self.allowed_skills(parent)
        root = parent.parent is None
        planner = self._agent(Planner, node, allowed=[s.id for s in skills], root=root,
                              blocked=lambda data: self.repeat(tree, parent, data), base=parent.code,
                              retimable=retimable(tree))
        plan = self._run(planner, parent.id, attempt, {
            "task": self.task_text, "machine": self.machine + machine_now(tree), "code": parent.code,
            "node": render_node(tree, parent) + restart_note(tree, parent, why),
            "reference": reference_for(self.task.source, parent.code),
            "skills": render_catalogue(skills, self.book.stats, self.op_classes, self.backend, arch_key(self.arch)),
            "context": self._window(tree, parent.id, "planner"), "tried": render_tried(tree, parent.id)})
        if not plan.ok:
            node.status, node.message = INVALID, f"planner output unusable: {plan.error}"
            return False
        d = plan.data
        if d.get("retime"):           # no plan: the optimizer re-times that node, at no attempt's cost
            node.retime_of = d["retime"]
            return False
        node.skill_id, node.mechanism, node.differs = d["skill_id"], d["mechanism"], d["differs"]
        node.secondary_skill = d["secondary_skill"]
        node.plan = d["plan"] + (f"\n(no skill: {d['why_no_skill']})" if d["why_no_skill"] else "")
        node.anchored_code, node.anchors, node.changed = d["anchored_code"], d["anchors"], d["changed"]
        skill = next((s for s in skills if s.id == node.skill_id), None)
        second = next((s for s in skills if s.id == node.secondary_skill), None)
        skill_text = skill.as_prompt(full=True) if skill else "(none)"
        if second is not None:
            skill_text += "\n\nSecond skill, applied beside the first where the plan says:\n" + second.as_prompt(full=True)
        coder = self._agent(Coder, node, root=root)
        code = self._run(coder, parent.id, attempt, {
            "task": self.task_text, "machine": self.machine + machine_now(tree), "reference": self.task.source,
            "plan": node.plan,
            "skill": skill_text, "anchored_code": node.anchored_code,
            "relatives": render_relatives(tree, parent.id), "context": self._window(tree, parent.id, "coder")})
        if not code.ok:
            node.status, node.message = INVALID, f"coder output unusable: {code.error}"
            return False
        node.code = code.data["code"]
        return True

    @staticmethod
    def repeat(tree: Trajectory, parent: Node, data: dict[str, Any]) -> str | None:
        """Why a plan is refused as a repeat, or None. A plan that repeats an earlier attempt by
        meaning (``Trajectory.repeats``) passes only when its ``differs`` names a concrete change that
        its own plan or advice carries and none of the attempts it repeats did (``mechanisms.concrete_change``)."""
        prior = tree.repeats(parent.id, data["skill_id"], data["mechanism"], data["changed"])
        if not prior:
            return None
        p = prior[0]
        where = f"from {parent.id}" if p.parent == parent.id else f"from {p.parent} and failed for good"
        said = f"skill {data['skill_id'] or 'none'} with mechanism {data['mechanism']!r} repeats {p.id} ({where}: " \
               f"skill {p.skill_id or 'none'} / {p.mechanism!r} → {ending(tree, p, 160)})"
        if not data["differs"]:
            other = "" if parent.parent is None else "mark other code, "      # the root marks no spans
            return (f"{said}; choose another skill or mechanism, {other}or say in \"differs\" the concrete "
                    f"change (a block size, a loop order, an instruction) and put it in your plan")
        own = "\n".join([data["plan"], data["mechanism"], data["anchored_code"]])
        earlier = "\n".join(t for n in prior for t in (n.plan, n.mechanism, n.anchored_code))
        if not concrete_change(data["differs"], own, earlier):
            ids = ", ".join(n.id for n in prior)
            return (f"{said}; \"differs\" ({data['differs'][:160]!r}) names nothing that your plan or advice has and "
                    f"the earlier attempts ({ids}) did not: name the concrete change in \"differs\" and write it "
                    f"into the plan")
        return None

    def repair(self, tree: Trajectory, failed: Node, node: Node, attempt: int) -> bool:
        """Debugger on ``failed``; the new node keeps the failed one's skill and mechanism."""
        node.skill_id, node.mechanism, node.plan = failed.skill_id, failed.mechanism, failed.plan
        node.secondary_skill = failed.secondary_skill
        debugger = self._agent(Debugger, node)
        fix = self._run(debugger, failed.id, attempt, {
            "task": self.task_text, "machine": self.machine + machine_now(tree), "reference": self.task.source,
            "plan": failed.plan or failed.mechanism or "-",
            "base": _base_code(tree, failed, self.task.source),
            "code": failed.code, "failure": render_failure(failed.result, failed.message),
            "chain": render_chain(tree.repair_chain(failed.id)), "context": self._window(tree, failed.id, "debugger")})
        if not fix.ok:
            node.status, node.message = INVALID, f"debugger output unusable: {fix.error}"
            return False
        node.code, node.diagnosis = fix.data["code"], fix.data["diagnosis"]
        return True
