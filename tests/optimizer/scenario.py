"""Scripted replies for the optimizer tests: the planner picks a skill, the coder writes a candidate
with a tail bug, the debugger fixes it; later coder calls return the fixed code again (a duplicate).

The same script serves the ScriptedLLM (``scenario(role, messages)``) and the chat-completions test
server (``scenario.from_request(body)``, the role taken from the per-role model name).
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from helpers import RELU_TASK, toolkit_candidate  # noqa: E402

REF = RELU_TASK.read_text()
GOOD = toolkit_candidate("return ext.relu2(x)")
BUGGY = toolkit_candidate("return ext.relu2_tail_bug(x)")
ANCHORED = REF.replace("        return torch.relu(x) * 2.0",
                       "        # <<<IMPROVE BEGIN>>>\n        # one C++ loop: relu and the scale in registers\n"
                       "        return torch.relu(x) * 2.0\n        # <<<IMPROVE END>>>")
# Fast evaluation settings, as config keys (they land in run.toml, so a resumed run uses them too).
EVAL_FLAGS = {"eval.device": "cpu", "eval.trials": 2, "eval.warmup": 1, "eval.min_reps": 5, "eval.max_reps": 10,
              "eval.time_cap_s": 0.3, "eval.retimes": 0}
ROLE_MODELS = {"planner-model": "planner", "coder-model": "coder", "debugger-model": "debugger"}


def fenced(code: str) -> str:
    return "```python\n" + code + "```\n"


def current_code(messages: list[dict]) -> str:
    """The code the planner was asked to anchor (its prompt's ```python block after the node)."""
    prompt = next(m["content"] for m in messages if m["role"] == "user" and "## The node to improve" in m["content"])
    text = prompt.split("## The node to improve", 1)[1]
    return text.split("```python\n", 1)[1].split("\n```\n\n## Allowed skills", 1)[0] + "\n"


def anchor(code: str) -> str:
    """``code`` with one span, as a planner marks it: around the forward's last return (else the top)."""
    lines = code.splitlines(keepends=True)
    at = max((i for i, ln in enumerate(lines) if ln.strip().startswith("return ")), default=None)
    span = ["        # <<<IMPROVE BEGIN>>>\n", "        # one C++ loop: relu and the scale in registers\n"]
    if at is None:
        return "".join(["# <<<IMPROVE BEGIN>>>\n# rewrite as one kernel\n# <<<IMPROVE END>>>\n"] + lines)
    return "".join(lines[:at] + span + [lines[at], "        # <<<IMPROVE END>>>\n"] + lines[at + 1:])


def planner_reply(skill: str, mechanism: str, differs: str = "", plan: str | list[str] = "write relu2 in C++",
                  code: str | None = None, echo: bool = True) -> str:
    """A planner's reply (its plan a list of steps, as the schema says: a string is one step);
    ``code``: the current code it echoes with anchors (default: the reference); ``echo=False``: the
    JSON object alone, as at the root, where nothing is marked."""
    steps = [plan] if isinstance(plan, str) else list(plan)
    head = json.dumps({"skill": skill, "mechanism": mechanism, "differs": differs, "plan": steps})
    if not echo:
        return f"<think>which skill fits?</think>Here is my plan for the new module.\n{head}\n"
    marked = ANCHORED if code is None else anchor(code)
    return f"<think>which skill fits?</think>Here is my plan.\n{head}\nThe marked span:\n" + fenced(marked)


def at_root(messages: list[dict]) -> bool:
    """Whether the planner was asked from the root: its instructions mark no IMPROVE spans there."""
    return "<<<IMPROVE BEGIN>>>" not in messages[0]["content"]


def coder_reply(code: str) -> str:
    return "Here is the module:\n" + fenced(code)


def debugger_reply(code: str, diagnosis: str = "relu2_tail_bug overwrites the last element") -> str:
    return json.dumps({"diagnosis": diagnosis, "fix": "call ext.relu2"}) + "\n" + fenced(code)


def allowed_skills(messages: list[dict]) -> list[str]:
    """The skill ids the planner was offered (each skill's prompt starts with ``[id]``)."""
    prompt = next((m["content"] for m in messages if m["role"] == "user" and "## Allowed skills" in m["content"]),
                  messages[-1]["content"])                         # the prompt, also under a corrective turn
    text = prompt.split("## Allowed skills", 1)[-1].split("## What the search knows", 1)[0]
    return re.findall(r"^\[([a-z0-9-]+)\]", text, re.M)


class Scenario:
    """planner → first allowed skill; coder → BUGGY first, then GOOD; debugger → GOOD."""

    def __init__(self, coder_codes: list[str] | None = None):
        self.coder_codes = list(coder_codes or [BUGGY])
        self.seen: list[tuple[str, list[dict]]] = []

    def __call__(self, role: str, messages: list[dict]) -> str:
        self.seen.append((role, messages))
        n = sum(r == role for r, _ in self.seen)
        if role == "planner":
            # Every try is the same idea on the same span; from the second on, the plan names what is
            # new (an unroll factor) in "differs" and in the plan, so the loop's repeat check lets it through.
            skills = allowed_skills(messages)
            return planner_reply(skills[0] if skills else "none", f"fused single pass, try {n}",
                                 differs=f"unroll by {n}" if n > 1 else "",
                                 plan="write relu2 in C++" + (f", unroll by {n}" if n > 1 else ""),
                                 code=current_code(messages), echo=not at_root(messages))
        if role == "coder":
            return coder_reply(self.coder_codes.pop(0) if self.coder_codes else GOOD)
        return debugger_reply(GOOD)

    def from_request(self, body: dict) -> str:
        return self(ROLE_MODELS[body["model"]], body["messages"])

    def prompts(self, role: str) -> list[str]:
        return [m[-1]["content"] for r, m in self.seen if r == role]


def project_toml(url: str, eval_flags: dict | None = None, search: str = "", agents: bool = True) -> str:
    """A project's kernelskill.toml pointing every role at the test server (per-role model names)."""
    ev = "\n".join(f"{k.split('.')[1]} = {json.dumps(v)}" for k, v in (eval_flags or EVAL_FLAGS).items())
    return (f'[llm]\nbase_url = "{url}"\nmodel = "planner-model"\nretry_base_s = 0.01\n'
            '[llm.roles.coder]\nmodel = "coder-model"\n[llm.roles.debugger]\nmodel = "debugger-model"\n'
            f"[search]\nepsilon = 0.0\n{search}" + ("[agents]\nskills_limit = 50\n" if agents else "")
            + f"[eval]\n{ev}\n")
