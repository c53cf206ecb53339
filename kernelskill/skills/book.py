"""SkillBook: the loaded skill library (long-term memory) with its outcome statistics.

One TOML file per skill: shipped ones under ``<repo>/skills``, learned ones under
``$KERNELSKILL_HOME/skills`` (a user skill overrides a shipped one with the same id).
Selection is by rules, not embeddings: op classes, task features, the task's facts and the node's
profile, backend and arch decide which skills are allowed (``SkillBook.gate``; ``explain`` gives
every reason); how specifically a skill fits, then outcomes recorded in the task's context, rank them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import math
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..errors import UserError
from ..paths import user_home
from ..vocab import BACKENDS, BOTTLENECKS, OP_CLASSES, TASK_FEATURES
from . import predicates
from .schema import Skill, _validate, check_dir, parse_arch, parse_skill, shipped_dir
from .stats import SkillStats, StatsStore


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


def arch_key(arch: str | None) -> str | None:
    """The GPU family statistics are kept under: ``sm_90`` for sm_90, sm_90a, 9.0, compute_90."""
    return None if arch is None else f"sm_{parse_arch(arch)[0]}"


def _split(feats: set[str]) -> tuple[set[str], set[str] | None]:
    """(op classes, task features or None when the caller gave none: structure unknown)."""
    task = {f for f in feats if f in TASK_FEATURES}
    return feats - task, (task or None)


@dataclass
class Decision:
    """The gate's verdict on one skill for one task and node, with every reason."""
    skill: Skill
    allowed: bool
    reasons: list[str]           # "+ …" holds, "- …" keeps it out, "? …" not known, "~ …" ranks it lower
    specificity: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.skill.id, "allowed": self.allowed, "specificity": self.specificity,
                "reasons": list(self.reasons)}


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

    def rank_key(self, skill: Skill, features: set[str] = frozenset(), backend: str | None = None,
                 arch: str | None = None) -> tuple:
        """Sort key: how specifically the skill matches the task (``Skill.specificity``), then its
        success rate (with a prior) and mean speedup recorded for this task's op classes on this
        backend and arch only, then priority, id."""
        classes, task = _split(set(features))
        st, arch = self.stats.get(skill.id), arch_key(arch)
        # Op classes alone say too little to rank by: then statistics and priority decide, as before.
        return (-(skill.specificity(classes, task) if task else 0), -st.rank_rate(classes, backend, arch),
                -(st.mean_speedup(classes, backend, arch) or 1.0), -skill.priority, skill.id)

    def gate(self, features: Iterable[str] | str | None, profile: Any = None,
             backend: str = "cuda", arch: str | None = None,
             limit: int | None = None, facts: Mapping[str, Any] | None = None) -> list[Skill]:
        """The skills allowed for a task's op classes and task features and a node's profile,
        best first (see ``rank_key``). A skill whose ``requires`` names a feature the task lacks is
        left out; when ``features`` holds op classes only, ``requires`` is not checked. ``facts``
        (``predicates.task_facts``) and the profile's own facts decide the skills' preconditions
        and forbidden patterns; a fact not known decides nothing.

        Deterministic: same inputs and stats give the same list.
        """
        allowed = [d.skill for d in self.explain(features, profile, backend, arch, facts) if d.allowed]
        return allowed if limit is None else allowed[:max(limit, 0)]

    def explain(self, features: Iterable[str] | str | None, profile: Any = None,
                backend: str = "cuda", arch: str | None = None,
                facts: Mapping[str, Any] | None = None) -> list["Decision"]:
        """Every skill with the gate's verdict and its reasons (``Skill.decide``): the allowed ones
        first in rank order, then the others by id. ``gate`` is this list's allowed part."""
        if backend not in BACKENDS:
            raise UserError(f"backend {backend!r} is not one of {', '.join(BACKENDS)}")
        feats = _features(features)
        bottleneck = _bottleneck_of(profile)
        if arch is not None:
            parse_arch(arch)
        classes, task = _split(feats)
        known = {**(facts or {}), **predicates.profile_facts(profile)}
        out = []
        for s in self.skills.values():
            ok, reasons = s.decide(classes, bottleneck, backend, arch, task, known)
            out.append(Decision(s, ok, reasons, s.specificity(classes, task) if task else 0))
        out.sort(key=lambda d: (not d.allowed, self.rank_key(d.skill, feats, backend, arch) if d.allowed
                                else (d.skill.id,)))
        return out

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
             limit: int | None = None, facts: Mapping[str, Any] | None = None) -> list[Skill]:
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
                               arch=arch, facts=facts):
                allowed[s.id] = s
        rank = {s.id: self.rank_key(s, feats or frozenset(), backend, arch) for s in allowed.values()}
        if query is not None:
            scores = self._text_scores(query)
            found = sorted((s for s in allowed.values() if s.id in scores),
                           key=lambda s: (-scores[s.id][0], -scores[s.id][1], rank[s.id]))
        else:
            found = sorted(allowed.values(), key=lambda s: rank[s.id])
        return found if limit is None else found[:max(limit, 0)]

    def record(self, skill_id: str, op_class: str | None, outcome: str,
               speedup: float | None = None, quality: str = "good", backend: str | None = None,
               arch: str | None = None) -> SkillStats:
        """Record one outcome of trying a skill on a task of ``op_class`` for ``backend`` on ``arch``;
        persisted atomically in the user store. Only ``quality="good"`` measurements rank skills
        (``StatsStore.record``)."""
        self.get(skill_id)
        if speedup is not None and not (isinstance(speedup, (int, float)) and math.isfinite(speedup)
                                        and speedup > 0):
            raise UserError(f"speedup {speedup!r}: a speedup is a finite number above 0 (eager time over "
                            f"candidate time); leave it out when there is no measurement")
        if op_class is not None and op_class not in OP_CLASSES:
            raise UserError(f"op class {op_class!r} is not one of {', '.join(OP_CLASSES)}")
        if backend is not None and backend not in BACKENDS:
            raise UserError(f"backend {backend!r} is not one of {', '.join(BACKENDS)}")
        return self.stats.record(skill_id, op_class, outcome, speedup, quality, backend, arch_key(arch))

    def op_class_for(self, skill_id: str, op_classes: Sequence[str]) -> str | None:
        """The op class an outcome of ``skill_id`` on a task of ``op_classes`` counts under: the first
        one the skill applies to, else the task's first (None when the task names none)."""
        skill = self.get(skill_id)
        return next((o for o in op_classes if o in skill.applies_to), op_classes[0] if op_classes else None)

    def record_outcome(self, skill_id: str, op_classes: Sequence[str], outcome: str,
                       speedup: float | None = None, quality: str = "good", backend: str | None = None,
                       arch: str | None = None) -> tuple[str | None, SkillStats]:
        """Record one try of a skill on a task of ``op_classes``: the one way the optimizer and the MCP
        server count outcomes, so both land in the same statistics row. Returns the op class it
        counted under (``op_class_for``) and the skill's statistics after it."""
        op_class = self.op_class_for(skill_id, op_classes)
        return op_class, self.record(skill_id, op_class, outcome, speedup, quality=quality, backend=backend,
                                     arch=arch)

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
