"""The retrieval benchmark (benchmarks/retrieval): its tasks load and run, its labels name real
skills of the right backend, its scoring is exact, it agrees with ``kernelskill skills search``,
and run.py runs end to end."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks" / "retrieval"
RUN = BENCH / "run.py"


def _load_run():
    spec = importlib.util.spec_from_file_location("retrieval_bench_run", RUN)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


run = _load_run()
FILES = run.task_files()
LABELS = run.load_labels()


def _skills() -> dict[str, list[str]]:
    out = {}
    for f in (ROOT / "skills").glob("*.toml"):
        data = tomllib.loads(f.read_text())
        out[data["id"]] = data["backends"]
    return out


def test_enough_tasks_across_levels():
    assert len(FILES) >= 40
    levels = {p.parent.name for p in FILES.values()}
    assert levels == {"level1", "level2", "level3"}


@pytest.mark.parametrize("name", sorted(FILES))
def test_task_loads_and_runs_on_cpu(name):
    """KernelBench format: Task.load accepts it, Model(*get_init_inputs())(*get_inputs()) runs on
    the CPU and gives finite outputs, and the feature trace the retrieval reads works."""
    from kernelskill.task import Task
    path = FILES[name]
    task = Task.load(path)
    assert task.name == name
    assert task.level == int(path.parent.name.removeprefix("level"))
    assert task.constants, f"{path}: no module-level size constants"
    mod = task.module()
    torch.manual_seed(0)
    model = task.build_model(mod)
    inputs = task.inputs(mod)
    with torch.no_grad():
        out = model(*inputs)
    for o in out if isinstance(out, (list, tuple)) else [out]:
        assert isinstance(o, torch.Tensor)
        assert torch.isfinite(o.float()).all(), f"{name}: non-finite output"
    assert isinstance(run.op_classes(path), list)


def test_tasks_are_not_copies_of_the_examples():
    examples = {p.read_text().strip() for p in (ROOT / "examples").glob("*/*.py")}
    copied = [n for n, p in FILES.items() if p.read_text().strip() in examples]
    assert not copied


def test_labels_name_existing_skills_of_their_backend():
    skills = _skills()
    assert set(LABELS) == set(FILES), "labels.toml and tasks/ must list the same tasks"
    for name, entry in LABELS.items():
        assert entry["kind"]
        for backend in run.BACKENDS:
            ids = entry[backend]
            assert len(ids) == len(set(ids)), f"[{name}] {backend}: duplicate labels"
            assert 2 <= len(ids) <= 6, f"[{name}] {backend}: {len(ids)} labels"
            for sid in ids:
                assert sid in skills, f"[{name}] {backend}: no skill {sid!r}"
                assert backend in skills[sid], f"[{name}] {backend}: {sid} is not a {backend} skill"


def test_score_exact():
    top = ["a", "b", "c", "d", "e"]
    s = run.score(top, {"a", "c", "x"}, k=5)
    assert s == {"hits": 2, "precision": 0.4, "recall": pytest.approx(2 / 3), "met": False}
    s = run.score(top, ["a", "c", "e", "x"], k=5)
    assert (s["hits"], s["precision"], s["recall"], s["met"]) == (3, 0.6, 0.75, True)
    # only the first k count
    s = run.score(top, {"a", "c", "e"}, k=3)
    assert (s["hits"], s["precision"], s["met"]) == (2, pytest.approx(2 / 3), False)
    # fewer labels than `need`: met when all of them are in the top k
    assert run.score(top, {"b", "d"}, k=5)["met"] is True
    assert run.score(top, {"b", "z"}, k=5)["met"] is False
    # a short list still counts k slots
    s = run.score(["a"], {"a"}, k=5)
    assert (s["hits"], s["precision"], s["recall"], s["met"]) == (1, 0.2, 1.0, True)
    agg = run.summarize([run.score(top, {"a", "c", "x"}, 5), run.score(top, {"a", "b", "c"}, 5)])
    assert agg == {"tasks": 2, "precision": pytest.approx(0.5), "recall": pytest.approx(5 / 6),
                   "hits": 5, "met": 1, "met_share": 0.5, "reachable": 0}


class _Skill:
    def __init__(self, sid):
        self.id = sid


class _Book:
    """Stands in for SkillBook.find: a fixed ranking."""

    def __init__(self, ranking):
        self.ranking = ranking

    def find(self, features, profile=None, query=None, backend=None, arch=None, limit=None, facts=None):
        ids = self.ranking if limit is None else self.ranking[:limit]
        return [_Skill(s) for s in ids]


def test_evaluate_rows_and_table():
    files = {"t": Path("tasks/level2/t.py")}
    labels = {"t": {"kind": "gemm-epilogue", "cuda": ["b", "d", "z"], "cpp": ["a"]}}
    rows = run.evaluate(_Book(["a", "b", "c", "d", "e", "f"]), files, labels, "cuda", k=3,
                        classes={"t": ["matmul", "elementwise"]})
    (r,) = rows
    assert (r["level"], r["hits"], r["precision"], r["met"]) == (2, 1, pytest.approx(1 / 3), False)
    assert r["missing"] == {"d": 4, "z": None}
    assert r["reachable"] is False                 # z is gated out: 2 of 3 labels at most
    assert run.evaluate(_Book(["a", "b", "c", "d", "z"]), files, labels, "cuda", k=3,
                        classes={"t": []})[0]["reachable"] is True
    text = run.markdown(rows, "cuda", 3, 3)
    assert "| t | gemm-epilogue | matmul,elementwise | a, **b**, c | 1/3 | d (4), z (gated out) (n=6) |" in text
    assert "cuda: precision@3 0.333 (1/3 slots); tasks with >= 3 relevant in the top 3: 0/1 (0.0 %)" in text


def test_retrieve_matches_the_cli(capsys):
    """run.py ranks exactly as `kernelskill skills search --task FILE --backend B --limit K`."""
    from kernelskill.cli import main
    from kernelskill.skills import SkillBook
    book = SkillBook.load()
    for name, backend in (("conv2d_bn_eval_relu", "cuda"), ("masked_cumsum", "cpp"),
                          ("convt2d_gelu_groupnorm", "cuda"), ("matmul_short_k_strict", "cuda")):
        path = FILES[name]
        assert main(["skills", "search", "--task", str(path), "--backend", backend, "--limit", "5",
                     "--json"]) == 0
        cli = [s["id"] for s in json.loads(capsys.readouterr().out)]
        ops, facts = run.task_info(path)
        assert run.retrieve(book, ops, backend, 5, facts) == cli


def test_run_end_to_end(tmp_path):
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, str(RUN), "--tasks", "matmul_square,groupnorm,lstm_2layer",
                           "--k", "5", "--json", str(out)], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "## cuda: top 5" in proc.stdout and "## cpp: top 5" in proc.stdout
    assert "| backend | tasks | precision@5 |" in proc.stdout
    data = json.loads(out.read_text())
    assert data["k"] == 5 and data["tasks"] == 3
    for backend in ("cuda", "cpp"):
        res = data["backends"][backend]
        assert [r["task"] for r in res["rows"]] == ["groupnorm", "matmul_square", "lstm_2layer"]
        for r in res["rows"]:
            assert len(r["top"]) <= 5
            assert r["hits"] == len(set(r["top"]) & set(r["relevant"]))
        assert res["summary"]["tasks"] == 3
        assert res["summary"]["precision"] == pytest.approx(sum(r["hits"] for r in res["rows"]) / 15)


def test_the_score_stays_above_the_bar_and_the_issue_44_shapes_rank_the_library_op_first():
    """The whole benchmark, as run.py scores it (the shipped skills, no user statistics): at least
    90 % of the tasks have 3 labelled skills in the top 5 on each backend (issue 44: 59/63 cuda,
    57/63 cpp on 2026-11-27; with item 2's seven tasks and six skills 65/70 cuda, 64/70 cpp), and on
    the tasks where a library conv or GEMM carries the work and a
    tail follows, the skill that keeps the library op and fuses the tail is first."""
    from kernelskill.skills import SkillBook, shipped_dir
    book = SkillBook.load([shipped_dir()], stats_path=Path("/nonexistent/stats.toml"))
    info = {name: run.task_info(path) for name, path in FILES.items()}
    classes = {n: ops for n, (ops, _) in info.items()}
    facts = {n: known for n, (_, known) in info.items()}
    rows = {}
    for backend in run.BACKENDS:
        rows[backend] = run.evaluate(book, FILES, LABELS, backend, 5, 3, classes, facts)
        s = run.summarize(rows[backend])
        assert s["met_share"] >= 0.9, (backend, run.totals_line(backend, s, 5, 3))
    top = {r["task"]: r["top"] for r in rows["cuda"]}
    for name, first in (("convt2d_gelu_groupnorm", "conv-aten-fused-ops"),
                        ("conv2d_tanh_scale_bias_chanmax", "conv-aten-fused-ops"),
                        ("linear_gelu_exact", "cublas-fused-epilogue")):
        assert top[name][0] == first, (name, top[name])
        assert "library-op-tail" in classes[name]
    assert "fp32-strict" in classes["matmul_short_k_strict"] and "gemm-short-k" in classes["matmul_short_k_strict"]
