"""A cancelled call stops its work: the client cancels a `verify` whose candidate hangs, and within
2 s the worker is gone and the device free, so the next call starts at once (in memory, over stdio
and over HTTP, with the SDK's own client). Where other processes keep every core busy meanwhile the
bound is 8 s, and a failure says which bound held and why."""
from __future__ import annotations

import os
import time

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from kernelskill.evaluate.host import HostSampler, cores
from kernelskill.mcp_server.locks import hold_device

from helpers import DATA
from procs import descendants, proc_stat, running_candidate
from support import SOURCE, kernelskill_command

pytestmark = pytest.mark.anyio
RELU = str(DATA / "relu_task.py")
WAIT_S = 120                # a bound on reaching a state on a busy machine
RELEASED_S = 2.0            # the bound: the worker dead and the device free
# On a machine other work keeps saturated (a CI box running tests beside busy threads), the wait is
# the scheduler's, not the server's: the bound then allows that much more, and the message says so.
SATURATED_FACTOR = 4.0
MARKER = "hung-for-cancel"
HUNG = f"""import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        # {MARKER}
        while True:
            pass
"""


async def _until(what: str, check, bound: float = WAIT_S):
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        await anyio.sleep(0.05)
    raise AssertionError(f"no {what} within {bound} s")


def _device_free() -> bool:
    """The CPU's device lock (this process's and the file lock) can be taken now."""
    got = []

    def take():
        with hold_device("cpu"):
            got.append(True)
    import threading
    t = threading.Thread(target=take, daemon=True)
    t.start()
    t.join(0.2)
    return bool(got)


class Released(float):
    """The seconds from the cancel until the worker was gone and the device free, with the bound
    they are held to: RELEASED_S, or SATURATED_FACTOR times it when other processes kept every
    core busy meanwhile (``why`` says so)."""
    bound: float = RELEASED_S
    why: str = ""

    def ok(self) -> bool:
        return self <= self.bound

    def __str__(self) -> str:
        return f"{float(self):.2f} s (bound {self.bound:.1f} s{'; ' + self.why if self.why else ''})"


class CancelWindow:
    """From a cancel until the release: the seconds, and whether other processes kept every core
    busy meanwhile. The machine's busy cores are sampled over the window (every process), less the
    hung worker's: it spins one core until it is gone, and once gone its CPU time can't be read
    (a sampler that left out its measured CPU returned nothing then: the 8 s bound never applied)."""

    def __init__(self, worker: int, start: int):
        self.worker, self.start, self.gone_at = worker, start, None
        self.sampler = HostSampler()
        self.sampler.start(None)
        self.t0 = time.monotonic()

    def worker_gone(self) -> bool:
        if self.gone_at is None and not ((st := proc_stat(self.worker)) and st[2] == self.start):
            self.gone_at = time.monotonic()
        return self.gone_at is not None

    def released(self) -> Released:
        took = Released(time.monotonic() - self.t0)
        self.worker_gone()
        host = self.sampler.stop()
        if host:
            spun = ((self.gone_at or time.monotonic()) - self.t0) / host["seconds"]   # at most one core
            others = host["others_cores"] - min(1.0, spun)
            if others >= cores() - 0.5:
                took.bound = RELEASED_S * SATURATED_FACTOR
                took.why = f"other processes kept {others:.1f} of {cores()} cores busy meanwhile"
        return took


