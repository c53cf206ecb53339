"""SkillBook: schema validation, loading and overrides, gating, ranking by outcomes, CLI."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path

import pytest

from kernelskill.cli import skills as cli_skills
from kernelskill.errors import UserError
from kernelskill.skills import (CATEGORIES, SkillBook, arch_allows, check_dir,
                                parse_skill, shipped_dir, user_home)
from kernelskill.vocab import BACKENDS

from helpers import VALID_SKILL

REPO = Path(__file__).resolve().parents[2]

VALID = VALID_SKILL


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch) -> Path:
    """Every test gets its own empty user store."""
    h = tmp_path / "home"
    monkeypatch.setenv("KERNELSKILL_HOME", str(h))
    return h


@pytest.fixture(scope="module")
def book_shipped() -> SkillBook:
    """The shipped skills with in-memory (empty) statistics."""
    skills, errors = check_dir(shipped_dir())
    assert errors == []
    return SkillBook(skills)


def write(dir_: Path, name: str, text: str) -> Path:
    dir_.mkdir(parents=True, exist_ok=True)
    p = dir_ / name
    p.write_text(text)
    return p


def ids(skills) -> list[str]:
    return [s.id for s in skills]


# --- schema and loading -----------------------------------------------------------------------

def test_shipped_library_is_valid_and_broad(book_shipped):
    skills, errors = check_dir(shipped_dir())
    assert errors == []
    assert len(skills) >= 40
    assert {s.category for s in skills} == set(CATEGORIES)
    for backend in BACKENDS:
        assert sum(backend in s.backends for s in skills) >= 5, backend
    for s in skills:
        assert Path(s.source).name == f"{s.id}.toml"
        assert s.steps and s.pitfalls and s.expected_gain.strip()
        assert 5 <= len(s.example.strip().splitlines()) <= 50, s.id


def test_user_home_default_and_override(monkeypatch, tmp_path):
    monkeypatch.setenv("KERNELSKILL_HOME", str(tmp_path / "x"))
    assert user_home() == tmp_path / "x"
    monkeypatch.delenv("KERNELSKILL_HOME")
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    assert user_home() == Path.home() / ".local" / "share" / "kernelskill"


def test_valid_skill_parses_with_defaults():
    s = parse_skill(VALID, "x.toml", stem="my-skill")
    assert s.arch == [] and s.priority == 0 and s.applies_to == ["softmax"]
    assert parse_skill(s.to_toml(), "again.toml") == s   # round trip through TOML


@pytest.mark.parametrize("edit, message", [
    (('backends = ["cuda"]', 'backends = ["cuad"]'),
     "key 'backends': 'cuad' is not one of cuda, triton, cpp"),
    (('applies_to = ["softmax"]', 'applies_to = ["softmaxx"]'), "key 'applies_to': 'softmaxx'"),
    (('bottlenecks = ["memory-bound"]', 'bottlenecks = ["slow"]'), "key 'bottlenecks': 'slow'"),
    (('category = "memory"', 'category = "magic"'), "key 'category': 'magic'"),
    (('example_lang = "cuda"', 'example_lang = "rust"'), "key 'example_lang': 'rust'"),
    (('steps = ["do it"]', 'steps = []'), "key 'steps': expected a non-empty list"),
    (('steps = ["do it"]', 'steps = "do it"'), "key 'steps': expected a non-empty list"),
    (('summary = "one line"', 'summary = 3'), "key 'summary': expected a non-empty string"),
    (('when = "always"', 'when = "always"\narch = ["ampere"]'), "key 'arch': 'ampere'"),
    (('when = "always"', 'when = "always"\npriority = true'), "key 'priority': expected an integer"),
    (('when = "always"', 'when = "always"\ncolour = "red"'), "unknown key 'colour'"),
    (('when = "always"\n', ''), "missing required key 'when'"),
    (('id = "my-skill"', 'id = "other-skill"'), "key 'id': 'other-skill' does not match the file name"),
    (('id = "my-skill"', 'id = "My Skill"'), "key 'id': 'My Skill' must be lowercase"),
])
def test_validation_errors_name_file_and_key(tmp_path, edit, message):
    old, new = edit
    assert old in VALID
    p = write(tmp_path / "skills", "my-skill.toml", VALID.replace(old, new))
    with pytest.raises(UserError) as exc:
        SkillBook.load(dirs=[p.parent], stats_path=tmp_path / "stats.toml")
    text = str(exc.value)
    assert "my-skill.toml" in text and message in text


def test_toml_syntax_error_names_file_and_line(tmp_path):
    p = write(tmp_path, "my-skill.toml", VALID.replace('title = "A test skill"', 'title = '))
    _, errors = check_dir(p.parent)
    assert len(errors) == 1
    assert "my-skill.toml: line 3: TOML syntax error" in errors[0]


def test_check_dir_reports_every_invalid_file(tmp_path):
    write(tmp_path, "my-skill.toml", VALID)
    write(tmp_path, "bad-one.toml", VALID.replace("my-skill", "bad-one").replace("cuda\"]", "gpu\"]"))
    write(tmp_path, "bad-two.toml", "id = ")
    skills, errors = check_dir(tmp_path)
    assert ids(skills) == ["my-skill"]
    assert len(errors) == 2
    assert any("bad-one.toml" in e for e in errors) and any("bad-two.toml" in e for e in errors)


def test_user_skill_overrides_shipped_one_by_id(home):
    shipped = SkillBook.load().get("online-softmax")
    assert shipped.origin == "shipped"
    text = Path(shipped.source).read_text().replace(shipped.title, "My own online softmax")
    write(home / "skills", "online-softmax.toml", text)
    write(home / "skills", "my-skill.toml", VALID)
    book = SkillBook.load()
    s = book.get("online-softmax")
    assert (s.title, s.origin) == ("My own online softmax", "user")
    assert book.get("my-skill").origin == "user"
    assert len(book) == len(SkillBook.load(dirs=[shipped_dir()])) + 1


def test_save_user_skill_validates_and_persists(home):
    book = SkillBook.load()
    path = book.save_user_skill(VALID)
    assert path == home / "skills" / "my-skill.toml"
    assert SkillBook.load().get("my-skill").origin == "user"
    with pytest.raises(UserError, match="key 'backends'"):
        book.save_user_skill(VALID.replace('["cuda"]', '["fortran"]'))


def test_save_user_skill_accepts_skill_and_mapping_and_rejects_bad_ones(home):
    book = SkillBook.load()
    learned = parse_skill(VALID)
    learned.id, learned.title = "learned-skill", "Learned from a run"
    path = book.save_user_skill(learned)
    assert path == home / "skills" / "learned-skill.toml"
    assert book.get("learned-skill").origin == "user"
    fresh = SkillBook.load()
    assert fresh.get("learned-skill") == learned and fresh.get("learned-skill").origin == "user"
    data = tomllib.loads(VALID) | {"id": "from-dict", "priority": 3}
    assert book.save_user_skill(data, directory=home / "elsewhere").name == "from-dict.toml"
    assert check_dir(home / "elsewhere") == ([book.get("from-dict")], [])
    bad = [
        (dataclasses.replace(learned, id="bad-one", backends=["fortran"]),
         "<skill 'bad-one'>: key 'backends': 'fortran' is not one of"),
        (dataclasses.replace(learned, id="bad-two", steps=[]), "key 'steps': expected a non-empty"),
        (dataclasses.replace(learned, id="bad-three", arch=None), "key 'arch'"),
        (dataclasses.replace(learned, id="Bad Id"), "key 'id': 'Bad Id' must be lowercase"),
        ({k: v for k, v in data.items() if k != "when"} | {"id": "bad-four"},
         "missing required key 'when'"),
        (data | {"id": "bad-five", "colour": "red"}, "unknown key 'colour'"),
        (VALID.replace('category = "memory"', 'category = "magic"'), "key 'category': 'magic'"),
    ]
    for skill, message in bad:
        with pytest.raises(UserError) as exc:
            book.save_user_skill(skill)
        assert message in str(exc.value)
    with pytest.raises(UserError, match="cannot save a int"):
        book.save_user_skill(42)
    # Nothing invalid reached the store, and no temp file was left behind.
    assert sorted(p.name for p in (home / "skills").iterdir()) == ["learned-skill.toml"]
    assert ids(SkillBook.load(dirs=[home / "skills"])) == ["learned-skill"]


def test_get_unknown_suggests_close_ids(book_shipped):
    with pytest.raises(UserError, match="did you mean online-softmax"):
        book_shipped.get("online-softmx")


def test_search_finds_by_keywords(book_shipped):
    assert ids(book_shipped.search("bank conflict"))[0] == "smem-bank-conflict-padding"
    assert ids(book_shipped.search("welford"))[0] == "welford-variance"
    assert ids(book_shipped.search("cuda graph capture"))[0] == "cuda-graphs"
    assert book_shipped.search("zzzyyyxxx") == []


# --- gating -----------------------------------------------------------------------------------

TENSOR_CORE_OR_GEMM = {"tensor-cores-wmma", "mma-sync-ldmatrix", "wgmma-hopper",
                       "cublas-fused-epilogue", "shared-memory-tiling", "register-tiling",
                       "tf32-tensor-cores", "threadblock-swizzle-l2"}


def test_gate_memory_bound_softmax(book_shipped):
    got = set(ids(book_shipped.gate({"softmax", "reduction"}, {"bottleneck": "memory-bound"},
                                    backend="cuda")))
    assert {"online-softmax", "warp-shuffle-reduction", "warp-per-row-mapping"} <= got
    assert not got & TENSOR_CORE_OR_GEMM
    assert not {s for s in got if book_shipped.get(s).category in ("cpu", "triton")}


def test_gate_compute_bound_gemm(book_shipped):
    got = ids(book_shipped.gate(["matmul"], {"bottleneck": "compute-bound"}, backend="cuda"))
    assert {"tensor-cores-wmma", "mma-sync-ldmatrix", "cublas-fused-epilogue",
            "register-tiling"} <= set(got)
    assert "online-softmax" not in got and "cuda-graphs" not in got


def test_gate_launch_bound_small_model(book_shipped):
    got = ids(book_shipped.gate({"matmul", "elementwise"}, {"bottleneck": "launch-bound"}))
    assert {"cuda-graphs", "horizontal-kernel-merge"} <= set(got)
    assert "tensor-cores-wmma" not in got


def test_gate_memory_bound_elementwise_chain(book_shipped):
    got = ids(book_shipped.gate({"elementwise"}, {"bottleneck": "memory-bound"}))
    assert "fuse-elementwise-chain" in got
    assert got.index("fuse-elementwise-chain") < got.index("vectorized-16byte-access")
    assert not set(got) & TENSOR_CORE_OR_GEMM


def test_gate_cpp_backend_returns_cpu_skills(book_shipped):
    got = book_shipped.gate({"softmax", "reduction"}, None, backend="cpp")
    assert {"openmp-parallel-for", "simd-vectorization", "cpu-parallel-reduction"} <= set(ids(got))
    assert all("cpp" in s.backends for s in got)
    assert "warp-shuffle-reduction" not in ids(got)


def test_gate_triton_backend_returns_triton_skills(book_shipped):
    got = book_shipped.gate(["matmul"], {"bottleneck": "compute-bound"}, backend="triton")
    assert {"triton-matmul-grouped", "triton-autotune-block-sizes"} <= set(ids(got))
    assert all("triton" in s.backends for s in got)
    assert "mma-sync-ldmatrix" not in ids(got)


def test_gate_filters_by_arch(book_shipped):
    feats, prof = ["matmul"], {"bottleneck": "compute-bound"}
    on = lambda arch: set(ids(book_shipped.gate(feats, prof, arch=arch)))  # noqa: E731
    assert {"wgmma-hopper", "mma-sync-ldmatrix", "tensor-cores-wmma"} <= on("sm_90")
    assert "wgmma-hopper" not in on("sm_80") and "mma-sync-ldmatrix" in on("sm_80")
    assert "wgmma-hopper" not in on("sm_100")          # sm_90a features are not forward compatible
    assert "mma-sync-ldmatrix" not in on("sm_75") and "tensor-cores-wmma" in on("sm_75")
    assert "wgmma-hopper" in on(None)
    assert arch_allows(["sm_80"], "9.0") and not arch_allows(["sm_90"], "compute_86")


def test_gate_is_deterministic_and_accepts_profile_shapes(book_shipped):
    class Profile:
        bottleneck = "memory-bound"
    a = ids(book_shipped.gate({"softmax", "reduction"}, {"bottleneck": "memory-bound"}))
    b = ids(book_shipped.gate(["reduction", "softmax"], Profile()))
    c = ids(book_shipped.gate("softmax,reduction", "memory-bound"))
    assert a == b == c
    unfiltered = ids(book_shipped.gate({"softmax"}, None))
    assert unfiltered == ids(book_shipped.gate({"softmax"}, {"bottleneck": None}))
    assert "fast-math-intrinsics" in unfiltered                 # compute-bound skill kept
    assert ids(book_shipped.gate({"softmax"}, None, limit=3)) == unfiltered[:3]
    assert set(ids(book_shipped.gate(set(), None))) == {
        s.id for s in book_shipped if s.applies_to == ["*"] and "cuda" in s.backends}


@pytest.mark.parametrize("kwargs, message", [
    ({"features": ["softmaxx"]}, "op class 'softmaxx'"),
    ({"features": ["softmax"], "profile": {"bottleneck": "slow"}}, "bottleneck 'slow'"),
    ({"features": ["softmax"], "backend": "metal"}, "backend 'metal'"),
    ({"features": ["softmax"], "arch": "ampere"}, "arch 'ampere'"),
])
def test_gate_rejects_bad_inputs(book_shipped, kwargs, message):
    with pytest.raises(UserError, match=message):
        book_shipped.gate(**kwargs)


# --- outcome statistics -----------------------------------------------------------------------

def test_recording_successes_changes_ranking_deterministically(home):
    book = SkillBook.load()
    feats, prof = {"softmax", "reduction"}, {"bottleneck": "memory-bound"}
    before = ids(book.gate(feats, prof))
    last = before[-1]
    assert before[0] != last
    for _ in range(3):
        book.record(last, "softmax", "success", speedup=2.0)
    book.record(before[0], "softmax", "failure")
    after = ids(book.gate(feats, prof))
    assert after[0] == last
    assert after.index(before[0]) > after.index(before[1])
    # Persisted: a fresh load ranks the same way.
    assert ids(SkillBook.load().gate(feats, prof)) == after
    # Equal success rates are broken by mean speedup, then priority, then id.
    book.record(before[1], "softmax", "success", speedup=1.1)
    book.record(before[1], "softmax", "success", speedup=1.1)
    book.record(before[1], "softmax", "success", speedup=1.1)
    ranked = ids(book.gate(feats, prof))
    assert ranked.index(last) < ranked.index(before[1])      # 2.0x beats 1.1x


def test_stats_file_contents_and_cap(home):
    book = SkillBook.load()
    for i in range(60):
        book.record("online-softmax", "softmax", "success", speedup=1.0 + i / 100, backend="cuda", arch="9.0")
    book.record("online-softmax", "attention", "no_gain", speedup=0.9, backend="cuda", arch="sm_90a")
    book.record("online-softmax", None, "failure")
    data = tomllib.loads((home / "stats.toml").read_text())
    assert data["version"] == 2
    rows = {(r["op"], r["backend"], r["arch"]): r for r in data["skills"]["online-softmax"]["contexts"]}
    assert set(rows) == {("softmax", "cuda", "sm_90"), ("attention", "cuda", "sm_90"), ("*", "*", "*")}
    soft = rows[("softmax", "cuda", "sm_90")]
    assert (soft["tried"], soft["succeeded"], soft["failed"], soft["no_gain"]) == (60, 60, 0, 0)
    assert len(soft["speedups"]) == 50 and soft["speedups"][-1] == pytest.approx(1.59)          # capped, newest kept
    assert rows[("attention", "cuda", "sm_90")]["no_gain"] == 1
    stats = SkillBook.load().stats.get("online-softmax")
    assert (stats.tried, stats.succeeded, stats.failed, stats.no_gain) == (62, 60, 1, 1)
    assert stats.success_rate({"softmax"}, "cuda", "sm_90") == 1.0
    assert stats.success_rate({"attention"}) == 0.0
    assert stats.success_rate({"softmax"}, "cpp") is None                      # never tried there: no rate


def test_statistics_of_one_op_class_or_backend_never_move_another(home):
    """One no_gain on a convolution pushed a skill out of the matmul rankings (issue 20)."""
    book = SkillBook.load()
    feats = ["matmul", "gemm-large"]
    before = ids(book.gate(feats, None, backend="cuda", arch="sm_90"))
    for sid in before[:3]:
        for _ in range(5):
            book.record(sid, "conv", "failure", backend="cuda", arch="sm_90")
            book.record(sid, "matmul", "failure", backend="cpp")
            book.record(sid, "matmul", "failure", backend="cuda", arch="sm_80")
    book = SkillBook.load()
    assert ids(book.gate(feats, None, backend="cuda", arch="sm_90")) == before
    # the same failures in the task's own context do move it
    book.record(before[0], "matmul", "failure", backend="cuda", arch="sm_90")
    assert ids(SkillBook.load().gate(feats, None, backend="cuda", arch="sm_90")).index(before[0]) > 0


def test_untried_skill_shows_no_rate(home, capsys):
    book = SkillBook.load()
    st = book.stats.get("online-softmax")
    assert st.success_rate() is None and st.success_rate({"softmax"}, "cuda") is None
    rc, out, _ = run_cli(["gate", "--ops", "softmax", "--backend", "cuda"], capsys)
    row = next(line for line in out.splitlines() if " online-softmax " in line)
    assert " - " in row and "0.5" not in row


def test_version_1_stats_are_read(home):
    write(home, "stats.toml", """version = 1
