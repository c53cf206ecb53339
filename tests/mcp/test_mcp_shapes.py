"""MCP verify/evaluate with shapes (issue 47, item 1): a client asks for the candidate at other shapes
and reads why it fails there."""
from __future__ import annotations

import pytest
from mcp import Client

from helpers import DATA, toolkit_candidate

pytestmark = pytest.mark.anyio
RELU = str(DATA / "relu_task.py")
FIRST_ROWS = toolkit_candidate("y = torch.zeros_like(x)\ny[:64] = ext.relu2(x[:64].contiguous())\nreturn y")


async def test_verify_at_other_shapes_fails_a_kernel_that_handles_the_benchmarks_rows_only(server):
    async with Client(server) as client:
        r = await client.call_tool("verify", {"task": RELU, "source": FIRST_ROWS, "trials": 2, "shapes": "auto"})
    assert not r.is_error, r.content
    out = r.structured_content
    assert out["status"] == "incorrect" and not out["correct"]
    assert "incorrect at shape batch_size=128 (double)" in out["summary"]
    shapes = out["result"]["shapes"]
    assert shapes["generalizes"] == "no"
    verdicts = {s["label"]: s["verdict"] for s in shapes["shapes"]}
    assert verdicts["batch_size=128 (double)"] == "incorrect" and verdicts["dim=997 (a prime near 1000)"] == "ok"
