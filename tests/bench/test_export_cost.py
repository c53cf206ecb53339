"""benchmarks/export_cost.py: which solutions it takes, its usage errors and its table; the whole
pipeline (export, AOT build, tests, speed) is the slow test below, on the C++ GELU."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import export_cost  # noqa: E402


def test_it_lists_the_backend_solutions_and_refuses_unknown_tasks(capsys):
    assert export_cost.main(["--backend", "cpp", "--list"]) == 0
    listed = capsys.readouterr().out.split()
    assert "relu_gelu:" in listed and "cpp_gelu_openmp.py" in listed
    assert not any(s.startswith("cuda_") for s in listed)
    assert export_cost.main(["--backend", "cuda", "--list", "--only", "relu_gelu"]) == 0
    assert capsys.readouterr().out.strip() == "relu_gelu: cuda_gelu_vec4.py"
    with pytest.raises(SystemExit) as e:
        export_cost.main(["--backend", "cpp", "--only", "no_such_task"])
    assert e.value.code == 2 and "no cpp solution for no_such_task" in capsys.readouterr().err


def test_a_failed_row_says_where_it_failed():
    rows = [{"task": "t", "solution": "s.py", "stage": "build", "export_s": 3.0, "error": "x\nerror: no compiler"}]
    lines = export_cost.table(rows)
    assert lines[2].startswith("| t | s.py | 3.0 | — |")
    assert "failed at build: error: no compiler" in lines[3]


@pytest.mark.slow
def test_the_whole_pipeline_on_the_cpp_gelu(tmp_path):
    out = tmp_path / "r.json"
    assert export_cost.main(["--backend", "cpp", "--only", "relu_gelu", "--seconds", "0.5",
                             "--work", str(tmp_path / "w"), "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())["rows"]
    assert row["stage"] == "done" and row["outputs_equal"] is True and "4 passed" in row["tests"]
    assert row["build_s"] > 0 and row["import_s"] < row["jit_first_import_s"]
