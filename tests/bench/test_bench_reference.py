"""``kernelskill bench SUITE --reference``: each task's reference as its own candidate, no LLM and no
solutions — verdict, eager time, floor, roofline fraction, bottleneck, op classes — resumable, with
a baseline file that later runs are scored against (``--compare``). Real evaluator, CPU device.

The suite is KernelBench-shaped: plain files under ``level1/`` and ``level2/``: a ReLU, KernelBench's
matmul + dropout (training mode) + softmax at a small size, a reference seeded from the clock (no
seed reproduces it: stochastic) and a file whose module fails to load.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kernelskill.bench import baseline as baselines
from kernelskill.errors import UserError

from helpers import DROPOUT_TASK, RELU_TASK
from test_bench import bench, last_json
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "evaluate"))   # the evaluator's tests' cases
from test_stochastic import CLOCK_SEEDED  # noqa: E402

FAST = ["--time-cap", "0.3", "--trials", "2", "--device", "cpu", "--executor", "local"]


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("kb")
    (root / "level1").mkdir()
    (root / "level2").mkdir()
    (root / "level1" / "19_ReLU.py").write_text(RELU_TASK.read_text())
    (root / "level2" / "66_Matmul_Dropout_Softmax.py").write_text(DROPOUT_TASK.read_text())
    (root / "level2" / "90_clock_seeded.py").write_text(CLOCK_SEEDED)
    (root / "level2" / "91_broken.py").write_text(RELU_TASK.read_text().replace("return torch.relu(x) * 2.0",
                                                                                  "return torch.relu(x) * undefined_name"))
    return root


@pytest.fixture(scope="module")
def first(suite, tmp_path_factory):
    out = tmp_path_factory.mktemp("ref") / "out"
    code, stdout, stderr = bench(str(suite), "--reference", "--out", str(out), "--json", *FAST)
    return out, code, last_json(stdout), stderr


def rows(doc: dict) -> dict:
    return {r["task"]: r for r in doc["tasks"]}


def test_every_task_gets_its_verdict_eager_time_floor_and_op_classes(first):
    out, code, doc, stderr = first
    r = rows(doc)
    assert doc["mode"] == "reference"
    assert {t: x["status"] for t, x in r.items()} == {
        "level1/19_ReLU": "ok", "level2/66_Matmul_Dropout_Softmax": "ok",      # same seed before each call
        "level2/90_clock_seeded": "stochastic", "level2/91_broken": "task_error"}
    assert code == 1, "a task that could not be evaluated makes the run exit 1"
    relu, drop = r["level1/19_ReLU"], r["level2/66_Matmul_Dropout_Softmax"]
    for x in (relu, drop):
        assert x["eager_ms"] > 0 and x["floor_ms"] > 0 and 0 < x["eager_fraction"]
        assert x["bottleneck"] in ("memory-bound", "compute-bound", "launch-bound", "latency-bound")
        assert x["level"] in (1, 2) and x["seconds"] > 0
    assert relu["op_classes"] == ["elementwise"]
    assert {"matmul", "softmax"} <= set(drop["op_classes"])
    assert "clock" in r["level2/90_clock_seeded"]["message"] or "differ" in r["level2/90_clock_seeded"]["message"]
    assert "undefined_name" in r["level2/91_broken"]["message"]
    s = doc["summary"]
    assert s["statuses"] == {"ok": 2, "stochastic": 1, "task_error": 1}
    assert sum(s["bottlenecks"].values()) >= 2 and s["job_seconds"] > 0
    # Where the evaluation seconds went, by step, the largest first; the summary line names the top three.
    steps = s["phase_seconds"]
    assert {"reference", "run", "time"} <= set(steps) and list(steps.values()) == sorted(steps.values(), reverse=True)
    assert 0 < sum(steps.values()) <= s["job_seconds"] + 1
    from kernelskill.bench.report import reference_line
    assert f"evaluation ({list(steps)[0]} " in reference_line(s)
    assert "[4/4]" in stderr


def test_the_report_and_the_baseline_file(first):
    out, _, doc, _ = first
    report = (out / "report.md").read_text()
    assert "| task | level | verdict | eager (ms) | torch.compile (ms) | floor (ms) | eager / floor |" in report
    assert "n 4 · evaluated 3 (ok 2, stochastic 1) · task_error 1" in report
    assert "fast_1" not in report           # a reference against itself: no speedup to score
    base = baselines.load(out / "baseline.json")
    assert base["device"] == "cpu" and set(base["tasks"]) == {r["task"] for r in doc["tasks"]}
    relu = base["tasks"]["level1/19_ReLU"]
    assert relu["eager_ms"] == rows(doc)["level1/19_ReLU"]["eager_ms"] and relu["status"] == "ok"
    assert relu["op_classes"] == ["elementwise"] and relu["floor_ms"] > 0


def test_the_rerun_resumes_and_a_run_compares_with_its_baseline(first, suite):
    out, _, doc, _ = first
    code, stdout, stderr = bench(str(suite), "--reference", "--out", str(out), "--json",
                                 "--compare", str(out / "baseline.json"), *FAST)
    again = last_json(stdout)
    assert again["reused"] == 4 and again["evaluated"] == 0, stderr
    c = again["compare"]
    assert c["n"] == 4 and c["changed"] == [] and c["missing_from_baseline"] == 0
    # The same records against themselves: eager over eager is 1 on both correct tasks.
    assert c["geomean_vs_eager"] == pytest.approx(1.0) and c["fast_0_vs_eager"] == pytest.approx(0.5)
    assert c["fast_1_vs_eager"] == 0.0


def test_compare_counts_fast_p_against_eager_and_compile_and_changed_verdicts():
    doc = {"mode": "solutions", "machine": {"gpus": ["NVIDIA H100 80GB HBM3"]}}
    base = {"machine": {"gpus": ["NVIDIA H100 80GB HBM3"]}, "finished": "then", "suite": "kb", "device": "cuda",
            "tasks": {"a": {"status": "ok", "eager_ms": 2.0, "compile_ms": 1.0},
                      "b": {"status": "ok", "eager_ms": 3.0, "compile_ms": 4.0},
                      "c": {"status": "ok", "eager_ms": 1.0, "compile_ms": None},
                      "d": {"status": "stochastic", "eager_ms": None, "compile_ms": None}}}
    sol = lambda ms: [{"solution": "s.py", "cand_ms": ms}]  # noqa: E731
    got = [{"task": "a", "status": "ok", "solution": "s.py", "solutions": sol(1.0)},      # 2× eager, 1× compile
           {"task": "b", "status": "ok", "solution": "s.py", "solutions": sol(1.0)},      # 3× eager, 4× compile
           {"task": "c", "status": "incorrect", "solution": None, "solutions": sol(0.1)},  # not ok: no speedup
           {"task": "d", "status": "stochastic", "solution": None, "solutions": []},
           {"task": "e", "status": "ok", "solution": "s.py", "solutions": sol(1.0)}]      # not in the baseline
    c = baselines.compare(got, doc, base)
    assert c["n"] == 4 and c["missing_from_baseline"] == 1
    assert c["fast_1_vs_eager"] == pytest.approx(2 / 4) and c["fast_2_vs_eager"] == pytest.approx(1 / 4)
    assert c["fast_1_vs_compile"] == pytest.approx(1 / 4)      # a: exactly 1×, not faster
    assert c["geomean_vs_eager"] == pytest.approx(6 ** 0.5) and c["geomean_vs_compile"] == pytest.approx(2.0)
    assert c["changed"] == [{"task": "c", "was": "ok", "now": "incorrect"}]
    assert "fast_1 vs eager 50%" in baselines.compare_line(c) and "c (ok → incorrect)" in baselines.compare_line(c)


def test_report_only_rewrites_the_report_from_the_stored_rows_and_runs_nothing(first, tmp_path):
    """Chunks run on a GPU host come back as results.jsonl; --report-only writes report.md,
    report.json and baseline.json from them on any machine, running nothing."""
    out, _, doc, _ = first
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "results.jsonl").write_text((out / "results.jsonl").read_text())
    before = (copy / "results.jsonl").read_text()
    code, stdout, stderr = bench(doc["suite"], "--reference",
                                 "--out", str(copy), "--json", "--report-only", *FAST)
    again = last_json(stdout)
    assert code == 1 and again["evaluated"] == 0 and again["reused"] == 4      # the task error still counts
    assert {r["task"]: r["status"] for r in again["tasks"]} == {r["task"]: r["status"] for r in doc["tasks"]}
    assert [r["eager_ms"] for r in again["tasks"]] == [r["eager_ms"] for r in doc["tasks"]]
    assert (copy / "results.jsonl").read_text() == before                        # nothing ran, nothing appended
    assert "written by --report-only" in (copy / "report.md").read_text()
    assert json.loads((copy / "baseline.json").read_text())["tasks"].keys() == {r["task"] for r in doc["tasks"]}
    # Other flags than the run's find none of its rows: said, not an empty report.
    code, _, err = bench(doc["suite"], "--reference", "--out", str(copy), "--report-only",
                         *[x if x != "2" else "3" for x in FAST])
    assert code == 2 and "holds no finished job" in err and "--trials" in err
    code, _, err = bench(doc["suite"], "--reference", "--out", str(tmp_path / "none"), "--report-only",
                         "--device", "auto")
    assert code == 2 and "results.jsonl" in err


def test_a_baseline_measured_on_two_gpus_compares_only_the_rows_of_this_runs_gpu():
    """A resumed run can hold rows from two kinds of card (its chunks ran on whatever host came):
    each task keeps its GPU, a later run compares only the tasks measured on its own GPU and
    counts the rest, and the report names the GPUs of the rows rather than only the last run's."""
    from kernelskill.bench.report import report_markdown
    h100, h200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"
    base = {"machine": {"gpus": [h200]}, "finished": "then", "suite": "kb", "device": "cuda",
            "tasks": {"a": {"status": "ok", "eager_ms": 2.0, "gpu": h100},
                      "b": {"status": "ok", "eager_ms": 3.0, "gpu": h200},
                      "c": {"status": "ok", "eager_ms": 4.0}}}           # no per-row GPU: the file's machine
    sol = lambda ms: [{"solution": "s.py", "cand_ms": ms}]  # noqa: E731
    got = [{"task": t, "status": "ok", "solution": "s.py", "solutions": sol(1.0), "gpu": g}
           for t, g in (("a", h200), ("b", h200), ("c", h200))]
    c = baselines.compare(got, {"mode": "solutions", "machine": {"gpus": [h200]}}, base)
    assert c["n"] == 2 and c["other_gpu"] == 1                   # a was timed on the H100: left out
    assert c["geomean_vs_eager"] == pytest.approx((3.0 * 4.0) ** 0.5)
    assert "1 task(s) measured on another GPU, not compared" in baselines.compare_line(c)
    on_h100 = baselines.compare(got, {"mode": "solutions", "machine": {"gpus": [h100]}},
                                {**base, "tasks": {"a": base["tasks"]["a"]}})
    assert on_h100["n"] == 0 and on_h100["other_gpu"] == 1       # this run's rows say H200
    assert baselines.compare(got, {"mode": "solutions", "machine": {"gpus": [h200]}}, base,
                             any_machine=True)["n"] == 3
    baselines.check_machine(base, {"gpus": [h100]})               # the baseline holds H100 rows: accepted
    with pytest.raises(UserError, match="measured on NVIDIA H100 80GB HBM3, NVIDIA H200"):
        baselines.check_machine(base, {"gpus": ["NVIDIA A100-SXM4-80GB"]})
    doc = {"suite": "kb", "device": "cuda", "preset": "default", "mode": "reference", "finished": "now",
           "evaluated": 1, "reused": 2, "machine": {"gpus": [h200], "cpu": "x", "cores": 2, "torch": "2",
                                                    "cuda": "13", "executor": "local", "slots": ["cuda"],
                                                    "threads": None},
           "settings": {"timing": {"warmup": 3}, "trials": 5, "baseline": "eager"},
           "summary": {"n": 3, "evaluated": 3, "statuses": {"ok": 3}, "bottlenecks": {}, "seconds": 1.0},
           "tasks": [{"task": "a", "level": 1, "status": "ok", "gpu": h100, "solutions": []},
                     {"task": "b", "level": 1, "status": "ok", "gpu": h100, "solutions": []},
                     {"task": "c", "level": 1, "status": "ok", "gpu": h200, "solutions": []}]}
    text = report_markdown(doc)
    assert f"rows measured on: {h100} (2), {h200} (1)" in text
    doc["tasks"] = doc["tasks"][2:]
    assert "rows measured on" not in report_markdown(doc)        # all on this run's GPU: nothing to say


