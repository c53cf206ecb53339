"""The protocol in memory, with the SDK's own Client: every tool with good and bad input, resources,
the prompt, progress notifications, and an event loop that keeps serving during an evaluation."""
from __future__ import annotations

import threading

import anyio
import pytest
from mcp import Client

from kernelskill.mcp_server.locks import hold_device
from kernelskill.vocab import BOTTLENECKS

from helpers import DATA, SCALE_TASK, toolkit_candidate

from support import SOURCE, TOOLS

pytestmark = pytest.mark.anyio
RELU = str(DATA / "relu_task.py")
WAIT_S = 120          # a bound on waiting for a state, generous for a busy 2-core machine


def text(result) -> str:
    return result.content[0].text if result.content else ""


async def test_tools_are_described_and_typed(server):
    async with Client(server) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert len(tool.description) > 80 and "\n" not in tool.description, tool.name
        assert tool.output_schema and tool.output_schema["type"] == "object", tool.name
    assert set(tools["evaluate"].input_schema["required"]) == {"task", "source"}
    assert tools["record_attempt"].input_schema["properties"]["outcome"]["enum"] == ["success", "failure", "no_gain"]
    assert "skills" in tools["lookup_skills"].output_schema["properties"]


async def test_task_and_skill_tools(server):
    async with Client(server) as client:
        listed = (await client.call_tool("list_tasks", {})).structured_content
        assert "softmax_rows" in {t["task"] for t in listed["tasks"]}
        found = (await client.call_tool("list_tasks", {"path": "."})).structured_content
        assert RELU in {t["task"] for t in found["tasks"]}
        info = (await client.call_tool("get_task", {"task": "softmax_rows", "preset": "small"})).structured_content
        assert info["op_classes"] == ["softmax"] and info["inputs"][0]["shape"] == [128, 1024]
        assert "class Model" in info["source"] and "[presets.small]" in info["task_toml"]
        relu = (await client.call_tool("get_task", {"task": "relu_task.py"})).structured_content
        assert relu["kind"] == "path" and relu["op_classes"] == ["elementwise"]
        inline = (await client.call_tool("get_task", {"task": (DATA / "relu_task.py").read_text()})).structured_content
        assert inline["kind"] == "inline" and inline["task"].startswith("inline:")
        skills = (await client.call_tool("lookup_skills", {"task": "softmax_rows", "backend": "cuda",
                                                           "bottleneck": "memory-bound", "limit": 3}))
        assert not skills.is_error and 0 < len(skills.structured_content["skills"]) <= 3
        first = skills.structured_content["skills"][0]
        assert first["guidance"] and first["stats"]["success_rate"] is None and first["stats"]["tried"] == 0 and first["uri"] == f"skill://{first['id']}"


async def test_get_task_lists_buffers_apart_from_parameters(server):
    async with Client(server) as client:
        info = (await client.call_tool("get_task", {"task": SCALE_TASK})).structured_content
    assert [p["name"] for p in info["parameters"]] == ["weight"]
    assert [b["name"] for b in info["buffers"]] == ["scale"]


BAD_CALLS = [
    ("get_task", {}, "task\n  Field required"),
    ("get_task", {"task": 42}, "Input should be a valid string"),
    ("get_task", {"task": "/etc/passwd"}, "outside the allowed roots"),
    ("get_task", {"task": "../../pyproject.toml"}, "outside the allowed roots"),
    ("get_task", {"task": "bad/syntax.py"}, "syntax error"),
    ("get_task", {"task": "bad/no_model.py"}, "no `Model` defined"),
    ("get_task", {"task": "softmax_rows", "preset": "huge"}, "unknown preset 'huge'"),
    ("get_task", {"task": "no_such_task"}, "no such task file"),
    ("evaluate", {"task": RELU, "source": ""}, "source is empty"),
    ("evaluate", {"task": RELU, "source": "x = 1\n" * 100_000}, "the limit is 512000"),
    ("evaluate", {"task": "bad/syntax.py", "source": SOURCE}, "syntax error"),
    ("verify", {"task": RELU, "source": SOURCE, "trials": 0}, "greater than or equal to 1"),
    ("compile", {"source": SOURCE, "backend": "cuda"}, "but the source is a 'cpp' candidate"),
    ("lookup_skills", {"backend": "fortran"}, "backend"),
    ("lookup_skills", {"limit": "many"}, "valid integer"),
    ("record_attempt", {"task": RELU, "source": SOURCE, "skill_id": "warp-shuffle-reductio", "outcome": "success"},
     "did you mean warp-shuffle-reduction"),
    ("record_attempt", {"task": RELU, "source": SOURCE, "skill_id": "x", "outcome": "great"}, "outcome"),
    ("no_such_tool", {}, "Unknown tool"),
]


async def test_bad_input_is_a_tool_error_and_the_server_keeps_serving(server):
    async with Client(server) as client:
        for name, args, message in BAD_CALLS:
            result = await client.call_tool(name, args)
            assert result.is_error, (name, args)
            assert message in text(result), (name, text(result))
        assert not (await client.call_tool("list_tasks", {})).is_error


async def test_compile(server):
    async with Client(server) as client:
        good = (await client.call_tool("compile", {"source": SOURCE})).structured_content
        assert good["ok"] and good["backend"] == "cpp" and "verify" in good["next_step"]
        bad = (await client.call_tool("compile", {"source": SOURCE.replace("class ModelNew", "class ModelNew(:")}))
        assert not bad.is_error and not bad.structured_content["ok"]      # a failed build is data, not an error
        assert bad.structured_content["result"]["diagnostics"]


