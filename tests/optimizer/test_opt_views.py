"""The deterministic Analyzer and the failure report the debugger reads."""
from __future__ import annotations

from kernelskill.agents.analyzer import analyze
from kernelskill.agents.views import render_chain, render_failure
from kernelskill.results import (CompileResult, Diagnostic, EvalResult, KernelStat, ProfileResult, TimingStats,
                                 TrialResult, VerifyResult)

from test_opt_search import tree_of


def test_analyzer_summarizes_time_kernels_share_and_bottleneck():
    prof = ProfileResult(device="cuda", candidate=TimingStats(0.5, 0.01, 30), baseline=TimingStats(1.0, 0.02, 30),
                         speedup=2.0, speedup_ci=[1.9, 2.1], custom_share=0.3, bottleneck="memory-bound",
                         roofline={"achieved_gbps": 812.5, "peak_fraction": 0.24},
                         kernels=[KernelStat("my_kernel", 1, 0.15, 0.3, True),
                                  KernelStat("aten::add", 2, 0.35, 0.7, False)])
    text = analyze(EvalResult(status="ok", compile=CompileResult(ok=True, backend="cuda"), profile=prof,
                              message="correct"))
    assert "2.00× [1.90–2.10]" in text and "custom kernels: 30%" in text
    assert text.index("aten::add") < text.index("my_kernel")                  # hottest first
    assert "memory-bound: cut the bytes moved" in text and "peak_fraction=0.24" in text
    assert "most time is outside the custom kernels (aten::add)" in text
    assert "no profile" in analyze(EvalResult(status="compile_error", compile=CompileResult(ok=False, backend="cpp"),
                                             message="x"))
    assert analyze(None) == "not evaluated"


def test_failure_report_has_diagnostics_mismatch_and_log():
    res = EvalResult(status="compile_error", compile=CompileResult(ok=False, backend="cpp", diagnostics=[
        Diagnostic("error", "expected ';'", line=12, source_line="  int x = 1", origin="cpp")]), message="build failed")
    text = render_failure(res)
    assert "line 12: error: expected ';'" in text and "int x = 1" in text
    res = EvalResult(status="incorrect", compile=CompileResult(ok=True, backend="cpp"), message="allclose",
                     verify=VerifyResult(correct=False, mismatch="index (63, 999): got 123, want 0.5",
                                         trials=[TrialResult(0, 1, "task", False, check="allclose", message="1 of 64000")]))
    text = render_failure(res)
    assert "got 123, want 0.5" in text and "trial 0 (task): allclose — 1 of 64000" in text
    t = tree_of(("n1", "n0", "incorrect", None), ("n2", "n1", "compile_error", None, "repair"))
    t.get("n2").diagnosis = "wrong index"
    assert "n1 (plan)" in render_chain(t.repair_chain("n2")) and "first repair" in render_chain(t.repair_chain("n1"))
