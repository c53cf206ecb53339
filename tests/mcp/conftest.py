"""Fixtures for the MCP server tests: one shared toolbox (its caches serve every in-memory session)
and one HTTP server subprocess with a token, for the transport and third-party client tests."""
from __future__ import annotations

import importlib.util
import os
import secrets
import subprocess
from pathlib import Path

import pytest



def _have_mcp() -> bool:
    # Not find_spec("mcp"): this very directory is a namespace package named "mcp".
    try:
        importlib.import_module("mcp.server.mcpserver")
        return importlib.util.find_spec("kernelskill.mcp_server") is not None
    except ImportError:
        return False


# The MCP server is an extra (pip install 'kernelskill[mcp]'); without it (the GPU machine) its
# tests are not collected at all.
collect_ignore_glob = [] if _have_mcp() else ["test_*.py"]

from helpers import DATA
from support import ALLOWED_ORIGIN, fast_options, free_port, kernelskill_command, wait_for_port


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="session")
def toolbox(_home):
    from kernelskill.mcp_server.toolbox import ServerConfig, Toolbox
    with Toolbox.open(ServerConfig(roots=[DATA], options=fast_options())) as tb:
        yield tb


@pytest.fixture(scope="session")
def server(toolbox):
    from kernelskill.mcp_server.server import build_server
    return build_server(toolbox=toolbox)


class HttpServer:
    def __init__(self, url: str, token: str, log: Path):
        self.url, self.token, self.log = url, token, log

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def _serve_http(log: Path, token: str | None, *extra: str):
    """Start ``kernelskill mcp --transport http`` on a free loopback port; yield its URL."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "KERNELSKILL_MCP_TOKEN"}
    if token:
        env["KERNELSKILL_MCP_TOKEN"] = token
    cmd = kernelskill_command() + ["mcp", "--transport", "http", "--port", str(port), "--root", str(DATA),
                                   "--device", "cpu", "--trials", "2", "--time-cap", "0.3", *extra]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        try:
            wait_for_port(port, proc)
        except RuntimeError as e:
            pytest.fail(f"{e}\n{log.read_text()[-3000:]}")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def http_server(_home, tmp_path_factory):
    """The HTTP server with a bearer token and one extra allowed origin."""
    token = secrets.token_urlsafe(24)
    log = tmp_path_factory.mktemp("http") / "server.log"
    for url in _serve_http(log, token, "--allow-origin", ALLOWED_ORIGIN):
        yield HttpServer(url, token, log)


@pytest.fixture
def own_http_server(_home, tmp_path):
    """An HTTP server of this test alone, started with this test's environment (its own device
    locks: the cancel tests time how soon their server frees the device)."""
    token = secrets.token_urlsafe(24)
    for url in _serve_http(tmp_path / "server.log", token):
        yield HttpServer(url, token, tmp_path / "server.log")


@pytest.fixture(scope="session")
def open_http_server(_home, tmp_path_factory):
    """The HTTP server as most people run it: loopback, no token."""
    yield from _serve_http(tmp_path_factory.mktemp("http-open") / "server.log", None)
