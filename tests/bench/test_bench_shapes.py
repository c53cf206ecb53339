"""``kernelskill bench --shapes`` (issue 47, item 1): every solution correct at the task's sizes is
checked again at derived shapes, and the summary gives the share that generalize. Real components:
the bench's run path (plan, local executor, results.jsonl, score, report, CLI) and the real
evaluator with the C++ toolkit, on the relu task at 64 x 1000. The bench runs ``--shapes odd``: the
task's preset of 128 rows of 997 (one shape: ``--shapes auto`` would check six, each a few seconds
on this CPU; tests/evaluate/test_shapes.py covers what auto derives).

The suite: one task, two honest solutions — one that works at any size, one that refuses every
width but 1000 (a clean refusal: specialised) — and a wrong one that is right at the task's 64 rows
and wrong beyond them (incorrect at a shape; its file expects it). The candidates are
tests/evaluate/test_shapes.py's.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kernelskill.bench import BenchSettings, plan
from kernelskill.bench.report import shapes_line
from kernelskill.bench.score import shapes_summary
from kernelskill.bench.suite import discover
from kernelskill.errors import UserError

from helpers import RELU_TASK
from test_bench import bench, last_json, lines
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "evaluate"))   # the evaluator's tests' cases
from test_shapes import FIRST_ROWS, GOOD, SPECIALISED  # noqa: E402

SHAPES = "odd"
FAST = ["--time-cap", "0.1", "--trials", "2", "--device", "cpu", "--executor", "local", "--include-wrong"]


def write_suite(root: Path) -> Path:
    d = root / "relu"
    (d / "solutions" / "wrong").mkdir(parents=True)
    (d / "reference.py").write_text(RELU_TASK.read_text())
    (d / "task.toml").write_text('name = "relu"\nlevel = 1\n[presets.odd]\ndim = 997\nbatch_size = 128\n[presets.tall]\nbatch_size = 128\n')
    (d / "solutions" / "cpp_any_size.py").write_text(GOOD)
    (d / "solutions" / "cpp_dim_1000.py").write_text(SPECIALISED)
    (d / "solutions" / "wrong" / "cpp_first_rows.py").write_text(
        "# expect: incorrect -- right at the task's 64 rows only\n" + FIRST_ROWS)
    return root


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    return write_suite(tmp_path_factory.mktemp("shapes_suite"))


@pytest.fixture(scope="module")
def shaped(suite, tmp_path_factory):
    out = tmp_path_factory.mktemp("shapes_out") / "out"
    code, stdout, stderr = bench(str(suite), "--out", str(out), "--shapes", SHAPES, "--json", *FAST)
    return out, code, last_json(stdout), stderr


def test_bench_shapes_counts_the_share_that_generalize(shaped):
    out, code, doc, stderr = shaped
    assert code == 0, stderr                     # every verdict as expected: the wrong one is incorrect
    sols = {s["solution"]: s for r in doc["tasks"] for s in r["solutions"]}
    assert {k: (s["status"], s["generalizes"], s["backend"]) for k, s in sols.items()} == {
        "solutions/cpp_any_size.py": ("ok", "yes", "cpp"),
        "solutions/cpp_dim_1000.py": ("ok", "specialised", "cpp"),
        "solutions/wrong/cpp_first_rows.py": ("incorrect", "no", "cpp")}
    assert sols["solutions/cpp_any_size.py"]["shapes_ran"] == 1
    assert sols["solutions/cpp_dim_1000.py"]["shapes_summary"] == "specialised: refuses preset odd"
    assert sols["solutions/wrong/cpp_first_rows.py"]["shapes_summary"].startswith("incorrect at shape preset odd")
    counts = {"checked": 3, "yes": 1, "specialised": 1, "no": 1, "none_ran": 0, "share": pytest.approx(1 / 3)}
    sh = doc["summary"]["shapes"]
    assert {k: sh[k] for k in counts} == counts and set(sh["by_backend"]) == {"cpp"}
    assert {k: sh["by_backend"]["cpp"][k] for k in counts} == counts
    assert doc["settings"]["shapes"] == SHAPES
    task = doc["tasks"][0]                      # the task's row: its best solution's label
    assert task["generalizes"] == sols[task["solution"]]["generalizes"]
    # Every row of results.jsonl carries its shapes check; report.md and the printed line say the share.
    assert all(r["result"]["shapes"] for r in lines(out / "results.jsonl"))
    line = "generalize to other shapes: 1 of 3 (33%) · specialised 1 · incorrect at a shape 1"
    report = (out / "report.md").read_text()
    assert line in report and "| specialised: specialised: refuses preset odd |" in report
    code, stdout, stderr = bench(doc["suite"], "--out", str(out), "--shapes", SHAPES, *FAST)
    assert code == 0 and "reused 3 of 3 jobs" in stderr and line in stdout
    assert "(other shapes: yes)" in stdout or "(other shapes: specialised)" in stdout


@pytest.mark.slow      # three more evaluations (~30 s on 2 cores); the keys themselves: test_shapes_keys_and_refusals
def test_a_resume_with_another_shapes_setting_reuses_nothing(shaped, suite):
    out, _, _, _ = shaped
    before = lines(out / "results.jsonl")
    code, stdout, stderr = bench(str(suite), "--out", str(out), "--json", *FAST)      # no --shapes
    assert code == 1, stderr                     # unchecked, the first-rows solution passes: not as expected
    assert "running 3 jobs" in stderr and "reused" not in stderr
    doc = last_json(stdout)
    assert "shapes" not in doc["summary"] and shapes_line(doc["summary"]) is None
    assert all(s["generalizes"] is None for r in doc["tasks"] for s in r["solutions"])
    # The first-rows solution is correct at the task's sizes when nothing checks other shapes.
    assert {s["solution"]: s["status"] for s in doc["tasks"][0]["solutions"]}["solutions/wrong/cpp_first_rows.py"] \
        == "ok"
    after = lines(out / "results.jsonl")
    assert after[:len(before)] == before and len(after) == len(before) + 3
    assert not {r["key"] for r in before} & {r["key"] for r in after[len(before):]}
    assert all(r["result"].get("shapes") is None for r in after[len(before):])


def test_shapes_keys_and_refusals(suite):
    tasks = discover(suite)
    plain = plan(tasks, BenchSettings(device="cpu"))[0].jobs
    auto = plan(tasks, BenchSettings(device="cpu", shapes="auto"))[0].jobs
    spaced = plan(tasks, BenchSettings(device="cpu", shapes=" auto "))[0].jobs
    assert [j.key for j in auto] == [j.key for j in spaced]
    assert not {j.key for j in plain} & {j.key for j in auto}
    assert all(j.shapes == "auto" and j._options("cpu", 1).shapes == "auto" for j in auto)
    assert all(j.shapes is None and j._options("cpu", 1).shapes is None for j in plain)
    odd = plan(tasks, BenchSettings(device="cpu", shapes="odd"))[0].jobs
    both = plan(tasks, BenchSettings(device="cpu", shapes="odd,tall"))[0].jobs
    assert len({j.key for j in plain + auto + odd + both}) == 4 * len(plain) == 8
    with pytest.raises(UserError, match=r"--shapes odd,large: presets not defined by relu \(large\)"):
        plan(tasks, BenchSettings(device="cpu", shapes="odd,large"))
    with pytest.raises(UserError, match="not with --reference"):
        plan(tasks, BenchSettings(device="cpu", mode="reference", shapes="auto"))
    ref = plan(tasks, BenchSettings(device="cpu", mode="reference"))[0].jobs[0]
    assert ref._options("cpu", 1).shapes is None


def test_shapes_summary_by_hand():
    def sol(backend, label, ran=3):
        return {"backend": backend, "generalizes": label, "shapes_ran": ran if label else None}
    rows = [{"solutions": [sol("cpp", "yes"), sol("cpp", "yes"), sol("cpp", "specialised"), sol("cpp", None)]},
            {"solutions": [sol("cuda", "no"), sol("cuda", "yes"), sol("cuda", "yes", ran=0)]}]
    s = shapes_summary(rows)
    # The unchecked cpp solution counts nowhere; the cuda one that ran at no shape counts apart.
    assert (s["checked"], s["yes"], s["specialised"], s["no"], s["none_ran"]) == (5, 3, 1, 1, 1)
    assert s["share"] == pytest.approx(3 / 5)
    assert s["by_backend"]["cpp"]["share"] == pytest.approx(2 / 3) and s["by_backend"]["cuda"]["checked"] == 2
    assert shapes_summary([{"solutions": [sol("cpp", None)]}]) is None
    line = shapes_line({"shapes": s})
    assert line.startswith("generalize to other shapes: 3 of 5 (60%) · specialised 1 · incorrect at a shape 1")
    assert "cpp: 2 of 3 (67%)" in line and "cuda: 1 of 2 (50%)" in line and "1 with no shape run" in line
