"""Hardware limits beside the library rates, and a fraction above 100 % that always names why.

Numbers computed by hand from published figures (H100 SXM: 132 SMs, 1980 MHz max SM clock, 128
FP32 lanes per SM; A100: 108 SMs, 1410 MHz, 64 lanes)."""
from __future__ import annotations

import re

import pytest

from kernelskill.agents.analyzer import analyze
from kernelskill.cli.report import _print_roofline
from kernelskill.evaluate import machine
from kernelskill.evaluate.judge import roofline
from kernelskill.evaluate.judge.verdict import _roofline
from kernelskill.results import EvalResult, CompileResult, KernelStat, ProfileResult, TimingStats
from kernelskill.task import Task
from kernelskill.vocab import Bottleneck

from helpers import RELU_TASK, ref_meta
from mcp_server.advice import _roof

H100_LIMITS = machine.gpu_limits(9, 0, 132, 1980.0, "test")
# The H100 as measured (docs/evaluator.md): cuBLAS fp32 without TF32 51.2 TFLOP/s, TF32 396; copy 2899 GB/s.
H100 = {"name": "H100", "bandwidth": 2.899e12, "peak_flops": {"float32": 51.2e12, "tf32": 396e12},
        "launch_us": 10.8, "measured_at": "now", "limits": H100_LIMITS, "cache_bytes": 50 << 20, "cache": "L2"}
CPU = {"name": "cpu", "bandwidth": 10e9, "peak_flops": {"float32": 0.1e12}, "launch_us": 6.0, "measured_at": "now",
       "limits": {"fp32_fma_tflops": 0.2688, "tensor": {}}, "cache_bytes": 32 << 20, "cache": "LLC"}


# ---- the hardware limits --------------------------------------------------------------------------
def test_fp32_fma_and_tensor_core_limits_per_architecture():
    assert H100_LIMITS["fp32_fma_tflops"] == pytest.approx(132 * 128 * 2 * 1.98e9 / 1e12, rel=1e-3)   # 66.9
    assert H100_LIMITS["tensor"]["tf32"] == pytest.approx(132 * 2048 * 1.98e9 / 1e12, rel=1e-3)       # 535
    assert H100_LIMITS["tensor"]["bfloat16"] == pytest.approx(2 * H100_LIMITS["tensor"]["tf32"], rel=1e-3)
    assert H100_LIMITS["tensor"]["tf32x3"] == pytest.approx(H100_LIMITS["tensor"]["tf32"] / 3, rel=1e-2)
    a100 = machine.gpu_limits(8, 0, 108, 1410.0)
    assert a100["fp32_fma_tflops"] == pytest.approx(19.5, abs=0.05)                                   # 64 lanes
    assert a100["tensor"]["float16"] == pytest.approx(312, abs=1) and a100["tensor"]["tf32"] == pytest.approx(156, abs=1)
    # An architecture the tables do not hold, or no clock: said, never guessed.
    odd = machine.gpu_limits(11, 0, 100, 2000.0)
    assert odd["fp32_fma_tflops"] is None and odd["tensor"] == {} and len(odd["unknown"]) == 2
    assert machine.gpu_limits(9, 0, 132, None)["fp32_fma_tflops"] is None
    assert "whitepaper" in H100_LIMITS["source"] and "Programming Guide" in H100_LIMITS["source"]


def test_the_cpu_fma_peak_is_computed_from_this_machines_flags_and_clock():
    lim = machine.cpu_limits(2)
    flags = set(open("/proc/cpuinfo").read().split())
    if "fma" not in flags and "avx512f" not in flags:
        assert lim["fp32_fma_tflops"] is None and lim["unknown"]
        return
    lanes = 16 if "avx512f" in flags else 8
    assert lim["fp32_lanes"] == lanes and lim["cores"] <= 2 and lim["fma_units"] in (1, 2)
    if lim["clock_mhz"]:
        want = lim["cores"] * lim["fma_units"] * lanes * 2 * lim["clock_mhz"] * 1e6 / 1e12
        assert lim["fp32_fma_tflops"] == pytest.approx(want, rel=1e-3)
        assert re.search(r"\d+ cores × \d FMA units × \d+ fp32 lanes", lim["source"])
    assert machine.llc_bytes() is None or machine.llc_bytes() > 1 << 16


