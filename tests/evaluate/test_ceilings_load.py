"""A ceiling measured under load is never stored: it serves its own evaluation, labelled, and the
next evaluation measures again; a raise from eager's rate is stored only from a good timing."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelskill.evaluate.judge import ceilings as ceil_mod
from kernelskill.evaluate.judge import roofline
from kernelskill.evaluate.api import Options
from kernelskill.evaluate.launch.isolation import WorkerOutcome
from kernelskill.evaluate.launch.reply import WorkerReply
from kernelskill.evaluate.judge.ceilings import ceilings, ceilings_key, store_raised_ceiling
from kernelskill.evaluate.judge.verdict import _roofline
from kernelskill.results import CompileResult, EvalResult, MeasurementQuality, ProfileResult, TimingStats
from kernelskill.task import Task
from kernelskill.vocab import WorkerStatus

from helpers import RELU_TASK, Busy, ref_meta

H100ISH = {"name": "GPU", "bandwidth": 3.0e12, "peak_flops": {"float32": 50e12, "tf32": 400e12},
           "launch_us": 5.0, "measured_at": "now", "version": roofline.CEILINGS_VERSION}
GEMM = ref_meta(flops=1e12, bytes=3 * 4096 * 4096 * 4)        # a 20 ms floor at 50 TFLOP/s


def _files(root) -> list:
    return sorted((root / "ceilings").glob("*.json"))


# ---- real measurements in a worker ----------------------------------------------------------------
def test_ceilings_measured_under_load_are_used_labelled_and_never_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELSKILL_CACHE", str(tmp_path))
    opts = Options(device="cpu", build_timeout=300, run_timeout=120)
    env = {"threads": 2}
    with Busy(2):                 # two cores' worth of competition beside the measuring worker
        first = ceilings("cpu", env, opts)
        assert first["quality"] == "contended" and first["cached"] is False, first
        assert first["bandwidth"] > 0 and first["peak_flops"]["float32"] > 0    # usable for this evaluation
        assert _files(tmp_path) == [], "a ceiling measured under load was cached"
        # This process's next evaluation reuses it, in memory and labelled; never from the disk.
        again = ceilings("cpu", env, opts)
        assert again["measured_unix"] == first["measured_unix"] and again["quality"] == "contended"
        assert "reused_s" in again and _files(tmp_path) == []
        monkeypatch.setattr(ceil_mod, "RECENT_S", 0.0)      # past the reuse window: measured again
        second = ceilings("cpu", env, opts)
    assert second["measured_unix"] != first["measured_unix"] and _files(tmp_path) == []
    # The hardware limits and the cache size travel with every measurement.
    assert "limits" in first and first["cache"] == "LLC"
    # Quiet (as quiet as this machine is now): stored if and only if the measurement was good.
    third = ceilings("cpu", env, opts)
    stored = _files(tmp_path)
    if third["quality"] == "good":
        assert len(stored) == 1 and json.loads(stored[0].read_text())["measured_unix"] == third["measured_unix"]
        assert ceilings("cpu", env, opts)["measured_unix"] == third["measured_unix"]      # reused, not measured
    else:
        assert stored == [], "a ceiling measured under load was cached"


# ---- the cache rule, at the worker's boundary ----------------------------------------------------------
class _Measurer:
    """Stands in for the ceilings worker: hands back the next measurement given, counting calls."""

    def __init__(self, *qualities: str):
        self.qualities, self.calls = list(qualities), 0

    def __call__(self, req, opts=None, listener=None, **kw):
        self.calls += 1
        q = self.qualities.pop(0)
        data = {**H100ISH, "quality": q, "measured_unix": float(self.calls), "others_cores": 1.5 if q != "good" else 0.0}
        reply = WorkerReply(status=WorkerStatus.ok, ceilings=data)
        return WorkerOutcome(result=reply, returncode=0, phase="done", timed_out=False, seconds=0.1, log_tail="",
                             out_dir=Path(req.out_dir or "."))


def test_only_a_good_measurement_is_stored_and_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELSKILL_CACHE", str(tmp_path))
    monkeypatch.setattr(ceil_mod, "RECENT_S", 0.0)        # each call past the in-memory reuse of one under load
    m = _Measurer("contended", "contended", "good")
    monkeypatch.setattr(ceil_mod, "run_worker", m)
    env, opts = {"gpu": "G"}, Options(device="cuda")
    a = ceilings("cuda", env, opts)
    assert a["quality"] == "contended" and a["cached"] is False and _files(tmp_path) == []
    b = ceilings("cuda", env, opts)
    assert m.calls == 2 and b["measured_unix"] == 2.0 and _files(tmp_path) == []
    c = ceilings("cuda", env, opts)
    assert c["quality"] == "good" and len(_files(tmp_path)) == 1
    d = ceilings("cuda", env, opts)
    assert m.calls == 3 and d["measured_unix"] == 3.0               # reused from the cache


def test_a_legacy_record_stored_under_load_is_measured_again_and_a_refresh_keeps_a_good_one(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELSKILL_CACHE", str(tmp_path))
    key, _ = ceilings_key("cuda", {"gpu": "G"})
    roofline.store(tmp_path, key, {**H100ISH, "quality": "contended", "measured_unix": 0.0})
    m = _Measurer("good", "contended")
    monkeypatch.setattr(ceil_mod, "run_worker", m)
    got = ceilings("cuda", {"gpu": "G"}, Options(device="cuda"))
    assert m.calls == 1 and got["quality"] == "good" and roofline.cached(tmp_path, key)["measured_unix"] == 1.0
    # Asked to measure again on a loaded machine: the good record stays, in the cache and in use.
    again = ceilings("cuda", {"gpu": "G"}, Options(device="cuda"), refresh=True)
    assert m.calls == 2 and again["quality"] == "good" and again["measured_unix"] == 1.0
    assert roofline.cached(tmp_path, key)["measured_unix"] == 1.0


# ---- the raise from eager's rate --------------------------------------------------------------------
def _evaluated(ceil: dict, verdict: str) -> EvalResult:
    task = Task.load(RELU_TASK)
    eager_ms = 20.0 / 1.006                  # eager 0.6 % above the fp32 ceiling: a raise
    prof = ProfileResult(device="cuda", candidate=TimingStats(median_ms=30.0, iqr_ms=0.0, n=10),
                         baseline=TimingStats(median_ms=eager_ms, iqr_ms=0.0, n=10),
                         quality=MeasurementQuality(verdict=verdict, reasons=[] if verdict == "good" else ["busy"]))
    _roofline(prof, task, GEMM, ceil, [])
    assert prof.roofline.raised_ceiling["ceiling"] == "peak_flops.float32"
    return EvalResult(status="ok", compile=CompileResult(ok=True, backend="cuda"), profile=prof)


@pytest.mark.parametrize("timing, stored_quality, stored", [
    ("contended", "good", False),            # eager's rate measured under load: no ceiling
    ("noisy", "good", False),
    ("good", "contended", False),            # a raise onto ceilings measured under load
    ("good", "good", True),
])
def test_a_raise_is_stored_only_from_a_good_timing_onto_good_ceilings(tmp_path, monkeypatch, timing, stored_quality,
                                                                       stored):
    monkeypatch.setenv("KERNELSKILL_CACHE", str(tmp_path))
    env = {"gpu": "G"}
    key, _ = ceilings_key("cuda", env)
    ceil = {**H100ISH, "quality": stored_quality}
    roofline.store(tmp_path, key, ceil)
    r = _evaluated(ceil, timing)
    store_raised_ceiling(r, "cuda", env, ceil)
    after = roofline.cached(tmp_path, key)
    assert r.profile.roofline.raised_ceiling["stored"] is stored
    assert (after["peak_flops"]["float32"] > 50e12) is stored
    if not stored:
        assert any("ceiling is not stored" in n for n in r.profile.notes), r.profile.notes
