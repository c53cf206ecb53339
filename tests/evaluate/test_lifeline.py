"""No process outlives its owner: kill -9 the process that runs an evaluation (`eval`, `bench`,
`optimize`, the MCP server) while its worker is stuck in the candidate, and every process it
started is gone within seconds. The guard needs no cooperation from the stuck code: a child that
holds the GIL in native code dies too."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "optimizer"))

from helpers import RELU_TASK  # noqa: E402
from procs import cmdline, proc_stat, descendants, running_candidate  # noqa: E402
from kernelskill.evaluate.launch import lifeline  # noqa: E402

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")

ROOT = Path(__file__).resolve().parents[2]
BOUND_S = 120           # generous: a busy 2-core machine imports torch slowly
GONE_S = 10             # "within a few seconds" after the owner dies

# A candidate stuck in its forward: the worker sits in its `run` phase until something kills it.
HUNG = textwrap.dedent("""\
    import torch
    import torch.nn as nn


    class ModelNew(nn.Module):
        def forward(self, x):
            while True:
                pass
""")


def wait_for(what: str, check, owner: subprocess.Popen, bound: float = BOUND_S):
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        if owner.poll() is not None:
            raise AssertionError(f"the owner exited ({owner.returncode}) before {what}:\n"
                                 f"{_output(owner)}")
        time.sleep(0.1)
    raise AssertionError(f"no {what} within {bound} s")


def _output(proc: subprocess.Popen) -> str:
    for stream in (proc.stdout, proc.stderr):
        if stream is not None and not stream.closed:
            try:
                return stream.read()[-3000:] if proc.poll() is not None else ""
            except (OSError, ValueError):
                return ""
    return ""


def kill_owner_and_check(owner: subprocess.Popen) -> None:
    """Wait until a worker runs the hung candidate, kill -9 the owner, and assert that every
    process it had started is gone within GONE_S."""
    worker = wait_for("worker running the candidate", lambda: running_candidate(owner.pid), owner)
    left = descendants(owner.pid)
    assert worker in left
    owner.kill()
    owner.wait()
    deadline = time.monotonic() + GONE_S
    alive = left
    while time.monotonic() < deadline:
        alive = {pid: start for pid, start in left.items() if (st := proc_stat(pid)) and st[2] == start}
        if not alive:
            return
        time.sleep(0.1)
    for pid in alive:                   # never leave them behind, even when the test fails
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    raise AssertionError(f"{len(alive)} process(es) outlived their owner by {GONE_S} s: "
                         + "; ".join(" ".join(cmdline(p))[:160] for p in alive))


def _start(args: list[str], cwd: Path, stdin=subprocess.DEVNULL) -> subprocess.Popen:
    env = {**os.environ, "KERNELSKILL_HOME": str(cwd / "home")}
    return subprocess.Popen([sys.executable, "-m", "kernelskill", *args], cwd=cwd, env=env, stdin=stdin,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


# ---- the guard itself ----------------------------------------------------------------------------
OWNER = textwrap.dedent("""\
    import os, subprocess, sys
    from kernelskill.evaluate.launch import lifeline
    env = dict(os.environ)
    child = subprocess.Popen([sys.executable, "-c", sys.argv[1]], env=env, start_new_session=True,
                             **lifeline.child_options(env))
    child.wait()
""")
STUCK = textwrap.dedent("""\
    import ctypes, subprocess, sys
    from kernelskill.evaluate.launch import lifeline
    lifeline.hold()
    subprocess.Popen(["sleep", "600"])                  # a grandchild in the same group
    print("stuck", flush=True)
    ctypes.PyDLL(None).sleep(600)                       # native code that keeps the GIL
""")


def test_a_child_stuck_in_native_code_dies_with_its_killed_owner():
    owner = subprocess.Popen([sys.executable, "-c", OWNER, STUCK], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert owner.stdout.readline() == "stuck\n"
        left = descendants(owner.pid)
        assert len(left) >= 3                            # the child, its guard, the sleep
        owner.kill()
        owner.wait()
        deadline = time.monotonic() + GONE_S
        while time.monotonic() < deadline and any(proc_stat(p) for p in left):
            time.sleep(0.05)
        assert not any(proc_stat(p) and proc_stat(p)[2] == s for p, s in left.items())
    finally:
        for pid, start in locals().get("left", {}).items():     # never leave them behind
            if (st := proc_stat(pid)) and st[2] == start:
                os.kill(pid, signal.SIGKILL)
        owner.kill()
        owner.wait()
        owner.stdout.close()


LAUNCHER = textwrap.dedent("""\
    import os, subprocess, sys
    fd = int(os.environ["KERNELSKILL_LIFELINE_FD"])     # handed on, as ncu hands it to the worker
    worker = subprocess.run([sys.executable, "-c", sys.argv[1]], capture_output=True, text=True, pass_fds=(fd,))
    print(worker.stdout.strip(), flush=True)            # the guard's pid
    sys.stdin.readline()                                # lives on (as ncu writes its report) until told
    print("launcher done", flush=True)
