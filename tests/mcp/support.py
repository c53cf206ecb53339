"""Shared by the MCP tests: the candidate source, fast options, and ways to start server processes."""
from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio

from helpers import toolkit_candidate

# One source for every test that evaluates: the toolkit's C++ build is cached after the first.
SOURCE = toolkit_candidate("return ext.relu2(x)")
ALLOWED_ORIGIN = "https://agent.example"


def fast_options():
    from kernelskill.evaluate.api import Options
    from kernelskill.evaluate.worker.timing import TimingConfig
    return Options(device="cpu", trials=2, timing=TimingConfig(warmup=1, min_reps=5, max_reps=20, time_cap_s=0.3, retimes=0),
                   build_timeout=600, run_timeout=60)


def kernelskill_command() -> list[str]:
    """The installed ``kernelskill`` script next to this interpreter, else ``python -m kernelskill.cli``."""
    script = Path(sys.executable).parent / "kernelskill"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "kernelskill.cli"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with code {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"nothing listened on port {port} within {timeout:.0f} s")


TOOLS = {"compile", "verify", "profile", "evaluate", "lookup_skills", "list_tasks", "get_task", "record_attempt",
         "distill_skill", "start_evaluation", "get_job", "cancel_job", "describe_machine", "export_kernel"}


async def exercise_all_tools(client, task: str) -> None:
    """Call every tool once with good arguments and check its structured result (any transport)."""
    tools = {t.name for t in (await client.list_tools()).tools}
    assert tools == TOOLS
    calls = {
        "compile": {"source": SOURCE},
        "verify": {"task": task, "source": SOURCE, "trials": 2},
        "evaluate": {"task": task, "source": SOURCE},
        "profile": {"task": task, "source": SOURCE},
        "lookup_skills": {"task": task, "backend": "cpp", "limit": 3},
        "list_tasks": {},
        "get_task": {"task": task},
        "describe_machine": {},
        "record_attempt": {"task": task, "source": SOURCE, "skill_id": "openmp-parallel-for", "outcome": "success"},
    }
    out = {}
    for name, args in calls.items():
        res = await client.call_tool(name, args)
        assert not res.is_error, (name, res.content)
        out[name] = res.structured_content
    assert out["compile"]["ok"]
    machine = out["describe_machine"]
    assert machine["cpu"]["logical_cores"] >= 1 and "cores usable" in machine["text"] and machine["ceilings"]
    assert out["verify"]["status"] == "ok" and out["verify"]["correct"]
    assert out["evaluate"]["status"] == "ok" and out["evaluate"]["speedup"] > 0
    assert out["profile"]["status"] == "ok" and out["profile"]["result"]["profile"]["kernels"]
    assert len(out["lookup_skills"]["skills"]) == 3
    assert out["get_task"]["op_classes"] == ["elementwise"]
    assert out["record_attempt"]["op_class"] == "elementwise"
    # a job: its id at once, then its result by id (the evaluation above made this one a cache hit)
    job = (await client.call_tool("start_evaluation", {"kind": "verify", "task": task, "source": SOURCE,
                                                       "trials": 2})).structured_content
    assert job["status"] in ("running", "done") and job["job"]
    deadline = time.monotonic() + 120
    while job["status"] == "running" and time.monotonic() < deadline:
        await anyio.sleep(0.05)
        job = (await client.call_tool("get_job", {"job": job["job"]})).structured_content
    assert job["status"] == "done" and job["result"]["status"] == "ok", job
    stopped = (await client.call_tool("cancel_job", {"job": job["job"]})).structured_content
    assert stopped["status"] == "done"                  # a finished job stays as it was
