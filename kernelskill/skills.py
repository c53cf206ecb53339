"""SkillBook: the expert skill library (long-term memory).

One TOML file per skill: shipped ones under ``<repo>/skills``, learned ones under
``$KERNELSKILL_HOME/skills`` (a user skill overrides a shipped one with the same id).
Selection is by rules, not embeddings: op classes, bottleneck, backend and arch decide which
skills are allowed (``SkillBook.gate``); recorded outcomes rank them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import math
import os
import re
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import tomli_w

from .errors import UserError
from .skill_stats import OUTCOMES, SkillStats, StatsStore
from .vocab import BACKENDS, BOTTLENECKS, OP_CLASSES, TASK_FEATURES

__all__ = [
    "CATEGORIES", "EXAMPLE_LANGS", "OUTCOMES", "Skill", "SkillBook", "SkillStats",
    "arch_allows", "check_dir", "load_skill_file", "parse_arch", "parse_skill", "shipped_dir",
    "user_home",
]

CATEGORIES = (
    "memory", "compute", "reduction", "fusion", "launch", "algorithm", "precision", "cpu",
    "triton",
)
EXAMPLE_LANGS = ("cuda", "cpp", "triton", "python")
_ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")
# "sm_80" means sm_80 or newer; "sm_90a" means exactly the sm_90 family (wgmma, setmaxnreg
# are not forward compatible to sm_100).
_ARCH_RE = re.compile(r"^sm_(\d{2,3})(a?)$")


def user_home() -> Path:
    """The user store: ``$KERNELSKILL_HOME``, else ``$XDG_DATA_HOME/kernelskill``, else
    ``~/.local/share/kernelskill``."""
    env = os.environ.get("KERNELSKILL_HOME")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / "kernelskill"


def shipped_dir() -> Path:
    """The skills shipped with the project (``skills/`` in a checkout, bundled in a wheel)."""
    from .shipped import SKILLS_DIR
    return SKILLS_DIR


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
    source: str = field(default="", compare=False)   # the file it was loaded from
    origin: str = field(default="shipped", compare=False)  # "shipped" or "user"

    def applies(self, features: set[str], bottleneck: str | None, backend: str,
                arch: str | None, task_features: set[str] | None = None) -> bool:
        """Whether the gate allows this skill for the given task and node. ``task_features``
        None: the task's structure is unknown, so ``requires`` is not checked."""
        if backend not in self.backends:
            return False
        if "*" not in self.applies_to and not features.intersection(self.applies_to):
            return False
        if task_features is not None and self.requires and not task_features & set(self.requires):
            return False
        if bottleneck and "*" not in self.bottlenecks and bottleneck not in self.bottlenecks:
            return False
        return arch_allows(self.arch, arch)

    def specificity(self, classes: set[str], task_features: set[str]) -> int:
        """How specifically this skill's conditions match a task: 3 per required task feature
        present (a structure it needs), 2 per task feature it lists, 1 for an op class it names
        (not "*") that the task runs. Generic skills (no features, "*") score 0."""
        return 3 * len(set(self.requires) & task_features) + 2 * len(set(self.features) & task_features) + ("*" not in self.applies_to and bool(classes & set(self.applies_to)))

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
_OPTIONAL = ("arch", "priority", "requires", "features")


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
    for key in ("requires", "features"):
        value = data.get(key, [])
        out[key] = [] if value == [] else _str_list(where, key, value, TASK_FEATURES)
    both = sorted(set(out["requires"]) & set(out["features"]))
    if both:
        raise UserError(f"{where}: key 'features': {both[0]!r} is already in 'requires'")
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


def _bottleneck_of(profile: Any) -> str | None:
    if profile is None:
        return None
    if isinstance(profile, str):
        value = profile
    elif isinstance(profile, Mapping):
        value = profile.get("bottleneck")
    else:
        value = getattr(profile, "bottleneck", None)
    if value is not None and value not in BOTTLENECKS:
        raise UserError(f"bottleneck {value!r} is not one of {', '.join(BOTTLENECKS)}")
    return value or None


def _features(features: Iterable[str] | str | None) -> set[str]:
    """Op classes and task features, checked against the vocabularies."""
    if features is None:
        return set()
    if isinstance(features, str):
        features = [f for f in features.split(",") if f.strip()]
    out = {f.strip() for f in features}
    for f in sorted(out):
        if f not in OP_CLASSES and f not in TASK_FEATURES:
            raise UserError(f"op class {f!r} is not one of {', '.join(OP_CLASSES)}, nor a task feature "
                            f"(kernelskill task show lists a task's; all: {', '.join(TASK_FEATURES)})")
    return out


