"""Results round-trip through JSON; candidates get a backend and a stable hash."""
from __future__ import annotations

import json

from kernelskill import Candidate
from kernelskill.results import (CompileResult, Diagnostic, Env, EvalResult, KernelStat, ProfileResult,
                                 TimingStats, TrialResult, VerifyResult)


def test_eval_result_json_round_trip():
    r = EvalResult(status="ok", compile=CompileResult(ok=True, backend="cpp", diagnostics=[
        Diagnostic("warning", "unused", line=3, column=1, origin="cpp")]),
        verify=VerifyResult(correct=True, trials=[TrialResult(0, 1, "task", True, 0.0, 0.0, 0.0)]),
        profile=ProfileResult(device="cpu", candidate=TimingStats(1.0, 0.1, 10), baseline=TimingStats(2.0, 0.2, 10),
                              speedup=2.0, speedup_ci=[1.9, 2.1], kernels=[KernelStat("k", 1, 1.0, 1.0, True)],
                              custom_share=1.0),
        env=Env(torch="2.13"), flags=["review: x"])
    text = r.to_json()
    data = json.loads(text)
    assert data["speedup"] == 2.0 and data["custom_share"] == 1.0 and data["status"] == "ok"
    back = EvalResult.from_json(text)
    assert back == r
    assert isinstance(back.compile.diagnostics[0], Diagnostic)
    assert isinstance(back.profile.kernels[0], KernelStat)


def test_backend_detection_and_hash():
    cpp = 'from torch.utils.cpp_extension import load_inline\next = load_inline(name="a", cpp_sources="x")\n'
    cuda = 'from torch.utils.cpp_extension import load_inline\next = load_inline("a", "x", cuda_sources="y")\n'
    cuda_pos = 'from torch.utils.cpp_extension import load_inline\next = load_inline("a", "x", "y")\n'
    tri = "import triton\nimport triton.language as tl\n@triton.jit\ndef k(x):\n    pass\n"
    assert Candidate.from_source(cpp).backend == "cpp"
    assert Candidate.from_source(cuda).backend == "cuda"
    assert Candidate.from_source(cuda_pos).backend == "cuda"
    assert Candidate.from_source(tri).backend == "triton"
    assert Candidate.from_source("import torch\n").backend == "none"
    assert Candidate.from_source(cpp).hash == Candidate.from_source(cpp.replace("\n", "  \n")).hash
    assert Candidate.from_source(cpp).hash != Candidate.from_source(cuda).hash
