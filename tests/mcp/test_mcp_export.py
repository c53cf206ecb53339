"""MCP ``export_kernel`` (issue 47, item 3): a client exports a verified C++ candidate as a package through the
real server, in process; the files are on disk, the run's node and the build work, and bad input is refused
with what to do instead. The build test is slow (~60 s of g++ for the GELU)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from mcp import Client

from helpers import DATA
from support import fast_options

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]
GELU_CPP = (ROOT / "examples" / "relu_gelu" / "solutions" / "cpp_gelu_openmp.py").read_text()
GELU_TRITON = (ROOT / "examples" / "relu_gelu" / "solutions" / "triton_gelu.py").read_text()
STORED_RUN = ROOT / "tests" / "tui" / "data" / "stored_runs" / "20250101-120000-relu_task-0001"


@pytest.fixture
def roots(tmp_path):
    """A run store and an output directory inside the roots; the run's task named by its absolute path."""
    run = tmp_path / "runs" / STORED_RUN.name
    shutil.copytree(STORED_RUN, run)
    toml = run / "run.toml"
    toml.write_text(toml.read_text().replace('task = "tests/data/relu_task.py"', f'task = "{DATA / "relu_task.py"}"'))
    (tmp_path / "out").mkdir()
    return tmp_path


@pytest.fixture
def export_server(roots, _home):
    """The real server over a toolbox whose roots are the test's directory and the test data."""
    from kernelskill.mcp_server.server import build_server
    from kernelskill.mcp_server.toolbox import ServerConfig, Toolbox
    with Toolbox.open(ServerConfig(roots=[roots, DATA], options=fast_options())) as tb:
        yield build_server(toolbox=tb)


async def _export(server, **args):
    progress: list[str] = []

    async def heard(step, total, message):
        progress.append(message)
    async with Client(server) as client:
        r = await client.call_tool("export_kernel", args, progress_callback=heard)
    return r, progress


async def test_the_tool_is_listed_with_its_arguments(export_server):
    async with Client(export_server) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    t = tools["export_kernel"]
    props = t.input_schema["properties"]
    assert {"to", "source", "run", "node", "task", "preset", "build", "package", "force"} <= set(props)
    assert t.input_schema["required"] == ["to"]
    assert t.annotations.read_only_hint is False
    assert {"path", "files", "ops", "built", "imported", "seconds"} <= set(t.output_schema["properties"])


async def test_exports_a_shipped_cpp_candidate_without_building(export_server, roots):
    dest = roots / "out" / "gelu"
    r, progress = await _export(export_server, to=str(dest), source=GELU_CPP, task="relu_gelu", preset="small")
    assert not r.is_error, r.content
    out = r.structured_content
    assert out["path"] == str(dest) and out["package"] == "ks_relu_gelu" and out["backend"] == "cpp"
    assert out["ops"] == ["ks_relu_gelu::gelu_tanh_forward"] and out["recorded"]
    assert out["built"] is None and out["imported"] is None and out["build_s"] is None
    assert out["export_s"] > 0 and out["seconds"] >= out["export_s"]
    # The files it says it wrote are there, and are what the package needs.
    for rel in ("setup.py", "pyproject.toml", "ks_relu_gelu/__init__.py", "ks_relu_gelu/_ops.py",
                "ks_relu_gelu/model.py", "ks_relu_gelu/export.json", "ks_relu_gelu/test_exported.py",
                "ks_relu_gelu/csrc/_C_relu_gelu_cpp_openmp.cpp"):
        assert rel in out["files"] and (dest / rel).is_file(), rel
    assert sorted(out["files"]) == sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert not any(f.endswith(".so") for f in out["files"])                      # not built
    assert "gelu_tanh_forward" in (dest / "ks_relu_gelu" / "csrc" / "_C_relu_gelu_cpp_openmp.cpp").read_text()
    meta = json.loads((dest / "ks_relu_gelu" / "export.json").read_text())
    assert meta["ops"][0]["schema"].startswith("gelu_tanh_forward(Tensor")
    assert "load_inline(" not in (dest / "ks_relu_gelu" / "model.py").read_text()
    assert any("exporting the cpp candidate" in m for m in progress) and progress[-1] == "done"
    assert "pip install --no-build-isolation" in out["next_step"]


async def test_exports_a_runs_node_with_the_runs_task(export_server, roots):
    run = roots / "runs" / STORED_RUN.name
    dest = roots / "out" / "n2"
    r, _ = await _export(export_server, to=str(dest), run=str(run), node="n2")
    assert not r.is_error, r.content
    out = r.structured_content
    assert out["source"] == f"run {STORED_RUN.name}, node n2" and out["package"] == "ks_relu_task"
    assert "ks_relu_task::relu2" in out["ops"] and (dest / "ks_relu_task" / "export.json").is_file()
    meta = json.loads((dest / "ks_relu_task" / "export.json").read_text())
    assert meta["provenance"]["run"] == STORED_RUN.name and meta["provenance"]["node"] == "n2"
    # RUN/NODE in one argument, and the run's best (n2) without a node.
    r2, _ = await _export(export_server, to=str(roots / "out" / "slash"), run=f"{run}/n2")
    assert not r2.is_error, r2.content
    r3, _ = await _export(export_server, to=str(roots / "out" / "best"), run=str(run))
    assert not r3.is_error and r3.structured_content["source"].endswith("node n2"), r3.content


