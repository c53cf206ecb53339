"""The library as Agent Skills folders (agentskills.io): one folder per skill, named by its id, with a
``SKILL.md`` (YAML front matter ``name`` and ``description``, then the skill as Markdown) and the
example under ``references/``. Claude Code, Codex, Cursor and other agents load such folders
directly; the TOML files stay the source of truth (an export is regenerated, never edited).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Iterable

from ..errors import UserError
from .schema import Skill

FORMATS = ("agent-skills",)
EXTENSIONS = {"cuda": "cu", "cpp": "cpp", "triton": "py", "python": "py"}
FENCES = {"cuda": "cuda", "cpp": "cpp", "triton": "python", "python": "python"}
MAX_NAME, MAX_DESCRIPTION = 64, 1024
_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
MARKER = ".kernelskill-export"      # a folder holding it was written by an export (and may be replaced)


def _yaml(text: str) -> str:
    """A YAML double-quoted scalar: JSON's string escapes are a subset of YAML's."""
    return json.dumps(text, ensure_ascii=False)


def description(skill: Skill) -> str:
    """What the skill does and when to use it, within the format's 1024 characters."""
    where = ", ".join(skill.applies_to if "*" not in skill.applies_to else ["any op"])
    text = (f"{skill.title}. Use when optimizing a PyTorch model into {'/'.join(skill.backends)} kernels and: "
            f"{skill.when.rstrip('.')} (op classes: {where}). {skill.summary}")
    return text if len(text) <= MAX_DESCRIPTION else text[:MAX_DESCRIPTION - 1] + "…"


def skill_md(skill: Skill, example_path: str) -> str:
    """The SKILL.md of one skill."""
    meta = {"source": "kernelskill", "category": skill.category, "backends": ", ".join(skill.backends),
            "applies-to": ", ".join(skill.applies_to), "bottlenecks": ", ".join(skill.bottlenecks)}
    if skill.arch:
        meta["arch"] = ", ".join(skill.arch)
    if skill.requires:
        meta["requires"] = ", ".join(skill.requires)
    if skill.against:
        meta["ranks-lower-with"] = ", ".join(skill.against)
    lines = ["---", f"name: {skill.id}", f"description: {_yaml(description(skill))}", "metadata:"]
    lines += [f"  {k}: {_yaml(v)}" for k, v in meta.items()]
    lines += ["---", "", f"# {skill.title}", "", f"**When:** {skill.when}", "", f"**In short:** {skill.summary}",
              "", skill.guidance.strip(), "", "## Steps", ""]
    lines += [f"{i}. {s}" for i, s in enumerate(skill.steps, 1)]
    lines += ["", "## Pitfalls", ""] + [f"- {p}" for p in skill.pitfalls]
    conditions = ([f"- must hold: `{p}`" for p in skill.preconditions]
                  + [f"- must not hold: `{p}`" for p in skill.forbidden])
    if conditions:
        lines += ["", "## Conditions", "", "Checked against the task and its profile "
                  "(`kernelskill skills gate --task T --explain`):", ""] + conditions
    if skill.expect:
        lines += ["", "## Expected effect", ""]
        lines += [f"- {metric}: {direction}" for metric, direction in skill.expect.items()]
        lines += [f"- overall: {skill.expected_gain}"]
    else:
        lines += ["", "## Expected gain", "", skill.expected_gain]
    lines += ["", "## Example", "", f"A short, compiled and tested example: [{example_path}]({example_path})", "",
              f"```{FENCES[skill.example_lang]}", skill.example.strip("\n"), "```", ""]
    return "\n".join(lines)


def export_agent_skills(skills: Iterable[Skill], out: Path | str) -> list[Path]:
    """Write one folder per skill under ``out``; returns the folders. A folder of that name that an
    earlier export wrote is replaced; one that did not come from an export is left alone (UserError)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UserError(f"{out}: exists and is not a directory; give a directory to export into")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for skill in skills:
        if not _NAME.match(skill.id) or len(skill.id) > MAX_NAME:
            raise UserError(f"skill {skill.id!r}: an Agent Skills name is 1-{MAX_NAME} lowercase letters, digits "
                            f"and single hyphens; rename the skill (its file {skill.source or '?'})")
        folder = out / skill.id
        if folder.exists() and not (folder / MARKER).exists():
            raise UserError(f"{folder}: exists and was not written by kernelskill skills export; move it away "
                            f"or export into another directory")
        example = f"references/example.{EXTENSIONS[skill.example_lang]}"
        tmp = Path(tempfile.mkdtemp(prefix=f".{skill.id}-", dir=out))
        try:
            (tmp / "references").mkdir()
            (tmp / "SKILL.md").write_text(skill_md(skill, example), encoding="utf-8")
            (tmp / example).write_text(skill.example.strip("\n") + "\n", encoding="utf-8")
            (tmp / MARKER).write_text(f"exported from {skill.source or skill.id}; regenerate, do not edit\n")
            if folder.exists():
                shutil.rmtree(folder)
            os.replace(tmp, folder)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        written.append(folder)
    return written
