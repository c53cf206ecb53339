"""Results round-trip through JSON; candidates get a backend and a stable hash."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from kernelskill import Candidate
from kernelskill.bench.store import Row
from kernelskill.results import (CompileResult, Diagnostic, Env, EvalResult, KernelStat, ProfileResult, Roofline,
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


# ---- the roofline record: typed, its JSON as the dict it replaced wrote it --------------------
RESULTS = Path(__file__).parents[1] / "benchmarks" / "results"


def _roofline() -> Roofline:
    return Roofline(flops=0, bytes=512000, intensity=0.0, ridge=12.5, peak_tflops=0.1, bandwidth_gbs=8.0,
                    roof="memory", ceilings="cpu (measured now)", floor_ms=0.064, fraction=0.5,
                    achieved_gbs=4.0, achieved_tflops=0.0, measured="p10 of the timed calls", launches=1,
                    launch_us=6.0, dtype="float32", tf32_allowed=False, fma_peak_tflops=0.27,
                    limits={"fp32_fma_tflops": 0.27, "tensor": {}}, eager_fraction=0.4, binds=False,
                    raised_ceiling={"ceiling": "bandwidth", "from": 8e9, "to": 9e9, "stored": True})


def _result(roof: Roofline | None) -> EvalResult:
    return EvalResult(status="ok", compile=CompileResult(ok=True, backend="cpp"),
                      profile=ProfileResult(device="cpu", candidate=TimingStats(0.128, 0.01, 10), roofline=roof))


def test_a_roofline_round_trips_through_the_result_json():
    roof = _roofline()
    data = json.loads(_result(roof).to_json())
    wire = data["profile"]["roofline"]
    # The fields set, and only those: a field left None was never a key of the dict this replaced.
    assert wire["fraction"] == 0.5 and wire["raised_ceiling"]["stored"] is True and wire["tf32_allowed"] is False
    assert "hw_fraction" not in wire and "over_roof_reason" not in wire and "extra" not in wire
    assert set(wire) == {k for k, v in dataclasses.asdict(roof).items() if v is not None and k != "extra"}
    back = EvalResult.from_dict(data)
    assert isinstance(back.profile.roofline, Roofline) and back.profile.roofline == roof
    assert back.profile.roofline.fraction == 0.5 and back.profile.roofline.limits["fp32_fma_tflops"] == 0.27


def test_no_roofline_is_the_empty_object_it_always_was():
    data = json.loads(_result(None).to_json())
    assert data["profile"]["roofline"] == {}
    assert EvalResult.from_dict(data).profile.roofline is None
    data["profile"]["roofline"] = None
    assert EvalResult.from_dict(data).profile.roofline is None


def test_a_key_no_field_names_is_kept_and_written_back():
    data = json.loads(_result(_roofline()).to_json())
    data["profile"]["roofline"]["l2_hit_rate"] = 0.9          # a key of some other version
    back = EvalResult.from_dict(data)
    assert back.profile.roofline.extra == {"l2_hit_rate": 0.9} and back.profile.roofline.fraction == 0.5
    assert back.to_dict()["profile"]["roofline"] == data["profile"]["roofline"]


def _stored_rows() -> list[dict]:
    """From each committed bench's results.jsonl: its first row with a roofline, and its first
    with each optional part (an over-the-roof reason, a raised ceiling, the hardware limits)."""
    rows = []
    for path in sorted(RESULTS.glob("*/results.jsonl")):
        wanted = ["", "over_roof_reason", "raised_ceiling", "hw_fraction"]
        for line in path.read_text().splitlines():
            roof = ((json.loads(line).get("result") or {}).get("profile") or {}).get("roofline")
            hit = [w for w in wanted if roof and (not w or w in roof)]
            if hit:
                rows.append(json.loads(line))
                wanted = [w for w in wanted if w not in hit]
    return rows


def test_stored_bench_rows_read_their_roofline_by_attribute():
    rows = _stored_rows()
    # every optional part is read back from at least one stored row (the files of record hold them all)
    for part in ("over_roof_reason", "raised_ceiling", "hw_fraction"):
        assert any(part in r["result"]["profile"]["roofline"] for r in rows), part
    for data in rows:
        stored = data["result"]["profile"]["roofline"]
        row = Row.from_dict(data)
        roof = row.result.profile.roofline
        assert isinstance(roof, Roofline) and roof.extra == {}, sorted(roof.extra)
        assert roof.fraction == stored["fraction"] and roof.floor_ms == stored["floor_ms"]
        assert roof.eager_fraction == stored["eager_fraction"] and roof.roof in ("memory", "compute")
        assert roof.over_roof_reason == stored.get("over_roof_reason")
        # Written again, the record is the one stored (what the bench's report and score read).
        assert row.result.to_dict()["profile"]["roofline"] == stored
