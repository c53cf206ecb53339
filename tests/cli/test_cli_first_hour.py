"""The command line as a new user meets it in the first hour (issue 25): help examples that exist and
run, clean errors with exit 2 (and a JSON error object under --json), --set named in its errors, a
Triton candidate on a machine that cannot run it, task show's units, help on every option, and
tracebacks that name the user's file instead of the worker's scratch copy."""
from __future__ import annotations

import argparse
import json
import re
import shlex
from pathlib import Path

import pytest
import torch

from kernelskill.cli import build_parser, main

from helpers import RELU_TASK

ROOT = Path(__file__).resolve().parents[2]
HAS_CUDA = bool(torch.version.cuda) and torch.cuda.is_available()

RAISING_TASK = '''import torch
import torch.nn as nn

batch_size = 4
dim = 8


class Model(nn.Module):
    def forward(self, x):
        raise ValueError("boom from the reference")


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
'''

RAISING_CANDIDATE = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.relu(x)
        raise ValueError("boom from the candidate")
'''


def parsers(parser: argparse.ArgumentParser | None = None, path: str = "kernelskill"):
    """(command path, parser) for the top level and every subcommand, those of COMMAND_MODULES too."""
    parser = parser or build_parser()
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:              # an alias names the same parser again
                    seen.add(id(sub))
                    yield from parsers(sub, f"{path} {name}")


# ---- 1. the examples in --help ------------------------------------------------------------------
def test_every_examples_path_named_in_a_help_exists():
    found = {}
    for path, parser in parsers():
        for ref in re.findall(r"\bexamples/[\w./-]+", parser.format_help()):
            found.setdefault(ref.rstrip(".,;:"), path)
    assert any("solutions/" in ref for ref in found), found     # the walk reached the solution examples
    missing = {ref: where for ref, where in found.items() if not (ROOT / ref).exists()}
    assert not missing, f"help texts name files that do not exist: {missing}"
    commands = {path for path, _ in parsers()}
    assert {"kernelskill profile", "kernelskill optimize", "kernelskill skills search", "kernelskill bench"} <= commands


def test_the_first_eval_example_of_the_top_level_help_runs(monkeypatch, capsys):
    lines = [line.strip() for line in build_parser().format_help().splitlines()]
    example = next(line for line in lines if line.startswith("kernelskill eval "))
    argv = shlex.split(example)[1:]
    assert "--preset" in argv and "small" in argv and "--device" not in argv        # the CPU path on this machine
    monkeypatch.chdir(ROOT)                 # the paths are written relative to a checkout
    # The example as printed, with a short timing so the test stays fast.
    code = main(argv + ["--time-cap", "0.3", "--retimes", "0"])
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
    assert out.out.startswith("✓ ok") and "backend cpp" in out.out


# ---- 2. task show on a task whose forward raises -------------------------------------------------
def test_task_show_of_a_forward_that_raises_is_a_clean_task_error(tmp_path, capsys):
    task = tmp_path / "raising.py"
    task.write_text(RAISING_TASK)
    assert main(["task", "show", str(task)]) == 2
    err = capsys.readouterr().err
    line = RAISING_TASK.splitlines().index('        raise ValueError("boom from the reference")') + 1
    assert f"error: {task}:{line}: Model.forward raised ValueError: boom from the reference" in err, err
    assert "Traceback" not in err


# ---- 3. --set values that do not work name the flag ----------------------------------------------
@pytest.mark.parametrize("command", [["eval", str(RELU_TASK), str(RELU_TASK)], ["task", "show", str(RELU_TASK)],
                                     ["profile", str(RELU_TASK)]])
def test_a_set_value_that_fails_names_the_flag_and_the_value(command, capsys):
    assert main(command + ["--set", "batch_size=8", "--set", "dim=abc"]) == 2
    err = capsys.readouterr().err
    assert "error: --set dim=abc: " in err, err
    assert f"{RELU_TASK}:5: " in err and "NameError: name 'abc' is not defined" in err, err
    assert "batch_size" not in err.split("--set dim=abc")[0]      # the value that works is not blamed


def test_a_set_value_that_fails_under_json_ends_stdout_with_the_error(capsys):
    assert main(["task", "show", str(RELU_TASK), "--set", "dim=abc", "--json"]) == 2
    data = json.loads(capsys.readouterr().out)
    assert data["status"] == "error" and data["error"].startswith("--set dim=abc: ")


# ---- 4. a Triton candidate where Triton cannot run -----------------------------------------------
@pytest.mark.skipif(HAS_CUDA, reason="the machine has a GPU: Triton candidates run there")
def test_a_triton_candidate_without_a_gpu_is_a_usage_error_that_says_what_to_do(monkeypatch, capsys):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    solution = ROOT / "examples" / "softmax_rows" / "solutions" / "triton_softmax.py"
    assert main(["eval", "softmax_rows", str(solution), "--preset", "small", "--no-timing"]) == 2
    err = capsys.readouterr().err
    assert "Triton candidate" in err and "no CUDA GPU" in err and "evaluate it on a GPU machine" in err, err
    assert "TRITON_INTERPRET=1" in err
    assert main(["profile", "softmax_rows", str(solution), "--preset", "small", "--json"]) == 2
    data = json.loads(capsys.readouterr().out)
    assert data["status"] == "error" and "evaluate it on a GPU machine" in data["error"]


# ---- 5. --json: a JSON error object on stdout for every usage or task error ----------------------
def json_error(argv, capsys) -> tuple[int, dict, str]:
    try:
        code = main(argv)
    except SystemExit as e:                  # argparse's own usage errors
        code = e.code
    out = capsys.readouterr()
    lines = out.out.strip().splitlines()
    assert lines, f"{argv}: nothing on stdout; stderr: {out.err}"
    return code, json.loads(lines[-1]), out.err


@pytest.mark.parametrize("argv, says", [
    (["eval", str(RELU_TASK), "/nonexistent/cand.py"], "/nonexistent/cand.py"),
    (["eval", "/nonexistent/task.py", str(RELU_TASK)], "no such task file"),
    (["profile", "/nonexistent/task.py"], "no such task file"),
    (["compile", "/nonexistent/cand.py"], "/nonexistent/cand.py"),
    (["task", "show", "/nonexistent/task.py"], "no such task file"),
    (["task", "show", str(RELU_TASK), "--set", "oops"], "NAME=VALUE"),
    (["skills", "show", "no-such-skill"], "no-such-skill"),
    (["skills", "search"], "give at least one of"),
    (["runs", "show", "no-such-run", "--runs-dir", "/nonexistent/runs"], "no-such-run"),
    (["bench", "/nonexistent/suite"], "/nonexistent/suite"),
])
def test_json_commands_print_a_json_error_for_a_task_or_usage_error(argv, says, capsys):
    code, data, err = json_error(argv + ["--json"], capsys)
    assert code == 2
    assert data["status"] == "error" and says in data["error"], data
    assert f"error: {data['error']}" in err          # a person still reads it on stderr


def test_every_json_command_prints_a_json_error_for_an_argparse_usage_error(capsys):
    with_json = [(path, p) for path, p in parsers()
                 if any("--json" in a.option_strings for a in p._actions)]
    assert len(with_json) >= 12, [path for path, _ in with_json]
    for path, _ in with_json:
        code, data, err = json_error(path.split()[1:] + ["--json", "--no-such-flag"], capsys)
        assert code == 2, path
        # a missing argument is the subcommand's error, an unknown flag the top parser's
        assert data["status"] == "error" and data["error"].startswith("kernelskill"), (path, data)
        assert "--no-such-flag" in data["error"] or "required" in data["error"], (path, data)
        assert "usage:" in err, path


def test_without_json_a_usage_error_leaves_stdout_empty(capsys):
    assert main(["eval", str(RELU_TASK), "/nonexistent/cand.py"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "/nonexistent/cand.py" in out.err


# ---- 6. task show: what FLOPs counts, typed overrides, the preset's constants --------------------
def test_task_show_says_what_the_flop_counter_counts_and_prints_typed_overrides(capsys):
    assert main(["task", "show", "softmax_rows", "--preset", "small", "--set", "dim=512"]) == 0
    out = capsys.readouterr().out
    assert "FLOPs 0 (counts matmul, conv and attention only; elementwise ops and reductions are not counted)" in out
    assert "overrides batch_size=128, dim=512" in out and "'128'" not in out, out
    assert main(["task", "show", "softmax_rows", "--preset", "small", "--set", "dim=512", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["overrides"] == {"batch_size": 128, "dim": 512}
    assert info["constants"] == {"batch_size": 128, "dim": 512}          # the values in force, not the file's
    assert info["flops"] == 0 and "matmul" in info["flops_counted"]
    assert main(["task", "show", str(RELU_TASK), "--set", "batch_size=2", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["constants"] == {"batch_size": 2, "dim": 1000, "numel": 2000}     # a derived one follows


# ---- 7. a help string on every option; the timeouts documented -----------------------------------
def test_every_option_of_every_command_has_a_help_string():
    missing = []
    for path, parser in parsers():
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            if not action.help or action.help == argparse.SUPPRESS:
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
    assert not missing, "options without a help string:\n  " + "\n  ".join(missing)


def test_the_run_and_build_timeouts_are_documented_and_settable(tmp_path, capsys):
    for command in ("eval", "profile"):
        text = " ".join(dict(parsers())[f"kernelskill {command}"].format_help().split())
        assert "--run-timeout S" in text and "default 300" in text and "--build-timeout S" in text, command
        assert "timeout" in text and "killed" in text, command
    docs = (ROOT / "docs" / "evaluator.md").read_text()
    assert "--run-timeout" in docs and "run_timeout_s" in docs and "--build-timeout" in docs
    hangs = tmp_path / "hangs.py"
    hangs.write_text(RAISING_CANDIDATE.replace('raise ValueError("boom from the candidate")',
                                               "while True:\n            y = y + 0"))
    assert main(["eval", str(RELU_TASK), str(hangs), "--no-timing", "--run-timeout", "3"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("⏱ timeout: timed out in the run phase") and "(run timeout 3 s)" in out, out
    assert "--run-timeout S (default 300)" in out


# ---- 8. the runtime_error log tail names the user's file -----------------------------------------
def test_the_runtime_error_log_tail_names_the_users_file_not_the_scratch_copy(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "cand.py").write_text(RAISING_CANDIDATE)
    assert main(["eval", str(RELU_TASK), "mine/cand.py", "--no-timing", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    line = RAISING_CANDIDATE.splitlines().index('        raise ValueError("boom from the candidate")') + 1
    assert data["status"] == "runtime_error" and f"(mine/cand.py:{line}:" in data["message"]
    tail = data["log_tail"]
    assert f'File "mine/cand.py", line {line}, in forward' in tail, tail
    assert "candidate_module" not in tail and "/scratch/" not in tail and "kernelskill-" not in tail, tail
    assert main(["eval", str(RELU_TASK), "mine/cand.py", "--no-timing"]) == 1
    out = capsys.readouterr().out
    assert f'File "mine/cand.py", line {line}, in forward' in out and "candidate_module" not in out
