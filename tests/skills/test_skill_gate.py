"""Preconditions as data: predicates in skill files, checked by `skills validate`, decided by the
gate over the task's facts and a node's profile, explained by `skills gate --explain`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernelskill.errors import UserError
from kernelskill.skills import SkillBook, parse_skill
from kernelskill.skills.predicates import FACTS, parse, profile_facts, task_facts
from kernelskill.task import Task

from helpers import skill_toml

REPO = Path(__file__).resolve().parents[2]

BASE = skill_toml("gemv-thing", '["matmul"]', '"*"')


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch) -> Path:
    h = tmp_path / "home"
    monkeypatch.setenv("KERNELSKILL_HOME", str(h))
    return h


def skill(extra: str):
    return parse_skill(BASE + extra, "x.toml")


def book(extra: str) -> SkillBook:
    return SkillBook([skill(extra)])


# ---- the predicate language ---------------------------------------------------------------------

def test_predicates_parse_and_decide():
    p = parse("gemm_k >= 4096", "w")
    assert (p.name, p.op, p.value) == ("gemm_k", ">=", 4096) and str(p) == "gemm_k >= 4096"
    assert p.check({"gemm_k": 8192}, set()) is True and p.check({"gemm_k": 64}, set()) is False
    assert p.check({}, set()) is None                                # not known: decides nothing
    assert parse("roofline_fraction < 0.5", "w").check({"roofline_fraction": 0.31}, None) is True
    assert parse("bottleneck == memory-bound", "w").check({"bottleneck": "memory-bound"}, None) is True
    assert parse("has gemv", "w").check({}, {"gemv"}) is True
    assert parse("has gemv", "w").check({}, set()) is False
    assert parse("has gemv", "w").check({}, None) is None             # structure unknown


@pytest.mark.parametrize("text, message", [
    ("gemm_q >= 3", "unknown fact 'gemm_q'"),
    ("gemm_k >> 3", "is not a predicate"),
    ("gemm_k >= lots", "'lots' is not a number"),
    ("bottleneck < memory-bound", "compare it with == or !="),
    ("bottleneck == slow", "'slow' is not one of"),
    ("has gemmv", "'gemmv' is not a task feature"),
    ("gemm_k >= inf", "finite"),
])
def test_bad_predicates_say_what_is_wrong(text, message):
    with pytest.raises(UserError, match=message):
        parse(text, "skills/x.toml: key 'preconditions'")


def test_validate_names_file_and_key_of_a_bad_predicate(tmp_path):
    (tmp_path / "gemv-thing.toml").write_text(BASE + 'preconditions = ["gemm_k >= many"]\n')
    r = subprocess.run([sys.executable, "-m", "kernelskill", "skills", "validate", str(tmp_path)],
                       capture_output=True, text=True, cwd=REPO)
    assert r.returncode != 0
    assert "gemv-thing.toml: key 'preconditions'" in r.stdout + r.stderr and "'many' is not a number" in r.stdout + r.stderr
    (tmp_path / "gemv-thing.toml").write_text(BASE + 'expect = { launches = "sideways" }\n')
    r = subprocess.run([sys.executable, "-m", "kernelskill", "skills", "validate", str(tmp_path)],
                       capture_output=True, text=True, cwd=REPO)
    assert r.returncode != 0 and "key 'expect'" in r.stdout + r.stderr and '"up" or "down"' in r.stdout + r.stderr


def test_expect_names_only_measured_metrics_and_round_trips():
    with pytest.raises(UserError, match="not a measured metric"):
        skill('expect = { gemm_k = "up" }\n')
    s = skill('preconditions = ["gemm_k >= 4096"]\nforbidden = ["has diagonal"]\n'
              'expect = { dram_pct = "up", launches = "down" }\n')
    again = parse_skill(s.to_toml(), "again.toml")
    assert (again.preconditions, again.forbidden, again.expect) == (s.preconditions, s.forbidden, s.expect)


# ---- the gate -----------------------------------------------------------------------------------

def test_preconditions_on_task_facts_gate_and_explain():
    b = book('preconditions = ["gemm_k >= 4096"]\n')
    assert b.gate(["matmul", "gemv"], facts={"gemm_k": 8192})
    assert not b.gate(["matmul", "gemv"], facts={"gemm_k": 512})
    assert b.gate(["matmul"])                                          # facts not known: kept
    d = b.explain(["matmul", "gemv"], facts={"gemm_k": 512})[0]
    assert not d.allowed and "- precondition gemm_k >= 4096 (gemm_k = 512)" in d.reasons
    d = b.explain(["matmul", "gemv"])[0]
    assert d.allowed and "? precondition gemm_k >= 4096: not measured" in d.reasons


def test_profile_preconditions_read_a_real_profile_shape():
    b = book('preconditions = ["roofline_fraction < 0.6", "launches >= 3"]\n'
             'forbidden = ["achieved_occupancy_pct >= 90"]\n')
    profile = {"bottleneck": "memory-bound", "roofline": {"fraction": 0.25, "floor_ms": 1.0},
               "kernels": [{"name": "a", "calls": 2, "time_ms": 1.0, "share": 0.5, "custom": True},
                           {"name": "b", "calls": 2, "time_ms": 1.0, "share": 0.5, "custom": False}],
               "custom_share": 0.5, "ncu": {"achieved_occupancy_pct": 40.0}}
    assert profile_facts(profile) == {"custom_share": 0.5, "bottleneck": "memory-bound", "roofline_fraction": 0.25,
                                      "launches": 4, "achieved_occupancy_pct": 40.0}
    assert b.gate(["matmul"], profile)
    assert not b.gate(["matmul"], {**profile, "roofline": {"fraction": 0.9}})        # at the roofline already
    out = b.explain(["matmul"], {**profile, "ncu": {"achieved_occupancy_pct": 95.0}})[0]
    assert not out.allowed
    assert "- forbidden achieved_occupancy_pct >= 90: holds (achieved_occupancy_pct = 95)" in out.reasons


def test_forbidden_feature_keeps_a_skill_out_whatever_else_fits():
    b = book('features = ["gemv"]\nforbidden = ["has diagonal"]\n')
    assert b.gate(["matmul", "gemv"])
    out = b.explain(["matmul", "gemv", "diagonal"])[0]
    assert not out.allowed and "- forbidden has diagonal: holds" in out.reasons


def test_every_shipped_skill_states_its_expected_effect_and_known_facts():
    for s in SkillBook.load():
        assert s.expect, f"{s.id}: no expect (the metric change it should cause)"
        for text in s.preconditions + s.forbidden:
            p = parse(text, s.id)
            assert p.name == "has" or p.name in FACTS


def test_task_facts_of_a_traced_task():
    info = Task.load(REPO / "examples" / "matmul").summary()
    facts = task_facts(info)
    assert (facts["gemm_m"], facts["gemm_n"], facts["gemm_k"], facts["gemm_batch"]) == (4096, 4096, 4096, 1)
    assert facts["dtype"] == "float32" and facts["ops"] >= 1
    assert facts["intensity"] == pytest.approx(facts["flops"] / facts["bytes"])
    red = task_facts(Task.load(REPO / "examples" / "sum_reduce").summary())
    assert red["reduce_size"] > 1 and "gemm_k" not in red


# ---- the CLI ------------------------------------------------------------------------------------

def ks(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kernelskill", "skills", *argv], capture_output=True, text=True,
                          cwd=REPO)


def test_cli_gate_explain_for_a_task_shows_every_skill_in_or_out():
    r = ks("gate", "--task", "diag_matmul", "--explain")
    assert r.returncode == 0, r.stderr
    assert "facts: " in r.stdout and "gemm_" in r.stdout
    assert "IN   diagonal-matrix-shortcut" in r.stdout
    outs = [line for line in r.stdout.splitlines() if " OUT " in line]
    assert outs and all(line.split()[1] for line in outs)
    # a skill that needs a structure the task lacks is out, with the reason
    r = ks("gate", "--task", "softmax_rows", "--backend", "cuda", "--explain")
    lines = r.stdout.split("OUT  diagonal-matrix-shortcut\n", 1)[1].splitlines()
    block = [line.strip() for line in lines[:next(i for i, line in enumerate(lines) if not line.startswith(" " * 11))]]
    assert "- requires one of diagonal: the task has none" in block and "+ backend cuda (skill: cuda, triton, cpp)" in block
    n = len(SkillBook.load())
    assert f"of {n} skill(s) allowed" in r.stdout


def test_cli_gate_reads_an_eval_result(tmp_path):
    result = tmp_path / "r.json"
    result.write_text(json.dumps({"status": "ok", "profile": {"bottleneck": "launch-bound", "custom_share": 1.0,
                                                              "roofline": {"fraction": 0.02}}}))
    r = ks("gate", "--task", "relu_gelu", "--result", str(result), "--json")
    assert r.returncode == 0, r.stderr
    allowed = [d["id"] for d in json.loads(r.stdout)]
    assert allowed and all(d["allowed"] for d in json.loads(r.stdout))
    launch_skills = {s.id for s in SkillBook.load() if "launch-bound" in s.bottlenecks or "*" in s.bottlenecks}
    assert set(allowed) <= launch_skills
    bad = tmp_path / "bad.json"
    bad.write_text("{\n  nope")
    r = ks("gate", "--task", "relu_gelu", "--result", str(bad))
    assert r.returncode == 2 and "bad.json: line 2" in r.stderr
    r = ks("gate", "--bottleneck", "memory-bound")
    assert r.returncode == 2 and "--task" in r.stderr


def test_cli_output_into_a_closed_pipe_ends_quietly():
    """`kernelskill skills gate --explain | head -3`: no traceback when the reader goes away."""
    fcntl = pytest.importorskip("fcntl")
    r, w = __import__("os").pipe()
    fcntl.fcntl(w, getattr(fcntl, "F_SETPIPE_SZ", 1031), 4096)        # far less than the output
    proc = subprocess.Popen([sys.executable, "-m", "kernelskill", "skills", "gate", "--task", "softmax_rows",
                             "--explain"], stdout=w, stderr=subprocess.PIPE, text=True, cwd=REPO)
    __import__("os").close(w)
    with open(r, "rb") as reader:
        assert reader.readline().startswith(b"facts:")
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0 and "Traceback" not in err, err
