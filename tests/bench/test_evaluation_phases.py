"""benchmarks/evaluation_phases.py: where an evaluation's seconds go, per step, over a bench run.
Rows are real stored rows (the first H100 row shipped) with their phases rewritten, read back
through the result store as the script reads the shipped files."""
from __future__ import annotations

import copy
import json
import statistics
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import evaluation_phases  # noqa: E402

SHIPPED = ROOT / "benchmarks" / "results" / "kernelbench_h100_compile" / "results.jsonl"


def _row(i: int, phases: dict, compiled: bool = True) -> dict:
    row = copy.deepcopy(json.loads(SHIPPED.read_text().splitlines()[0]))
    row["key"], row["task"] = f"k{i}", f"level1/{i}_t"
    row["result"]["phases"] = phases
    if not compiled:
        row["result"]["profile"]["compile_baseline"] = None
    return row


def _write(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_each_step_is_its_median_and_share_and_the_warm_cost_leaves_the_reference_out(tmp_path):
    f = _write(tmp_path / "r.jsonl", [_row(0, {"reference": 6.0, "setup": 2.0, "time": 2.0}),
                                      _row(1, {"reference": 0.0, "setup": 4.0, "time": 1.0}),
                                      _row(2, {"reference": 9.0, "setup": 6.0, "time": 3.0, "ncu": 1.0})])
    t = evaluation_phases.phases_table(f)
    steps = {s["step"]: s for s in t["steps"]}
    assert t["rows"] == 3 and t["baseline"] == "eager and torch.compile" and "H100" in t["gpu"]
    assert steps["setup"]["median_s"] == 4.0 and steps["reference"]["median_s"] == 6.0
    assert steps["ncu"]["median_s"] == 0.0           # a step a row lacks counts as 0 s there
    assert steps["reference"]["share"] == pytest.approx(15 / 34) and steps["time"]["share"] == pytest.approx(6 / 34)
    assert [s["step"] for s in t["steps"]][:2] == ["reference", "setup"]          # largest share first
    assert t["total"]["median_s"] == 10.0 and t["warm"]["median_s"] == 5.0       # 4+2, 4+1, 6+3+1
    md = evaluation_phases.render(t, warm=True)
    assert "| setup | 4.00 |" in md and "reference cached" in md


def test_the_shipped_h100_file_agrees_with_its_rows(capsys):
    assert evaluation_phases.main(["--warm", str(SHIPPED)]) == 0
    out = capsys.readouterr().out
    rows = [json.loads(line) for line in SHIPPED.read_text().splitlines()]
    totals = [sum(r["result"]["phases"].values()) for r in rows if r.get("result") and r["result"].get("phases")]
    assert f"| **whole evaluation** | {statistics.median(totals):.2f} |" in out


def test_a_missing_file_and_a_file_without_phases_are_usage_errors(tmp_path, capsys):
    assert evaluation_phases.main([str(tmp_path / "nope.jsonl")]) == 2
    assert "no such results file" in capsys.readouterr().err
    f = _write(tmp_path / "r.jsonl", [_row(0, {})])
    with pytest.raises(SystemExit, match="no rows with phases"):
        evaluation_phases.phases_table(f)
    assert evaluation_phases.main(["--kind", "bogus"]) == 2
