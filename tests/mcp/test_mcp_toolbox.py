"""The server's logic without the protocol: roots, task resolution, limits, locks, skills, HTTP guard."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from kernelskill.errors import TaskError, UserError
from kernelskill.mcp_server import catalog
from kernelskill.mcp_server.describe import describe_isolated
from kernelskill.mcp_server.http import Guard, HttpPolicy, is_loopback
from kernelskill.mcp_server.locks import hold_device, holder, is_free
from kernelskill.mcp_server.roots import Roots
from kernelskill.skills import SkillBook
from starlette.datastructures import Headers

from helpers import DATA, RELU_TASK

TASK_SOURCE = RELU_TASK.read_text()
WAIT_S = 120          # a bound on waiting for a state, generous for a busy 2-core machine


@pytest.fixture
def roots(tmp_path):
    inside = tmp_path / "inside"
    inside.mkdir()
    (inside / "relu.py").write_text(TASK_SOURCE)
    (inside / "notes.txt").write_text("not a task")
    (tmp_path / "secret.py").write_text(TASK_SOURCE)
    os.symlink(tmp_path / "secret.py", inside / "escape.py")
    os.symlink(inside / "relu.py", inside / "alias.py")
    return Roots([inside])


@pytest.mark.parametrize("spec", ["../secret.py", "{tmp}/secret.py", "escape.py", "/etc/passwd", "../../../etc"])
def test_paths_outside_the_roots_are_refused(roots, tmp_path, spec):
    with pytest.raises(UserError, match="outside the allowed roots"):
        roots.resolve_task(spec.format(tmp=tmp_path), tmp_path / "inline")


def test_paths_inside_the_roots_and_examples_resolve(roots, tmp_path):
    assert roots.resolve_task("relu.py", tmp_path / "inline").kind == "path"
    assert roots.resolve_task("alias.py", tmp_path / "inline").task.path.name == "relu.py"   # symlink inside
    ex = roots.resolve_task("softmax_rows", tmp_path / "inline", preset="small")
    assert ex.kind == "example" and ex.trusted and ex.task.overrides
    with pytest.raises(UserError, match="no such task.*Similar examples: .*softmax_rows"):
        roots.resolve_task("softmax", tmp_path / "inline")
    with pytest.raises(UserError, match=r"a task file is a Python \(.py\) file"):
        roots.resolve_task("notes.txt", tmp_path / "inline")
    with pytest.raises(TaskError, match="unknown preset 'huge'"):
        roots.resolve_task("softmax_rows", tmp_path / "inline", preset="huge")
    with pytest.raises(UserError, match="--root .*no such directory"):
        Roots([tmp_path / "missing"])


def test_a_task_toml_cannot_point_outside_the_roots(roots, tmp_path):
    d = roots.dirs[0] / "sneaky"
    d.mkdir()
    (d / "task.toml").write_text('reference = "../../secret.py"\n')
    with pytest.raises(UserError, match="outside the allowed roots"):
        roots.resolve_task("sneaky", tmp_path / "inline")


def test_inline_sources_get_a_handle_and_are_checked_statically(roots, tmp_path):
    rt = roots.resolve_task(TASK_SOURCE, tmp_path / "inline")
    assert rt.kind == "inline" and not rt.trusted and rt.ref.startswith("inline:")
    assert roots.resolve_task(rt.ref, tmp_path / "inline").task.source == TASK_SOURCE
    with pytest.raises(UserError, match="unknown inline task handle"):
        roots.resolve_task("inline:../../etc", tmp_path / "inline")
    with pytest.raises(UserError, match="defines no Model, get_init_inputs"):
        roots.resolve_task("import torch\ndef get_inputs():\n    return []\n", tmp_path / "inline")
    with pytest.raises(UserError, match="syntax error at line 2"):
        roots.resolve_task("x = 1\ndef (:\n", tmp_path / "inline")
    with pytest.raises(UserError, match="the limit is 1000"):
        roots.resolve_task(TASK_SOURCE + "#" * 1000 + "\n", tmp_path / "inline", max_bytes=1000)
    with pytest.raises(UserError, match="task is empty"):
        roots.resolve_task("  ", tmp_path / "inline")


def test_candidate_limits(toolbox):
    with pytest.raises(UserError, match="source is empty"):
        toolbox.candidate("\n  \n")
    with pytest.raises(UserError, match="the limit is 512000"):
        toolbox.candidate("x = 1\n" * 100_000)


def test_broken_and_hanging_tasks_fail_in_a_child(tmp_path):
    with pytest.raises(TaskError, match=r"raises.py:\d+: get_inputs\(\) raised RuntimeError"):
        describe_isolated(DATA / "bad" / "raises.py", None, tmp_path, timeout=120)
    hang = tmp_path / "hang.py"
    hang.write_text("while True:\n    pass\n" + TASK_SOURCE)
    started = time.monotonic()
    with pytest.raises(TaskError, match="took longer than 2 s"):
        describe_isolated(hang, None, tmp_path, timeout=2)
    assert time.monotonic() - started < 20


def test_one_evaluation_per_device(tmp_path):
    # The first holder lets go only once the second caller has said it waits (hold_device's on_wait,
    # called when the lock is taken) or has got in (the bug): no sleep decides who is first.
    inside, waits, order = threading.Event(), [], []
    second_waits_or_entered = threading.Event()

    def on_wait(message: str) -> None:
        waits.append(message)
        second_waits_or_entered.set()

    def first():
        with hold_device("cpu", tmp_path):
            inside.set()
            assert second_waits_or_entered.wait(WAIT_S)
            order.append("first")

    t = threading.Thread(target=first)
    t.start()
    assert inside.wait(WAIT_S)
    with hold_device("cpu", tmp_path, on_wait=on_wait):
        order.append("second")
        second_waits_or_entered.set()
    t.join(WAIT_S)
    assert order == ["first", "second"]
    assert waits and "waiting for cpu" in waits[0]


HOLDER = """
import sys
from kernelskill.mcp_server.locks import hold_device, holder, is_free
with hold_device("cpu", sys.argv[1], what="a bench run of softmax_rows"):
    print("held", flush=True)
    sys.stdin.readline()
