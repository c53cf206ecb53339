"""The deterministic Analyzer and the failure report the debugger reads."""
from __future__ import annotations

import pytest

from kernelskill.agents.analyzer import analyze
from kernelskill.agents.views import render_chain, render_failure
from kernelskill.results import (CompileResult, Diagnostic, EvalResult, KernelStat, ProfileResult, Roofline,
                                 TimingStats, TrialResult, VerifyResult)

from test_opt_search import tree_of


def test_analyzer_summarizes_time_kernels_share_and_bottleneck():
    prof = ProfileResult(device="cuda", candidate=TimingStats(0.5, 0.01, 30), baseline=TimingStats(1.0, 0.02, 30),
                         speedup=2.0, speedup_ci=[1.9, 2.1], custom_share=0.3, bottleneck="memory-bound",
                         roofline=Roofline.from_dict({"achieved_gbps": 812.5, "peak_fraction": 0.24}),
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


# ---- feedback that is true (issue 48, item 1) -------------------------------------------------------
def _roofed(device: str, roof: Roofline, bottleneck: str = "compute-bound") -> str:
    prof = ProfileResult(device=device, candidate=TimingStats(4.4, 0.01, 30), baseline=TimingStats(26.9, 0.1, 30),
                         speedup=6.1, speedup_ci=[6.0, 6.2], bottleneck=bottleneck, roofline=roof)
    return analyze(EvalResult(status="ok", compile=CompileResult(ok=True, backend="cpp"), profile=prof,
                              message="correct"))


def test_the_roof_is_the_hardwares_never_the_librarys_measured_rate():
    from kernelskill.evaluate.judge import roofline
    cpu = {"bandwidth": 20e9, "peak_flops": {"float32": 0.21e12}, "limits": {"fp32_fma_tflops": 0.52}}
    # level2/82 on a 2-core CPU: 1.19 GFLOP in 4.4 ms = 0.27 TFLOP/s, above the measured matmul rate
    # (0.21), half the FMA peak (0.52).
    roof, _ = roofline.analyse(int(1.19e9), 4_000_000, cpu, "float32", False, measured_ms=4.4, gpu=False)
    assert roof.fraction > 1 and roof.hw_fraction == pytest.approx(1.19e9 / 0.52e12 * 1e3 / 4.4, rel=1e-3)
    text = _roofed("cpu", roof)
    assert "AT THE ROOF" not in text and "against the hardware it runs at 52%" in text
    assert "SIMD FMA" in text and "no tensor cores on a CPU" in text and "(tensor cores" not in text
    # The library's rate reached, the hardware's not: keep going with the same algorithm.
    near, _ = roofline.analyse(int(0.9e9), 4_000_000, cpu, "float32", False, measured_ms=4.4, gpu=False)
    assert 0.9 <= near.fraction <= 1.0 and near.hw_fraction < 0.9
    text = _roofed("cpu", near)
    assert "AT THE ROOF" not in text and "near the library's measured rate" in text and "can still go faster" in text
    # At 90 % of the hardware's limits: the roof, said as such.
    at, _ = roofline.analyse(int(2.1e9), 4_000_000, cpu, "float32", False, measured_ms=4.4, gpu=False)
    assert 0.9 <= at.hw_fraction <= 1.0
    assert "AT THE ROOF: this code runs at 92% of the hardware's limits (0.52 TFLOP/s" in _roofed("cpu", at)
    # No hardware limit known: never a roof.
    bare = {"bandwidth": 20e9, "peak_flops": {"float32": 0.21e12}}
    none, _ = roofline.analyse(int(0.9e9), 4_000_000, bare, "float32", False, measured_ms=4.4, gpu=False)
    assert none.hw_fraction is None
    text = _roofed("cpu", none)
    assert "AT THE ROOF" not in text and "the hardware's limit is not known here" in text


def test_hardware_peaks_per_dtype_at_the_tasks_accuracy():
    from kernelskill.evaluate.judge import roofline
    h100 = {"bandwidth": 3.0e12, "peak_flops": {"float32": 51e12, "tf32": 400e12, "bfloat16": 700e12},
            "limits": {"fp32_fma_tflops": 66.9, "tensor": {"tf32": 494.7, "tf32x3": 164.9, "bfloat16": 989.4}}}
    assert roofline.hardware_peak(h100, "float32") == pytest.approx(164.9e12)              # 3xTF32 at fp32 accuracy
    assert roofline.hardware_peak(h100, "float32", allow_tf32=True) == pytest.approx(494.7e12)
    assert roofline.hardware_peak(h100, "bfloat16") == pytest.approx(989.4e12)
    assert roofline.hardware_peak({"peak_flops": {"float32": 1e12}}, "float32") == 0.0
    roof, _ = roofline.analyse(int(2e12), int(1e8), h100, "float32", False, measured_ms=40.0)
    text = _roofed("cuda", roof)
    assert "3xTF32 split precision keeps fp32's accuracy" in text and "164.9 TFLOP/s here" in text
    roof, _ = roofline.analyse(int(2e12), int(1e8), h100, "float32", True, measured_ms=40.0)
    assert "TF32 tensor cores are allowed by this task's flags" in _roofed("cuda", roof)
    roof, _ = roofline.analyse(int(2e12), int(1e8), h100, "bfloat16", False, measured_ms=40.0)
    assert "(bfloat16 tensor cores" in _roofed("cuda", roof)


def test_the_planner_is_told_why_the_search_starts_again_from_the_reference():
    """Issue 48, item 1: late in a run the last attempt restarted from the reference instead of
    improving the best, with no word why; now the planner reads the policy's reason and the best."""
    from kernelskill.agents.team import restart_note
    from kernelskill.search import StarkPolicy
    t = tree_of(("n1", "n0", "ok", 3.2), ("n2", "n1", "incorrect", None), ("n3", "n0", "ok", 1.4))
    sel = next(s for s in StarkPolicy(epsilon=1.0, seed=3).expandable(t) if s.node_id == "n0")
    note = restart_note(t, t.get("n0"), "explore (ε=1) among 3")
    assert "Why from the reference again: the search chose it (explore (ε=1) among 3)" in note
    assert "the best so far is n1 at 3.20×" in note and "2 working candidates" in note
    assert "a plan unlike those in 'What the search knows'" in note and sel.action == "expand"
    # Early (nothing works yet) or from a candidate: nothing to explain.
    assert restart_note(tree_of(("n1", "n0", "incorrect", None)), tree_of().get("n0"), "exploit") == ""
    assert restart_note(t, t.get("n1"), "exploit: best node") == ""


def test_the_machines_state_now_is_told_when_the_last_timing_was_not_good():
    from kernelskill.agents.team import machine_now
    from kernelskill.results import MeasurementQuality
    t = tree_of(("n1", "n0", "ok", 2.0), ("n2", "n1", "ok", 2.4))
    assert machine_now(t) == ""                                   # never timed badly: nothing to say
    prof = ProfileResult(device="cpu", candidate=TimingStats(1.0, 0.5, 30), baseline=TimingStats(2.4, 0.9, 30),
                         speedup=2.4, speedup_ci=[1.5, 3.9],
                         quality=MeasurementQuality(verdict="contended",
                                                    reasons=["other processes used 1.3 of 2 CPU cores"]))
    t.get("n2").result = EvalResult(status="ok", compile=CompileResult(ok=True, backend="cpp"), profile=prof)
    note = machine_now(t)
    assert "the last timing (n2) was contended: other processes used 1.3 of 2 CPU cores" in note
    assert "a small difference in speed read now means little" in note


def test_every_prompt_shows_a_candidates_own_time_its_interval_and_its_label():
    """Issue 48, item 2: the coder was shown n2 as "correct, 10.55×" without its contended label, and
    the planner saw siblings only as ratios to eager runs that drifted; now each number carries its
    interval, its quality when not good, and the candidate's and eager's times."""
    from kernelskill.agents.views import headline, render_relatives, render_tried
    from kernelskill.results import MeasurementQuality
    t = tree_of(("n1", "n0", "ok", 8.39), ("n2", "n0", "ok", 10.55))
    for nid, sp, ci, cand, eager, q in (("n1", 8.39, [8.30, 8.51], 3.209, 26.95, "good"),
                                        ("n2", 10.55, [9.1, 12.0], 11.47, 121.0, "contended")):
        prof = ProfileResult(device="cpu", candidate=TimingStats(cand, 0.1, 30), baseline=TimingStats(eager, 1.0, 30),
                             speedup=sp, speedup_ci=ci, quality=MeasurementQuality(verdict=q))
        t.get(nid).result = EvalResult(status="ok", compile=CompileResult(ok=True, backend="cpp"), profile=prof)
    assert "n2 (from n0; skill none): ok, 10.55× [9.10–12.00] (contended), 11.470 ms vs eager 121.000 ms" \
        in headline(t, t.get("n2"))
    assert "8.39× [8.30–8.51], 3.209 ms vs eager 26.950 ms" in headline(t, t.get("n1"))
    assert "(contended)" not in headline(t, t.get("n1"))
    rel = render_relatives(t, "n0")
    assert "correct, 10.55× [9.10–12.00] (contended), 11.470 ms" in rel
    assert "→ ok 10.55× [9.10–12.00] (contended)" in render_tried(t, "n0")
