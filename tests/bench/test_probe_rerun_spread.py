"""benchmarks/probe_rerun_spread.py (issue 43, item 4): the summaries it draws its conclusions from —
spread of medians, pairwise overlap of intervals, the factors beyond the noise floor — on canned
numbers; its settings change one factor at a time; --help teaches; on a GPU, a short real run."""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import probe_rerun_spread as probe  # noqa: E402

# The issue's four evaluations of one LayerNorm candidate on an H100 (ms), eager beside them.
ISSUE_CAND = [0.349, 0.375, 0.367, 0.435]


def _eval_row(cand: float, eager: float, ci: list[float], quality: str = "good") -> dict:
    return {"status": "ok", "quality": quality, "candidate": {"median": cand, "iqr": 0.001, "min": cand * 0.99,
                                                              "ci": [cand * 0.998, cand * 1.002]},
            "eager": {"median": eager, "iqr": 0.01, "min": eager}, "speedup": eager / cand, "speedup_ci": ci}


def test_spread_is_max_over_min_in_percent_of_the_values_there():
    assert probe.spread_pct(ISSUE_CAND) == pytest.approx(24.64, abs=0.01)      # the issue's 24.6 %
    assert probe.spread_pct([1.0, 1.01]) == pytest.approx(1.0)
    assert probe.spread_pct([1.0, None, 1.02]) == pytest.approx(2.0)
    assert probe.spread_pct([1.0]) is None and probe.spread_pct([]) is None and probe.spread_pct([0.0, 1.0]) is None


def test_pairwise_overlap_names_every_disjoint_pair_and_touching_intervals_overlap():
    got = probe.pairwise_overlap([[1.0, 2.0], [2.0, 3.0], [3.5, 4.0], None])
    assert got == {"all": False, "disjoint": [(0, 2), (1, 2)]}
    assert probe.pairwise_overlap([[1.0, 2.0], [1.5, 1.6]])["all"]
    assert probe.pairwise_overlap([])["all"]


def test_median_interval_brackets_the_median_and_needs_six_samples():
    assert probe.median_ci([1.0] * 5) is None
    lo, hi = probe.median_ci(list(range(1, 101)))
    assert lo < 50.5 < hi and hi - lo < 25
    s = probe.sample_stats([3.0, 1.0, 2.0, 4.0, 5.0, 6.0, 7.0])
    assert (s["median"], s["min"], s["n"]) == (4.0, 1.0, 7) and s["iqr"] == pytest.approx(3.0)


def test_the_issues_evaluations_fail_the_goal_and_name_the_disjoint_pair():
    eager = [8.10, 8.11, 8.12, 8.13]
    cis = [[23.0, 23.4], [21.4, 21.8], [22.0, 22.3], [18.4, 18.8]]
    rows = [_eval_row(c, e, ci) for c, e, ci in zip(ISSUE_CAND, eager, cis)]
    s = probe.summarize_evaluations(rows + [{"status": "error", "error": "boom"}])
    assert s["n"] == 4 and s["candidate_spread_pct"] == pytest.approx(24.64, abs=0.01)
    assert s["eager_spread_pct"] == pytest.approx(0.37, abs=0.01)
    assert not s["goal_met"] and (0, 3) in s["speedup_ci_overlap"]["disjoint"]
    text = "\n".join(probe.table_evaluations("kb40_layernorm", rows, s))
    assert "DISJOINT" in text and "NOT MET" in text and "24.64 %" in text


def test_evaluations_within_one_percent_with_overlapping_intervals_meet_the_goal():
    rows = [_eval_row(c, 0.4, [1.14, 1.16]) for c in (0.350, 0.351, 0.352, 0.350, 0.3505)]
    s = probe.summarize_evaluations(rows)
    assert s["goal_met"] and s["candidate_spread_pct"] < 1.0
    assert "MET" in probe.table_evaluations("x", rows, s)[-2]
    assert "too few" in "\n".join(probe.table_evaluations("x", rows[:1], probe.summarize_evaluations(rows[:1])))


def _setting(factor: str, setting: str, cand: float, eager: float = 1.0) -> dict:
    return {"factor": factor, "setting": setting, "candidate": {"median": cand, "iqr": 0.0, "min": cand},
            "eager": {"median": eager, "iqr": 0.0, "min": eager}, "in_ptr": {"mod_4k": 0, "mod_2m": 0},
            "out_ptr": {"mod_4k": 256, "mod_2m": 256}, "out_distinct": 1, "eff_mhz": 1980.0}


