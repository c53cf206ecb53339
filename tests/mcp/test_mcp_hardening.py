"""What a client may trust: honest tool hints, every failure a clean and bounded tool error, only
finite speedups in the shared statistics, and an HTTP server that binds before it announces."""
from __future__ import annotations

import logging
import math
import socket
import subprocess

import pytest
from mcp import Client

from kernelskill.errors import UserError
from kernelskill.skills import SkillBook, shipped_dir

from helpers import DATA
from support import SOURCE, kernelskill_command

pytestmark = pytest.mark.anyio
RELU = str(DATA / "relu_task.py")
RUNS_CODE = {"compile", "verify", "evaluate", "profile"}


def text(result) -> str:
    return result.content[0].text if result.content else ""


async def test_tools_that_build_and_run_code_are_not_read_only(server):
    async with Client(server) as client:
        tools = {t.name: t.annotations for t in (await client.list_tools()).tools}
    for name in RUNS_CODE:
        assert tools[name].read_only_hint is False and tools[name].destructive_hint is False, name
        assert tools[name].open_world_hint is False, name
    for name in ("list_tasks", "get_task", "lookup_skills", "describe_machine"):
        assert tools[name].read_only_hint is True, name
    assert tools["record_attempt"].read_only_hint is False


async def test_a_megabyte_argument_is_a_clean_bounded_error_and_the_server_serves_on(server, caplog):
    huge = "x" * 1_000_000
    with caplog.at_level(logging.DEBUG):
        async with Client(server) as client:
            r = await client.call_tool("get_task", {"task": huge})
            assert r.is_error and "is no path" in text(r) and len(text(r)) < 1000
            ok = await client.call_tool("get_task", {"task": "softmax_rows"})
            assert not ok.is_error
    assert all(len(rec.getMessage()) < 5000 for rec in caplog.records), "a megabyte went to the log"


async def test_an_unexpected_os_error_is_one_bounded_line(server, toolbox, monkeypatch, caplog):
    def boom(*_a, **_k):
        raise OSError(28, "No space left on device: " + "/tmp/" + "d" * 100_000)
    monkeypatch.setattr(toolbox, "list_tasks", boom)
    with caplog.at_level(logging.ERROR, logger="kernelskill.mcp"):
        async with Client(server) as client:
            r = await client.call_tool("list_tasks", {})
    assert r.is_error and "OSError" in text(r) and "No space left" in text(r) and len(text(r)) < 600
    assert "still running" in text(r)
    assert [rec for rec in caplog.records if "No space left" in rec.getMessage()]
    assert all(len(rec.getMessage()) < 1000 for rec in caplog.records)


@pytest.mark.parametrize("speedup", [-2.0, 0.0])
async def test_a_speedup_below_zero_is_refused_by_the_tool(server, speedup):
    async with Client(server) as client:
        r = await client.call_tool("record_attempt", {"task": RELU, "source": SOURCE, "skill_id": "openmp-parallel-for",
                                                      "outcome": "success", "speedup": speedup})
    assert r.is_error and "greater than 0" in text(r)


@pytest.mark.parametrize("speedup", [math.nan, math.inf, -math.inf])
def test_a_speedup_that_is_no_number_is_refused_even_for_a_measured_source(toolbox, speedup):
    """(The SDK's client sends NaN as null; a raw JSON client can send it: the toolbox refuses it,
    also for a source the server measured, whose own speedup would otherwise replace it.)"""
    with pytest.raises(UserError, match="finite number above 0"):
        toolbox.record_attempt(RELU, SOURCE, "openmp-parallel-for", "success", speedup)


@pytest.mark.parametrize("speedup", [math.nan, math.inf, -1.0, 0.0])
def test_the_library_refuses_a_speedup_that_is_no_number(tmp_path, speedup):
    book = SkillBook.load(dirs=[shipped_dir()], stats_path=tmp_path / "stats.toml")
    with pytest.raises(UserError, match="finite number above 0"):
        book.record("openmp-parallel-for", "elementwise", "success", speedup)
    assert not (tmp_path / "stats.toml").exists()


async def test_a_claimed_success_the_server_never_measured_ranks_nothing(server, toolbox):
    skill = "loop-unrolling-ilp" if "loop-unrolling-ilp" in toolbox.book.skills else next(iter(toolbox.book)).id
    before = toolbox.book.stats.get(skill)
    fake = "import torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    pass\n"
    async with Client(server) as client:
        r = await client.call_tool("record_attempt", {"task": RELU, "source": fake, "skill_id": skill,
                                                      "outcome": "success", "speedup": 50})
    rec = r.structured_content
    assert not r.is_error and rec["measured_by_server"] is False and rec["ranked"] is False
    after = toolbox.book.stats.get(skill)
    assert (after.tried, after.succeeded, after.success_rate()) == (before.tried, before.succeeded,
                                                                    before.success_rate())


def test_http_refuses_a_taken_port_before_announcing_a_url(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = subprocess.run(kernelskill_command() + ["mcp", "--transport", "http", "--port", str(port),
                                                    "--root", str(DATA), "--device", "cpu"],
                           capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert f"port {port} on 127.0.0.1 is already in use" in r.stderr and "--port" in r.stderr
    assert "MCP server on" not in r.stderr + r.stdout
