"""A skill file: the ``Skill`` record, its TOML schema, parsing and validation (errors name the
file, the line or the key)."""

from __future__ import annotations

import dataclasses
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import tomli_w

from ..errors import UserError
from ..vocab import BACKENDS, BOTTLENECKS, OP_CLASSES, TASK_FEATURES
from . import predicates

CATEGORIES = (
    "memory", "compute", "reduction", "fusion", "launch", "algorithm", "precision", "cpu",
    "triton",
)
EXAMPLE_LANGS = ("cuda", "cpp", "triton", "python")
_ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")
# "sm_80" means sm_80 or newer; "sm_90a" means exactly the sm_90 family (wgmma, setmaxnreg
# are not forward compatible to sm_100).
_ARCH_RE = re.compile(r"^sm_(\d{2,3})(a?)$")


def shipped_dir() -> Path:
    """The skills shipped with the project (``skills/`` in a checkout, bundled in a wheel)."""
    from .. import paths
    return paths.SKILLS_DIR


@dataclass
class Skill:
    """One optimization skill; the fields mirror the TOML keys (see docs/skills.md)."""

    id: str
    title: str
    category: str
    backends: list[str]
    applies_to: list[str]          # op classes, or ["*"]
    bottlenecks: list[str]         # bottleneck classes, or ["*"]
    when: str
    summary: str
    guidance: str
    steps: list[str]
    pitfalls: list[str]
    expected_gain: str
    example: str
    example_lang: str
    arch: list[str] = field(default_factory=list)
    priority: int = 0
    requires: list[str] = field(default_factory=list)   # task features, one of which must be present
    features: list[str] = field(default_factory=list)   # task features it is specific to
    against: list[str] = field(default_factory=list)    # task features under which it ranks lower
    preconditions: list[str] = field(default_factory=list)   # predicates that must hold where known
    forbidden: list[str] = field(default_factory=list)       # predicates any of which keeps it out
    expect: dict[str, str] = field(default_factory=dict)     # metric -> "up" | "down"
    source: str = field(default="", compare=False)   # the file it was loaded from
    origin: str = field(default="shipped", compare=False)  # "shipped" or "user"

    def applies(self, features: set[str], bottleneck: str | None, backend: str,
                arch: str | None, task_features: set[str] | None = None,
                facts: Mapping[str, Any] | None = None) -> bool:
        """Whether the gate allows this skill for the given task and node (see ``decide``)."""
        return self.decide(features, bottleneck, backend, arch, task_features, facts)[0]

    def decide(self, classes: set[str], bottleneck: str | None, backend: str, arch: str | None,
               task_features: set[str] | None = None,
               facts: Mapping[str, Any] | None = None) -> tuple[bool, list[str]]:
        """(allowed, reasons): every condition of the skill checked against the task and node, one
        line each, marked ``+`` (holds), ``-`` (fails: the skill is out) or ``?`` (not known: decides
        nothing). ``task_features`` None: the task's structure is unknown; ``facts``: the task's and
        the node's facts (``predicates.task_facts``, ``predicates.profile_facts``)."""
        facts = facts or {}
        out: list[str] = []

        def mark(ok: bool | None, text: str) -> None:
            out.append(("+" if ok else "?" if ok is None else "-") + " " + text)

        mark(backend in self.backends, f"backend {backend} (skill: {', '.join(self.backends)})")
        if "*" in self.applies_to:
            mark(True, "op classes: any")
        else:
            hit = sorted(classes & set(self.applies_to))
            mark(bool(hit), f"op classes: {', '.join(hit)}" if hit else
                 f"op classes: needs one of {', '.join(self.applies_to)}; the task has "
                 f"{', '.join(sorted(classes)) or 'none'}")
        if self.requires:
            if task_features is None:
                mark(None, f"requires one of {', '.join(self.requires)}: the task's structure is not known")
            else:
                hit = sorted(task_features & set(self.requires))
                mark(bool(hit), f"requires {', '.join(hit)}: present" if hit else
                     f"requires one of {', '.join(self.requires)}: the task has none")
        if "*" not in self.bottlenecks:
            if bottleneck is None:
                mark(None, f"bottleneck: not measured (skill: {', '.join(self.bottlenecks)})")
            else:
                mark(bottleneck in self.bottlenecks, f"bottleneck {bottleneck} (skill: {', '.join(self.bottlenecks)})")
        if self.arch:
            mark(None if arch is None else arch_allows(self.arch, arch),
                 f"arch {arch or 'not known'} (skill: {', '.join(self.arch)})")
        if self.against and task_features is not None:
            hit = sorted(task_features & set(self.against))
            # Not a gate: these features say what beats the skill here, so it ranks lower.
            out.append(f"~ ranks lower: the task has {', '.join(hit)}" if hit else
                       f"+ none of {', '.join(self.against)} (they would rank it lower)")
        for text, forbid in [(t, False) for t in self.preconditions] + [(t, True) for t in self.forbidden]:
            pred = predicates.parse(text, f"skill {self.id}")
            holds = pred.check(facts, task_features)
            have = "" if pred.name == "has" else f" ({pred.name} = {_num(facts.get(pred.name))})"
            if holds is None:
                mark(None, f"{'forbidden' if forbid else 'precondition'} {text}: not measured")
            elif forbid:
                mark(not holds, f"forbidden {text}: {'holds' if holds else 'does not hold'}{have}")
            else:
                mark(holds, f"precondition {text}{have}")
        return not any(line.startswith("-") for line in out), out

    def specificity(self, classes: set[str], task_features: set[str]) -> int:
        """How specifically this skill's conditions match a task: 3 per required task feature
        present (a structure it needs), 2 per task feature it lists, 1 for an op class it names
        (not "*") that the task runs, minus 3 per task feature it is ``against`` (what beats it
        there). Generic skills (no features, "*") score 0."""
        return (3 * len(set(self.requires) & task_features) + 2 * len(set(self.features) & task_features)
                - 3 * len(set(self.against) & task_features)
                + ("*" not in self.applies_to and bool(classes & set(self.applies_to))))

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON output."""
        return dataclasses.asdict(self)

    def to_toml(self) -> str:
        """The skill as a TOML document (what ``parse_skill`` reads back)."""
        data = {k: v for k, v in self.to_dict().items() if k not in ("source", "origin")}
        return tomli_w.dumps(data, multiline_strings=True)

    def as_prompt(self, full: bool = True) -> str:
        """The skill as text for an LLM prompt; ``full=False`` gives one line."""
        head = f"[{self.id}] {self.title} ({self.category}; {', '.join(self.backends)})"
        if not full:
            return f"{head}: {self.summary}"
        lines = [head, f"When: {self.when}", f"Summary: {self.summary}", "",
                 self.guidance.strip(), "", "Steps:"]
        lines += [f"  {i}. {s}" for i, s in enumerate(self.steps, 1)]
        lines += ["Pitfalls:"] + [f"  - {p}" for p in self.pitfalls]
        lines += [f"Expected gain: {self.expected_gain}", "",
                  f"Example ({self.example_lang}):", self.example.rstrip()]
        return "\n".join(lines)


_REQUIRED = ("id", "title", "category", "backends", "applies_to", "bottlenecks", "when",
             "summary", "guidance", "steps", "pitfalls", "expected_gain", "example",
             "example_lang")
_OPTIONAL = ("arch", "priority", "requires", "features", "against", "preconditions", "forbidden", "expect")


def _num(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def parse_arch(arch: str) -> tuple[int, bool]:
    """'sm_90' -> (90, False); 'sm_90a' -> (90, True); also accepts '90', '9.0', 'compute_90'."""
    text = arch.strip().lower()
    m = re.fullmatch(r"(?:sm_|compute_)?(\d{2,3})([af]?)", text) or \
        re.fullmatch(r"(\d+)\.(\d)", text)
    if not m:
        raise UserError(f"arch {arch!r} is not an arch like sm_80, sm_90 or sm_90a")
    if "." in text:
        return int(m.group(1)) * 10 + int(m.group(2)), False
    return int(m.group(1)), m.group(2) == "a"


def arch_allows(required: list[str], target: str | None) -> bool:
    """Whether a skill that needs ``required`` runs on ``target`` (None: do not filter)."""
    if not required or target is None:
        return True
    have, _ = parse_arch(target)
    for entry in required:
        need, exact = parse_arch(entry)
        if (have == need) if exact else (have >= need):
            return True
    return False


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _str_list(where: str, key: str, value: Any, allowed: Iterable[str] | None = None,
              star: bool = False) -> list[str]:
    if star and value == "*":
        return ["*"]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        extra = ' or "*"' if star else ""
        raise UserError(f"{where}: key '{key}': expected a non-empty list of strings{extra}")
    if star and "*" in value:
        if len(value) > 1:
            raise UserError(f"{where}: key '{key}': \"*\" must stand alone")
        return ["*"]
    if allowed is not None:
        allowed = tuple(allowed)
        for v in value:
            if v not in allowed:
                raise UserError(f"{where}: key '{key}': {v!r} is not one of {', '.join(allowed)}")
    if len(set(value)) != len(value):
        raise UserError(f"{where}: key '{key}': duplicate entries")
    return list(value)


def _validate(data: Mapping[str, Any], where: str, stem: str | None) -> Skill:
    unknown = sorted(set(data) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        raise UserError(f"{where}: unknown key '{unknown[0]}' (allowed: "
                        f"{', '.join(_REQUIRED + _OPTIONAL)})")
    for key in _REQUIRED:
        if key not in data:
            raise UserError(f"{where}: missing required key '{key}'")
    out: dict[str, Any] = {}
    for key in ("id", "title", "category", "when", "summary", "guidance", "expected_gain",
                "example", "example_lang"):
        if not isinstance(data[key], str) or not data[key].strip():
            raise UserError(f"{where}: key '{key}': expected a non-empty string")
        out[key] = data[key]
    if not _ID_RE.match(out["id"]):
        raise UserError(f"{where}: key 'id': {out['id']!r} must be lowercase letters, digits "
                        "and '-'")
    if stem is not None and stem != out["id"]:
        raise UserError(f"{where}: key 'id': {out['id']!r} does not match the file name; "
                        f"name the file {out['id']}.toml")
    for key, allowed in (("category", CATEGORIES), ("example_lang", EXAMPLE_LANGS)):
        if out[key] not in allowed:
            raise UserError(f"{where}: key '{key}': {out[key]!r} is not one of "
                            f"{', '.join(allowed)}")
    out["backends"] = _str_list(where, "backends", data["backends"], BACKENDS)
    out["applies_to"] = _str_list(where, "applies_to", data["applies_to"], OP_CLASSES, star=True)
    out["bottlenecks"] = _str_list(where, "bottlenecks", data["bottlenecks"], BOTTLENECKS,
                                   star=True)
    out["steps"] = _str_list(where, "steps", data["steps"])
    out["pitfalls"] = _str_list(where, "pitfalls", data["pitfalls"])
    arch = data.get("arch", [])
    if arch != []:
        arch = _str_list(where, "arch", arch)
        for a in arch:
            if not _ARCH_RE.match(a):
                raise UserError(f"{where}: key 'arch': {a!r} is not an arch like sm_80 or "
                                "sm_90a")
    out["arch"] = arch
    priority = data.get("priority", 0)
    if not isinstance(priority, int) or isinstance(priority, bool):
        raise UserError(f"{where}: key 'priority': expected an integer")
    out["priority"] = priority
    for key in ("requires", "features", "against"):
        value = data.get(key, [])
        out[key] = [] if value == [] else _str_list(where, key, value, TASK_FEATURES)
    both = sorted(set(out["requires"]) & set(out["features"]))
    if both:
        raise UserError(f"{where}: key 'features': {both[0]!r} is already in 'requires'")
    both = sorted((set(out["requires"]) | set(out["features"])) & set(out["against"]))
    if both:
        raise UserError(f"{where}: key 'against': {both[0]!r} is also in "
                        f"'{'requires' if both[0] in out['requires'] else 'features'}'")
    for key in ("preconditions", "forbidden"):
        out[key] = [str(p) for p in predicates.parse_list(data.get(key, []), f"{where}: key '{key}'")]
    out["expect"] = predicates.parse_expect(data["expect"], f"{where}: key 'expect'") if "expect" in data else {}
    return Skill(**out)


def parse_skill(text: str, source: str = "<skill>", stem: str | None = None) -> Skill:
    """Parse and validate one skill from TOML text; errors name ``source`` and the key."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        line = f" line {m.group(1)}:" if m else ""
        raise UserError(f"{source}:{line} TOML syntax error: {exc}") from None
    skill = _validate(data, source, stem)
    skill.source = source
    return skill


def load_skill_file(path: Path) -> Skill:
    """Load and validate one ``<id>.toml`` file."""
    where = _display(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{where}: cannot read: {exc}") from None
    return parse_skill(text, where, stem=path.stem)


def check_dir(directory: Path) -> tuple[list[Skill], list[str]]:
    """Validate every ``*.toml`` in ``directory``: (valid skills, error messages)."""
    skills: list[Skill] = []
    errors: list[str] = []
    for path in sorted(Path(directory).glob("*.toml")):
        try:
            skills.append(load_skill_file(path))
        except UserError as exc:
            errors.append(str(exc))
    return skills, errors
