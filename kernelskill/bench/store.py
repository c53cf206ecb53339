"""The resumable result store: ``results.jsonl``, one JSON line per finished job, flushed as it
lands, read back as ``Row``s (the job's record, typed: its ``EvalResult`` as one).

The file's format is the jobs' records as they were always written (``jobs._record``): a row read
and written again (``Row.from_dict(d).to_dict()``) is ``d`` itself, key order included, whatever
version of kernelskill wrote it.
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..results import EvalResult
from ..vocab import RowStatus

# The keys every record has, in the order the jobs write them; then the ones only some kinds add.
BASE_KEYS = ("key", "kind", "task", "solution", "expected", "status", "message", "device", "threads", "seconds",
             "finished", "result")
REFERENCE_KEYS = ("op_classes",)
OPTIMIZE_KEYS = ("run_dir", "best_file", "attempts", "reason", "tokens", "usd")
KNOWN_KEYS = (*BASE_KEYS, *REFERENCE_KEYS, *OPTIMIZE_KEYS)


_UNREAD = object()


def _read_result(raw: dict | None, key: str, task: str) -> EvalResult | None:
    try:
        return EvalResult.from_dict(raw) if raw is not None else None
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        raise UserError(f"results row {key!r} ({task}): its result does not read as an evaluation "
                        f"({type(e).__name__}: {e})") from None


class _Result:
    """``Row.result``: the stored result, read as an ``EvalResult`` on first use. Reading one is
    slow (the nested dataclasses' type hints), so a resumed bench, which needs only the keys of the
    stored rows, reads none (figures: docs/bench.md, "Measurements behind the code")."""

    def __get__(self, row, owner=None):
        if row is None:
            return None                         # the field's default
        value = row.__dict__.get("_result")
        if value is _UNREAD:
            raw = row._stored[1]
            value = row.__dict__["_result"] = _read_result(raw, row.key, row.task)
            row._stored = (value, raw)
        return value

    def __set__(self, row, value) -> None:
        row.__dict__["_result"] = value


@dataclass
class Row:
    """One line of ``results.jsonl``: a finished job (see ``jobs._record``)."""
    key: str
    kind: str = "eval"                      # eval | reference | optimize
    task: str = ""
    solution: str = ""                      # its path from the task directory; reference; optimize
    expected: str = "ok"                    # the verdict it should get (solutions/wrong/: its `# expect:`)
    status: str = ""                        # a Status, or a RowStatus (task_error, error, no_correct)
    message: str = ""
    device: str | None = None
    threads: int | None = None
    seconds: float | None = None            # the job's own time
    finished: str | None = None             # local time, 2026-11-27T06:14:23
    result: EvalResult | None = _Result()   # the evaluation (an optimize job: its best candidate's)
    op_classes: list[str] | None = None     # reference jobs: the task's op classes
    run_dir: str | None = None              # optimize jobs, from here on
    best_file: str | None = None
    attempts: int | None = None
    reason: str | None = None
    tokens: int | None = None
    usd: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)     # keys this version does not know, kept as stored
    # The keys as stored, in their order, and the result as stored beside the EvalResult read from
    # it: an EvalResult adds the defaults of fields newer than the row, so writing the row back
    # writes the stored result unless ``result`` was replaced.
    _keys: tuple[str, ...] = field(default=(), init=False, repr=False, compare=False)
    _stored: tuple[Any, Any] = field(default=(None, None), init=False, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: dict) -> Row:
        """A record as the jobs write it (JSON-ready), the partial ones of older files included.
        Its result is read when first used (a UserError then if it does not read as one)."""
        row = cls(**{k: data[k] for k in KNOWN_KEYS if k in data and k != "result"},
                  extra={k: v for k, v in data.items() if k not in KNOWN_KEYS})
        row._keys = tuple(data)
        row.__dict__["_result"] = _UNREAD
        row._stored = (_UNREAD, data.get("result"))
        return row

    def to_dict(self) -> dict:
        """The record again: the stored keys in their order (a row built here: the jobs' order)."""
        keys = self._keys or (*BASE_KEYS, *(k for k in (*REFERENCE_KEYS, *OPTIMIZE_KEYS)
                                            if getattr(self, k) is not None), *self.extra)
        keys = (*keys, *(k for k in self.extra if k not in keys))
        out = {}
        for k in keys:
            if k == "result":
                parsed, raw = self._stored
                current = self.__dict__.get("_result")
                out[k] = raw if current is parsed else (current.to_dict() if current is not None else None)
            elif k in KNOWN_KEYS:
                out[k] = getattr(self, k)
            elif k in self.extra:
                out[k] = self.extra[k]
        return out

    @property
    def speedup(self) -> float | None:
        """Eager over the candidate (the result's); None when it has none."""
        return self.result.speedup if self.result else None


class ResultStore:
    """``results.jsonl``: one line per finished job, flushed as it lands."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()

    def load(self) -> dict[str, Row]:
        """Finished rows by key (later lines win); a line cut short by a crash is skipped.
        A job that stopped on an ``error`` (an unreachable endpoint, …) is not finished: it reruns."""
        records: dict[str, dict] = {}
        if not self.path.is_file():
            return {}
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(rec, dict) and "key" in rec:
                records[rec["key"]] = rec
        return {k: Row.from_dict(r) for k, r in records.items() if r.get("status") != RowStatus.error}

    def reset(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("")

    def append(self, record: dict | Row) -> Row:
        """Write one finished job's record (a line, flushed); the row as a rerun will read it."""
        line = json.dumps(record.to_dict() if isinstance(record, Row) else record, default=str)
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a+", encoding="utf-8") as f:
                f.seek(0, 2)
                if f.tell():            # a last line cut short must not swallow this one
                    f.seek(f.tell() - 1)
                    if f.read(1) != "\n":
                        f.write("\n")
                f.write(line + "\n")
                f.flush()
        return Row.from_dict(json.loads(line))