def _split(feats: set[str]) -> tuple[set[str], set[str] | None]:
    """(op classes, task features or None when the caller gave none: structure unknown)."""
    task = {f for f in feats if f in TASK_FEATURES}
    return feats - task, (task or None)


class SkillBook:
    """The loaded skills plus their outcome statistics."""

    def __init__(self, skills: Iterable[Skill] = (), stats: StatsStore | None = None):
        self.skills: dict[str, Skill] = {s.id: s for s in skills}
        self.stats = stats if stats is not None else StatsStore(None)

    @classmethod
    def load(cls, dirs: Iterable[Path | str] | None = None,
             stats_path: Path | str | None = None) -> "SkillBook":
        """Load skills from ``dirs`` (later directories override earlier ones by id).

        Default: the shipped skills, then ``$KERNELSKILL_HOME/skills``; statistics from
        ``$KERNELSKILL_HOME/stats.toml``. Raises UserError listing every invalid file.
        """
        home = user_home()
        dirs = [shipped_dir(), home / "skills"] if dirs is None else [Path(d) for d in dirs]
        if stats_path is None:
            stats_path = home / "stats.toml"
        user_dir = (home / "skills").resolve()
        skills: dict[str, Skill] = {}
        errors: list[str] = []
        for d in dirs:
            d = Path(d)
            if not d.is_dir():
                continue
            found, errs = check_dir(d)
            errors += errs
            origin = "user" if d.resolve() == user_dir else "shipped"
            for s in found:
                s.origin = origin
                skills[s.id] = s
        if errors:
            raise UserError("invalid skill files:\n" + "\n".join(errors))
        if shipped_dir() in dirs and not any(s.origin == "shipped" for s in skills.values()):
            raise UserError(f"{shipped_dir()}: the shipped skills are missing; this installation of "
                            f"kernelskill is incomplete: reinstall it (pip install kernelskill, or "
                            f"bash scripts/setup in a checkout)")
        return cls(skills.values(), StatsStore(Path(stats_path)))

    def __len__(self) -> int:
        return len(self.skills)

    def __iter__(self):
        return iter(sorted(self.skills.values(), key=lambda s: s.id))

    def get(self, skill_id: str) -> Skill:
        """The skill with this id; UserError (with close matches) when there is none."""
        try:
            return self.skills[skill_id]
        except KeyError:
            near = difflib.get_close_matches(skill_id, sorted(self.skills), n=3)
            hint = f"; did you mean {', '.join(near)}?" if near else ""
            raise UserError(f"no skill with id {skill_id!r}{hint}") from None

    def rank_key(self, skill: Skill, features: set[str] = frozenset()) -> tuple:
        """Sort key: how specifically the skill matches the task (``Skill.specificity``), then
        success rate (with a prior), mean speedup, priority, id."""
        classes, task = _split(set(features))
        st = self.stats.get(skill.id)
        # Op classes alone say too little to rank by: then statistics and priority decide, as before.
        return (-(skill.specificity(classes, task) if task else 0), -st.success_rate(classes),
                -(st.mean_speedup() or 1.0), -skill.priority, skill.id)

    def gate(self, features: Iterable[str] | str | None, profile: Any = None,
             backend: str = "cuda", arch: str | None = None,
             limit: int | None = None) -> list[Skill]:
        """The skills allowed for a task's op classes and task features and a node's profile,
        best first (see ``rank_key``). A skill whose ``requires`` names a feature the task lacks is
        left out; when ``features`` holds op classes only, ``requires`` is not checked.

        Deterministic: same inputs and stats give the same list.
        """
        if backend not in BACKENDS:
            raise UserError(f"backend {backend!r} is not one of {', '.join(BACKENDS)}")
        feats = _features(features)
        bottleneck = _bottleneck_of(profile)
        if arch is not None:
            parse_arch(arch)
        classes, task = _split(feats)
        allowed = [s for s in self.skills.values() if s.applies(classes, bottleneck, backend, arch, task)]
        allowed.sort(key=lambda s: self.rank_key(s, feats))
        return allowed if limit is None else allowed[:max(limit, 0)]

    def _text_scores(self, query: str) -> dict[str, tuple[int, int]]:
        """Per matching skill: (query words matched, weighted hit count)."""
        words = [w for w in re.split(r"[^a-z0-9_+.-]+", query.lower()) if w]
        scores: dict[str, tuple[int, int]] = {}
        for s in self.skills.values():
            fields = ((s.id, 4), (s.title.lower(), 3), (s.summary.lower(), 2),
                      (s.when.lower(), 1), (s.guidance.lower(), 1))
            hits = [sum(w * text.count(word) for text, w in fields) for word in words]
            matched = sum(1 for h in hits if h)
            if matched:
                scores[s.id] = (matched, sum(hits))
        return scores

    def search(self, query: str, limit: int | None = None) -> list[Skill]:
        """Keyword search over id, title, summary, when and guidance, best match first."""
        scores = self._text_scores(query)
        found = [self.skills[sid] for sid in
                 sorted(scores, key=lambda sid: (-scores[sid][0], -scores[sid][1], sid))]
        return found if limit is None else found[:limit]

    def find(self, features: Iterable[str] | str | None = None, profile: Any = None,
             query: str | None = None, backend: str | None = None, arch: str | None = None,
             limit: int | None = None) -> list[Skill]:
        """Combined search, best first (what ``kernelskill skills search`` prints).

        ``features`` (op classes; None: any), ``profile`` (a bottleneck), ``backend`` (None: any)
        and ``arch`` filter through :meth:`gate`; ``query`` keeps only skills that match the
        text and orders them by text relevance first, then by the gate's ranking.
        """
        if backend is not None and backend not in BACKENDS:
            raise UserError(f"backend {backend!r} is not one of {', '.join(BACKENDS)}")
        feats = None if features is None else _features(features)
        allowed: dict[str, Skill] = {}
        for b in ([backend] if backend else BACKENDS):
            for s in self.gate(set(OP_CLASSES) if feats is None else feats, profile, backend=b,
                               arch=arch):
                allowed[s.id] = s
        rank = {s.id: self.rank_key(s, feats or frozenset()) for s in allowed.values()}
        if query is not None:
            scores = self._text_scores(query)
            found = sorted((s for s in allowed.values() if s.id in scores),
                           key=lambda s: (-scores[s.id][0], -scores[s.id][1], rank[s.id]))
        else:
            found = sorted(allowed.values(), key=lambda s: rank[s.id])
        return found if limit is None else found[:max(limit, 0)]

    def record(self, skill_id: str, op_class: str | None, outcome: str,
               speedup: float | None = None, quality: str = "good") -> SkillStats:
        """Record one outcome of trying a skill; persisted atomically in the user store. Only
        ``quality="good"`` measurements rank skills (``StatsStore.record``)."""
        self.get(skill_id)
        if speedup is not None and not (isinstance(speedup, (int, float)) and math.isfinite(speedup)
                                        and speedup > 0):
            raise UserError(f"speedup {speedup!r}: a speedup is a finite number above 0 (eager time over "
                            f"candidate time); leave it out when there is no measurement")
        if op_class is not None and op_class not in OP_CLASSES:
            raise UserError(f"op class {op_class!r} is not one of {', '.join(OP_CLASSES)}")
        return self.stats.record(skill_id, op_class, outcome, speedup, quality)

    def save_user_skill(self, skill: Skill | Mapping[str, Any] | str,
                        directory: Path | str | None = None) -> Path:
        """Validate a learned skill and write it to the user store; returns the file.

        ``skill`` is a :class:`Skill`, a mapping of the TOML keys, or TOML text. It is checked
        against the same schema as the files (UserError naming the key otherwise), written
        atomically as ``<directory>/<id>.toml`` (default: ``$KERNELSKILL_HOME/skills``),
        replacing a user skill with the same id, and added to this book with origin "user".
        """
        if isinstance(skill, str):
            skill = parse_skill(skill, "<new skill>")
        else:
            if isinstance(skill, Skill):
                where = f"<skill {skill.id!r}>"
                data = {k: v for k, v in dataclasses.asdict(skill).items()
                        if k not in ("source", "origin")}
            elif isinstance(skill, Mapping):
                where, data = f"<skill {skill.get('id', '?')!r}>", dict(skill)
            else:
                raise UserError(f"cannot save a {type(skill).__name__} as a skill; pass a "
                                "Skill, a mapping of skill keys or TOML text")
            skill = _validate(data, where, None)
        directory = Path(directory) if directory else user_home() / "skills"
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{skill.id}.toml"
        fd, tmp = tempfile.mkstemp(prefix=f".{skill.id}-", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(skill.to_toml())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        skill.source, skill.origin = str(path), "user"
        self.skills[skill.id] = skill
        return path
