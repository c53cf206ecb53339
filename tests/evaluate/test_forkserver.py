"""Forked CPU workers (launch/forkserver.py), with real evaluations: a worker forked from the zygote
is judged as a spawned one, runs as isolated as one, dies however a spawned one dies, and a zygote
that cannot serve (multithreaded, killed) costs a fallback or a new zygote, never a verdict."""
from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
import torch

from kernelskill import Candidate
from kernelskill.evaluate import evaluate
from kernelskill.evaluate.launch import forkserver, isolation
from kernelskill.evaluate.options import request

from helpers import RELU_TASK, limits, toolkit_candidate

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or not Path("/proc/self/task").exists(),
                                reason="forks and reads /proc")

GOOD = toolkit_candidate("return ext.relu2(x)")
WRONG = toolkit_candidate("return ext.relu2(x) + 1.0")
BOUND_S = 120             # an upper bound on a state change, never a guess at how long it takes


@pytest.fixture
def forks(monkeypatch):
    """Every worker the zygotes forked in this test: (zygote pid, handle), in order."""
    monkeypatch.setattr(isolation, "FORK", True)
    seen: list[tuple[int, forkserver.ForkedProc]] = []
    real = forkserver.Zygote.fork

    def fork(self, *a, **k):
        proc = real(self, *a, **k)
        if proc is not None:
            seen.append((self.proc.pid, proc))
        return proc
    monkeypatch.setattr(forkserver.Zygote, "fork", fork)
    return seen


def _until(what: str, check, bound: float = BOUND_S):
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"no {what} within {bound} s")


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


def _compile(src: str, fast, tmp_path, env: dict | None = None):
    """A compile request (the worker imports the candidate) run through ``run_worker``."""
    base = tmp_path / f"req{len(list(tmp_path.iterdir()))}"
    base.mkdir()
    req = request("compile", None, Candidate.from_source(src), "cpu", fast, base)
    if env:
        req.env = {**req.env, **env}
    return isolation.run_worker(req, limits(), keep=base), base


# The candidate's module writes what its process looks like from inside.
PROBE = '''
import json as _json, os as _os, sys as _sys, tempfile as _tempfile
_fds = {{}}
for _fd in _os.listdir("/proc/self/fd"):
    try:
        _fds[_fd] = _os.readlink("/proc/self/fd/" + _fd)
    except OSError:
        pass
with open({path!r}, "w") as _f:
    _json.dump({{"pid": _os.getpid(), "sid": _os.getsid(0), "pgid": _os.getpgid(0), "cwd": _os.getcwd(),
                "env": dict(_os.environ), "path0": _sys.path[0], "tmp": _tempfile.gettempdir(),
                "argv": _sys.argv[1:], "fds": _fds,
                "parent": open(f"/proc/{{_os.getppid()}}/cmdline").read().split("\\0")}}, _f)
'''


def _probe(fast, tmp_path, name: str) -> tuple[dict, Path]:
    path = tmp_path / f"{name}.json"
    out, base = _compile(toolkit_candidate("return ext.relu2(x)", extra=PROBE.format(path=str(path))), fast, tmp_path)
    assert out.result is not None and out.result.status == "ok", out.log_tail
    return json.loads(path.read_text()), base


def test_a_forked_worker_gives_the_verdict_and_outputs_a_spawned_one_gives(forks, fast, tmp_path, monkeypatch):
    results = {}
    for fork in (True, False):
        monkeypatch.setattr(isolation, "FORK", fork)
        before = len(forks)
        for name, src in (("good", GOOD), ("wrong", WRONG)):
            keep = tmp_path / f"{name}-{fork}"
            keep.mkdir()
            r = evaluate(RELU_TASK, Candidate.from_source(src), opts=fast, timing=None, keep_dir=keep)
            out = next(keep.iterdir()) / "out"
            outputs = [torch.load(p) for p in sorted(out.glob("cand_outputs_*.pt"))]
            results[name, fork] = r, outputs
        assert (len(forks) > before) == fork            # forked only where asked to
    for name, status in (("good", "ok"), ("wrong", "incorrect")):
        (forked, f_out), (spawned, s_out) = results[name, True], results[name, False]
        assert forked.status == spawned.status == status, (forked.message, spawned.message)
        assert forked.verify.correct == spawned.verify.correct
        assert [t.ok for t in forked.verify.trials] == [t.ok for t in spawned.verify.trials]
        assert len(f_out) == len(s_out) == len(forked.verify.trials)
        for a, b in zip(f_out, s_out):
            assert len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