[skills.online-softmax]
tried = 5
succeeded = 3
failed = 1
no_gain = 1
speedups = [1.5, 2.0]
ops = { softmax = { tried = 4, succeeded = 3 } }
""")
    st = SkillBook.load().stats.get("online-softmax")
    assert st.tried == 5 and st.succeeded == 3
    assert st.success_rate({"softmax"}, "cuda") == 0.75       # kept for its op class, any backend
    assert st.success_rate({"matmul"}) is None


def test_record_rejects_bad_input(home):
    book = SkillBook.load()
    with pytest.raises(UserError, match="outcome 'great'"):
        book.record("online-softmax", "softmax", "great")
    with pytest.raises(UserError, match="no skill with id"):
        book.record("no-such-skill", "softmax", "success")
    with pytest.raises(UserError, match="op class 'sofmax'"):
        book.record("online-softmax", "sofmax", "success")
    with pytest.raises(UserError, match="speedup"):
        book.record("online-softmax", "softmax", "success", speedup=-1.0)
    assert not (home / "stats.toml").exists()


def test_stats_write_is_atomic(home, monkeypatch):
    book = SkillBook.load()
    book.record("online-softmax", "softmax", "success", speedup=1.5)
    before = (home / "stats.toml").read_bytes()

    def boom(src, dst):
        raise OSError("disk full")
    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        book.record("online-softmax", "softmax", "success", speedup=3.0)
    monkeypatch.undo()
    assert (home / "stats.toml").read_bytes() == before               # old file intact
    assert not [p for p in home.iterdir() if p.name.endswith(".tmp")]  # no temp left behind
    assert book.stats.get("online-softmax").tried == 1                 # memory matches the file


def test_concurrent_records_are_not_lost(home):
    books = [SkillBook.load() for _ in range(4)]

    def work(b):
        for _ in range(10):
            b.record("cuda-graphs", "matmul", "success", speedup=1.2)
    threads = [threading.Thread(target=work, args=(b,)) for b in books]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert SkillBook.load().stats.get("cuda-graphs").tried == 40


_RECORDER = """
import os, sys, time
from pathlib import Path
from kernelskill.skills import SkillBook
go, n = Path(sys.argv[1]), int(sys.argv[2])
book = SkillBook.load()
Path(sys.argv[3]).touch()                  # ready
deadline = time.monotonic() + 60
while not go.exists() and time.monotonic() < deadline:
    time.sleep(0.005)
