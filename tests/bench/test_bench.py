"""``kernelskill bench``: suites, KernelBench's metrics, output formats, resume, the executors (local,
pool, Ray) and --optimize, on the real evaluator with the C++ backend.

The suite is written into a temporary directory: a task directory with an honest and a wrong
solution (built on the shared test toolkit, so one build serves them all), the shipped
softmax_rows example, and plain KernelBench files under ``level2/`` (one with a solution, one
reference-only). The first bench of the module is shared; later runs resume from it or compare
with it.
"""
from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kernelskill.bench import BenchSettings, EvalJob, ResultStore, Row, TaskPlan, plan, summarize, task_rows
from kernelskill.bench.report import summary_line
from kernelskill.cli import main
from kernelskill.errors import UserError
from kernelskill.bench.executors import PoolExecutor, cpu_cores, make_executor
from kernelskill.paths import EXAMPLES_DIR
from kernelskill.results import CompileResult, EvalResult, ProfileResult, TimingStats
from kernelskill.vocab import Status
from kernelskill.bench.suite import SuiteTask, discover, resolve_suite, select

from helpers import RELU_TASK, toolkit_candidate

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "optimizer"))
from chat_server import ChatServer  # noqa: E402
from scenario import Scenario, project_toml  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
GOOD = toolkit_candidate("return ext.relu2(x)")
WRONG = "# expect: incorrect -- the tail bug\n" + toolkit_candidate("return ext.relu2_tail_bug(x)")
FAST = ["--time-cap", "0.3", "--trials", "2", "--device", "cpu"]
STATUSES = {"relu_dir": "ok", "softmax_rows": "ok", "level2/7_relu_plain": "ok",
            "level2/12_reference_only": "no_solution"}


def write_suite(root: Path) -> Path:
    """The four-task suite described above."""
    d = root / "relu_dir"
    (d / "solutions" / "wrong").mkdir(parents=True)
    (d / "reference.py").write_text(RELU_TASK.read_text())
    (d / "task.toml").write_text('name = "relu_dir"\nlevel = 1\n[presets.small]\nbatch_size = 8\n')
    (d / "solutions" / "cpp_relu2.py").write_text(GOOD)
    (d / "solutions" / "wrong" / "cpp_tail_bug.py").write_text(WRONG)
    (d / "solutions" / "cuda_not_here.py").write_text(GOOD.replace("load_inline(", "load_inline(cuda_sources='', "))
    shutil.copytree(EXAMPLES_DIR / "softmax_rows", root / "softmax_rows")
    lv = root / "level2"
    (lv / "solutions" / "7_relu_plain").mkdir(parents=True)
    (lv / "7_relu_plain.py").write_text(RELU_TASK.read_text())
    (lv / "solutions" / "7_relu_plain" / "cpp_relu2.py").write_text(GOOD)
    (lv / "12_reference_only.py").write_text(RELU_TASK.read_text().replace("* 2.0", "* 3.0"))
    (lv / "notes.py").write_text("print('not a task')\n")
    return root


