"""benchmarks/kernelbench_agreement.py on the CPU: the reference-as-candidate is a candidate our evaluator
accepts (through the benchmark's own child process), KernelBench's child against a stand-in harness of
the same API (KernelBench itself needs CUDA), the stand-ins for modules KernelBench imports and never
calls, the table's and summary's logic, and the error for a missing checkout."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import kernelbench_agreement as kba  # noqa: E402
from helpers import RELU_TASK  # noqa: E402

# KernelBench's API as its eval.py and timing.py have it, run on the CPU: the child calls it exactly as
# it calls the real one. Its utils.py imports what the real one imports (the stand-ins' reason to be).
STAND_IN_HARNESS = {
    "__init__.py": "from . import utils\n",
    "utils.py": ("from dotenv import load_dotenv\nload_dotenv()\nfrom tqdm import tqdm\n"
                 "from openai import OpenAI\nfrom litellm import completion\n"),
    "timing.py": '''
import numpy as np

def get_timing_stats(elapsed_times, device=None):
    return {"mean": float(f"{np.mean(elapsed_times):.3g}"), "std": float(np.std(elapsed_times)),
            "num_trials": len(elapsed_times)}

def measure_ref_program_time(ref_arch_name, ref_arch_src, num_warmup=5, num_trials=100, discard_first=1,
                             timing_method="cuda_event", use_torch_compile=False, torch_compile_backend="inductor",
                             torch_compile_options="default", device=None, verbose=False, precision="fp32"):
    return get_timing_stats([1.0, 1.2, 0.8, 1.0, 1.0])
''',
    "eval.py": '''
import requests
import torch
from pydantic import BaseModel
from . import timing

class KernelExecResult(BaseModel):
    compiled: bool = False
    correctness: bool = False
    metadata: dict = {}
    runtime: float = -1.0
    runtime_stats: dict = {}
    ref_runtime: float = -1.0
    ref_runtime_stats: dict = {}

def build_compile_cache(custom_model_src, verbose=False, build_dir=None):
    exec(custom_model_src, {})
    return True, "", None

def eval_kernel_against_ref(original_model_src, custom_model_src, seed_num=42, num_correct_trials=1,
                            num_perf_trials=10, measure_performance=False, timing_method="cuda_event",
                            verbose=False, build_dir=None, device=None, backend="cuda", precision=torch.float32,
                            check_for_excessive_speedup=True):
    context = {}
    exec(original_model_src, context)
    exec(custom_model_src, context)
    torch.manual_seed(seed_num)
    ref = context["Model"](*context["get_init_inputs"]())
    torch.manual_seed(seed_num)
    new = context["ModelNew"](*context["get_init_inputs"]())
    ok = True
    for _ in range(num_correct_trials):
        x = context["get_inputs"]()
        ok = ok and torch.allclose(ref(*x), new(*x), atol=1e-4, rtol=1e-4)
    res = KernelExecResult(compiled=True, correctness=ok, metadata={"error": ValueError("not JSON")})
    if measure_performance and ok:
        res.runtime_stats = timing.get_timing_stats([2.0, 2.4, 1.6])
        res.runtime = res.runtime_stats["mean"]
    if measure_performance:
        res.ref_runtime_stats = timing.get_timing_stats([1.1, 1.1, 1.1])
        res.ref_runtime = res.ref_runtime_stats["mean"]
    return res
''',
}

TINY_TASK = RELU_TASK.read_text()      # a KernelBench-format file: relu, then × 2


def test_the_reference_as_a_candidate_passes_our_cpu_evaluator_through_the_benchmarks_child(tmp_path):
    task = ROOT / "examples" / "layernorm"
    src = kba.reference_candidate((task / "reference.py").read_text())
    # KernelBench execs the reference, then the candidate, into one namespace: ModelNew is its Model.
    context: dict = {}
    exec((task / "reference.py").read_text(), context)
    exec(src, context)
    assert issubclass(context["ModelNew"], context["Model"]) and context["ModelNew"] is not context["Model"]
    step = kba.Step("ours", {"task_path": str(task), "preset": "small", "cand_src": src, "prestart": False,
                             "options": {"device": "cpu", "timing": None, "profile": False}}, tmp_path / "ours")
    step.go()
    out = step.wait(240)
    side = kba.ours_side(out)
    assert out["status"] == "finished", out["log_tail"]
    assert side.status == "ok" and side.correct is True, (side.message, out["log_tail"][-2000:])
    assert side.max_abs_err == 0.0 and side.atol == 1e-4
    assert side.eager_ms is None                     # not timed here (timing=None)


@pytest.mark.skipif(importlib.util.find_spec("pydantic") is None, reason="KernelBench's eval.py needs pydantic")
def test_kernelbench_child_runs_a_harness_of_kernelbenchs_api_and_reads_its_numbers(tmp_path):
    pkg = tmp_path / "kb" / "src" / "kernelbench"
    pkg.mkdir(parents=True)
    for name, text in STAND_IN_HARNESS.items():
        (pkg / name).write_text(text)
    req = {"kernelbench": str(tmp_path / "kb"), "name": "tiny", "ref_src": TINY_TASK,
           "cand_src": kba.reference_candidate(TINY_TASK), "backend": "cuda", "build_dir": None}
    step = kba.Step("kb", req, tmp_path / "step")        # started ahead: it imports, then waits
    step.go()
    out = step.wait(120)
    assert out["status"] == "finished", out["log_tail"]
    kb = kba.kb_side(out)
    assert (kb.status, kb.correct) == ("correct", True), out
    assert kb.ref_ms == pytest.approx(1.0) and kb.ref_median_ms == pytest.approx(1.0)   # from the raw times
    assert kb.cand_ms == pytest.approx(2.0) and kb.cand_median_ms == pytest.approx(2.0)
    assert kb.eval_ref_ms == pytest.approx(1.1) and kb.speedup == pytest.approx(0.5)
    assert kb.max_diff == 0.0                            # observed in its allclose calls: one per trial
    assert len(kb.detail["observed_max_diff"]) == 5
    assert kb.detail["metadata"]["error"] == "not JSON"  # an exception in its metadata, as text
    for name in kba.STANDINS:                            # a stand-in exactly where the module is missing
        assert (name in kb.detail["standins"]) == (importlib.util.find_spec(name) is None), name


def test_standins_are_installed_only_for_modules_that_do_not_import(monkeypatch):
    missing = "kernelbench_agreement_no_such_module"
    monkeypatch.delitem(sys.modules, missing, raising=False)
    import json
    installed = kba.install_standins(("json", missing))
    try:
        assert installed == [missing]
        assert sys.modules["json"] is json
        stand_in = sys.modules[missing]
        assert isinstance(stand_in, kba.StandIn) and stand_in.__spec__.name == missing
        from kernelbench_agreement_no_such_module import Client   # importing a name works; using it does not
        with pytest.raises(RuntimeError, match=f"{missing}.Client is a stand-in"):
            Client(api_key="x")
        with pytest.raises(AttributeError):
            stand_in.__path__                        # not a package: import machinery is not misled
    finally:
        sys.modules.pop(missing, None)
    assert kba.StandIn("dotenv").load_dotenv() is False   # called at KernelBench's import: a no-op


def _row(task, kb_correct, ours_correct, kb_ms, ours_ms, dev, kb_status=None, atol=1e-4):
    kb = kba.KbSide(status=kb_status or ("correct" if kb_correct else "incorrect"), correct=kb_correct,
                    max_diff=0.0 if kb_correct else 3e-3, ref_ms=kb_ms, ref_median_ms=kb_ms,
                    cand_ms=kb_ms and kb_ms / 2)
    ours = kba.OursSide(status="ok" if ours_correct else "incorrect", correct=ours_correct, max_abs_err=1e-5,
                        eager_deviation=dev, eager_ms=ours_ms, cand_ms=ours_ms and ours_ms / 2, speedup=2.0)
    return kba.Row(task=task, candidate="reference", key=task, task_atol=atol, task_rtol=atol, kb=kb, ours=ours)


def test_the_table_and_summary_say_where_eager_and_the_verdicts_agree():
    rows = [_row("a", True, True, 10.0, 10.1, 0.2),          # eager +1 %, both correct
            _row("b", False, True, 10.0, 10.5, 0.5),         # eager +5 %; KB rejects what we accept
            _row("c", False, True, 4.0, 4.04, 3.0),          # KB's own reference is 3× the tolerance off
            _row("d", None, True, None, 2.0, 0.1, kb_status="timeout"),   # KernelBench gave no verdict
            _row("e", True, True, 1.0, 0.99, 0.5, atol=1e-3)]              # task.toml 1e-3: 5× KB's 1e-4
    agree = [kba.compare(r)["verdicts_agree"] for r in rows]
    assert agree == ["yes", "no", kba.NA_STRICT, "n/a (no KB verdict: timeout)", kba.NA_STRICT]
    within = [kba.compare(r)["eager_within_2pct"] for r in rows]
    assert within == [True, False, True, None, True]
    lines = kba.table(rows)
    assert lines[0].startswith("| task | candidate | KB verdict | ours | eager ms KB / ours / ratio")
    assert lines[2] == ("| a | reference | correct (max diff 0) | ok (max err 1e-05) | 10.00 / 10.10 / 1.010 "
                        "| 5.000 / 5.050 / 1.010 | 2.00× / 2.00× | yes | yes |")
    assert "| incorrect (max diff 0.003) |" in lines[3] and lines[3].endswith("| no | no |")
    assert lines[4].endswith(f"| yes | {kba.NA_STRICT} |")
    assert "| - / 2.000 / - |" in lines[5] and lines[5].endswith("| - | n/a (no KB verdict: timeout) |")
    assert any("e reference: tolerance: ours atol 0.001" in x for x in lines)
    s = kba.summarize(rows)
    assert s["eager_within_2pct"] == (3, 4) and s["verdicts_equal"] == (1, 2) and s["na_strict"] == 2
    assert kba.summary_line(s).startswith("eager within 2 %: 3 of 4 (against KernelBench's mean; 3 of 4 against")
    assert "verdicts equal: 1 of 2 where comparable (2 with KB's reference outside the strict tolerance, " \
           "1 without a verdict: n/a; equal on 2 of 4 with both verdicts)" in kba.summary_line(s)
    again = kba.Row.from_dict(rows[1].to_dict())          # what a resumed run reads back
    assert again == rows[1] and rows[1].to_dict()["comparison"]["eager_ratio"] == pytest.approx(1.05)


def test_without_our_eager_deviation_the_verdicts_are_still_compared_and_a_note_says_so():
    row = _row("x", True, True, 1.0, 1.0, None)
    c = kba.compare(row)
    assert c["verdicts_agree"] == "yes" and any("comparability not known" in n for n in c["notes"])
    assert kba.eager_deviation({"tolerances": [{"eager_allclose_ratio": 0.4}, {"eager_allclose_ratio": 1.5}, {}]}) == 1.5
    assert kba.eager_deviation({}) is None


@pytest.mark.parametrize("make", ["absent", "empty"])
def test_a_missing_kernelbench_folder_is_a_usage_error_that_names_it(tmp_path, capsys, make):
    folder = tmp_path / "kb"
    if make == "empty":
        folder.mkdir()
    assert kba.main(["--kernelbench", str(folder)]) == 2
    err = capsys.readouterr().err
    assert str(folder) in err and "src/kernelbench/eval.py" in err and "KernelBench/level1/" in err
    assert "git --git-dir=" in err                        # and how to make one


def test_the_default_sample_spans_what_it_should():
    tasks = [p.task for p in kba.DEFAULT_SAMPLE]
    assert len(tasks) >= 12
    for t in ("level1/64_conv_transposed_1D", "level2/89_ConvTranspose3d_MaxPool_Softmax_Subtract_Swish_Max",
              "level3/27_RegNet", "level2/19_ConvTranspose2d_GELU_GroupNorm", "level1/40_LayerNorm",
              "level2/82_Conv2d_Tanh_Scaling_BiasAdd_Max", "level2/33_Gemm_Scale_BatchNorm"):
        assert t in tasks
    for p in kba.DEFAULT_SAMPLE:                          # the shipped candidates exist and are CUDA
        if p.candidate:
            rp = kba.resolve(p, None)
            assert rp.cand_path.is_file() and rp.built and rp.backend == "cuda"


@pytest.mark.gpu
def test_one_pair_on_the_gpu(tmp_path):
    kb = ROOT / ".kb"
    if kba.check_kernelbench(kb):
        pytest.skip("no KernelBench checkout in .kb (docs/evaluator.md says how to extract one)")
    out = tmp_path / "a.json"
    rc = kba.main(["--kernelbench", str(kb), "--only", "level2/89", "--out", str(out), "--work", str(tmp_path)])
    rows = kba.load_rows(out)
    assert rc == 0 and len(rows) == 1
    (row,) = rows.values()
    assert row.kb.correct is True and row.ours.correct is True
    assert kba.compare(row)["eager_ratio"] is not None