for i in range(n):
    book.record("online-softmax", "softmax", "success" if i % 2 else "failure", speedup=1.5)
"""


def test_two_processes_recording_at_once_lose_nothing(home, tmp_path):
    n = 40
    go = tmp_path / "go"
    env = os.environ | {"KERNELSKILL_HOME": str(home)}
    procs, ready = [], []
    for i in range(2):
        ready.append(tmp_path / f"ready-{i}")
        procs.append(subprocess.Popen([sys.executable, "-c", _RECORDER, str(go), str(n),
                                       str(ready[-1])], env=env, cwd=REPO,
                                      stderr=subprocess.PIPE, text=True))
    deadline = time.monotonic() + 120
    while not all(r.exists() for r in ready) and time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            break
        time.sleep(0.01)
    go.touch()                                  # both start recording at the same moment
    for p in procs:
        _, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
    st = SkillBook.load().stats.get("online-softmax")
    assert (st.tried, st.succeeded, st.failed) == (2 * n, n, n)
    assert st.success_rate({"softmax"}) == 0.5


def test_corrupt_stats_file_is_a_user_error(home):
    write(home, "stats.toml", "skills = [")
    with pytest.raises(UserError, match="stats.toml"):
        SkillBook.load()


# --- CLI --------------------------------------------------------------------------------------

def run_cli(argv, capsys):
    parser = argparse.ArgumentParser(prog="kernelskill")
    cli_skills.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["skills", *argv])
    rc = args.func(args)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cli_list_and_filters(capsys):
    rc, out, _ = run_cli(["list"], capsys)
    assert rc == 0 and "online-softmax" in out and "openmp-parallel-for" in out
    rc, out, _ = run_cli(["list", "--backend", "cpp", "--category", "cpu"], capsys)
    assert "openmp-parallel-for" in out and "online-softmax" not in out
    rc, out, _ = run_cli(["list", "--json", "--backend", "triton"], capsys)
    data = json.loads(out)
    assert data and all("triton" in d["backends"] for d in data)


def test_cli_show_and_gate(capsys, home):
    rc, out, _ = run_cli(["show", "welford-variance"], capsys)
    assert rc == 0 and "Welford" in out and "Pitfalls:" in out and "layernorm_welford" in out
    rc, out, _ = run_cli(["show", "welford-variance", "--json"], capsys)
    assert json.loads(out)["stats"]["tried"] == 0
    with pytest.raises(UserError):
        run_cli(["show", "nope"], capsys)
    rc, out, _ = run_cli(["gate", "--ops", "softmax,reduction", "--bottleneck", "memory-bound",
                          "--backend", "cuda", "--json"], capsys)
    gated = [d["id"] for d in json.loads(out)]
    assert "online-softmax" in gated and "tensor-cores-wmma" not in gated
    rc, out, _ = run_cli(["gate", "--ops", "matmul", "--bottleneck", "compute-bound", "--backend", "cuda",
                          "--arch", "sm_80", "--limit", "50"], capsys)
    assert rc == 0 and "mma-sync-ldmatrix" in out and "wgmma-hopper" not in out


def test_cli_stats_and_search(capsys, home):
    rc, out, _ = run_cli(["stats"], capsys)
    assert rc == 0 and "no outcomes" in out
    SkillBook.load().record("cuda-graphs", "matmul", "success", speedup=2.0)
    rc, out, _ = run_cli(["stats"], capsys)
    assert "cuda-graphs" in out and "2.00x" in out
    rc, out, _ = run_cli(["stats", "--json"], capsys)
    assert json.loads(out)["cuda-graphs"]["succeeded"] == 1
    rc, out, _ = run_cli(["search", "bank", "conflict", "--backend", "any"], capsys)
    assert rc == 0 and "smem-bank-conflict-padding" in out


def test_cli_list_json_has_skill_objects(capsys, book_shipped):
    rc, out, _ = run_cli(["list", "--json"], capsys)
    data = json.loads(out)
    assert rc == 0 and [d["id"] for d in data] == ids(book_shipped)
    for d in data:
        assert {"id", "title", "category", "backends", "applies_to", "bottlenecks"} <= set(d)
        assert isinstance(d["backends"], list) and isinstance(d["applies_to"], list)


def test_cli_search_by_task_and_bottleneck(capsys, home):
    rc, out, _ = run_cli(["search", "--task", "softmax_rows", "--bottleneck", "memory-bound",
                          "--backend", "cuda", "--json"], capsys)
    got = [d["id"] for d in json.loads(out)]
    book = SkillBook.load()
    from kernelskill.cli.skills import _task_summary
    from kernelskill.skills.predicates import task_facts
    info = _task_summary("softmax_rows")
    feats = info["op_classes"] + info["features"]          # op classes and task features
    assert "softmax" in feats and "softmax-rows" in feats
    assert rc == 0 and got == ids(book.gate(feats, "memory-bound", backend="cuda", facts=task_facts(info)))
    assert "online-softmax" in got and not set(got) & TENSOR_CORE_OR_GEMM
    assert [d["rank"] for d in json.loads(out)] == list(range(1, len(got) + 1))
    # A task directory works as well as an example name; recorded outcomes move a skill up.
    book.record(got[-1], "softmax", "success", speedup=2.0)
    rc, out, _ = run_cli(["search", "--task", str(REPO / "examples" / "softmax_rows"),
                          "--bottleneck", "memory-bound", "--backend", "cuda"], capsys)
    lines = out.splitlines()
    assert "op classes softmax" in lines[0]
    # Specificity ranks first (skills that match the task's features), then the statistics.
    now = [line.split()[1] for line in lines if line[:1].isdigit()]
    assert now.index(got[-1]) < len(got) - 1
    # With --backend any every backend's skills are candidates.
    rc, out, _ = run_cli(["search", "--task", "softmax_rows", "--backend", "any", "--json"], capsys)
    backends = {b for d in json.loads(out) for b in d["backends"]}
    assert backends == set(BACKENDS)


def test_cli_search_combines_task_with_query(capsys):
    rc, out, _ = run_cli(["search", "--task", "matmul", "--query", "tensor cores",
                          "--backend", "cuda", "--json"], capsys)
    got = [d["id"] for d in json.loads(out)]
    assert rc == 0 and got[0] in {"tensor-cores-wmma", "tf32-tensor-cores", "mma-sync-ldmatrix"}
    book = SkillBook.load()
    gated = set(ids(book.gate(["matmul"], None, backend="cuda")))
    assert set(got) <= gated & set(ids(book.search("tensor cores")))
    assert "online-softmax" not in got
    rc, out, _ = run_cli(["search", "--query", "welford", "--backend", "triton", "--json"],
                         capsys)
    assert [d["id"] for d in json.loads(out)][0] == "welford-variance"
    rc, out, _ = run_cli(["search", "--query", "warp shuffle", "--backend", "cpp", "--json"],
                         capsys)
    assert "warp-shuffle-reduction" not in [d["id"] for d in json.loads(out)]
    rc, out, _ = run_cli(["search", "--bottleneck", "launch-bound", "--backend", "any", "--limit", "50"], capsys)
    assert rc == 0 and "cuda-graphs" in out and "tensor-cores-wmma" not in out


@pytest.mark.parametrize("argv, message", [
    ([], "give at least one of --task"),
    (["--task", "no_such_example"], "no_such_example"),
    (["--query", "  "], "--query: empty"),
])
def test_cli_search_usage_errors(capsys, argv, message):
    with pytest.raises(UserError, match=message):
        run_cli(["search", *argv], capsys)


def test_cli_search_rejects_bad_choices(capsys):
    for argv in (["--bottleneck", "slow"], ["--backend", "metal"]):
        with pytest.raises(SystemExit):
            run_cli(["search", *argv], capsys)


@pytest.mark.parametrize("command", ["validate", "check"])
def test_cli_validate_dir_and_file(capsys, tmp_path, command):
    rc, out, err = run_cli([command], capsys)
    assert rc == 0 and err == "" and "0 error(s)" in out
    good = tmp_path / "good"
    write(good, "my-skill.toml", VALID)
    assert run_cli([command, str(good)], capsys)[0] == 0
    rc, out, _ = run_cli([command, str(good / "my-skill.toml")], capsys)
    assert rc == 0 and "1 valid skill(s), 0 error(s)" in out
    bad = write(good, "bad.toml", VALID.replace("my-skill", "bad") + 'colour = "red"\n')
    rc, out, err = run_cli([command, str(good)], capsys)
    assert rc == 1 and "bad.toml: unknown key 'colour'" in err and "1 error" in out
    rc, out, err = run_cli([command, str(bad)], capsys)
    assert rc == 1 and "bad.toml: unknown key 'colour'" in err and "0 valid" in out
    wrong = write(tmp_path, "other.toml", VALID)
    rc, _, err = run_cli([command, str(wrong)], capsys)
    assert rc == 1 and "other.toml: key 'id': 'my-skill' does not match the file name" in err
    rc, _, err = run_cli([command, str(tmp_path / "missing")], capsys)
    assert rc == 1 and "missing: no such skill file or directory" in err


def test_cli_through_main_entry_point(capsys):
    from kernelskill.cli import main
    assert main(["skills", "validate", str(shipped_dir() / "online-softmax.toml")]) == 0
    assert main(["skills", "search", "--query", "bank conflict", "--backend", "any", "--json"]) == 0
    assert json.loads(capsys.readouterr().out.split("\n", 1)[1])[0]["id"] == \
        "smem-bank-conflict-padding"
    assert main(["skills", "search"]) == 2


def test_docs_table_matches_shipped_skills(book_shipped):
    doc = (REPO / "docs" / "skills.md").read_text()
    assert cli_skills.markdown_table(list(book_shipped)) in doc