def bench(*argv: str) -> tuple[int, str, str]:
    """``kernelskill bench`` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["bench", *argv])
    return code, out.getvalue(), err.getvalue()


def last_json(text: str) -> dict:
    return json.loads(text.strip().splitlines()[-1])


def statuses(doc: dict) -> dict:
    return {r["task"]: r["status"] for r in doc["tasks"]}


def verdicts(doc: dict) -> dict:
    return {(s["task"], s["solution"]): s["status"] for r in doc["tasks"] for s in r["solutions"]}


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    return write_suite(tmp_path_factory.mktemp("suite"))


@pytest.fixture(scope="module")
def first(suite, tmp_path_factory):
    """The reference bench: local executor, wrong solutions included, JSON out."""
    out = tmp_path_factory.mktemp("first") / "out"
    code, stdout, stderr = bench(str(suite), "--include-wrong", "--executor", "local", "--out", str(out), "--json",
                                 *FAST)
    return out, code, last_json(stdout), stderr


# ---- metrics: KernelBench's definitions, by hand ---------------------------------------------------------
def _row(task: str, status: str, speedup: float | None = None) -> dict:
    return {"task": task, "status": status, "speedup": speedup, "speedup_vs_compile": None, "solutions": []}


def test_summary_formulas_by_hand():
    rows = [_row("a", "ok", 2.5), _row("b", "ok", 1.5), _row("c", "ok", 1.2), _row("d", "ok", 0.8),
            _row("e", "incorrect"), _row("f", "no_solution")]
    s = summarize(rows)
    assert (s["n"], s["correct"]) == (6, 4)
    assert s["correct_rate"] == pytest.approx(4 / 6)
    assert s["fast_0"] == pytest.approx(4 / 6)           # every correct task is faster than 0
    assert s["fast_1"] == pytest.approx(3 / 6)           # 2.5, 1.5, 1.2
    assert s["fast_1_5"] == pytest.approx(1 / 6)         # strictly faster: 1.5 is not
    assert s["fast_2"] == pytest.approx(1 / 6)
    assert s["geomean_speedup"] == pytest.approx((2.5 * 1.5 * 1.2 * 0.8) ** 0.25)   # 3.6 ** 0.25 = 1.3774
    assert s["geomean_speedup"] == pytest.approx(1.37744, abs=1e-5)
    assert s["statuses"] == {"incorrect": 1, "no_solution": 1, "ok": 4}
    # The line says how many ran and how many had no solution, next to the rate.
    line = summary_line(s)
    assert "correct 4 (67%: 4 of the 5 run; 1 task has no solution for this device and counts as not solved)" in line
    plain = summary_line(summarize(rows[:5]))
    assert "correct 4 (80%) ·" in plain and "no solution" not in plain
    none = summarize([_row("a", "incorrect"), _row("b", "compile_error")])
    assert none["geomean_speedup"] is None and none["correct_rate"] == 0 and none["fast_0"] == 0


def _job(name: str, expected: str = "ok") -> EvalJob:
    return EvalJob(key=name, task="t", task_path="t.py", preset=None, solution=name, source="", expected=expected,
                   trials=5, timing={}, baseline="eager")


def _result(status: str, speedup: float | None = None, vs_compile: float | None = None) -> EvalResult:
    prof = ProfileResult(device="cpu", baseline=TimingStats(1.0, 0.0, 30), speedup=speedup, speedup_ci=[0.9, 1.1],
                         speedup_vs_compile=vs_compile, custom_share=0.9)
    return EvalResult(Status(status), CompileResult(ok=True, backend="cpp"), profile=prof)


def _rec(job: EvalJob, status: str, speedup: float | None = None, vs_compile: float | None = None) -> Row:
    result = _result(status, speedup, vs_compile) if speedup else None
    return Row.from_dict({"key": job.key, "status": status, "message": status,
                          "result": result.to_dict() if result else None})


def test_task_row_is_its_best_verified_solution_else_its_first_failure():
    t = SuiteTask("t", Path("t.py"), 1, Path("solutions"))
    a, b, c, w = _job("a"), _job("b"), _job("c"), _job("w", "incorrect")
    recs = {a.key: _rec(a, "incorrect"), b.key: _rec(b, "ok", 1.3, 0.7), c.key: _rec(c, "ok", 2.1, 1.4),
            w.key: _rec(w, "ok", 5.0)}     # a wrong solution that passed: never the task's best, a failed verdict
    row, = task_rows([TaskPlan(t, jobs=[a, b, c, w])], recs)
    assert (row["status"], row["speedup"], row["solution"], row["speedup_vs_compile"]) == ("ok", 2.1, "c", 1.4)
    assert [s["as_expected"] for s in row["solutions"]] == [False, True, True, False]
    failed, = task_rows([TaskPlan(t, jobs=[a, _job("d")])], {**recs, "d": _rec(_job("d"), "compile_error")})
    assert (failed["status"], failed["speedup"]) == ("incorrect", None)
    empty, = task_rows([TaskPlan(t, note="no cpp solution for cpu")], {})
    assert (empty["status"], empty["message"]) == ("no_solution", "no cpp solution for cpu")
    s = summarize([row, failed, empty])
    assert s["geomean_speedup_vs_compile"] == pytest.approx(1.4) and s["correct_rate"] == pytest.approx(1 / 3)


# ---- the suite ------------------------------------------------------------------------------------------
def test_discover_levels_limit_and_solutions(suite):
    tasks = discover(suite)
    assert [(t.id, t.level) for t in tasks] == [("level2/7_relu_plain", 2), ("level2/12_reference_only", 2),
                                                 ("relu_dir", 1), ("softmax_rows", 1)]   # 7 before 12; notes.py skipped
    assert [t.id for t in select(tasks, levels={1})] == ["relu_dir", "softmax_rows"]
    assert [t.id for t in select(tasks, levels={1, 2}, limit=1)] == ["level2/7_relu_plain"]
    with pytest.raises(UserError, match="no task of level 3.*levels present: 1, 2"):
        select(tasks, levels={3})
    assert [t.id for t in select(tasks, names=["softmax_rows", "relu_dir"])] == ["relu_dir", "softmax_rows"]
    with pytest.raises(UserError, match="no task of level 2"):
        select(tasks, levels={2}, names=["relu_dir"])
    with pytest.raises(UserError, match="no task named nope"):
        select(tasks, names=["relu_dir", "nope"])
    relu = tasks[2]
    assert [p.name for p, _ in relu.solutions(("cpp",))] == ["cpp_relu2.py"]
    assert [(p.name, e) for p, e in relu.solutions(("cpp",), include_wrong=True)] == \
        [("cpp_relu2.py", "ok"), ("cpp_tail_bug.py", "incorrect")]
    assert [p.name for p, _ in relu.solutions(("cuda", "triton"))] == ["cuda_not_here.py"]
    soft = tasks[3]
    assert [p.name for p, _ in soft.solutions(("cuda", "triton"))] == ["cuda_softmax_regcache.py", "triton_softmax.py"]
    assert resolve_suite("examples") == EXAMPLES_DIR and resolve_suite("softmax_rows") == EXAMPLES_DIR / "softmax_rows"
    assert len(discover(EXAMPLES_DIR)) >= 24 and {t.level for t in discover(EXAMPLES_DIR)} == {1, 2, 3}


def test_preset_small_by_default_on_cpu_and_settings_in_the_key(suite):
    tasks = discover(suite)
    plans = {p.task.id: p for p in plan(tasks, BenchSettings(device="cpu"))}
    assert plans["relu_dir"].preset == "small" and plans["level2/7_relu_plain"].preset is None
    assert plans["level2/12_reference_only"].note == "no cpp solution for cpu"
    both = {p.task.id: p for p in plan(tasks, BenchSettings(device="cpu", baseline="both", threads=1))}
    job, other = both["relu_dir"].jobs[0], plans["relu_dir"].jobs[0]
    assert job.key != other.key                         # baseline and threads change the numbers
    assert job._options("cpu", 1).baseline == "both" and job._options("cpu", 1).threads == 1
    with pytest.raises(UserError, match="--preset small: not defined by level2/7_relu_plain"):
        plan(tasks, BenchSettings(device="cpu", preset="small"))


def test_result_store_skips_a_cut_line_and_rerun_errors(tmp_path):
    store = ResultStore(tmp_path / "results.jsonl")
    store.append({"key": "a", "status": "ok"})
    with open(store.path, "a") as f:
        f.write('{"key": "b", "sta')                    # a crash mid-line
    store.append({"key": "c", "status": "error"})       # an unreachable endpoint: not done
    store.append({"key": "d", "status": "incorrect"})
    assert set(store.load()) == {"a", "d"}


# ---- the command: JSON, CSV, markdown, report, resume ---------------------------------------------------
def test_json_shape_and_summary_consistent_with_rows(first, suite):
    out, code, doc, stderr = first
    assert code == 0, stderr
    assert {"suite", "device", "machine", "summary", "tasks"} <= set(doc) and doc["device"] == "cpu"
    assert doc["suite"] == str(suite) and doc["machine"]["executor"] == "local" and doc["machine"]["cores"] >= 1
    assert statuses(doc) == STATUSES
    rows, s = doc["tasks"], doc["summary"]
    for r in rows:
        assert {"task", "status", "speedup"} <= set(r)
        assert (r["speedup"] is not None) == (r["status"] == "ok")
    ok = [r for r in rows if r["status"] == "ok"]
    assert s["n"] == len(rows) == 4 and s["correct"] == len(ok) == 3 and s["correct_rate"] == pytest.approx(0.75)
    # Speed metrics count only tasks whose timing was good; the others are counted apart.
    good = [r for r in ok if r["quality"] == "good"]
    apart = [r["task"] for r in ok if r["quality"] != "good"]
    assert all(r["quality"] in ("good", "noisy", "contended") for r in ok)
    assert (s["timing_not_good"], s["timing_not_good_tasks"]) == (len(apart), apart)
    for p, name in ((0, "fast_0"), (1, "fast_1"), (1.5, "fast_1_5"), (2, "fast_2")):
        assert s[name] == pytest.approx(sum(r["speedup"] > p for r in good) / (4 - len(apart)))
    if good:
        assert s["geomean_speedup"] == pytest.approx(math.exp(sum(math.log(r["speedup"]) for r in good) / len(good)))
    else:
        assert s["geomean_speedup"] is None
    relu = next(r for r in rows if r["task"] == "relu_dir")
    assert relu["preset"] == "small" and relu["solution"] == "solutions/cpp_relu2.py"
    assert [(x["solution"], x["status"], x["as_expected"]) for x in relu["solutions"]] == \
        [("solutions/cpp_relu2.py", "ok", True), ("solutions/wrong/cpp_tail_bug.py", "incorrect", True)]
    v = s["verdicts"]
    assert (v["solutions"], v["as_expected"], v["honest_rejected"], v["honest"]) == (4, 4, 0, 3)
    assert len(lines(out / "results.jsonl")) == 4
    report = (out / "report.md").read_text()
    assert "| relu_dir | 1 | ok |" in report and "correct 3 (75%: 3 of the 3 run; 1 task has no solution" in report and " cores" in report
    assert json.loads((out / "report.json").read_text())["summary"] == s
    assert "[4/4]" in stderr and "incorrect (as expected)" in stderr


def test_rerun_reuses_everything_csv_and_md(first, suite):
    out, _, doc, _ = first
    before = (out / "results.jsonl").read_text()
    code, stdout, stderr = bench(str(suite), "--include-wrong", "--executor", "local", "--out", str(out), "--csv",
                                 *FAST)
    assert code == 0 and "reused 4 of 4 jobs" in stderr and "running 0" in stderr
    assert (out / "results.jsonl").read_text() == before        # nothing evaluated, nothing appended
    rows = list(csv.DictReader(io.StringIO(stdout)))
    assert {r["task"]: r["status"] for r in rows} == STATUSES
    assert {r["task"]: r["speedup"] for r in rows} == {r["task"]: str(r["speedup"] or "") for r in doc["tasks"]}
    code, stdout, _ = bench(str(suite), "--include-wrong", "--executor", "local", "--out", str(out), "--md", *FAST)
    assert code == 0 and stdout.startswith("| task | level | status | speedup vs eager |")
    assert "| level2/12_reference_only | 2 | no_solution | - |" in stdout and "fast_1.5" in stdout
    code, stdout, stderr = bench(str(suite), "--include-wrong", "--executor", "local", "--out", str(out), *FAST)
    assert code == 0 and "relu_dir" in stdout and "n 4 · correct 3 (75%: 3 of the 3 run;" in stdout and "0 run, 4 reused" in stdout
    # a subset of the same settings reuses too: --levels and --limit
    code, stdout, stderr = bench(str(suite), "--levels", "2", "--limit", "1", "--executor", "local", "--out",
                                 str(out), "--json", *FAST)
    sub = last_json(stdout)
    assert code == 0 and statuses(sub) == {"level2/7_relu_plain": "ok"} and (sub["reused"], sub["evaluated"]) == (1, 0)


def test_pool_with_two_workers_matches_local(first, suite, tmp_path):
    _, _, doc, _ = first
    code, stdout, stderr = bench(str(suite), "--include-wrong", "--executor", "pool", "--workers", "2", "--jobs", "2",
                                 "--out", str(tmp_path / "pool"), "--json", "--fresh", *FAST)
    pooled = last_json(stdout)
    assert code == 0, stderr
    assert statuses(pooled) == statuses(doc) and verdicts(pooled) == verdicts(doc)
    assert pooled["machine"]["slots"] == ["cpu", "cpu"] and pooled["settings"]["threads"] == max(1, cpu_cores() // 2)
    assert "built 4 candidates on 2 CPU workers" in stderr


@pytest.mark.slow       # 79 s on 2 cores (Ray's start); the pool executor's test covers parallel runs by default
def test_ray_matches_local_and_shuts_its_ray_down(first, suite, tmp_path):
    import ray                  # in the test extra: CI runs this path
    _, _, doc, _ = first
    code, stdout, stderr = bench(str(suite), "--include-wrong", "--executor", "ray", "--workers", "2",
                                 "--out", str(tmp_path / "ray"), "--json", *FAST)
    on_ray = last_json(stdout)
    assert code == 0, stderr
    assert "started a local Ray" in stderr and on_ray["machine"]["executor"] == "ray"
    assert statuses(on_ray) == statuses(doc) and verdicts(on_ray) == verdicts(doc)
    assert {x["device"] for r in on_ray["tasks"] for x in r["solutions"]} == {"cpu"}
    assert not ray.is_initialized()


def test_fresh_runs_everything_again(first, suite, tmp_path):
    out = tmp_path / "again"
    shutil.copytree(first[0], out)
    code, stdout, stderr = bench(str(suite), "--levels", "2", "--executor", "local", "--out", str(out), "--json",
                                 "--fresh", *FAST)
    doc = last_json(stdout)
    assert code == 0 and (doc["reused"], doc["evaluated"]) == (0, 1) and "reused" not in stderr
    assert len(lines(out / "results.jsonl")) == 1              # the old results were dropped


def test_ctrl_c_keeps_what_finished_and_the_rerun_goes_on(suite, tmp_path):
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "kernelskill.cli", "bench", str(suite), "--include-wrong", "--executor", "local",
           "--out", str(out), *FAST]
    # A terminal's process starts with SIGINT at its default; a process this test runs in may have
    # inherited it ignored (a library an earlier test loaded), and an ignored SIGINT is inherited
    # and never becomes KeyboardInterrupt. Start the bench as a terminal would.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 240
        while not ((out / "results.jsonl").is_file() and (out / "results.jsonl").read_text().count("\n") >= 1):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no finished job in time"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)                      # what Ctrl-C in a terminal sends
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    kept = lines(out / "results.jsonl")
    assert proc.returncode == 130 and "interrupted:" in err and "run the same command again" in err, \
        (proc.returncode, err[-1500:])
    assert 1 <= len(kept) < 4
    code, stdout, stderr = bench(str(suite), "--include-wrong", "--executor", "local", "--out", str(out), "--json",
                                 *FAST)
    doc = last_json(stdout)
    assert code == 0 and (doc["reused"], doc["evaluated"]) == (len(kept), 4 - len(kept))
    assert f"reused {len(kept)} of 4 jobs" in stderr and statuses(doc) == STATUSES
    assert lines(out / "results.jsonl")[:len(kept)] == kept


@pytest.mark.slow     # torch.compile of the task on two cores: ~20 s warm, more cold; `pytest -m slow`
def test_baseline_both_adds_the_speedup_vs_torch_compile(suite, tmp_path):
    code, stdout, stderr = bench(str(suite), "--levels", "2", "--baseline", "both", "--executor", "local",
                                 "--out", str(tmp_path / "o"), "--json", *FAST)
    doc = last_json(stdout)
    assert code == 0, stderr
    row = next(r for r in doc["tasks"] if r["status"] == "ok")
    assert row["speedup_vs_compile"] > 0 and row["solutions"][0]["compile_ms"] > 0
    # The mean counts only timings judged good (a busy machine's noisy one is counted apart).
    if row["quality"] in ("good", None):
        assert doc["summary"]["geomean_speedup_vs_compile"] == pytest.approx(row["speedup_vs_compile"])
    else:
        assert "geomean_speedup_vs_compile" not in doc["summary"]
        assert doc["summary"]["timing_not_good_tasks"] == [row["task"]], doc["summary"]
    report = (tmp_path / "o" / "report.md").read_text()
    assert "| task | level | status | speedup vs eager | vs torch.compile |" in report


def test_an_honest_solution_that_fails_exits_1(tmp_path):
    d = tmp_path / "suite" / "relu_bug"
    (d / "solutions").mkdir(parents=True)
    (d / "reference.py").write_text(RELU_TASK.read_text())
    (d / "solutions" / "cpp_bug.py").write_text(WRONG.split("\n", 1)[1])    # no `# expect:` line: meant to be ok
    code, stdout, _ = bench(str(tmp_path / "suite"), "--executor", "local", "--out", str(tmp_path / "o"), "--json",
                            *FAST)
    doc = last_json(stdout)
    assert code == 1 and statuses(doc) == {"relu_bug": "incorrect"} and doc["summary"]["correct_rate"] == 0
    assert doc["tasks"][0]["message"] and doc["summary"]["verdicts"]["honest_rejected"] == 1


def test_progress_redraws_one_line_on_a_terminal():
    from kernelskill.cli.bench import Progress

    class Terminal(io.StringIO):
        def isatty(self):
            return True
    term = Terminal()
    progress = Progress(term, slots=2)
    progress.start(3, 1, Path("out/results.jsonl"))
    for i, status in enumerate(("ok", "incorrect")):
        result = _result(status, 1.5) if i == 0 else None
        progress(_job(f"s{i}"), Row(f"s{i}", status=status, seconds=4.0, result=result))
    progress.note("a note starts on its own line")
    text = term.getvalue()
    assert text.startswith("reused 1 of 4 jobs from out/results.jsonl; running 3\n")
    assert "\r\x1b[K[1/3] 1 ok · 0s elapsed · ETA 4s · t s0: ok 1.50×" in text      # 4 s × 2 left / 2 slots
    assert "\r\x1b[K[2/3] 1 ok · 0s elapsed · ETA 2s · t s1: incorrect\na note" in text


# ---- errors ---------------------------------------------------------------------------------------------
def test_usage_errors_exit_2_with_a_clear_message(suite, tmp_path, monkeypatch):
    (tmp_path / "empty").mkdir()
    cases = [([str(tmp_path / "nope")], "no such suite directory"),
             ([str(tmp_path / "empty")], "no tasks found"),
             ([str(suite), "--levels", "one"], "expected numbers separated by commas"),
             ([str(suite), "--levels", "3"], "no task of level 3"),
             ([str(suite), "--preset", "huge"], "--preset huge: not defined by"),
             ([str(suite), "--executor", "local", "--workers", "2"], "--workers needs --executor pool or ray"),
             ([str(suite / "level2"), "--limit", "0"], "--limit 0")]
    only_refs = tmp_path / "refs"
    only_refs.mkdir()
    shutil.copy(RELU_TASK, only_refs / "1_relu.py")
    cases.append(([str(only_refs)], "pass --reference"))
    for argv, message in cases:
        code, _, err = bench(*argv, "--device", "cpu", "--out", str(tmp_path / "o"))
        assert code == 2 and message in err, (argv, err)
    monkeypatch.setitem(sys.modules, "ray", None)           # as if Ray were not installed
    code, _, err = bench(str(suite), "--executor", "ray", "--device", "cpu", "--out", str(tmp_path / "o"))
    assert code == 2 and "pip install 'kernelskill[ray]'" in err
    with pytest.raises(UserError, match="--jobs 0"):
        make_executor("pool", "cpu", jobs=0)


def test_import_kernelskill_does_not_import_ray():
    code = ("import sys, kernelskill, kernelskill.cli, kernelskill.bench, kernelskill.bench.executors;"
            "kernelskill.cli.build_parser(); assert 'ray' not in sys.modules, 'ray imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


# ---- executors, with plain jobs -------------------------------------------------------------------------
class _Job:
    """The executors' Job protocol in its smallest form: records which slot ran it."""
    builds = True

    def __init__(self, key: str, fail: bool = False, meet: "_Meeting | None" = None):
        self.key, self.fail, self.meet, self.built = key, fail, meet, []

    def build(self, device: str) -> None:
        self.built.append(device)

    def run(self, device: str, threads):
        if self.meet:
            self.meet()
        if self.fail:
            raise RuntimeError(f"job {self.key} broke")
        return {"key": self.key, "device": device, "threads": threads, "thread": threading.current_thread().name}


