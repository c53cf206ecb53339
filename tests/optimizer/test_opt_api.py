"""``kernelskill.optimize`` (the library entry point) and the optimize/resume flags."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

import kernelskill
from kernelskill.cli import build_parser, main
from kernelskill.cli.optimize import _flags
from kernelskill.errors import UserError
from kernelskill.llm import ScriptedLLM
from kernelskill.results import EvalResult
from kernelskill.runs import load_run

from scenario import BUGGY, EVAL_FLAGS, GOOD, RELU_TASK, Scenario


def test_import_kernelskill_stays_free_of_the_optimizer_and_openai():
    code = ("import sys, kernelskill; assert 'kernelskill.optimizer' not in sys.modules; "
            "f = kernelskill.optimize; b = kernelskill.Budget; assert 'openai' not in sys.modules; print(f.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "kernelskill.optimizer"
    with pytest.raises(AttributeError):
        kernelskill.no_such_thing


def test_optimize_with_the_scripted_llm_and_a_budget(tmp_path):
    flags = {**EVAL_FLAGS, "search.epsilon": 0.0, "search.seed": 0}
    seen = []
    run = kernelskill.optimize(RELU_TASK, llm=ScriptedLLM(Scenario()), budget=kernelskill.Budget(attempts=None, tokens=1),
                               runs_dir=tmp_path / "runs", flags=flags, on_event=lambda ev: seen.append(ev.name))
    assert (run.reason, run.attempts) == ("tokens", 1)            # no attempts limit: the token limit stopped it
    assert run.path.parent == tmp_path / "runs" and (run.path / "events.jsonl").is_file()
    state = load_run(run.path)
    assert state.info["config"]["budget"] == {"tokens": 1}
    assert [(n.id, n.status, n.code) for n in state.tree][1:] == [("n1", "incorrect", BUGGY)]
    assert seen[0] == "RunStarted" and seen[-1] == "RunFinished"

    # an int is the attempts budget; the evaluator replays the measured reference (no build, no timing)
    measured = state.tree.root.result
    replay = lambda task, cand, opts=None, **kw: EvalResult.from_dict(measured.to_dict())   # noqa: E731
    task = kernelskill.Task.load(RELU_TASK)
    run = kernelskill.optimize(task, llm=ScriptedLLM(Scenario(coder_codes=[GOOD])), budget=2, runs_dir=tmp_path / "r2",
                               flags=flags, evaluator=replay)
    assert (run.reason, run.attempts, run.best_node) == ("attempts", 2, "n1")
    assert run.best_speedup == measured.speedup
    with pytest.raises(UserError, match="expected an int"):
        kernelskill.optimize(task, llm=ScriptedLLM([]), budget="3")


def test_the_flags_of_optimize_and_their_aliases():
    parser = build_parser()
    args = parser.parse_args(["optimize", "t.py", "--model", "M", "--base-url", "http://h/v1", "--api-key-env", "MY_KEY",
                              "--budget", "7", "--policy", "line", "--device", "cpu", "--run-dir", "D", "--json"])
    assert args.json and args.task == "t.py"
    assert {k: v for k, v in _flags(args).items() if v is not None} == {
        "llm.model": "M", "llm.base_url": "http://h/v1", "llm.api_key_env": "MY_KEY", "budget.attempts": 7,
        "search.policy": "line", "eval.device": "cpu", "runs_dir": "D"}
    old = parser.parse_args(["optimize", "t.py", "--budget-attempts", "4", "--runs-dir", "E"])
    assert (old.budget_attempts, old.runs_dir) == (4, "E")
    res = parser.parse_args(["resume", "R", "--budget", "9", "--run-dir", "F", "--api-key-env", "K", "--json"])
    assert (res.budget_attempts, res.runs_dir, res.api_key_env, res.json) == (9, "F", "K", True)
    with pytest.raises(SystemExit):
        parser.parse_args(["optimize", "t.py", "--policy", "greedy"])


def test_api_key_env_names_the_variable_and_json_ends_stdout(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KS_TEST_NO_SUCH_KEY", raising=False)
    argv = ["optimize", str(RELU_TASK), "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--device", "cpu",
            "--api-key-env", "KS_TEST_NO_SUCH_KEY", "--run-dir", str(tmp_path / "runs"), "--json"]
    assert main(argv) == 2
    cap = capsys.readouterr()
    assert "the API key variable KS_TEST_NO_SUCH_KEY is not set" in cap.err
    last = json.loads(cap.out.strip().splitlines()[-1])
    assert (last["status"], last["run_dir"], last["attempts"], last["best_speedup"]) == ("error", None, 0, None)
    assert "KS_TEST_NO_SUCH_KEY" in last["error"] and not (tmp_path / "runs").exists()
