"""``results.jsonl`` read back as ``Row``s: every shipped file's rows round-trip exactly (a file
written by an older kernelskill still loads and resumes), and the rows read the same numbers the
stored dicts held."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelskill.bench import ResultStore, Row
from kernelskill.results import EvalResult

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "benchmarks" / "results").glob("*/results.jsonl"))
BASELINE = ROOT / "benchmarks/results/kernelbench_h100_compile/results.jsonl"     # the suite of record


def test_there_are_shipped_results_to_read():
    assert BASELINE in SHIPPED


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.parent.name)
def test_every_shipped_row_round_trips_exactly(path):
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines
    for line in lines:
        d = json.loads(line)
        row = Row.from_dict(d)
        back = row.to_dict()
        assert back == d and list(back) == list(d), d["key"]
        assert json.dumps(back) == json.dumps(d)            # byte for byte, as json.dumps writes the line
        assert (row.key, row.kind, row.task, row.status) == (d["key"], d["kind"], d["task"], d["status"])
        if d["result"] is not None:
            assert isinstance(row.result, EvalResult)
            assert row.speedup == d["result"]["speedup"] and row.result.quality == d["result"]["quality"]
            assert row.result.custom_share == d["result"]["custom_share"]


def test_the_baseline_file_loads_and_a_rerun_would_reuse_it(tmp_path):
    src = BASELINE
    rows = ResultStore(src).load()
    keys = {json.loads(line)["key"] for line in src.read_text().splitlines()}
    assert set(rows) == keys and len(rows) == 250
    assert all(isinstance(r, Row) for r in rows.values())
    assert {r.kind for r in rows.values()} == {"reference"}
    # Written again, row by row, through the store: the same bytes.
    copy = ResultStore(tmp_path / "results.jsonl")
    for r in rows.values():
        copy.append(r)
    assert copy.path.read_bytes() == src.read_bytes()


def test_a_row_built_here_writes_the_jobs_key_order_and_a_replaced_result_is_written():
    r = Row("k", kind="reference", task="t", solution="reference", status="ok", op_classes=["conv"], extra={"new": 1})
    assert list(r.to_dict()) == ["key", "kind", "task", "solution", "expected", "status", "message", "device",
                                 "threads", "seconds", "finished", "result", "op_classes", "new"]
    d = {"key": "k", "status": "error", "unknown": [1, 2], "result": None}
    assert Row.from_dict(d).to_dict() == d and Row.from_dict(d).extra == {"unknown": [1, 2]}
    stored = json.loads(BASELINE.read_text().splitlines()[0])
    row = Row.from_dict(stored)
    row.result = EvalResult.from_dict(stored["result"])      # replaced: written from the EvalResult itself
    assert row.to_dict()["result"] == row.result.to_dict()


def test_a_result_is_read_when_first_used_and_a_bad_one_says_which_row(tmp_path):
    from kernelskill.errors import UserError
    store = ResultStore(tmp_path / "results.jsonl")
    store.append({"key": "bad", "task": "t", "status": "ok", "result": {"status": "ok"}})     # no compile result
    row = store.load()["bad"]                # loading (what a resume does) reads no result
    assert row.to_dict()["result"] == {"status": "ok"}
    with pytest.raises(UserError, match="results row 'bad' \\(t\\): its result does not read"):
        row.result