def test_a_factor_moves_the_kernel_when_its_spread_passes_twice_the_noise_floor():
    rows = [_setting("repeat", "plain #1", 0.350), _setting("repeat", "plain #2", 0.352),
            _setting("pad", "0 B", 0.350), _setting("pad", "4 KiB", 0.420, 1.001),
            _setting("flush", "on", 0.350), _setting("flush", "off", 0.3535),
            {"factor": "outputs", "setting": "ring of 8 held", "error": "OutOfMemoryError"}]
    s = probe.summarize_factors(rows)
    assert s["noise_floor_pct"] == pytest.approx(0.571, abs=0.001)
    assert s["bar_pct"] == pytest.approx(1.143, abs=0.001)           # twice the floor, above the 1 % goal
    assert s["moves"] == ["pad"]                                     # flush's 1.0 % is within the noise
    assert s["factors"]["pad"]["slowest"] == "4 KiB" and "outputs" not in s["factors"]
    text = "\n".join(probe.table_factors("kb40_layernorm", rows, s))
    assert "| pad | 4 KiB | 0.4200 |" in text and "failed: OutOfMemoryError" in text and "beyond 1.14 %: pad" in text


def test_the_summary_table_says_per_kernel_where_the_spread_is():
    evals = [_eval_row(c, 8.1, ci) for c, ci in zip(ISSUE_CAND, [[1, 2], [1, 2], [1, 2], [3, 4]])]
    procs = [{"plain": {"candidate": {"median": m, "iqr": 0.001, "min": m, "ci": [m, m]}, "eager": {"median": 8.1}},
              "time_pair": {"candidate": {"median": m}, "eager": {"median": 8.1}}} for m in (0.35, 0.43)]
    k = {"evaluations": evals, "evaluations_summary": probe.summarize_evaluations(evals),
         "factors_summary": probe.summarize_factors([_setting("repeat", "a", 1.0), _setting("repeat", "b", 1.001),
                                                     _setting("placement", "0 GiB", 1.0), _setting("placement", "1 GiB", 1.2)]),
         "processes": procs, "processes_summary": probe.summarize_processes(procs)}
    assert k["processes_summary"]["plain_spread_pct"] == pytest.approx(22.857, abs=0.001)
    assert not k["processes_summary"]["plain_ci_overlap"]["all"]
    lines = probe.table_summary({"kb40_layernorm": k, "conv_bn_relu": {"skipped": "not asked"}})
    assert "| kb40_layernorm | 24.64 % | 0.00 % | NO | NOT met | 0.10 % | placement 20.00 % | 22.86 % / 22.86 % |" in lines
    assert any("conv_bn_relu | skipped" in line for line in lines)
    assert "between processes: plain candidate 22.86 %" in "\n".join(probe.table_processes("kb40", procs, k["processes_summary"]))


def test_each_factors_settings_differ_from_its_first_in_one_field_only():
    jobs = probe.factor_jobs(quick=False)
    assert jobs[0][0] == jobs[-1][0] == "repeat" and sum(f == "repeat" for f, _, _ in jobs) == 3
    plain = probe.Setting()
    firsts: dict = {}
    for factor, name, s in jobs:
        first = firsts.setdefault(factor, s)
        if factor == "repeat":
            assert s == plain
        differ = {k for k, v in dataclasses.asdict(s).items() if dataclasses.asdict(first)[k] != v}
        if s.loop == "time_pair":           # timing.time_pair holds its outputs its own way
            differ.discard("outputs")
        assert len(differ) <= 1, (factor, name, differ)
    pads = [s.pad for f, _, s in jobs if f == "pad"]
    assert pads == [0, 256, 4096, 65536, 2 * probe.MIB + 256] and max(pads) <= probe.PAD_ROOM
    assert len(probe.factor_jobs(quick=True)) < len(jobs)


def test_names_cards_and_sizes():
    assert probe.card_name("NVIDIA H100 80GB HBM3") == "h100"
    assert probe.card_name("NVIDIA H200") == "h200" and probe.card_name(None) == "gpu"
    assert [probe._bytes(n) for n in (0, 256, 4096, 65536, 2 * probe.MIB + 256)] == \
        ["0 B", "256 B", "4 KiB", "64 KiB", "2 MiB + 256 B"]


def test_options_quick_and_steps():
    a = probe.parse_args(["--quick"])
    assert (a.evals, a.procs, a.reps, a.steps) == (2, 2, 20, ["evals", "factors", "procs"])
    a = probe.parse_args(["--evals", "7", "--steps", "procs"])
    assert (a.evals, a.procs, a.steps) == (7, 3, ["procs"])
    with pytest.raises(SystemExit):
        probe.parse_args(["--steps", "evals,bogus"])


def test_a_missing_kernelbench_task_is_skipped_with_a_note_and_examples_layernorm_probed(tmp_path):
    notes = []
    got = probe.resolve_kernels(["kb40_layernorm", "relu_gelu"], str(tmp_path / "none.py"), notes.append)
    assert isinstance(got["kb40_layernorm"], str) and "missing" in got["kb40_layernorm"]
    assert got["layernorm"][1].endswith("cuda_layernorm_regcache.py") and Path(got["relu_gelu"][0]).is_dir()
    assert "probing layernorm instead" in notes[0]
    with pytest.raises(SystemExit):
        probe.resolve_kernels(["nope"], "x", notes.append)


