"""A third-party client: the MCP Inspector's CLI mode (from npm) against our stdio and HTTP servers.

The Inspector is installed once into a cache directory ($KERNELSKILL_NPM_CACHE, default
<repo>/.kernelskill-cache/npm) and runs from there offline afterwards. The test is skipped only
when node or npm is not installed; a failed install or a failed call is a failure.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers import DATA
from support import TOOLS, kernelskill_command

INSPECTOR, VERSION = "@modelcontextprotocol/inspector", "2.12.0"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def inspector() -> Path:
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        pytest.skip("node/npm are not installed: the MCP Inspector CLI test needs them")
    prefix = Path(os.environ.get("KERNELSKILL_NPM_CACHE", ROOT / ".kernelskill-cache" / "npm"))
    manifest = prefix / "node_modules" / "@modelcontextprotocol" / "inspector" / "package.json"
    if not manifest.is_file() or json.loads(manifest.read_text()).get("version") != VERSION:
        prefix.mkdir(parents=True, exist_ok=True)
        done = subprocess.run([npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
                               f"{INSPECTOR}@{VERSION}"], capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, f"npm install {INSPECTOR}@{VERSION} failed:\n{done.stderr[-3000:]}"
    return prefix / "node_modules" / ".bin" / "mcp-inspector"


def run(inspector: Path, tmp_path: Path, *args: str) -> tuple[int, dict, str]:
    """Run ``mcp-inspector --cli ARGS``: (exit code, its JSON output, everything it printed)."""
    env = {**os.environ, "HOME": str(tmp_path)}          # it keeps a catalog under ~/.mcp-inspector
    # The server imports torch before it answers: on a busy 2-core machine that took longer than the
    # Inspector's default 15 s connect timeout. A state (the connection), not a time, is waited on.
    done = subprocess.run([str(inspector), "--cli", "--connect-timeout", "240000", *args], capture_output=True,
                          text=True, timeout=300, env=env, cwd=ROOT)
    printed = f"{done.stdout}\n{done.stderr}"
    out = done.stdout.strip()
    try:
        return done.returncode, json.loads(out[out.index("{"):]) if "{" in out else {}, printed
    except json.JSONDecodeError:
        pytest.fail(f"the Inspector printed no JSON (exit {done.returncode}):\n{printed[-3000:]}")


def test_inspector_lists_tools_over_stdio(inspector, tmp_path):
    env = [a for k in ("KERNELSKILL_HOME", "KERNELSKILL_CACHE") if k in os.environ
           for a in ("-e", f"{k}={os.environ[k]}")]
    rc, out, printed = run(inspector, tmp_path, *env, *kernelskill_command(), "mcp", "--root", str(DATA),
                           "--method", "tools/list")
    assert rc == 0, printed[-3000:]
    tools = {t["name"]: t for t in out["tools"]}
    assert TOOLS == set(tools)
    assert tools["evaluate"]["outputSchema"]["properties"]["status"]


def test_inspector_calls_tools_over_http(inspector, tmp_path, http_server):
    auth = f"Authorization: Bearer {http_server.token}"
    rc, out, printed = run(inspector, tmp_path, http_server.url, "--transport", "http", "--header", auth,
                           "--method", "tools/call", "--tool-name", "lookup_skills", "--tool-arg", "task=softmax_rows",
                           "--tool-arg", "preset=small", "--tool-arg", "limit=2")
    assert rc == 0 and not out.get("isError"), printed[-3000:]
    assert len(out["structuredContent"]["skills"]) == 2
    rc, out, printed = run(inspector, tmp_path, http_server.url, "--transport", "http", "--header", auth,
                           "--method", "tools/call", "--tool-name", "get_task", "--tool-arg", "task=/etc/passwd")
    assert rc != 0 and "outside the allowed roots" in printed, printed[-3000:]
    rc, out, printed = run(inspector, tmp_path, http_server.url, "--transport", "http", "--header", auth,
                           "--method", "prompts/get", "--prompt-name", "optimize_kernel",
                           "--prompt-args", "task=softmax_rows")
    assert rc == 0 and "ModelNew" in printed, printed[-3000:]
    rc, out, printed = run(inspector, tmp_path, http_server.url, "--transport", "http", "--method", "tools/list")
    assert rc != 0 and "auth" in printed.lower(), printed[-3000:]       # it reads our 401 as an auth challenge
