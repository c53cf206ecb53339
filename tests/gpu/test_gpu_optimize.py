"""`kernelskill optimize --device cuda` end to end on a real GPU, with the test chat-completions
server standing in for the LLM: a CUDA plan that does not compile, the debugger's fix (correct but
slow), a fast CUDA kernel; the budget stops the run; best.py is the fast kernel.

Run on the GPU machine: python3 -m pytest -m gpu -q (needs the openai package: carry its wheels)
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(importlib.util.find_spec("openai") is None, reason="needs the openai package")]

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "optimizer"))

from gpu.test_gpu_backends import CUDA  # noqa: E402

FAST = CUDA
# The same extension (a cached build), its kernel launched 201 times: correct, and slower than eager.
SLOW = CUDA.replace("        return ext.relu2(x)\n",
                    "        y = ext.relu2(x)\n        for _ in range(200):\n            y = ext.relu2(x)\n"
                    "        return y\n")
# nvcc rejects this: a missing ';' in the kernel body (the line is mapped back into the candidate).
BROKEN = CUDA.replace("y[i] = x[i] > 0.f ? 2.f * x[i] : 0.f;", "y[i] = x[i] > 0.f ? 2.f * x[i] : 0.f").replace(
    'name="ks_gpu_relu2"', 'name="ks_gpu_relu2_broken"')


def test_optimize_on_cuda_through_the_http_chat_server(tmp_path, monkeypatch, capsys):
    from chat_server import ChatServer
    from scenario import (ROLE_MODELS, allowed_skills, coder_reply, current_code, debugger_reply, planner_reply,
                          project_toml)
    from test_opt_e2e import last_json

    from kernelskill.cli import main
    from kernelskill.runs import load_run
    from helpers import RELU_TASK

    calls: list[str] = []

    def reply(body: dict) -> str:
        role = ROLE_MODELS[body["model"]]
        calls.append(role)
        n = calls.count(role)
        if role == "planner":
            threads = f"{64 << n} threads per block"           # what later tries change (the repeat check)
            return planner_reply(allowed_skills(body["messages"])[0], f"one CUDA kernel, variant {n}",
                                 differs=threads if n > 1 else "", plan=f"write relu2 in CUDA, {threads}",
                                 code=current_code(body["messages"]))
        if role == "coder":
            return coder_reply(BROKEN if n == 1 else FAST)
        return debugger_reply(SLOW, diagnosis="missing ';' in relu2_kernel")

    for name in ("KERNELSKILL_BASE_URL", "KERNELSKILL_MODEL", "KERNELSKILL_API_KEY_ENV"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    with ChatServer(reply) as server:
        ev = {"eval.trials": 3, "eval.warmup": 2, "eval.min_reps": 30, "eval.max_reps": 100, "eval.time_cap_s": 1.0}
        (tmp_path / "kernelskill.toml").write_text(project_toml(server.url, ev))
        code = main(["optimize", str(RELU_TASK), "--budget", "3", "--device", "cuda", "--policy", "stark",
                     "--run-dir", str(tmp_path / "runs"), "--seed", "3", "--json"])
    out = last_json(capsys.readouterr().out)
    assert (out["status"], out["attempts"]) == ("attempts", 3)
    state = load_run(Path(out["run_dir"]))
    n0, n1, n2, n3 = list(state.tree)
    assert (n1.kind, n1.status) == ("plan", "compile_error")
    assert (n2.kind, n2.parent, n2.status) == ("repair", "n1", "ok") and n2.speedup < 1.0
    assert (n3.kind, n3.status) == ("plan", "ok") and n3.speedup > n2.speedup
    assert n3.result.env.device.startswith("cuda") and n3.result.profile.custom_share > 0.5
    assert (Path(out["run_dir"]) / "best.py").read_text() == FAST
    assert code == (0 if out["best_speedup"] > 1.0 else 1)
