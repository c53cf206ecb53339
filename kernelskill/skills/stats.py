"""Outcome statistics of skills per (op class, backend, GPU arch), persisted in the user store
(``stats.toml``).

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
from ..vocab import Outcome

try:  # POSIX only; elsewhere writes stay atomic but are not serialized.
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

OUTCOMES = tuple(o.value for o in Outcome)      # plain strings: error messages show them
MAX_SPEEDUPS = 50
# Beta(1, 1) prior for the ranking only: an untried skill ranks between one success and one failure.
# It is never shown as a rate: a skill untried in a context has no rate there.
PRIOR_SUCCESS, PRIOR_FAILURE = 1.0, 1.0
STATS_VERSION = 2
ANY = "*"          # a context field not known (version-1 files kept no backend or arch)


@dataclass
class Counts:
    """Outcomes in one context (or summed over several)."""

    tried: int = 0
    succeeded: int = 0
    failed: int = 0
    no_gain: int = 0
    speedups: list[float] = field(default_factory=list)

    def add(self, other: "Counts") -> "Counts":
        return Counts(self.tried + other.tried, self.succeeded + other.succeeded, self.failed + other.failed,
                      self.no_gain + other.no_gain, self.speedups + other.speedups)

    @property
    def rate(self) -> float | None:
        """The measured success rate; None when never tried (no rate, not 0.5)."""
        return self.succeeded / self.tried if self.tried else None

    def mean_speedup(self) -> float | None:
        """Geometric mean of the recorded speedups, None when there are none."""
        if not self.speedups:
            return None
        return math.exp(sum(math.log(s) for s in self.speedups) / len(self.speedups))


Context = tuple[str, str, str]      # (op class, backend, GPU arch); ANY where not known


def _matches(ctx: Context, ops: set[str] | None, backend: str | None, arch: str | None) -> bool:
    op, b, a = ctx
    if ops is not None and op not in ops:          # an unknown op class ranks nothing
        return False
    if backend is not None and b not in (backend, ANY):
        return False
    return arch is None or a in (arch, ANY)


@dataclass
class SkillStats:
    """How a skill fared, per (op class, backend, GPU arch): the ranking of a task reads only the
    contexts of its own op classes, backend and arch, so a convolution's failures never move a
    matmul's ranking, nor a CPU run's a GPU's."""

    contexts: dict[Context, Counts] = field(default_factory=dict)
    # Outcomes kept but not ranked: timed with a quality that was not good, or not measured by
    # the evaluator itself (an MCP client's claim). {label: count}
    unranked: dict[str, int] = field(default_factory=dict)

    def counts(self, ops: Iterable[str] | None = None, backend: str | None = None,
               arch: str | None = None) -> Counts:
        """The outcomes in the matching contexts summed (all of them with no filter)."""
        wanted = None if ops is None else set(ops)
        total = Counts()
        for ctx, c in sorted(self.contexts.items()):
            if _matches(ctx, wanted, backend, arch):
                total = total.add(c)
        return total

    @property
    def tried(self) -> int:
        return self.counts().tried

    @property
    def succeeded(self) -> int:
        return self.counts().succeeded

    @property
    def failed(self) -> int:
        return self.counts().failed

    @property
    def no_gain(self) -> int:
        return self.counts().no_gain

    def success_rate(self, ops: Iterable[str] | None = None, backend: str | None = None,
                     arch: str | None = None) -> float | None:
        """The measured rate in the matching contexts; None when the skill was not tried there."""
        return self.counts(ops, backend, arch).rate

    def rank_rate(self, ops: Iterable[str], backend: str | None = None, arch: str | None = None) -> float:
        """Posterior mean success rate in the task's contexts (what ranks; 0.5 when untried there)."""
        c = self.counts(ops, backend, arch)
        return (c.succeeded + PRIOR_SUCCESS) / (c.tried + PRIOR_SUCCESS + PRIOR_FAILURE)

    def mean_speedup(self, ops: Iterable[str] | None = None, backend: str | None = None,
                     arch: str | None = None) -> float | None:
        return self.counts(ops, backend, arch).mean_speedup()

    def to_dict(self) -> dict[str, Any]:
        """Plain data (what stats.toml stores for one skill)."""
        total = self.counts()
        return {"tried": total.tried, "succeeded": total.succeeded, "failed": total.failed,
                "no_gain": total.no_gain,
                "contexts": [{"op": op, "backend": b, "arch": a, "tried": c.tried, "succeeded": c.succeeded,
                              "failed": c.failed, "no_gain": c.no_gain, "speedups": list(c.speedups)}
                             for (op, b, a), c in sorted(self.contexts.items())],
                "unranked": dict(sorted(self.unranked.items()))}

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str) -> "SkillStats":
        """Read one skill's table (version 2, or version 1: per-op counts keep ranking their op class
        for any backend; the rest is shown but ranks nothing), naming ``where`` when it is malformed."""
        try:
            st = cls(unranked={str(k): int(v) for k, v in dict(data.get("unranked", {})).items()})
            if "contexts" in data:
                for row in data["contexts"]:
                    ctx = (str(row.get("op", ANY)), str(row.get("backend", ANY)), str(row.get("arch", ANY)))
                    st.contexts[ctx] = Counts(int(row.get("tried", 0)), int(row.get("succeeded", 0)),
                                              int(row.get("failed", 0)), int(row.get("no_gain", 0)),
                                              [float(x) for x in row.get("speedups", [])])
                return st
            rest = Counts(int(data.get("tried", 0)), int(data.get("succeeded", 0)), int(data.get("failed", 0)),
                          int(data.get("no_gain", 0)), [float(x) for x in data.get("speedups", [])])
            for op, v in dict(data.get("ops", {})).items():
                tried, ok = int(v.get("tried", 0)), int(v.get("succeeded", 0))
                st.contexts[(str(op), ANY, ANY)] = Counts(tried, ok, tried - ok, 0)
                rest.tried, rest.succeeded, rest.failed = rest.tried - tried, rest.succeeded - ok, \
                    max(rest.failed - (tried - ok), 0)
            if rest.tried > 0 or rest.speedups:
                st.contexts[(ANY, ANY, ANY)] = Counts(max(rest.tried, 0), max(rest.succeeded, 0), rest.failed,
                                                      rest.no_gain, rest.speedups)
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
               speedup: float | None = None, quality: str = "good", backend: str | None = None,
               arch: str | None = None) -> SkillStats:
        """Count one outcome (and its speedup, if measured) in its context and persist it.

        Only ``quality="good"`` counts for ranking when the outcome rests on a timing (success,
        no_gain): anything else — ``noisy``, ``contended``, ``unmeasured`` (not timed by the
        evaluator itself) — is kept under ``unranked`` with its label. A failure is a verdict,
        not a timing, and always counts."""
        if outcome not in OUTCOMES:
            raise UserError(f"outcome {outcome!r} is not one of {', '.join(OUTCOMES)}")
        if speedup is not None and not (isinstance(speedup, (int, float))
                                        and math.isfinite(speedup) and speedup > 0):
            raise UserError(f"speedup {speedup!r} must be a positive finite number")
        with self._locked() if self.path is not None else contextlib.nullcontext():
            if self.path is not None:
                self.data = self._read()
            st = self.data.setdefault(skill_id, SkillStats())
            if outcome != "failure" and quality != "good":
                st.unranked[quality] = st.unranked.get(quality, 0) + 1
            else:
                c = st.contexts.setdefault((op_class or ANY, backend or ANY, arch or ANY), Counts())
                c.tried += 1
                c.succeeded += outcome == "success"
                c.failed += outcome == "failure"
                c.no_gain += outcome == "no_gain"
                if speedup is not None:
                    c.speedups = (c.speedups + [float(speedup)])[-MAX_SPEEDUPS:]
            if self.path is not None:
                try:
                    self._write()
                except BaseException:
                    self.data = self._read()  # memory matches the file that was kept
                    raise
        return st