class _Meeting:
    """Holds every job until ``n`` different threads have taken one: each slot provably takes work,
    however the threads are scheduled. A pool with fewer slots fails here instead of hanging."""

    def __init__(self, n: int, timeout: float = 120.0):
        self.n, self.timeout, self.threads, self.cond = n, timeout, set(), threading.Condition()

    def __call__(self) -> None:
        with self.cond:
            self.threads.add(threading.current_thread().name)
            self.cond.notify_all()
            if not self.cond.wait_for(lambda: len(self.threads) >= self.n, self.timeout):
                raise RuntimeError(f"only {sorted(self.threads)} took a job in {self.timeout:.0f} s")


def test_pool_builds_everything_first_then_shares_the_jobs_between_its_slots():
    meeting = _Meeting(2)
    jobs = [_Job(str(i), meet=meeting) for i in range(8)]
    pool = PoolExecutor("cpu", workers=2, jobs=3)
    got = dict((job.key, rec) for job, rec in pool.map(jobs))
    assert sorted(got) == [j.key for j in jobs] and all(j.built == ["cpu"] for j in jobs)
    assert len({r["thread"] for r in got.values()}) == 2           # both timing workers took jobs
    assert {r["threads"] for r in got.values()} == {max(1, cpu_cores() // 2)}
    with pytest.raises(RuntimeError, match="job 1 broke"):
        list(PoolExecutor("cpu").map([_Job("0"), _Job("1", fail=True), _Job("2")]))
    assert [rec["device"] for _, rec in make_executor("local", "cpu").map([_Job("a")])] == ["cpu"]


def test_a_long_job_is_named_while_it_runs():
    """Nothing finishes for minutes (a KernelBench LSTM traced on meta tensors held every GPU of
    a pool for over 200 s and the log stayed silent): after a quiet minute the display names what
    runs, where, and for how long."""
    from kernelskill.bench.executors import RUNNING
    from kernelskill.cli.bench import Progress
    release, started = threading.Event(), threading.Semaphore(0)

    class Held(_Job):
        def run(self, device, threads):
            started.release()
            assert release.wait(120), "never released"
            return super().run(device, threads)
    jobs = [Held("lstm"), Held("gru")]
    out = io.StringIO()
    progress = Progress(out)
    progress.start(2, 0, Path("out/results.jsonl"))
    records = []
    consumer = threading.Thread(target=lambda: records.extend(PoolExecutor("cpu", workers=2, jobs=1).map(jobs)))
    consumer.start()
    try:
        for _ in jobs:                                   # both slots hold a job
            assert started.acquire(timeout=120)
        running = RUNNING.now()
        assert sorted(label for label, _, _ in running) == ["gru", "lstm"]
        assert {device for _, device, _ in running} == {"cpu"} and all(s >= 0 for _, _, s in running)
        assert not progress.beat(running, now=progress.last_line + 10)      # a quiet 10 s: nothing
        assert progress.beat(running, now=progress.last_line + 61)
        line = out.getvalue().splitlines()[-1]
        assert "running:" in line and "lstm on cpu for" in line and "gru on cpu for" in line, line
        assert not progress.beat(running, now=progress.last_line + 1)       # printed just now
    finally:
        release.set()
        consumer.join(120)
    assert sorted(r["key"] for _, r in records) == ["gru", "lstm"]
    assert RUNNING.now() == []                                              # finished jobs leave it


# ---- --optimize against a real chat-completions server ---------------------------------------------------


def test_optimize_each_task_and_report_its_best_verified_speedup(tmp_path, monkeypatch):
    for name in ("KERNELSKILL_BASE_URL", "KERNELSKILL_MODEL", "KERNELSKILL_API_KEY_ENV"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    refs = tmp_path / "refs"
    refs.mkdir()
    shutil.copy(RELU_TASK, refs / "1_relu.py")
    code, _, err = bench(str(refs), "--optimize", "--device", "cpu", "--base-url", "http://127.0.0.1:9/v1",
                         "--model", "m")
    assert code == 2 and "127.0.0.1:9" in err                 # an unreachable endpoint fails before any run
    script = Scenario()                                       # coder: a tail bug; debugger: the fix
    with ChatServer(script.from_request) as server:
        (tmp_path / "kernelskill.toml").write_text(project_toml(server.url, search="seed = 3\n"))
        code, stdout, stderr = bench(str(refs), "--optimize", "--budget", "2", "--device", "cpu", "--executor",
                                     "local", "--json")
        doc = last_json(stdout)
        assert code == 0, stderr
        row, = doc["tasks"]
        assert (row["task"], row["status"], doc["mode"]) == ("1_relu", "ok", "optimize")
        run, = row["solutions"]
        assert run["attempts"] == 2 and run["speedup"] == row["speedup"] > 0
        assert Path(run["run_dir"]).parent == Path("bench-runs/refs-cpu-default-optimize/runs")
        assert (Path(run["run_dir"]) / "best.py").is_file() and run["solution"].endswith("best.py")
        assert doc["summary"]["correct_rate"] == 1.0
        calls = len(server.requests)
        code, stdout, stderr = bench(str(refs), "--optimize", "--budget", "2", "--device", "cpu", "--executor",
                                     "local", "--json")
        assert code == 0 and "reused 1 of 1" in stderr and len(server.requests) == calls   # resumed: no new run
        assert last_json(stdout)["tasks"][0]["speedup"] == row["speedup"]


def test_noisy_timings_are_counted_apart_from_fast_p_and_the_geomean():
    from kernelskill.bench import summarize
    from kernelskill.bench.report import summary_line, tasks_markdown
    row = lambda task, sp, q: {"task": task, "level": 1, "status": "ok", "speedup": sp, "ci": [sp * 0.9, sp * 1.1],  # noqa: E731
                               "quality": q, "speedup_vs_compile": None, "custom_share": 1.0, "eager_ms": 1.0,
                               "solution": "s.py", "solutions": []}
    rows = [row("a", 2.5, "good"), row("b", 54.6, "noisy"), row("c", 0.8, "good"),
            {**row("d", 1.0, None), "status": "incorrect", "speedup": None, "ci": None}]
    s = summarize(rows)
    # b's 54.6× (a noisy interval) is neither in fast_2 nor in the geometric mean.
    assert s["timing_not_good"] == 1 and s["timing_not_good_tasks"] == ["b"]
    assert s["fast_2"] == pytest.approx(1 / 3) and s["fast_1"] == pytest.approx(1 / 3)
    assert s["geomean_speedup"] == pytest.approx(math.sqrt(2.5 * 0.8))
    assert s["correct_rate"] == pytest.approx(0.75)
    assert "counted apart: b" in summary_line(s)
    assert "54.60× [49.14–60.06] (noisy)" in tasks_markdown(rows)


def test_one_absurd_task_neither_carries_nor_sinks_the_mean():
    """Issue 26: a single outlier (an absurdly fast kernel, or one that underflows) moved the geomean."""
    honest = [_row(t, "ok", 1.5) for t in "abcd"]
    fast = summarize(honest + [_row("e", "ok", 1e9)])
    slow = summarize(honest + [_row("e", "ok", 1e-9)])
    assert fast["geomean_speedup"] > 50 and slow["geomean_speedup"] < 0.05            # the plain mean is hijacked
    assert fast["geomean_speedup_clipped"] == pytest.approx((1.5 ** 4 * 100) ** 0.2)    # the outlier counts as 100×
    assert slow["geomean_speedup_clipped"] == pytest.approx((1.5 ** 4 / 100) ** 0.2)
    # beyond the task's roofline bound: flagged as impossible, and clipped to the bound
    r = {**_row("f", "ok", 40.0), "eager_ms": 2.0, "floor_ms": 0.1, "floor_binds": True}   # bound 20×
    s = summarize(honest + [r])
    assert s["impossible_tasks"] == ["f"]
    assert s["geomean_speedup_clipped"] == pytest.approx((1.5 ** 4 * 20) ** 0.2)
    assert summarize(honest + [{**r, "speedup": 19.0}])["impossible_tasks"] == []
    # A floor that does not bind (a CPU's caches hold the working set) is no bound: not "impossible"
    # and not clipped to it; a row from before the field binds when a GPU measured it.
    cpu = summarize(honest + [{**r, "floor_binds": False}])
    assert cpu["impossible_tasks"] == [] and cpu["geomean_speedup_clipped"] == pytest.approx((1.5 ** 4 * 40) ** 0.2)
    old = {k: v for k, v in r.items() if k != "floor_binds"}
    assert summarize(honest + [{**old, "gpu": "NVIDIA H100 80GB HBM3"}])["impossible_tasks"] == ["f"]
    assert summarize(honest + [{**old, "gpu": None}])["impossible_tasks"] == []
    from kernelskill.bench.report import summary_line
    assert "(physically impossible): f" in summary_line(s) and "(clipped 2.52×)" in summary_line(s)