@pytest.mark.parametrize("args, words", [
    ({"run": "runs/no-such-run"}, "no run directory there"),
    ({"run": "RUN", "node": "n9"}, "has no node 'n9' (nodes: n0, n1, n2, n3, n4)"),
    ({"run": "RUN", "node": "n1"}, "n1 is not a verified candidate (status incorrect"),
    ({"run": "RUN", "node": "n0"}, "the reference itself"),
    ({"source": GELU_CPP}, "task is required with source"),
    ({"source": GELU_CPP, "run": "RUN"}, "pass either source"),
    ({}, "pass either source"),
    ({"node": "n2", "source": GELU_CPP, "task": "relu_gelu"}, "node names a node of a run"),
    ({"source": GELU_TRITON, "task": "relu_gelu"}, "a Triton candidate runs on a GPU"),
    ({"source": GELU_CPP, "task": "no_such_example"}, "no such task file or directory"),
    ({"source": GELU_CPP, "task": "relu_gelu", "to": "/etc/ks_pkg"}, "outside the allowed roots"),
    ({"source": GELU_CPP, "task": "relu_gelu", "to": "FULL"}, "exists and is not empty"),
    ({"source": GELU_CPP, "task": "relu_gelu", "package": "not a name"}, "a Python identifier"),
])
async def test_bad_input_is_refused_saying_what_to_do(export_server, roots, args, words):
    run = roots / "runs" / STORED_RUN.name
    full = roots / "out" / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    args = {k: (str(run) if v == "RUN" else v) for k, v in args.items()}
    args["to"] = str(full) if args.get("to") == "FULL" else args.get("to", str(roots / "out" / "pkg"))
    r, _ = await _export(export_server, **args)
    assert r.is_error, r.content
    assert words in r.content[0].text, r.content[0].text
    assert not (roots / "out" / "pkg").exists()                         # nothing written
    assert [p.name for p in full.iterdir()] == ["keep.txt"]
    assert not Path("/etc/ks_pkg").exists()


async def test_a_failing_candidate_is_an_error_from_its_child_not_the_server(export_server, roots):
    """A candidate whose output differs from the reference: export refuses it (in the child), the server lives."""
    wrong = GELU_CPP.replace("return _ext.gelu_tanh_forward(x)", "return 2 * _ext.gelu_tanh_forward(x)")
    assert wrong != GELU_CPP
    r, _ = await _export(export_server, to=str(roots / "out" / "wrong"), source=wrong, task="relu_gelu",
                         preset="small")
    assert r.is_error and "differs from the reference" in r.content[0].text, r.content
    ok, _ = await _export(export_server, to=str(roots / "out" / "after"), source=GELU_CPP, task="relu_gelu",
                          preset="small")
    assert not ok.is_error, ok.content


@pytest.mark.slow
async def test_export_and_build_imports_the_package_without_compiling(export_server, roots):
    """build=true: setup.py build_ext --inplace (~60 s of g++), then the package imported from its directory
    (load_inline disabled) and its ModelNew compared with the reference."""
    dest = roots / "out" / "built"
    r, progress = await _export(export_server, to=str(dest), source=GELU_CPP, task="relu_gelu", preset="small",
                                build=True)
    assert not r.is_error, r.content
    out = r.structured_content
    assert out["built"] is True and out["imported"] is True, out
    assert out["import_message"] == "ModelNew matches the reference on the task's inputs"
    assert out["build_s"] > 0 and out["seconds"] >= out["build_s"] + out["export_s"] - 0.5
    so = [f for f in out["files"] if f.endswith(".so")]
    assert so and (dest / so[0]).is_file() and so[0].startswith("ks_relu_gelu/_C_relu_gelu_cpp_openmp")
    assert any("building the package" in m for m in progress)
    assert any("importing the built package" in m for m in progress)


async def test_the_candidate_runs_in_a_child_never_in_the_server(export_server, roots):
    """The candidate's module notes the process that runs it: not the server's (nor a thread of it)."""
    import os
    mark = roots / "ran-in"
    spy = GELU_CPP + f"\nimport os as _os\nopen({str(mark)!r}, 'a').write(str(_os.getpid()) + '\\n')\n"
    r, _ = await _export(export_server, to=str(roots / "out" / "spy"), source=spy, task="relu_gelu", preset="small")
    assert not r.is_error, r.content
    pids = set(mark.read_text().split())
    assert pids and str(os.getpid()) not in pids