def test_a_limit_the_measured_library_rate_beats_is_withdrawn_as_unknown():
    """On this 2-core container /proc/cpuinfo shows the nominal 2100 MHz while the AVX-512 matmul
    runs at a turbo clock: oneDNN's fp32 matmul measured 255-315 GFLOP/s against 268.8 computed."""
    cpu = {"cores": 2, "fma_units": 2, "fp32_lanes": 16, "clock_mhz": 2100.0, "fp32_fma_tflops": 0.2688,
           "unknown": [], "tensor": {}}
    got = machine.reconcile_limits(cpu, {"float32": 315e9})
    assert got["fp32_fma_tflops"] is None and got["fp32_fma_tflops_at_clock_read"] == 0.2688
    assert "2461 MHz implied" in got["unknown"][0] and cpu["fp32_fma_tflops"] == 0.2688     # the input as it was
    assert machine.reconcile_limits(cpu, {"float32": 200e9})["fp32_fma_tflops"] == 0.2688
    # The H100's measured rates (fp32 51.2, TF32 396, bf16 734 TFLOP/s) are all below its limits.
    kept = machine.reconcile_limits(H100_LIMITS, {"float32": 51.2e12, "tf32": 396e12, "bfloat16": 734e12})
    assert kept["fp32_fma_tflops"] == H100_LIMITS["fp32_fma_tflops"] and kept["tensor"] == H100_LIMITS["tensor"]
    assert kept["unknown"] == []


# ---- a fraction above 1 names why ----------------------------------------------------------------------
def test_memory_roof_above_the_floor_in_the_cpus_caches():
    # 8 MB of compulsory bytes at 10 GB/s: a 0.8 ms floor; measured 0.36 ms → 222 % (the case seen).
    roof, cls = roofline.analyse(0, 8e6, CPU, "float32", False, 0.36, launches=1, gpu=False)
    assert roof.fraction == pytest.approx(2.222, rel=1e-3)
    assert roof.over_roof_reason == roofline.OVER_CPU_CACHE and "MiB" in roof.over_roof_detail
    assert cls == Bottleneck.memory_bound and "arithmetic intensity only" in roof.bottleneck_note
    # Beyond the cache: no reason the hardware gives, and no class from counts in doubt.
    roof, cls = roofline.analyse(0, 80e6, CPU, "float32", False, 3.6, launches=1, gpu=False)
    assert roof.over_roof_reason == roofline.OVER_MISCOUNT and cls is None
    assert "no bottleneck class" in roof.bottleneck_note


def test_memory_roof_above_the_floor_on_a_gpu():
    # 1 GB at 2.9 TB/s: far beyond the 50 MiB L2, 9 % above the floor → the counts, not the cache.
    floor = 1e9 / 2.899e12 * 1e3
    roof, cls = roofline.analyse(0, 1e9, H100, "float32", False, floor / 1.09)
    assert roof.over_roof_reason == roofline.OVER_MISCOUNT and cls is None
    # 2 % above: within the margin a copy benchmark leaves below a streaming kernel.
    roof, cls = roofline.analyse(0, 1e9, H100, "float32", False, floor / 1.02)
    assert roof.over_roof_reason == roofline.OVER_MARGIN and cls == Bottleneck.memory_bound
    # A working set the L2 holds, or an L2 not flushed before each call.
    small = 16 << 20
    roof, _ = roofline.analyse(0, small, H100, "float32", False, small / 2.899e12 * 1e3 / 1.5)
    assert roof.over_roof_reason == roofline.OVER_L2
    roof, _ = roofline.analyse(0, 1e9, H100, "float32", False, floor / 1.5, flushed=False)
    assert roof.over_roof_reason == roofline.OVER_L2 and "not flushed" in roof.over_roof_detail
    # At or below the floor: no reason, the plain class.
    roof, cls = roofline.analyse(0, 1e9, H100, "float32", False, floor * 1.25, launches=1, busy_ms=floor * 1.2)
    assert roof.over_roof_reason is None and cls == Bottleneck.memory_bound


