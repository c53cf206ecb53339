"""get_task over the protocol: the constants of the preset asked for, next to that preset's inputs, and
FLOPs that say what they count."""
from __future__ import annotations

import pytest
from mcp import Client

pytestmark = pytest.mark.anyio


async def test_get_task_shows_the_constants_of_the_preset_it_was_asked_for(server):
    async with Client(server) as client:
        small = (await client.call_tool("get_task", {"task": "softmax_rows", "preset": "small"})).structured_content
        full = (await client.call_tool("get_task", {"task": "softmax_rows"})).structured_content
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert small["inputs"][0]["shape"] == [128, 1024]
    assert small["constants"] == {"batch_size": 128, "dim": 1024}          # typed, and those of the preset
    assert full["preset"] is None and full["constants"] == {"batch_size": 4096, "dim": 16384}
    assert full["inputs"][0]["shape"] == [4096, 16384]
    flops = tools["get_task"].output_schema["properties"]["flops"]["description"]
    assert "matmul, conv and attention only" in flops and small["flops"] == 0
