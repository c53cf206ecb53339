"""The kernelskill command: JSON contract, exit codes, readable output, task show."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kernelskill.cli import main

from helpers import DATA, RELU_TASK, kernelbench_file, toolkit_candidate

STATUSES = {"ok", "compile_error", "runtime_error", "timeout", "crashed", "incorrect", "flagged"}


@pytest.fixture
def cand_file(tmp_path):
    def make(body: str):
        p = tmp_path / "cand.py"
        p.write_text(toolkit_candidate(body))
        return str(p)
    return make


def test_eval_json_contract(cand_file, capsys):
    code = main(["eval", str(RELU_TASK), cand_file("return ext.relu2(x)"), "--json", "--time-cap", "0.3",
                 "--set", "batch_size=8"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert data["status"] == "ok" and data["status"] in STATUSES
    assert isinstance(data["flags"], list)
    assert isinstance(data["speedup"], float) and isinstance(data["custom_share"], float)
    for key in ("compile", "verify", "profile", "env"):
        assert isinstance(data[key], dict)
    assert data["env"]["torch"] and data["env"]["device"] == "cpu"


def test_eval_failure_exit_1_and_readable_summary(cand_file, capsys):
    code = main(["eval", str(RELU_TASK), cand_file("return ext.relu2_tail_bug(x)"), "--no-timing"])
    out = capsys.readouterr().out
    assert code == 1
    assert "incorrect" in out and "worst" in out and "expected" in out
    # Where the seconds went, by step (the worker's start-up, importing torch, always shows); nothing
    # was timed.
    steps = next(line for line in out.splitlines() if line.startswith("  seconds: "))
    assert "start " in steps and "time " not in steps, steps


def test_errors_in_a_candidate_file_name_that_file_and_line(cand_file, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine").mkdir()
    bad = tmp_path / "mine" / "bad.py"
    bad.write_text("import torch\n\nx = (\n")
    assert main(["eval", str(RELU_TASK), str(bad), "--no-timing"]) == 1
    out = capsys.readouterr().out
    # The file as the user can open it (relative to the working directory), line 3, column 5, and the
    # worker's internal module name nowhere.
    assert "mine/bad.py:3:5: error: SyntaxError: '(' was never closed" in out, out
    assert "candidate_module" not in out
    raising = cand_file("y = ext.relu2(x)\nraise ValueError('boom')")          # tmp_path/cand.py
    assert main(["eval", str(RELU_TASK), raising, "--no-timing"]) == 1
    out = capsys.readouterr().out
    line = open(raising).read().splitlines().index("        raise ValueError('boom')") + 1
    assert f"ValueError: boom (cand.py:{line}: raise ValueError('boom'))" in out, out


def test_eval_usage_and_task_errors_exit_2(cand_file, capsys):
    assert main(["eval", str(DATA / "bad" / "syntax.py"), cand_file("return ext.relu2(x)")]) == 2
    assert "syntax error" in capsys.readouterr().err
    assert main(["eval", str(RELU_TASK), "/nonexistent.py"]) == 2
    assert main(["eval", str(RELU_TASK), cand_file("return ext.relu2(x)"), "--set", "oops"]) == 2
    assert "NAME=VALUE" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["eval"])
    assert e.value.code == 2


def test_task_show(capsys):
    assert main(["task", "show", str(RELU_TASK), "--set", "dim=10"]) == 0
    out = capsys.readouterr().out
    assert "float32[64, 10]" in out and "elementwise" in out
    assert main(["task", "show", str(RELU_TASK), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["op_classes"] == ["elementwise"]


def test_console_script_help():
    out = subprocess.run([sys.executable, "-m", "kernelskill.cli", "eval", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "--preset" in out.stdout and "Exit codes" in out.stdout


def test_first_call_is_reported(cand_file, capsys):
    assert main(["eval", str(RELU_TASK), cand_file("return ext.relu2(x)"), "--json", "--time-cap", "0.2"]) == 0
    prof = json.loads(capsys.readouterr().out)["profile"]
    assert prof["first_call_ms"] > 0 and prof["first_call_ms"] >= prof["candidate"]["min_ms"] * 0.01


def test_python_dash_m_kernelskill_runs_the_cli():
    # The same entry point as the console script (pyproject's [project.scripts]).
    out = subprocess.run([sys.executable, "-m", "kernelskill", "--help"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: kernelskill") and "task show" in out.stdout


def test_task_show_level_from_folder_and_buffers_apart(tmp_path, capsys):
    path = str(kernelbench_file(tmp_path))
    assert main(["task", "show", path, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["level"] == 2
    assert [p["name"] for p in info["parameters"]] == ["weight"]
    assert [b["name"] for b in info["buffers"]] == ["scale"]
    assert main(["task", "show", path]) == 0
    out = capsys.readouterr().out
    assert "(level 2)" in out
    assert "parameters: 1\n    weight: float32[8]\n" in out
    assert "buffers: 1\n    scale: float32[8]\n" in out


def test_compile_prints_a_readable_result(cand_file, capsys):
    """`kernelskill compile` without --json crashed after printing (CompileResult has no status)."""
    code = main(["compile", cand_file("return ext.relu2(x)"), "--device", "cpu"])
    captured = capsys.readouterr()
    out = captured.out
    assert code == 0 and out.startswith("compile ok: backend cpp"), out
    # the build's steps, as the worker reported them, under the build phase with their times
    err = captured.err
    assert "… building the candidate's extensions" in err and "load" in err, err
    assert "cached extension" in err or "compile kernel.cpp" in err, err