def test_a_forked_worker_is_as_isolated_as_a_spawned_one(forks, fast, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_API_KEY", "secret-1")
    monkeypatch.setenv("OPENAI_API_KEY", "secret-2")
    monkeypatch.setenv("PLAIN_VARIABLE_FOR_THE_TEST", "visible")
    forked, f_base = _probe(fast, tmp_path, "forked")
    assert forks and "--zygote" in forked["parent"], forked["parent"]
    monkeypatch.setattr(isolation, "FORK", False)
    spawned, s_base = _probe(fast, tmp_path, "spawned")
    assert "--zygote" not in spawned["parent"]

    scratch = str(f_base / "scratch")
    assert forked["sid"] == forked["pgid"] == forked["pid"]            # its own session and group
    assert forked["cwd"] == forked["path0"] == forked["tmp"] == scratch
    assert forked["env"]["HOME"] == forked["env"]["TMPDIR"] == scratch
    assert "FAKE_API_KEY" not in forked["env"] and "OPENAI_API_KEY" not in forked["env"]
    assert forked["env"]["PLAIN_VARIABLE_FOR_THE_TEST"] == "visible"
    assert forked["argv"] == [str(f_base / "out" / "request.json")]
    # Exactly a spawned worker's environment and files, its own folder aside; nothing of the zygote's.
    def same(facts: dict, base: Path) -> dict:
        text = json.dumps({k: facts[k] for k in ("env", "fds")})
        return json.loads(text.replace(str(base), "BASE").replace(f"/proc/{facts['pid']}/", "/proc/PID/"))
    assert same(forked, f_base) == same(spawned, s_base)
    assert not any(t.startswith(("pipe:", "socket:")) for t in forked["fds"].values()), forked["fds"]


def test_timeouts_kill_a_forked_workers_whole_group(forks, fast, tmp_path):
    pids = tmp_path / "pids.json"
    src = toolkit_candidate(
        f"child = subprocess.Popen(['sleep', '3600'])\n"
        f"open({str(pids)!r}, 'w').write(json.dumps([os.getpid(), child.pid]))\n"
        "while True:\n    pass", extra="import json, os, subprocess\n")
    r = evaluate(RELU_TASK, Candidate.from_source(src), opts=fast, run_timeout=4)
    assert r.status == "timeout" and "run phase" in r.message, r.message
    worker, sleeper = json.loads(pids.read_text())
    assert worker in [p.pid for _, p in forks]
    _until("end of the worker and its child", lambda: _gone(worker) and _gone(sleeper))


def test_a_forked_worker_that_segfaults_is_crashed(forks, fast):
    r = evaluate(RELU_TASK, Candidate.from_source(toolkit_candidate(
        "os.kill(os.getpid(), signal.SIGSEGV)\nreturn ext.relu2(x)", extra="import os, signal\n")), opts=fast)
    assert r.status == "crashed" and "worker died with SIGSEGV" in r.message, r.message
    assert any(p.returncode == -11 for _, p in forks)


def test_a_candidate_that_kills_its_zygote_fails_and_the_next_evaluation_works(forks, fast):
    # Only its zygote: a spawned worker's parent would be this test's process.
    src = toolkit_candidate(
        "if '--zygote' in open(f'/proc/{os.getppid()}/cmdline').read().split(chr(0)):\n"
        "    os.kill(os.getppid(), signal.SIGKILL)\nreturn ext.relu2(x)", extra="import os, signal\n")
    r = evaluate(RELU_TASK, Candidate.from_source(src), opts=fast)
    assert r.status == "crashed" and "fork server" in r.message and "died" in r.message, r.message
    killed = forks[-1][0]
    assert _gone(killed)
    r = evaluate(RELU_TASK, Candidate.from_source(GOOD), opts=fast)
    assert r.status == "ok", r.message
    assert forks[-1][0] != killed                 # a new zygote forked it


def test_a_multithreaded_zygote_falls_back_to_spawning(forks, fast, tmp_path, capfd, monkeypatch):
    monkeypatch.setattr(isolation, "_NO_FORK", {})
    site = tmp_path / "site"
    site.mkdir()
    # Imported by every Python started with it on its path: a thread before any fork.
    (site / "sitecustomize.py").write_text("import threading, time\n"
                                           "threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()\n")
    pkg = str(Path(isolation.__file__).resolve().parents[3])
    env = {"PYTHONPATH": f"{site}{os.pathsep}{pkg}"}
    for _ in range(2):
        out, _ = _compile(GOOD, fast, tmp_path, env)
        assert out.result is not None and out.result.status == "ok", out.log_tail
    assert not forks
    key = isolation._spare_key(_last_request(tmp_path))
    assert "threads" in isolation._NO_FORK[key], isolation._NO_FORK
    assert key not in isolation._ZYGOTES                                   # not started again
    assert capfd.readouterr().err.count("spawned, not forked") == 1      # said once


def _last_request(tmp_path):
    from kernelskill.evaluate.launch.request import WorkerRequest
    last = max(tmp_path.glob("req*"), key=lambda p: int(p.name[3:]))
    return WorkerRequest.parse(json.loads((last / "out" / "request.json").read_text()))


def test_two_threads_evaluate_at_once_through_one_zygote(forks, fast, tmp_path):
    # Each candidate's module, when first imported, waits until the other's has been: both
    # evaluations' workers run at once.
    def meeting(me: str, other: str, body: str) -> str:
        mine, theirs = str(tmp_path / me), str(tmp_path / other)
        return toolkit_candidate(body, extra=(
            f"import os, time\nopen({mine!r}, 'a').close()\ndeadline = time.monotonic() + {BOUND_S}\n"
            f"while not os.path.exists({theirs!r}) and time.monotonic() < deadline:\n    time.sleep(0.01)\n"
            f"if not os.path.exists({theirs!r}):\n    raise RuntimeError('the other worker never ran beside this one')\n"))
    sources = {"a": meeting("a", "b", "return ext.relu2(x)"), "b": meeting("b", "a", "return ext.relu2(x) + 1.0")}
    results: dict = {}

    def run(name: str) -> None:
        results[name] = evaluate(RELU_TASK, Candidate.from_source(sources[name]), opts=fast, timing=None)
    threads = [threading.Thread(target=run, args=(n,)) for n in sources]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # (the meeting's file I/O gets the candidates flagged: their trials are judged all the same)
    a, b = results["a"], results["b"]
    assert a.verify is not None and a.verify.correct and a.status in ("ok", "flagged"), a.message
    assert b.verify is not None and not b.verify.correct and "trial" in b.verify.mismatch, b.message
    assert (tmp_path / "a").exists() and (tmp_path / "b").exists()
    # One worker per evaluation here (no timing), both forked by one zygote.
    assert len({tuple(p.args) for _, p in forks}) == 2 and len({z for z, _ in forks}) == 1, forks


def test_zygotes_beyond_the_cap_are_stopped_least_recently_used_first(forks, fast, tmp_path, monkeypatch):
    import dataclasses
    monkeypatch.setattr(isolation, "ZYGOTES_MAX", 1)
    for threads in (1, 2):                     # two kinds of worker: OMP_NUM_THREADS differs
        out, _ = _compile(GOOD, dataclasses.replace(fast, threads=threads), tmp_path)
        assert out.result is not None and out.result.status == "ok", out.log_tail
    (first, _), (second, _) = forks
    assert first != second and [z.proc.pid for z in isolation._ZYGOTES.values()] == [second]
    _until("end of the zygote beyond the cap", lambda: _gone(first))