async def cancel_a_hung_verify(client, root_pid: int) -> Released:
    """Start verify(HUNG), wait for its worker to run the candidate, cancel; the seconds until the
    worker is gone and the device is free, and the bound that holds on this machine just then."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(client.call_tool, "verify", {"task": RELU, "source": HUNG, "trials": 1})
        worker = await _until("worker running the hung candidate", lambda: running_candidate(root_pid, MARKER))
        window = CancelWindow(worker, proc_stat(worker)[2])
        tg.cancel_scope.cancel()
    await _until("end of the worker", window.worker_gone, bound=RELEASED_S * SATURATED_FACTOR + 5)
    await _until("free device", _device_free, bound=RELEASED_S * SATURATED_FACTOR + 5)
    return window.released()


def collect(into: list):
    """A progress callback that keeps every message (the mcp client awaits its callback)."""
    async def on_progress(progress, total, message):
        into.append(message)
    return on_progress


async def next_call_starts_at_once(client) -> None:
    """The next call does not queue behind the cancelled one. The cancelled call held the device in
    this server's process (its thread lock, then the file lock): a wait on it reads "another
    evaluation is running". A wait for the file lock alone ("another process is evaluating") is some
    other process of the machine holding it, not the cancelled call (seen once in a CI-like run)."""
    waits = []

    async def on_progress(progress, total, message):      # the client awaits its progress callback
        if message and "waiting" in message and "another process" not in message:
            waits.append(message)
    r = await client.call_tool("verify", {"task": RELU, "source": SOURCE, "trials": 1}, progress_callback=on_progress)
    assert not r.is_error and r.structured_content["status"] == "ok", r.content
    assert not waits, waits


async def test_cancel_in_memory_kills_the_worker_and_frees_the_device(server):
    async with Client(server) as client:
        took = await cancel_a_hung_verify(client, os.getpid())
        assert took.ok(), str(took)
        await next_call_starts_at_once(client)


async def test_cancel_over_stdio(tmp_path):
    cmd = kernelskill_command()
    params = StdioServerParameters(command=cmd[0], args=cmd[1:] + ["mcp", "--root", str(DATA), "--device", "cpu",
                                                                   "--trials", "1", "--time-cap", "0.3"],
                                   env=dict(os.environ))
    async with Client(params) as client:
        await client.list_tools()
        took = await cancel_a_hung_verify(client, os.getpid())
        assert took.ok(), str(took)
        await next_call_starts_at_once(client)


def _server_pid(port_url: str) -> int:
    port = int(port_url.rsplit(":", 1)[1].split("/")[0])
    for pid in descendants(os.getpid()):
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if b"mcp" in argv and str(port).encode() in argv:
            return pid
    raise AssertionError(f"no server process for {port_url}")


async def test_cancel_over_http(http_server):
    async with httpx2.AsyncClient(headers=http_server.auth, timeout=httpx2.Timeout(30, read=300)) as http:
        async with Client(streamable_http_client(http_server.url, http_client=http)) as client:
            took = await cancel_a_hung_verify(client, _server_pid(http_server.url))
            assert took.ok(), str(took)
            await next_call_starts_at_once(client)


async def test_a_disconnected_client_stops_its_work(tmp_path):
    """The client goes away (the editor closed) with a call running: the worker dies, the server
    stays up for the next client."""
    cmd = kernelskill_command()
    params = StdioServerParameters(command=cmd[0], args=cmd[1:] + ["mcp", "--root", str(DATA), "--device", "cpu",
                                                                   "--trials", "1"], env=dict(os.environ))
    worker = None
    async with Client(params) as client:
        await client.list_tools()
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.call_tool, "verify", {"task": RELU, "source": HUNG, "trials": 1})
            worker = await _until("worker running the hung candidate",
                                  lambda: running_candidate(os.getpid(), MARKER))
            start = proc_stat(worker)[2]
            tg.cancel_scope.cancel()
    # the client closed the session and its stdio: nothing of the server's remains
    await _until("end of the worker", lambda: not ((st := proc_stat(worker)) and st[2] == start), bound=10)
    # the server lets the device go once the cancelled call has unwound: waited for, not assumed
    await _until("the device free", _device_free, bound=10)


# ---- jobs ------------------------------------------------------------------------------------------
async def _job(client, job_id: str) -> dict:
    return (await client.call_tool("get_job", {"job": job_id})).structured_content


async def test_a_job_returns_at_once_reports_progress_and_cancels(server):
    async with Client(server) as client:
        started = await client.call_tool("start_evaluation", {"kind": "verify", "task": RELU, "source": HUNG,
                                                              "trials": 1})
        job = started.structured_content
        assert not started.is_error and job["status"] == "running" and job["result"] is None
        worker = await _until("worker running the hung candidate", lambda: running_candidate(os.getpid(), MARKER))
        start = proc_stat(worker)[2]
        seen = await _job(client, job["job"])
        assert seen["status"] == "running" and seen["message"] and seen["elapsed_s"] > 0
        window = CancelWindow(worker, start)
        await client.call_tool("cancel_job", {"job": job["job"]})
        deadline = time.monotonic() + RELEASED_S * SATURATED_FACTOR + 5
        while (seen := await _job(client, job["job"]))["status"] == "running" and time.monotonic() < deadline:
            window.worker_gone()
            await anyio.sleep(0.05)
        took = window.released()
        assert seen["status"] == "cancelled" and took.ok(), (str(took), seen)
        assert not ((st := proc_stat(worker)) and st[2] == start)
        resource = await client.read_resource(f"job://{job['job']}")
        assert '"cancelled"' in resource.contents[0].text
        await next_call_starts_at_once(client)


async def test_job_mistakes_are_errors_of_the_call(server):
    async with Client(server) as client:
        r = await client.call_tool("start_evaluation", {"kind": "evaluate", "task": RELU})
        assert r.is_error and "needs the candidate's source" in r.content[0].text
        r = await client.call_tool("start_evaluation", {"kind": "verify", "task": "no_such_task", "source": HUNG})
        assert r.is_error and "no such task" in r.content[0].text
        r = await client.call_tool("get_job", {"job": "0123456789ab"})
        assert r.is_error and "no job '0123456789ab'" in r.content[0].text


# ---- time limits the caller sets ---------------------------------------------------------------------
async def test_a_call_lowers_its_run_timeout_and_hears_it_in_progress(server):
    messages = []
    async with Client(server) as client:
        t0 = time.monotonic()
        r = await client.call_tool("verify", {"task": RELU, "source": HUNG, "trials": 1, "run_timeout_s": 2},
                                   progress_callback=collect(messages))
        took = time.monotonic() - t0
    assert not r.is_error and r.structured_content["status"] == "timeout", r.content
    assert took < 60, took                              # the server's own limit (60 s in these tests)
    assert any("running the correctness trials (stopped as a timeout after 2 s)" in (m or "") for m in messages), \
        messages


async def test_compile_reports_the_builds_steps_as_progress(server):
    """The compile tool was silent until the build ended (159 s for a CUDA source on a busy machine):
    each build step now comes back as a progress notification within the build phase."""
    messages = []
    async with Client(server) as client:
        r = await client.call_tool("compile", {"source": SOURCE}, progress_callback=collect(messages))
    assert not r.is_error and r.structured_content["ok"], r.content
    assert messages and messages[0].startswith("building the candidate's extensions"), messages
    steps = [m for m in messages if m and m.startswith("build, ")]
    assert steps and steps[-1].endswith("load"), messages


async def test_a_run_timeout_above_the_server_limit_is_refused(server):
    async with Client(server) as client:
        r = await client.call_tool("evaluate", {"task": RELU, "source": SOURCE, "run_timeout_s": 10_000})
        assert r.is_error and "between 1 and 60 seconds" in r.content[0].text and "--run-timeout" in r.content[0].text
        r = await client.call_tool("start_evaluation", {"kind": "verify", "task": RELU, "source": SOURCE,
                                                        "run_timeout_s": 10_000})
        assert r.is_error and "this server's limit" in r.content[0].text


def test_the_server_limits_are_flags(tmp_path):
    import subprocess
    r = subprocess.run(kernelskill_command() + ["mcp", "--run-timeout", "0", "--root", str(DATA)],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 2 and "--run-timeout 0: at least 1 second" in r.stderr


async def test_past_results_are_resources(server):
    async with Client(server) as client:
        r = await client.call_tool("verify", {"task": RELU, "source": SOURCE, "trials": 1})
        uri = r.structured_content["uri"]
        assert uri.startswith("result://")
        again = await client.read_resource(uri)
        assert '"status": "ok"' in again.contents[0].text and uri in again.contents[0].text
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
        assert {"job://{job_id}", "result://{task_hash}/{candidate_hash}"} <= templates
        with pytest.raises(Exception, match="no such result"):
            await client.read_resource("result://0000000000000000/0000000000000000")