async def test_concurrent_evaluations_take_turns_report_progress_and_leave_the_loop_free(server):
    # The test holds the CPU's device lock: both evaluations must report that they wait for it, and
    # a quick tool must answer while they do (their work runs in worker threads, not on the loop).
    # Holding the lock, not sleeping, is what keeps them unfinished while the quick tool runs.
    progress: dict[str, list] = {"verify": [], "evaluate": []}
    results, quick, timeline = {}, {}, []
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with hold_device("cpu"):
            held.set()
            release.wait(WAIT_S)          # bounded: a loop blocked by a tool still gets its lock back

    def waiting(name: str) -> bool:
        return any(m.startswith("waiting for cpu") for _, _, m in progress[name])

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    try:
        assert held.wait(WAIT_S), "the test could not take the CPU's device lock"
        async with Client(server) as client:
            async def call(name, args):
                async def on_progress(value, total, message):
                    progress[name].append((value, total, message))
                    timeline.append((name, message))
                results[name] = await client.call_tool(name, args, progress_callback=on_progress)

            async def meanwhile():
                with anyio.fail_after(WAIT_S):
                    while not (waiting("verify") and waiting("evaluate")) and not results:
                        await anyio.sleep(0.05)
                quick["skills"] = await client.call_tool("lookup_skills", {"query": "openmp", "backend": "cpp"})
                quick["evaluations_done"] = len(results)
                release.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(call, "verify", {"task": "relu_task.py", "source": SOURCE, "trials": 2})
                tg.start_soon(call, "evaluate", {"task": RELU, "source": SOURCE})
                tg.start_soon(meanwhile)

            assert waiting("verify") and waiting("evaluate"), "both evaluations should have waited for the device"
            assert quick["evaluations_done"] == 0 and not quick["skills"].is_error
            # Released, they take turns: one runs from start to finish before the other starts.
            spans = [name for name, m in timeline if m.startswith("evaluating") or m == "finished"]
            assert spans in (["verify"] * 2 + ["evaluate"] * 2, ["evaluate"] * 2 + ["verify"] * 2), timeline
            verify, evaluate = results["verify"].structured_content, results["evaluate"].structured_content
            assert verify["status"] == "ok" and verify["correct"] and verify["speedup"] is None
            assert evaluate["status"] == "ok" and evaluate["speedup"] > 0
            assert evaluate["result"]["profile"]["candidate"]["median_ms"] > 0
            for name, events in progress.items():
                values = [v for v, _, _ in events]
                assert values == sorted(values) and len(set(values)) == len(values), name
                assert any("correctness trials" in m for _, _, m in events), name

            # What the server measured flows into get_task and record_attempt.
            info = (await client.call_tool("get_task", {"task": RELU})).structured_content
            assert info["baseline"]["median_ms"] > 0
            rec = (await client.call_tool("record_attempt", {"task": RELU, "source": SOURCE, "outcome": "success",
                                                             "skill_id": "openmp-parallel-for", "speedup": 99.0}))
            assert rec.structured_content["measured_by_server"]
            assert rec.structured_content["speedup"] == pytest.approx(evaluate["speedup"])
            assert rec.structured_content["op_class"] == "elementwise"
    finally:
        release.set()
        holder.join(WAIT_S)


async def test_profile_against_a_baseline(server):
    slower = toolkit_candidate("y = ext.relu2(x)\nfor _ in range(3):\n    y = ext.relu2(x)\nreturn y")
    async with Client(server) as client:
        res = (await client.call_tool("profile", {"task": RELU, "source": SOURCE, "baseline": slower}))
    data = res.structured_content
    assert data["status"] == "ok" and data["baseline_result"]["status"] == "ok"
    assert data["vs_baseline"] > 1.0          # the baseline does the work four times
    assert data["result"]["profile"]["kernels"]


async def test_profile_of_the_reference(server):
    async with Client(server) as client:
        data = (await client.call_tool("profile", {"task": RELU})).structured_content
    assert data["status"] == "ok" and data["summary"].startswith("reference: eager median")
    assert data["result"]["profile"]["baseline"]["median_ms"] > 0 and "lookup_skills" in data["next_step"]
    # the roofline and bottleneck class reach the agent, and the next step names that bottleneck
    bottleneck = data["result"]["profile"]["bottleneck"]
    assert bottleneck in BOTTLENECKS and data["result"]["profile"]["roofline"]["bytes"] == 512000
    assert "roofline floor" in data["summary"] and f"bottleneck='{bottleneck}'" in data["next_step"]


async def test_resources(server):
    async with Client(server) as client:
        uris = {str(r.uri) for r in (await client.list_resources()).resources}
        assert "task://softmax_rows" in uris and "skill://warp-shuffle-reduction" in uris
        skill = (await client.read_resource("skill://warp-shuffle-reduction")).contents[0]
        assert "Steps:" in skill.text and "Recorded: never tried." in skill.text
        task = (await client.read_resource("task://softmax_rows")).contents[0].text
        assert "## reference.py" in task and "[presets.small]" in task
        with pytest.raises(Exception, match="Unknown resource"):
            await client.read_resource("skill://no-such-skill")


async def test_optimize_kernel_prompt(server):
    async with Client(server) as client:
        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
        assert [a.name for a in prompts["optimize_kernel"].arguments] == ["task"]
        got = await client.get_prompt("optimize_kernel", {"task": "softmax_rows"})
        body = got.messages[0].content.text
        for needle in ("class ModelNew", "load_inline", "@triton.jit", "lookup_skills", "evaluate", "record_attempt",
                       "describe_machine()",
                       "preset=\"small\"", "def get_inputs"):
            assert needle in body, needle
        with pytest.raises(Exception, match="outside the allowed roots"):
            await client.get_prompt("optimize_kernel", {"task": "/etc/passwd"})
