"""`kernelskill optimize | resume | runs` end to end, the agents served by a real chat-completions
server over HTTP (streaming, per-role models, injected 429/500 retried)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelskill.cli import main

from chat_server import ChatServer
from scenario import RELU_TASK, Scenario, project_toml



@pytest.fixture
def project(tmp_path, monkeypatch):
    for name in ("KERNELSKILL_BASE_URL", "KERNELSKILL_MODEL", "KERNELSKILL_API_KEY_ENV"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)

    def write(url: str) -> None:
        (tmp_path / "kernelskill.toml").write_text(project_toml(url, agents=False))
    return write


def test_optimize_over_http_then_runs_and_resume(project, capsys):
    script = Scenario()
    with ChatServer(script.from_request, failures=[429, 500]) as server:
        project(server.url)
        code = main(["optimize", str(RELU_TASK), "--budget-attempts", "2", "--seed", "3", "--json"])
        out = json.loads(capsys.readouterr().out)
        assert code == (0 if out["improved"] else 1)
        assert (out["reason"], out["attempts"], out["best_node"]) == ("attempts", 2, "n2")
        assert server.statuses[:3] == [429, 500, 200]
        temps = {r["model"]: r["temperature"] for r in server.requests}
        assert temps == {"planner-model": 0.8, "coder-model": 0.1, "debugger-model": 0.1}
        assert all(r["stream"] for r in server.requests)

        run_id, run = out["run_id"], Path(out["path"])
        assert out["best_file"] == str(run / "best.py") and (run / "best.py").is_file()
        assert sorted(p.name for p in (run / "nodes").iterdir()) == ["n0.py", "n1.py", "n2.py"]
        assert (run / "report.md").is_file() and (run / "events.jsonl").stat().st_size > 0
        assert main(["runs", "list", "--json"]) == 0
        listed = json.loads(capsys.readouterr().out)
        assert [(r["id"], r["state"], r["attempts"], r["best_node"]) for r in listed] == [(run_id, "attempts", 2, "n2")]
        assert main(["runs", "show", run_id[:15]]) == 0
        assert "| n1 | n0 | plan |" in capsys.readouterr().out

        script.coder_codes = []           # the next candidate is the fixed code again: not evaluated
        code = main(["resume", run_id, "--budget-attempts", "3"])
        captured = capsys.readouterr()
        assert f"resuming {run_id}" in captured.err and "[3/3] n3" in captured.err
        assert "identical to n2" in captured.err and "attempts after 3 attempts" in captured.out

    assert main(["optimize", str(RELU_TASK), "--budget-attempts", "1"]) == 2      # the server is gone
    assert "is unreachable" in capsys.readouterr().err
    assert main(["runs", "list", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 1                         # no run was started


def test_optimize_without_an_endpoint_is_a_usage_error(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("KERNELSKILL_BASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(["optimize", str(RELU_TASK), "--device", "cpu"]) == 2
    assert "no LLM endpoint: set base_url in kernelskill.toml [llm] or KERNELSKILL_BASE_URL" in capsys.readouterr().err
    assert main(["resume", "nope"]) == 2
    assert "no run 'nope'" in capsys.readouterr().err