"""


def test_a_waiter_is_told_who_holds_the_device(tmp_path):
    """Another process holds the device: a probe sees it busy without waiting, a waiter is told
    which process holds it and for what, and the device is free (and its holder blank) once it
    lets go. Another lock directory is another domain: it is not blocked."""
    holder_proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, text=True)
    try:
        assert holder_proc.stdout.readline().strip() == "held"
        assert not is_free("cpu", tmp_path)
        assert holder("cpu", tmp_path) == f"pid {holder_proc.pid}: a bench run of softmax_rows"
        assert is_free("cpu", tmp_path / "elsewhere")
        with hold_device("cpu", tmp_path / "elsewhere"):
            pass
        waits = []

        def on_wait(message: str) -> None:
            waits.append(message)
            holder_proc.stdin.write("go\n")          # told it waits: now the holder lets go
            holder_proc.stdin.flush()
        with hold_device("cpu", tmp_path, on_wait=on_wait, what="this test"):
            assert holder("cpu", tmp_path) == f"pid {os.getpid()}: this test"
            assert not is_free("cpu", tmp_path)      # held by this process: its own probe sees it too
        assert waits == [f"waiting for cpu: another process is evaluating on it (pid {holder_proc.pid}: "
                         f"a bench run of softmax_rows)"]
        assert is_free("cpu", tmp_path) and holder("cpu", tmp_path) == ""
    finally:
        holder_proc.kill()
        holder_proc.wait()


def test_list_tasks(roots):
    examples = catalog.list_tasks(roots)
    assert any(t.task == "softmax_rows" and "small" in t.presets and t.uri == "task://softmax_rows"
               for t in examples.tasks)
    found = catalog.list_tasks(roots, ".")
    names = sorted(t.name for t in found.tasks)
    assert "relu" in names and "secret" not in names     # the symlink out of the root is not followed
    with pytest.raises(UserError, match="outside the allowed roots"):
        catalog.list_tasks(roots, "..")


def test_lookup_skills_gates_and_validates(tmp_path):
    book = SkillBook.load(stats_path=tmp_path / "stats.toml")
    gated = catalog.lookup_skills(book, features=["softmax"], backend="cuda", limit=50)
    assert gated.skills and all("cuda" in s.backends for s in gated.skills)
    assert all("*" in s.applies_to or "softmax" in s.applies_to for s in gated.skills)
    narrowed = catalog.lookup_skills(book, features=["softmax"], backend="cuda", bottleneck="memory-bound", limit=50)
    assert {s.id for s in narrowed.skills} <= {s.id for s in gated.skills}
    found = catalog.lookup_skills(book, features=None, backend="cpp", query="openmp", limit=3)
    assert found.skills and found.skills[0].uri.startswith("skill://")
    for kw, msg in (({"backend": "fortran"}, "backend 'fortran'"), ({"bottleneck": "slow"}, "bottleneck 'slow'"),
                    ({"limit": 0}, "limit=0")):
        with pytest.raises(UserError, match=msg):
            catalog.lookup_skills(book, features=None, **{"backend": "cuda", **kw})


def test_record_attempt_trusts_the_servers_verdict(tmp_path):
    book = SkillBook.load(stats_path=tmp_path / "stats.toml")
    sid = next(iter(book)).id
    with pytest.raises(UserError, match="last evaluated here as 'incorrect'"):
        catalog.record_attempt(book, features=["elementwise"], skill_id=sid, outcome="success", speedup=9.0,
                               verdict=("incorrect", None), candidate_hash="h")
    rec = catalog.record_attempt(book, features=["elementwise"], skill_id=sid, outcome="success", speedup=9.0,
                                 verdict=("ok", 1.5), candidate_hash="h")
    assert rec.speedup == 1.5 and rec.measured_by_server and rec.stats.tried == 1
    with pytest.raises(UserError, match="no skill with id"):
        catalog.record_attempt(book, features=[], skill_id="no-such-skill", outcome="failure", speedup=None,
                               verdict=None, candidate_hash="h")
    assert SkillBook.load(stats_path=tmp_path / "stats.toml").stats.get(sid).succeeded == 1   # persisted


def _refusal(policy: HttpPolicy, **headers):
    got = Guard(app=None, policy=policy).refusal(Headers(headers={"host": "127.0.0.1:8765", **headers}))
    return got[0] if got else 200


def test_http_guard():
    policy = HttpPolicy(token="t" * 20, allow_origins=["https://agent.example", "http://devbox:*"])
    ok = {"authorization": "Bearer " + "t" * 20}
    assert _refusal(policy, **ok) == 200
    assert _refusal(policy) == 401 and _refusal(policy, authorization="Bearer wrong") == 401
    assert _refusal(policy, origin="https://evil.example", **ok) == 403
    assert _refusal(policy, origin="null", **ok) == 403
    for origin in ("http://localhost:3000", "https://agent.example", "http://devbox:8080"):
        assert _refusal(policy, origin=origin, **ok) == 200, origin
    assert _refusal(policy, host="evil.example:8765", **ok) == 421       # DNS rebinding
    assert _refusal(policy, **{"content-length": str(3 * 1024 * 1024)}, **ok) == 413
    assert _refusal(HttpPolicy()) == 200                                   # loopback without a token


def test_http_policy_requires_a_token_off_loopback():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5")
    with pytest.raises(UserError, match="reachable from other machines"):
        HttpPolicy(host="0.0.0.0").check()
    with pytest.raises(UserError, match="at least 16"):
        HttpPolicy(host="0.0.0.0", token="short").check()
    HttpPolicy(host="0.0.0.0", token="x" * 32).check()


def test_cli_skills_search_defaults_to_this_machines_backend_as_mcp_does(toolbox, capsys):
    """`skills search --task softmax_rows` on a CPU-only machine listed four CUDA/Triton skills while
    MCP's lookup_skills listed C++ ones: both now default to this machine's backend, and agree."""
    import json as _json

    from kernelskill.cli.main import main
    task = "softmax_rows"             # a shipped example's name: both resolve it
    assert main(["skills", "search", "--task", task, "--limit", "5", "--json"]) == 0
    cli = [s["id"] for s in _json.loads(capsys.readouterr().out)]
    mcp = toolbox.lookup_skills(task=task, limit=5)
    assert cli == [s.id for s in mcp.skills] and cli, (cli, mcp)
    assert all(str(mcp.backend) in s.backends for s in mcp.skills)
    # --backend any lifts the filter; the text output names the backend it used.
    assert main(["skills", "search", "--task", task, "--backend", "any", "--json"]) == 0
    every = _json.loads(capsys.readouterr().out)
    assert len(every) > len(cli) and {b for s in every for b in s["backends"]} > {str(mcp.backend)}
    assert main(["skills", "search", "--task", task, "--limit", "3"]) == 0
    assert f"backend {mcp.backend} (this machine's; --backend any for every backend)" in capsys.readouterr().out


def test_evaluation_summaries_say_each_number_once_and_end_whole(toolbox):
    """The ok summary repeated the speedup; the incorrect one ended in a dangling `worst`, and so did
    each trial's message. Real evaluations through the toolbox, on the C++ test toolkit."""
    from helpers import toolkit_candidate
    ok = toolbox.evaluate("relu_task.py", toolkit_candidate("return ext.relu2(x)"))
    assert ok.status == "ok", ok.summary
    assert ok.summary.count("vs eager") == 1 and "eager " in ok.summary and "candidate " in ok.summary, ok.summary
    bad = toolbox.evaluate("relu_task.py", toolkit_candidate("return ext.relu2(x) + 1"))
    assert bad.status == "incorrect", bad.summary
    assert "outside tolerance; worst: at [" in bad.summary and "expected" in bad.summary, bad.summary
    for t in bad.result.verify.trials:
        assert not t.ok and not t.message.rstrip().endswith(("worst", "worst:")), t.message
