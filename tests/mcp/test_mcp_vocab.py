"""The tools' schemas and structured output carry the vocabulary's enums as the same plain strings."""
from __future__ import annotations

import pytest
from mcp import Client

from kernelskill.vocab import Backend, Bottleneck, Status

from helpers import DATA

from support import SOURCE

pytestmark = pytest.mark.anyio
RELU = str(DATA / "relu_task.py")


def _enum(schema: dict, name: str) -> list[str]:
    return schema["$defs"][name]["enum"]


async def test_schemas_list_exactly_the_enums_values(server):
    async with Client(server) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    backends, bottlenecks = [b.value for b in Backend], [b.value for b in Bottleneck]
    statuses = [s.value for s in Status]
    assert _enum(tools["compile"].input_schema, "Backend") == backends
    assert _enum(tools["lookup_skills"].input_schema, "Backend") == backends
    assert _enum(tools["lookup_skills"].input_schema, "Bottleneck") == bottlenecks
    for name in ("verify", "evaluate", "profile"):
        out = tools[name].output_schema
        assert _enum(out, "Status") == statuses, name
        assert out["properties"]["status"]["$ref"] == "#/$defs/Status"
    assert _enum(tools["lookup_skills"].output_schema, "Bottleneck") == bottlenecks
    assert " | ".join(statuses) in tools["verify"].description       # generated from the enum, never stale


async def test_structured_output_holds_plain_strings(server):
    async with Client(server) as client:
        skills = (await client.call_tool("lookup_skills", {"task": "softmax_rows", "backend": "cuda",
                                                           "bottleneck": "memory-bound", "limit": 1}))
        assert not skills.is_error, skills.content
        assert skills.structured_content["backend"] == "cuda"
        assert skills.structured_content["bottleneck"] == "memory-bound"
        bad = await client.call_tool("lookup_skills", {"bottleneck": "disk-bound"})
        assert bad.is_error and "memory-bound" in bad.content[0].text     # the enum's values in the error
        wrong = await client.call_tool("compile", {"source": SOURCE, "backend": "triton"})
        assert wrong.is_error and "backend='triton' but the source is a 'cpp' candidate" in wrong.content[0].text
        r = await client.call_tool("verify", {"task": RELU, "source": SOURCE, "trials": 1})
        assert not r.is_error, r.content
        data = r.structured_content
        assert data["status"] == "ok" and data["result"]["status"] == "ok"
        assert '"status":"ok"' in r.content[0].text.replace(" ", "")