def test_help_teaches_what_each_step_measures():
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "probe_rerun_spread.py"), "--help"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    for words in ("(a) evaluations", "(b) factors", "(c) processes", "noise floor", "--kernels", "--evals", "--quick",
                  "--steps", "--out", "probe_rerun_spread_<card>.json"):
        assert words in r.stdout, words
    assert "--child" not in r.stdout


KB40_TASK = ROOT / probe.KB40
KB40_CAND = ROOT / "benchmarks" / "probe_candidates" / "layernorm_kb40.py"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_the_kb40_candidate_passes_the_compile_check():
    from kernelskill.evaluate import compile as compile_candidate
    from kernelskill.evaluate.options import resolve
    _, cand = resolve(None, KB40_CAND)
    res = compile_candidate(cand, device="cuda" if _has_cuda() else "cpu")
    assert res.ok, [str(d) for d in res.diagnostics]


def _has_cuda() -> bool:
    import torch
    return bool(torch.version.cuda) and torch.cuda.is_available()


@pytest.mark.gpu
@pytest.mark.skipif(not KB40_TASK.exists(), reason="KernelBench is not extracted into .kb")
def test_the_kb40_candidate_is_correct_on_the_gpu():
    from kernelskill.evaluate import verify
    res = verify(KB40_TASK, KB40_CAND, device="cuda")
    assert res.ok, res.message


@pytest.mark.gpu
def test_a_short_real_run_writes_every_step(tmp_path):
    out = tmp_path / "p.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "probe_rerun_spread.py"), "--quick", "--kernels",
                        "relu_gelu", "--evals", "2", "--procs", "2", "--reps", "10", "--out", str(out)],
                       capture_output=True, text=True, timeout=900, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    data = json.loads(out.read_text())
    k = data["kernels"]["relu_gelu"]
    assert data["complete"] and len(k["evaluations"]) == 2 and all(e.get("candidate") for e in k["evaluations"])
    assert k["factors"]["facts"]["correct"] and {s["factor"] for s in k["factors"]["settings"]} >= {"pad", "flush", "repeat"}
    assert all(p.get("plain") for p in k["processes"]) and "summary" in r.stdout


def test_an_evaluations_row_takes_the_reported_rounds_raw_samples_from_the_kept_folder(tmp_path):
    from kernelskill.results import (CompileResult, EvalResult, MeasurementQuality, ProfileResult, TimingStats,
                                     VerifyResult)
    from kernelskill.vocab import Status
    work = tmp_path / "kernelskill-x" / "out"
    work.mkdir(parents=True)
    cand0, cand1 = [0.40 + i * 1e-4 for i in range(30)], [0.35 + i * 1e-4 for i in range(30)]
    (work / "timing_0.json").write_text(json.dumps({"times": {"candidate": {"ms": cand0}, "eager": {"ms": [8.1] * 30}}}))
    (work / "timing_1.json").write_text(json.dumps({"times": {"candidate": {"ms": cand1}, "eager": {"ms": [8.2] * 30}}}))
    # A race in another worker process (TimingConfig.processes) keeps its rounds beside them, its
    # candidate named c0, in a folder that sorts first: never taken for the evaluation's own.
    race = tmp_path / "kernelskill-a" / "out"
    race.mkdir(parents=True)
    (race / "timing_1.json").write_text(json.dumps({"times": {"c0": {"ms": cand0}, "eager": {"ms": [8.0] * 30}}}))
    stats = TimingStats(median_ms=0.3515, iqr_ms=0.0015, n=30, min_ms=0.35)
    res = EvalResult(status=Status.ok, compile=CompileResult(ok=True, backend="cuda"),
                     verify=VerifyResult(correct=True, memory_plan={"outputs": "recompute", "summary": "memory plan: …"}),
                     profile=ProfileResult(device="cuda", candidate=stats, baseline=TimingStats(8.2, 0.0, 30),
                                           speedup=23.3, speedup_ci=[23.2, 23.4],
                                           quality=MeasurementQuality(verdict="good", rounds=2, chosen_round=1)))
    row = probe.eval_row(res, tmp_path)
    assert row["status"] == "ok" and row["quality"] == "good" and row["chosen_round"] == 1
    # The raw samples are the reported round's; the median is the one the evaluator reported (of
    # several rounds: the median of the rounds' own, not the pooled samples').
    assert row["candidate_ms"] == cand1 and row["candidate"]["median"] == 0.3515
    assert row["candidate"]["ci"] and row["eager"]["median"] == 8.2 and row["memory_plan"]["outputs"] == "recompute"
    row = probe.eval_row(res, tmp_path / "nothing-kept")          # no samples: the reported statistics
    assert row["candidate"] == {"median": 0.3515, "iqr": 0.0015, "min": 0.35, "n": 30, "ci": None}