def test_a_baseline_from_another_device_or_not_a_baseline_exits_2(first, suite, tmp_path):
    out, *_ = first
    other = json.loads((out / "baseline.json").read_text())
    other["machine"]["gpus"] = ["NVIDIA H100 80GB HBM3"]
    (tmp_path / "h100.json").write_text(json.dumps(other))
    code, _, err = bench(str(suite), "--reference", "--out", str(tmp_path / "o"), "--compare",
                         str(tmp_path / "h100.json"), *FAST)
    assert code == 2 and "measured on NVIDIA H100 80GB HBM3" in err and "--compare-any-machine" in err
    assert not (tmp_path / "o" / "results.jsonl").exists()        # refused before anything ran
    code, stdout, _ = bench(str(suite), "--reference", "--out", str(out), "--compare", str(tmp_path / "h100.json"),
                            "--compare-any-machine", "--json", *FAST)
    assert code == 1 and last_json(stdout)["compare"]["n"] == 4
    for bad, message in ((out / "report.json", "not a baseline file"), (tmp_path / "nope.json", "cannot read it")):
        code, _, err = bench(str(suite), "--reference", "--out", str(out), "--compare", str(bad), *FAST)
        assert code == 2 and message in err, err


def test_op_classes_never_run_the_task_for_real(tmp_path):
    # A forward that cannot run on meta tensors: at KernelBench's sizes a real run on this CPU
    # could take minutes or all its memory, so the classes are unknown (None), not traced for real.
    from kernelskill.bench import op_classes
    from kernelskill.task import Task
    f = tmp_path / "needs_data.py"
    f.write_text(RELU_TASK.read_text().replace("return torch.relu(x) * 2.0",
                                               "return torch.relu(x) * float(x.sum().item() > 0)"))
    assert op_classes(Task.load(RELU_TASK)) == ["elementwise"]
    assert op_classes(Task.load(f)) is None


def test_op_classes_come_from_the_reference_workers_trace(tmp_path, monkeypatch):
    """One trace per task, not two: the reference worker traces the forward for its FLOPs and
    records the op classes beside them, and the bench row takes them from its cached reply
    (tracing an unrolled LSTM costs seconds; it was done twice). Here the bench's own tracer is
    broken: the classes still arrive."""
    import kernelskill.features as features

    def broken(*a, **k):
        raise AssertionError("the bench traced the task itself")
    monkeypatch.setattr(features, "trace", broken)
    monkeypatch.setenv("KERNELSKILL_CACHE", str(tmp_path / "cache"))     # a reference not cached before
    (tmp_path / "kb" / "level1").mkdir(parents=True)
    (tmp_path / "kb" / "level1" / "19_ReLU.py").write_text(RELU_TASK.read_text())
    code, stdout, _ = bench(str(tmp_path / "kb"), "--reference", "--out", str(tmp_path / "out"), "--json", *FAST)
    row = rows(last_json(stdout))["level1/19_ReLU"]
    assert code == 0 and row["status"] == "ok"
    assert row["op_classes"] == ["elementwise"]
