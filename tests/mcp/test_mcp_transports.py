"""The real transports: ``kernelskill mcp`` over stdio in a subprocess, and streamable HTTP with its
guard (token, Origin, Host, body size) in front of a subprocess server."""
from __future__ import annotations

import http.client
import json
import os
from urllib.parse import urlsplit

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from kernelskill.cli import main
from kernelskill.mcp_server.cli import main as mcp_main

from helpers import DATA
from support import ALLOWED_ORIGIN, TOOLS, exercise_all_tools, kernelskill_command

pytestmark = pytest.mark.anyio
FAST = ["--device", "cpu", "--trials", "2", "--time-cap", "0.3"]   # quick evaluations in tests
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


async def test_stdio_session():
    cmd = kernelskill_command()
    params = StdioServerParameters(command=cmd[0], args=cmd[1:] + ["mcp", "--root", str(DATA), *FAST],
                                   env=dict(os.environ))
    async with Client(params) as client:
        await exercise_all_tools(client, str(DATA / "relu_task.py"))
        assert len((await client.list_tools()).tools) == len(TOOLS)
        info = await client.call_tool("get_task", {"task": "softmax_rows", "preset": "small"})
        assert not info.is_error and info.structured_content["op_classes"] == ["softmax"]
        outside = await client.call_tool("get_task", {"task": "../../../etc/passwd"})
        assert outside.is_error and "outside the allowed roots" in outside.content[0].text
        skill = await client.read_resource("skill://warp-shuffle-reduction")
        assert "Steps:" in skill.contents[0].text


def post(url: str, body: bytes | None = None, **headers: str) -> int:
    """POST a JSON-RPC body (or only the headers, when ``Content-Length`` is given) and return the status."""
    parts = urlsplit(url)
    data = json.dumps(INIT).encode() if body is None else body
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    conn.putrequest("POST", parts.path, skip_host="Host" in headers)
    for key, value in {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                       "Content-Length": str(len(data)), **headers}.items():
        conn.putheader(key, value)
    conn.endheaders()
    if "Content-Length" not in headers:
        conn.send(data)
    try:
        return conn.getresponse().status
    finally:
        conn.close()


def test_http_guard_answers_before_the_server(http_server):
    url, auth = http_server.url, http_server.auth
    assert post(url) == 401
    assert post(url, Authorization="Bearer not-the-token") == 401
    assert post(url, Origin="https://evil.example", **auth) == 403
    assert post(url, Host="evil.example", **auth) == 421
    assert post(url, **{"Content-Length": str(3 * 1024 * 1024)}, **auth) == 413      # refused before the body
    assert post(url, Origin=ALLOWED_ORIGIN, **auth) == 200
    assert post(url, **auth) == 200


async def test_http_tool_calls_with_the_sdk_client(http_server):
    async with httpx2.AsyncClient(headers=http_server.auth, timeout=httpx2.Timeout(30, read=300)) as http:
        async with Client(streamable_http_client(http_server.url, http_client=http)) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert "evaluate" in tools and "lookup_skills" in tools
            await exercise_all_tools(client, str(DATA / "relu_task.py"))
            skills = await client.call_tool("lookup_skills", {"task": "softmax_rows", "preset": "small", "limit": 2})
            assert not skills.is_error and len(skills.structured_content["skills"]) == 2
            bad = await client.call_tool("get_task", {"task": "/etc/passwd"})
            assert bad.is_error and "outside the allowed roots" in bad.content[0].text


async def test_http_default_loopback_server_with_client_url(open_http_server):
    assert post(open_http_server) == 200                                          # no token needed on loopback
    assert post(open_http_server, Origin="http://rebind.example:8765") == 403
    async with Client(open_http_server) as client:
        info = await client.call_tool("get_task", {"task": "softmax_rows", "preset": "small"})
        assert not info.is_error and info.structured_content["inputs"][0]["shape"] == [128, 1024]
        prompt = await client.get_prompt("optimize_kernel", {"task": "softmax_rows"})
        assert "class ModelNew" in prompt.messages[0].content.text


def test_http_refuses_to_bind_off_loopback_without_a_token(capsys, monkeypatch):
    monkeypatch.delenv("KERNELSKILL_MCP_TOKEN", raising=False)
    assert main(["mcp", "--transport", "http", "--host", "0.0.0.0"]) == 2
    assert "set a bearer token" in capsys.readouterr().err
    assert mcp_main(["--transport", "http", "--host", "192.168.0.10", "--token", "short"]) == 2   # kernelskill-mcp
    assert "at least 16" in capsys.readouterr().err
    assert main(["mcp", "--root", str(DATA / "no-such-dir")]) == 2
    assert "no such directory" in capsys.readouterr().err
