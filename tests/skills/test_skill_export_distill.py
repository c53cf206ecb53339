"""`skills export --format agent-skills` (Agent Skills folders) and `skills distill` (a run's node
that beat its parent with confidence becomes a draft skill), through the CLI, the library and the
MCP toolbox, on run directories written by the real RunStore."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kernelskill.errors import UserError
from kernelskill.events import BaselineMeasured, CandidateEvaluated
from kernelskill.runs import RunStore, load_run
from kernelskill.skills import SkillBook
from kernelskill.skills.distill import draft
from kernelskill.skills.export import MAX_DESCRIPTION
from kernelskill.trajectory import Node

from helpers import eval_result

REPO = Path(__file__).resolve().parents[2]
TASK = REPO / "examples" / "relu_gelu"


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch) -> Path:
    h = tmp_path / "home"
    monkeypatch.setenv("KERNELSKILL_HOME", str(h))
    return h


def ks(*argv: str, cwd: Path = REPO, home: Path | None = None) -> subprocess.CompletedProcess:
    env = None
    if home is not None:
        import os
        env = {**os.environ, "KERNELSKILL_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "kernelskill", "skills", *argv], capture_output=True, text=True,
                          cwd=cwd, env=env)


# ---- export -------------------------------------------------------------------------------------

def front_matter(text: str) -> dict:
    """The SKILL.md front matter, read strictly: name (plain), description and metadata values (quoted)."""
    assert text.startswith("---\n")
    head, body = text[4:].split("\n---\n", 1)
    out: dict = {"metadata": {}, "body": body}
    for line in head.splitlines():
        if line.startswith("  "):
            k, v = line.strip().split(": ", 1)
            out["metadata"][k] = json.loads(v)
        elif line == "metadata:":
            continue
        else:
            k, v = line.split(": ", 1)
            out[k] = json.loads(v) if v.startswith('"') else v
    return out


def test_export_writes_one_agent_skill_folder_per_skill(tmp_path, home):
    out = tmp_path / "agent-skills"
    r = ks("export", "--format", "agent-skills", str(out), home=home)
    assert r.returncode == 0, r.stderr
    book = SkillBook.load()
    folders = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert folders == sorted(s.id for s in book)
    for skill in book:
        fm = front_matter((out / skill.id / "SKILL.md").read_text())
        assert fm["name"] == skill.id and re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", fm["name"]) and len(fm["name"]) <= 64
        assert 0 < len(fm["description"]) <= MAX_DESCRIPTION and skill.title in fm["description"]
        assert fm["metadata"]["category"] == skill.category
        assert skill.guidance.strip().splitlines()[0] in fm["body"] and "## Steps" in fm["body"]
        example = next((out / skill.id / "references").iterdir())
        assert example.read_text().strip() == skill.example.strip()
        assert f"({'references/' + example.name})" in fm["body"]
    # again: replaced in place; a folder that no export wrote is left alone
    assert ks("export", str(out), home=home).returncode == 0
    mine = out / "online-softmax"
    (mine / ".kernelskill-export").unlink()
    r = ks("export", str(out), home=home)
    assert r.returncode == 2 and "online-softmax: exists and was not written by kernelskill" in r.stderr


def test_export_by_backend(tmp_path, home):
    r = ks("export", str(tmp_path / "cpp"), "--backend", "cpp", home=home)
    assert r.returncode == 0, r.stderr
    names = {p.name for p in (tmp_path / "cpp").iterdir()}
    assert names == {s.id for s in SkillBook.load() if "cpp" in s.backends}


# ---- distill ------------------------------------------------------------------------------------

def profile(speedup, ci, fraction, launches, quality="good", bottleneck="memory-bound"):
    return {"bottleneck": bottleneck, "speedup": speedup, "speedup_ci": ci, "roofline": {"fraction": fraction},
            "kernels": [{"name": "k", "calls": launches, "time_ms": 1.0, "share": 1.0, "custom": True}],
            "quality": {"verdict": quality}}


def node(id_, parent, status="ok", speedup=None, ci=(), fraction=0.2, launches=4, quality="good", **kw) -> Node:
    n = Node(id=id_, parent=parent, kind="root" if parent is None else "plan", code=f"# code of {id_}\n",
             status=status, speedup=speedup, **kw)
    n.result = eval_result(status, profile(speedup, list(ci), fraction, launches, quality))
    return n


@pytest.fixture
def run_dir(tmp_path) -> Path:
    """A run on relu_gelu (cpp): n1 beats the reference with confidence, n2 by noise, n3 is wrong,
    n4 is a child of n1 that beats it with confidence."""
    info = {"run": {"id": "r1", "task": str(TASK), "task_name": "relu_gelu", "backend": "cpp", "device": "cpu"}}
    store = RunStore.create(tmp_path / "runs", "20261124-relu_gelu-ab12", info)
    store.write(BaselineMeasured(node=node("n0", None, speedup=1.0, fraction=0.1, launches=6)))
    store.write(CandidateEvaluated(node=node(
        "n1", "n0", speedup=1.8, ci=(1.7, 1.9), fraction=0.4, launches=1, skill_id="fuse-elementwise-chain",
        mechanism="fuse relu and gelu into one OpenMP loop",
        plan="- one pass over x with #pragma omp parallel for\n- compute relu then gelu in registers")))
    store.write(CandidateEvaluated(node=node("n2", "n0", speedup=1.05, ci=(0.9, 1.2))))
    store.write(CandidateEvaluated(node=node("n3", "n0", status="incorrect")))
    store.write(CandidateEvaluated(node=node("n4", "n1", speedup=2.6, ci=(2.5, 2.7), fraction=0.6, launches=1,
                                             mechanism="vectorize the inner loop with omp simd")))
    store.close()
    return store.path


def test_distill_picks_the_widest_confident_gain_and_writes_a_valid_draft(run_dir, home):
    d = draft(load_run(run_dir), book=SkillBook.load())
    assert (d.node_id, d.base_id) == ("n1", "n0")              # 1.7/1.0 beats n4's 2.5/1.9
    assert d.gain == pytest.approx(1.8) and d.gain_low == pytest.approx(1.7)
    s = d.skill
    assert s.backends == ["cpp"] and s.example == "# code of n1\n" and s.example_lang == "python"
    assert s.category == "fusion"                               # the skill n1 applied
    assert "elementwise" in s.applies_to and s.bottlenecks == ["memory-bound"]
    assert "dtype == float32" in s.preconditions and any(p.startswith("output_numel >= ") for p in s.preconditions)
    assert s.expect == {"speedup": "up", "roofline_fraction": "up", "launches": "down"}
    assert s.steps[0] == "one pass over x with #pragma omp parallel for"
    assert "1.80x eager [1.70-1.90]" in s.guidance and "node n1" in s.guidance
    d4 = draft(load_run(run_dir), "n4", book=SkillBook.load())
    assert d4.base_id == "n1" and d4.gain_low == pytest.approx(2.5 / 1.9)


@pytest.mark.parametrize("node_id, message", [
    ("n2", "n2 does not qualify: its speedup's interval overlaps its parent's. Nodes that do: n1, n4"),
    ("n3", "n3 does not qualify: its status is incorrect"),
    ("n9", "no node 'n9'"),
])
def test_distill_refuses_a_node_that_did_not_beat_its_parent(run_dir, node_id, message):
    with pytest.raises(UserError, match=re.escape(message)):
        draft(load_run(run_dir), node_id)


def test_cli_distill_writes_to_the_user_store_and_the_gate_offers_it(run_dir, home, tmp_path):
    r = ks("distill", str(run_dir), "--id", "fused-relu-gelu-omp", home=home)
    assert r.returncode == 0, r.stderr
    path = home / "skills" / "fused-relu-gelu-omp.toml"
    assert path.is_file() and "review it" in r.stdout and "over n0: 1.80x" in r.stdout
    assert ks("validate", str(path), home=home).returncode == 0
    book = SkillBook.load()
    assert book.get("fused-relu-gelu-omp").origin == "user"
    r = ks("gate", "--task", str(TASK), "--backend", "cpp", "--json", home=home)
    assert "fused-relu-gelu-omp" in [d["id"] for d in json.loads(r.stdout)]
    # the same id again: refused without --force; by run id under --runs-dir
    r = ks("distill", run_dir.name[:12], "--runs-dir", str(run_dir.parent), "--id", "fused-relu-gelu-omp", home=home)
    assert r.returncode == 2 and "exists; --force replaces it" in r.stderr
    r = ks("distill", str(run_dir), "n4", "--id", "fused-relu-gelu-omp", "--force", "--json", home=home)
    assert r.returncode == 0 and json.loads(r.stdout)["node"] == "n4"
    r = ks("distill", str(run_dir), "--id", "online-softmax", home=home)
    assert r.returncode == 2 and "shipped skill's id" in r.stderr


def test_mcp_toolbox_distills_inside_its_roots(run_dir, home, tmp_path):
    pytest.importorskip("mcp")
    from kernelskill.mcp_server.toolbox import ServerConfig, Toolbox
    with Toolbox.open(ServerConfig(roots=[run_dir.parent])) as tb:
        got = tb.distill_skill(str(run_dir))
        assert got.node == "n1" and got.skill.id.startswith("learned-relu-gelu-") and Path(got.path).is_file()
        with pytest.raises(UserError, match="exists; pass skill_id"):
            tb.distill_skill(str(run_dir))
        with pytest.raises(UserError, match="outside the allowed roots"):
            tb.distill_skill(str(tmp_path / "home"))
