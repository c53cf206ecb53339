"""Outcome statistics of skills, persisted in the user store (``stats.toml``).

Writes are atomic (temp file + ``os.replace``) and, where ``fcntl`` exists, serialized with a
lock file so that parallel workers recording outcomes do not lose each other's counts: every
``record`` re-reads the file under the lock, applies its increment and writes it back.
"""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import tomli_w

from ..errors import UserError

try:  # POSIX only; elsewhere writes stay atomic but are not serialized.
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

OUTCOMES = ("success", "failure", "no_gain")
MAX_SPEEDUPS = 50
# Beta(1, 1) prior: an untried skill ranks at 0.5, between one success and one failure.
PRIOR_SUCCESS, PRIOR_FAILURE = 1.0, 1.0
STATS_VERSION = 1


@dataclass
class SkillStats:
    """How often a skill was tried, how often it helped, and by how much."""

    tried: int = 0
    succeeded: int = 0
    failed: int = 0
    no_gain: int = 0
    speedups: list[float] = field(default_factory=list)
    ops: dict[str, dict[str, int]] = field(default_factory=dict)  # op class -> tried/succeeded
    # Outcomes kept but not ranked: timed with a quality that was not good, or not measured by
    # the evaluator itself (an MCP client's claim). {label: count}
    unranked: dict[str, int] = field(default_factory=dict)

    def success_rate(self, features: Iterable[str] = ()) -> float:
        """Posterior mean success rate; evidence on the given op classes counts twice."""
        tried, succeeded = float(self.tried), float(self.succeeded)
        for op in sorted(set(features)):
            counts = self.ops.get(op, {})
            tried += counts.get("tried", 0)
            succeeded += counts.get("succeeded", 0)
        return (succeeded + PRIOR_SUCCESS) / (tried + PRIOR_SUCCESS + PRIOR_FAILURE)

    def mean_speedup(self) -> float | None:
        """Geometric mean of the recorded speedups, None when there are none."""
        if not self.speedups:
            return None
        return math.exp(sum(math.log(s) for s in self.speedups) / len(self.speedups))

    def to_dict(self) -> dict[str, Any]:
        """Plain data (what stats.toml stores for one skill)."""
        return {"tried": self.tried, "succeeded": self.succeeded, "failed": self.failed,
                "no_gain": self.no_gain, "speedups": list(self.speedups),
                "ops": {k: dict(v) for k, v in sorted(self.ops.items())},
                "unranked": dict(sorted(self.unranked.items()))}

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str) -> "SkillStats":
        """Read one skill's table, naming ``where`` when it is malformed."""
        try:
            st = cls(tried=int(data.get("tried", 0)), succeeded=int(data.get("succeeded", 0)),
                     failed=int(data.get("failed", 0)), no_gain=int(data.get("no_gain", 0)),
                     speedups=[float(x) for x in data.get("speedups", [])],
                     ops={str(k): {"tried": int(v.get("tried", 0)),
                                   "succeeded": int(v.get("succeeded", 0))}
                          for k, v in dict(data.get("ops", {})).items()},
                     unranked={str(k): int(v) for k, v in dict(data.get("unranked", {})).items()})
        except (TypeError, ValueError, AttributeError) as exc:
            raise UserError(f"{where}: malformed statistics ({exc}); fix or delete the file")
        return st


class StatsStore:
    """Per-skill statistics backed by one TOML file (or memory only when path is None)."""

    def __init__(self, path: Path | None):
        self.path = Path(path) if path is not None else None
        self.data: dict[str, SkillStats] = self._read()

    def get(self, skill_id: str) -> SkillStats:
        """Statistics of one skill (empty when never tried)."""
        return self.data.get(skill_id) or SkillStats()

    def reload(self) -> None:
        """Re-read the file (another process may have recorded outcomes)."""
        self.data = self._read()

    def _read(self) -> dict[str, SkillStats]:
        if self.path is None or not self.path.exists():
            return {}
        try:
            raw = tomllib.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise UserError(f"{self.path}: cannot read skill statistics ({exc}); fix or "
                            "delete the file") from None
        skills = raw.get("skills", {})
        if not isinstance(skills, dict):
            raise UserError(f"{self.path}: key 'skills' must be a table")
        return {sid: SkillStats.from_dict(t if isinstance(t, dict) else {"tried": "?"},
                                          f"{self.path}: skills.{sid}")
                for sid, t in skills.items()}

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        assert self.path is not None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if fcntl is None:  # pragma: no cover
            yield
            return
        with open(self.path.with_name(self.path.name + ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _write(self) -> None:
        assert self.path is not None
        doc = {"version": STATS_VERSION,
               "skills": {sid: st.to_dict() for sid, st in sorted(self.data.items())}}
        fd, tmp = tempfile.mkstemp(prefix=".stats-", suffix=".tmp", dir=self.path.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                tomli_w.dump(doc, fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def record(self, skill_id: str, op_class: str | None, outcome: str,
               speedup: float | None = None, quality: str = "good") -> SkillStats:
        """Count one outcome (and its speedup, if measured) and persist it.

        Only ``quality="good"`` counts for ranking when the outcome rests on a timing (success,
        no_gain): anything else — ``noisy``, ``contended``, ``unmeasured`` (not timed by the
        evaluator itself) — is kept under ``unranked`` with its label. A failure is a verdict,
        not a timing, and always counts."""
        if outcome not in OUTCOMES:
            raise UserError(f"outcome {outcome!r} is not one of {', '.join(OUTCOMES)}")
        if speedup is not None and not (isinstance(speedup, (int, float))
                                        and math.isfinite(speedup) and speedup > 0):
            raise UserError(f"speedup {speedup!r} must be a positive finite number")
        if outcome != "failure" and quality != "good":
            with self._locked() if self.path is not None else contextlib.nullcontext():
                if self.path is not None:
                    self.data = self._read()
                st = self.data.setdefault(skill_id, SkillStats())
                st.unranked[quality] = st.unranked.get(quality, 0) + 1
                if self.path is not None:
                    self._write()
            return st
        with self._locked() if self.path is not None else contextlib.nullcontext():
            if self.path is not None:
                self.data = self._read()
            st = self.data.setdefault(skill_id, SkillStats())
            st.tried += 1
            st.succeeded += outcome == "success"
            st.failed += outcome == "failure"
            st.no_gain += outcome == "no_gain"
            if speedup is not None:
                st.speedups = (st.speedups + [float(speedup)])[-MAX_SPEEDUPS:]
            if op_class:
                counts = st.ops.setdefault(op_class, {"tried": 0, "succeeded": 0})
                counts["tried"] += 1
                counts["succeeded"] += outcome == "success"
            if self.path is not None:
                try:
                    self._write()
                except BaseException:
                    self.data = self._read()  # memory matches the file that was kept
                    raise
        return st