GEMM_FLOPS = 2 * 4096 ** 3                                 # 137 GFLOP: a 2.68 ms floor at 51.2 TFLOP/s
GEMM_BYTES = 3 * 4096 * 4096 * 4


def _gemm_ms(tflops: float) -> float:
    return GEMM_FLOPS / (tflops * 1e12) * 1e3


@pytest.mark.parametrize("tflops, reason", [
    (60.0, roofline.OVER_WITHIN_LIMIT),        # above cuBLAS's fp32 rate, below the 66.9 FMA peak
    (150.0, roofline.OVER_TENSOR),             # a correct 3xTF32 kernel: above the FMA roof, below TF32's
    (700.0, roofline.OVER_MISCOUNT),           # beyond every limit of the hardware
])
def test_compute_roof_above_the_library_rate(tflops, reason):
    roof, cls = roofline.analyse(GEMM_FLOPS, GEMM_BYTES, H100, "float32", False, _gemm_ms(tflops), launches=1,
                                 busy_ms=_gemm_ms(tflops))
    assert roof.peak_tflops == pytest.approx(51.2) and roof.fma_peak_tflops == pytest.approx(66.91, abs=0.01)
    assert roof.tensor_peak_tflops == pytest.approx(535.3, abs=0.1)
    assert roof.over_roof_reason == reason
    assert cls == (None if reason == roofline.OVER_MISCOUNT else Bottleneck.compute_bound)


def _prof(ms: float) -> ProfileResult:
    t = TimingStats(median_ms=ms, iqr_ms=0.0, n=10)
    return ProfileResult(device="cuda", candidate=t, baseline=TimingStats(median_ms=5.0, iqr_ms=0.0, n=10),
                         kernels=[KernelStat("k", 1, ms, 1.0, True)])


def test_a_tensor_core_kernel_faster_than_the_library_floor_is_explained_not_alarmed():
    """A correct 3xTF32 tensor-core kernel was reported "below the roofline floor"."""
    task = Task.load(RELU_TASK)                                     # float32, TF32 off
    meta = ref_meta(flops=GEMM_FLOPS, bytes=GEMM_BYTES)
    prof, flags = _prof(_gemm_ms(150.0)), []
    _roofline(prof, task, meta, H100, flags)
    assert not any("below the roofline floor" in f for f in flags), flags
    assert any("explained: " + roofline.OVER_TENSOR in n for n in prof.notes), prof.notes
    assert prof.roofline.limits["fp32_fma_tflops"] == pytest.approx(66.91, abs=0.01)
    assert prof.bottleneck == Bottleneck.compute_bound
    # Beyond every hardware limit: still the review flag.
    prof, flags = _prof(_gemm_ms(700.0)), []
    _roofline(prof, task, meta, H100, flags)
    assert any("below the roofline floor" in f for f in flags) and prof.bottleneck is None


def test_the_texts_people_read_name_the_reason_never_a_bare_fraction_above_100():
    task = Task.load(RELU_TASK)
    prof = _prof(_gemm_ms(150.0))
    _roofline(prof, task, ref_meta(flops=GEMM_FLOPS, bytes=GEMM_BYTES), H100, [])
    frac = prof.roofline.fraction
    assert frac > 1
    bare = f"{frac:.0%}"
    texts = {"fraction_text": roofline.fraction_text(prof.roofline)}
    lines: list[str] = []
    _print_roofline(prof, lines.append)
    texts["eval/profile output"] = "\n".join(lines)
    texts["mcp advice"] = _roof(prof)
    texts["analyzer"] = analyze(EvalResult(status="ok", compile=CompileResult(ok=True, backend="cuda"),
                                                     profile=prof))
    for where, text in texts.items():
        assert roofline.OVER_TENSOR in text, (where, text)
        for m in re.finditer(re.escape(bare) + "|" + re.escape(f"{frac:.1%}"), text):
            assert "above the roof" in text[m.end():m.end() + 80], (where, text)
    # The planner sees the library rate and the hardware limits side by side.
    assert "fp32 FMA peak 66.91 TFLOP/s" in texts["eval/profile output"]
    assert "fma_peak_tflops=66.9" in texts["analyzer"] and "peak_tflops=51.2" in texts["analyzer"]
    assert roofline.fraction_text({"fraction": 0.81}) == "81% of the floor's pace"
