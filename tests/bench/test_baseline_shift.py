"""benchmarks/baseline_shift.py: the table of KernelBench tasks whose baseline moved when the flags
changed. Rows are real stored rows (the first H100 row shipped) with their medians rewritten, read
back through the result store as the script reads the shipped files."""
from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import baseline_shift  # noqa: E402

SHIPPED = ROOT / "benchmarks" / "results" / "kernelbench_h100_compile" / "results.jsonl"


def _row(task: str, eager: float, compiled: float | None, gpu: str = "NVIDIA H100 80GB HBM3", classes=("conv",)):
    row = copy.deepcopy(json.loads(SHIPPED.read_text().splitlines()[0]))
    row["key"], row["task"], row["op_classes"] = f"k-{task}-{eager}", task, list(classes)
    prof = row["result"]["profile"]
    prof["baseline"]["median_ms"] = eager
    if compiled is None:
        prof["compile_baseline"] = None
    else:
        prof["compile_baseline"]["median_ms"] = compiled
    row["result"]["env"]["gpu"] = gpu
    return row


def _write(path: Path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_moved_tasks_are_the_ones_beyond_the_threshold_either_way(tmp_path, capsys):
    new = _write(tmp_path / "new.jsonl", [
        _row("level1/2_a", 4.0, 3.0), _row("level1/10_b", 9.9, 2.0, classes=("matmul",)),
        _row("level2/1_c", 5.5, 1.0), _row("level3/1_d", 1.0, 1.0, gpu="NVIDIA H200")])
    old = _write(tmp_path / "old.jsonl", [
        _row("level1/2_a", 8.0, 3.1), _row("level1/10_b", 10.0, 2.05, classes=("matmul",)),
        _row("level2/1_c", 5.0, 1.0), _row("level3/1_d", 1.0, 1.0), _row("level3/9_only_old", 1.0, 1.0)])
    out = tmp_path / "shift.json"
    assert baseline_shift.main([new, old, "--old-compile", "", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    by = {r["task"]: r for r in data["rows"]}
    assert [r["task"] for r in data["rows"]] == ["level1/2_a", "level1/10_b", "level2/1_c"]   # numeric order
    assert by["level1/2_a"]["moved"] == ["eager"] and by["level1/2_a"]["eager_ratio"] == 0.5
    assert by["level1/10_b"]["moved"] == []                       # 1 % and 2.4 %: within 5 %
    assert by["level2/1_c"]["moved"] == ["eager"]                 # 10 % slower counts too
    assert data["skipped"] == {"other_gpu": 1, "only_new": 0, "only_old": 1}
    text = capsys.readouterr().out
    assert "eager: 3 tasks compared, 2 moved by more than 5 % (1 faster, 1 slower)" in text
    assert "| level1/2_a | conv | 8.000 → 4.000 | **0.500** |" in text
    assert "level1/10_b" not in text.split("\n\n", 1)[1]          # the table lists only moved tasks
    # A looser threshold leaves only the halving.
    assert baseline_shift.main([new, old, "--old-compile", "", "--threshold", "20", "--json", str(out)]) == 0
    assert [r["task"] for r in json.loads(out.read_text())["rows"] if r["moved"]] == ["level1/2_a"]


def test_old_compile_rows_come_from_their_own_file_and_a_missing_one_is_named(tmp_path, capsys):
    new = _write(tmp_path / "new.jsonl", [_row("level2/1_c", 5.0, 1.0)])
    old = _write(tmp_path / "old.jsonl", [_row("level2/1_c", 5.0, None)])
    old_c = _write(tmp_path / "oldc.jsonl", [_row("level2/1_c", 5.0, 4.0)])
    out = tmp_path / "s.json"
    baseline_shift.main([new, old, "--old-compile", old_c, "--json", str(out)])
    (row,) = json.loads(out.read_text())["rows"]
    assert row["compile_ratio"] == 0.25 and row["moved"] == ["compile"]
    try:
        baseline_shift.main([new, str(tmp_path / "absent.jsonl")])
    except SystemExit as e:
        assert "absent.jsonl: no such results file" in str(e)
    else:
        raise AssertionError("a missing results file must stop the script")
