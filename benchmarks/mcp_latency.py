"""MCP tool-call latency: get_task, lookup_skills and list_tasks, in memory and over streamable HTTP.

    python benchmarks/mcp_latency.py [--calls 50] [--json OUT]

In memory, the SDK's Client talks to the server object directly; over HTTP, to ``kernelskill mcp
--transport http`` in a subprocess on a loopback port (with a bearer token, so the guard runs).
The first call of each tool is reported apart: it fills the server's task-summary cache. Prints a
markdown table; the figures in docs/mcp.md come from it.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "mcp"))
sys.path.insert(0, str(ROOT / "tests"))

from support import free_port, kernelskill_command, wait_for_port  # noqa: E402

CALLS = [("get_task", {"task": "softmax_rows", "preset": "small"}),
         ("lookup_skills", {"task": "softmax_rows", "preset": "small", "limit": 5}),
         ("list_tasks", {})]


async def measure(client: Client, n: int) -> dict:
    out = {}
    for name, args in CALLS:
        t = time.perf_counter()
        first = await client.call_tool(name, args)
        cold = (time.perf_counter() - t) * 1e3
        assert not first.is_error, first.content
        times = []
        for _ in range(n):
            t = time.perf_counter()
            await client.call_tool(name, args)
            times.append((time.perf_counter() - t) * 1e3)
        times.sort()
        out[name] = {"first_ms": round(cold, 1), "median_ms": round(statistics.median(times), 2),
                     "p90_ms": round(times[int(0.9 * (len(times) - 1))], 2), "n": n}
    return out


async def in_memory(n: int) -> dict:
    from kernelskill.mcp_server.server import build_server
    from kernelskill.mcp_server.toolbox import ServerConfig
    async with Client(build_server(ServerConfig(roots=[ROOT]))) as client:
        return await measure(client, n)


async def over_http(n: int) -> dict:
    port, token = free_port(), secrets.token_urlsafe(24)
    env = {**os.environ, "KERNELSKILL_MCP_TOKEN": token}
    proc = subprocess.Popen(kernelskill_command() + ["mcp", "--transport", "http", "--port", str(port),
                                                     "--root", str(ROOT)], env=env, stderr=subprocess.DEVNULL)
    try:
        started = time.perf_counter()
        wait_for_port(port, proc)
        startup = time.perf_counter() - started
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http:
            async with Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)) as client:
                return {"startup_s": round(startup, 2), **await measure(client, n)}
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=50, help="timed calls per tool after the first (default 50)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    os.environ.setdefault("KERNELSKILL_HOME", tempfile.mkdtemp(prefix="ks-bench-home-"))
    results = {"machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
               "in_memory": anyio.run(in_memory, args.calls), "http": anyio.run(over_http, args.calls)}
    print(f"\n{results['machine']}; HTTP server start-up {results['http']['startup_s']} s\n")
    print("| tool | transport | first call (ms) | median (ms) | p90 (ms) |\n|---|---|---|---|---|")
    for name, _ in CALLS:
        for transport in ("in_memory", "http"):
            r = results[transport][name]
            print(f"| {name} | {transport.replace('_', ' ')} | {r['first_ms']} | {r['median_ms']} | {r['p90_ms']} |")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
