"""`kernelskill optimize --device cuda` end to end on a real GPU, with the test chat-completions
server standing in for the LLM: a CUDA plan that does not compile, the debugger's fix (correct but
slow), a fast CUDA kernel; the budget stops the run; best.py is the fast kernel.

Run on the GPU machine: python3 -m pytest -m gpu -q (needs the openai package: carry its wheels)
"""
from __future__ import annotations

import importlib.util
import os
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


# KernelBench's level1/19_ReLU as fetched (benchmarks/kernelbench_chunk.sh says how .kb/ is filled;
# KERNELBENCH_DIR points elsewhere). Its shipped size: 4096 × 393216 fp32, 6.4 GB a tensor.
KB_DIR = Path(os.environ.get("KERNELBENCH_DIR", Path(__file__).resolve().parents[2] / ".kb/KernelBench"))
KB_RELU = KB_DIR / "level1" / "19_ReLU.py"
# relu, four floats a thread (float4 loads and stores), a grid-stride loop: 19_ReLU's 1.6e9 elements.
KB_FAST = r'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = "torch::Tensor relu4(torch::Tensor x);"
CUDA_SRC = r"""
#include <ATen/cuda/CUDAContext.h>
__global__ void relu4_kernel(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
        float4 v = x[i];
        v.x = fmaxf(v.x, 0.f); v.y = fmaxf(v.y, 0.f); v.z = fmaxf(v.z, 0.f); v.w = fmaxf(v.w, 0.f);
        y[i] = v;
    }
}
torch::Tensor relu4(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.numel() % 4 == 0, "relu4: contiguous CUDA, numel % 4 == 0");
    auto y = torch::empty_like(x);
    int64_t n4 = x.numel() / 4;
    int blocks = (int)std::min<int64_t>((n4 + 255) / 256, 132 * 32);
    relu4_kernel<<<blocks, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        reinterpret_cast<const float4*>(x.data_ptr<float>()), reinterpret_cast<float4*>(y.data_ptr<float>()), n4);
    return y;
}
"""
ext = load_inline(name="ks_gpu_kb_relu4", cpp_sources=CPP, cuda_sources=CUDA_SRC, functions=["relu4"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu4(x)
'''


@pytest.mark.skipif(not KB_RELU.is_file(), reason=f"needs KernelBench's {KB_RELU} (carry .kb; see kernelbench_chunk.sh)")
def test_optimize_a_shipped_kernelbench_problem_at_its_size(tmp_path, monkeypatch, capsys):
    """Issue 48 item 6: `kernelskill optimize` on KernelBench's own file at its shipped size, the model
    scripted through the HTTP chat server: one plan, one CUDA kernel, verified under the memory plan
    and timed against eager; the run's record says where its seconds went."""
    from chat_server import ChatServer
    from scenario import ROLE_MODELS, allowed_skills, coder_reply, planner_reply, project_toml
    from test_opt_e2e import last_json

    from kernelskill.cli import main
    from kernelskill.runs import load_run

    def reply(body: dict) -> str:
        role = ROLE_MODELS[body["model"]]
        if role == "planner":
            return planner_reply(allowed_skills(body["messages"])[0], "relu in one pass, float4 loads",
                                 plan="one CUDA kernel: float4 loads and stores, a grid-stride loop", echo=False)
        assert role == "coder", f"{role} was called: the kernel compiles and is correct"
        return coder_reply(KB_FAST)

    for name in ("KERNELSKILL_BASE_URL", "KERNELSKILL_MODEL", "KERNELSKILL_API_KEY_ENV"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    with ChatServer(reply) as server:
        (tmp_path / "kernelskill.toml").write_text(project_toml(server.url, {"eval.trials": 3}))
        code = main(["optimize", str(KB_RELU), "--budget", "1", "--device", "cuda", "--run-dir",
                     str(tmp_path / "runs"), "--json"])
    out = last_json(capsys.readouterr().out)
    state = load_run(Path(out["run_dir"]))
    n0, n1 = list(state.tree)
    assert (n1.kind, n1.status) == ("plan", "ok"), (n1.status, n1.result.message if n1.result else None)
    r = n1.result
    assert r.env.device.startswith("cuda") and r.profile.custom_share > 0.5
    assert r.verify.memory_plan["inputs"] == "seeds", r.verify.memory_plan      # 6.4 GB tensors: not stored
    # The relu is memory bound: a float4 kernel moves the same bytes as eager's, so it is close to it.
    assert 0.7 < n1.speedup < 1.5, n1.speedup
    assert r.seconds > 0 and r.phases, "the evaluation's seconds are recorded, phase by phase"
    print(f"\n19_ReLU at 4096x393216: speedup {n1.speedup:.3f}, evaluation {r.seconds:.1f} s, phases "
          + ", ".join(f"{k} {v:.1f}" for k, v in r.phases.items()))
    assert code == (0 if out["best_speedup"] > 1.0 else 1)