""")
ENDS = "from kernelskill.evaluate.launch import lifeline; print(lifeline.hold())"


def test_the_guard_ends_with_its_worker_and_spares_the_launcher():
    """ncu (--target-processes all) waits for every process the worker started: a guard that
    outlived its worker hung every Nsight Compute run until the run timeout."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, ENDS], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True, start_new_session=True, env=env,
                                **lifeline.child_options(env))
    try:
        guard = int(launcher.stdout.readline())
        start = proc_stat(guard)[2]
        deadline = time.monotonic() + GONE_S
        while time.monotonic() < deadline and (st := proc_stat(guard)) and st[2] == start:
            time.sleep(0.05)
        assert not ((st := proc_stat(guard)) and st[2] == start), "the guard outlived its worker"
        assert launcher.poll() is None                  # the guard did not kill the worker's group
        launcher.stdin.write("\n")
        launcher.stdin.flush()
        assert launcher.stdout.readline() == "launcher done\n"
        assert launcher.wait() == 0
    finally:
        launcher.kill()
        launcher.wait()
        launcher.stdin.close()
        launcher.stdout.close()


def test_a_child_without_a_lifeline_holds_none():
    r = subprocess.run([sys.executable, "-c", "from kernelskill.evaluate.launch import lifeline; print(lifeline.hold())"],
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.stdout.strip() == "None", r.stderr


# ---- every owner ---------------------------------------------------------------------------------
def test_killing_eval_leaves_no_process(tmp_path):
    cand = tmp_path / "hung.py"
    cand.write_text(HUNG)
    owner = _start(["eval", str(RELU_TASK), str(cand), "--device", "cpu", "--trials", "1"], tmp_path)
    try:
        kill_owner_and_check(owner)
    finally:
        owner.kill()
        owner.communicate()


def test_killing_bench_leaves_no_process(tmp_path):
    suite = tmp_path / "suite" / "level1"
    (suite / "solutions" / "relu").mkdir(parents=True)
    (suite / "relu.py").write_text(RELU_TASK.read_text())
    # a C++ solution to the bench (it picks solutions by backend), never built: the forward hangs first
    (suite / "solutions" / "relu" / "hung.py").write_text(HUNG + textwrap.dedent("""

        def _never_called():
            from torch.utils.cpp_extension import load_inline
            return load_inline("never", "")
    """))
    owner = _start(["bench", str(tmp_path / "suite"), "--device", "cpu", "--executor", "local",
                    "--out", str(tmp_path / "out")], tmp_path)
    try:
        kill_owner_and_check(owner)
    finally:
        owner.kill()
        owner.communicate()


def test_killing_the_mcp_server_leaves_no_process(tmp_path):
    pytest.importorskip("mcp")                          # the GPU machine has no front ends
    cand = tmp_path / "hung.py"
    cand.write_text(HUNG)
    owner = _start(["mcp", "--root", str(tmp_path)], tmp_path, stdin=subprocess.PIPE)
    try:
        def send(msg: dict) -> None:
            owner.stdin.write(json.dumps(msg) + "\n")
            owner.stdin.flush()
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "test", "version": "0"}}})
        assert json.loads(owner.stdout.readline())["id"] == 1
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        task = tmp_path / "relu.py"
        task.write_text(RELU_TASK.read_text())
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "verify", "arguments": {"task": str(task), "source": HUNG}}})
        kill_owner_and_check(owner)
    finally:
        owner.kill()
        owner.communicate()


def test_killing_optimize_leaves_no_process(tmp_path):
    pytest.importorskip("openai")
    from chat_server import ChatServer
    from scenario import Scenario, project_toml
    script = Scenario(coder_codes=[HUNG])
    with ChatServer(script.from_request) as server:
        (tmp_path / "kernelskill.toml").write_text(project_toml(server.url, agents=False))
        owner = _start(["optimize", str(RELU_TASK), "--budget-attempts", "2"], tmp_path)
        try:
            kill_owner_and_check(owner)
        finally:
            owner.kill()
            owner.communicate()
