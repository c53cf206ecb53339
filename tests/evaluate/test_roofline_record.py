"""The roofline record of a real evaluation is a typed ``Roofline``, and every text a person or an
agent reads from it (analyzer, ``kernelskill profile``, the MCP advice, the TUI, the skill gate's
facts) reads its fields, before and after the JSON a run store or a bench keeps."""
from __future__ import annotations

from kernelskill import Candidate
from kernelskill.agents.analyzer import analyze
from kernelskill.cli.report import _print_roofline
from kernelskill.evaluate import evaluate
from kernelskill.evaluate.judge.ceilings import store_raised_ceiling
from kernelskill.results import EvalResult, Roofline
from kernelskill.skills.predicates import profile_facts
from kernelskill.trajectory import Node
from kernelskill.tui.widgets.node_detail import profile_text
from mcp_server.advice import _roof

from helpers import RELU_TASK, toolkit_candidate


def test_a_cpu_evaluations_roofline_is_read_by_attribute_everywhere(fast):
    r = evaluate(RELU_TASK, Candidate.from_source(toolkit_candidate("return ext.relu2(x)")), opts=fast)
    assert r.ok, r.message
    stored = EvalResult.from_json(r.to_json())            # as a run store or a bench reads it back
    for result in (r, stored):
        roof = result.profile.roofline
        assert isinstance(roof, Roofline) and roof.extra == {}
        assert roof.bytes == 2 * 64 * 1000 * 4 and roof.roof == "memory" and roof.binds is False
        frac = roof.fraction
        assert frac > 0 and roof.eager_fraction > 0 and roof.measured.endswith("of the timed calls")

        text = analyze(result)
        assert f"fraction={frac:.3g}" in text and f"bytes={roof.bytes}" in text, text
        lines: list[str] = []
        _print_roofline(result.profile, lines.append)
        assert lines[0].startswith("  roofline: 0 FLOP, 5.12e+05 B") and roof.ceilings in lines[1], lines
        assert f"{frac:.0%} of the roofline floor's pace" in _roof(result.profile)
        assert profile_facts(result.profile)["roofline_fraction"] == frac
        assert profile_facts(result.profile.to_dict())["roofline_fraction"] == frac      # its JSON form too
        node = Node(id="n1", parent="n0", kind="plan", code="", status="ok", result=result)
        detail = profile_text(node).plain
        assert "floor " in detail and f"{frac:.0%} of its pace" in detail and f"{roof.roof} roof" in detail, detail
        store_raised_ceiling(result, "cpu", {}, {})           # nothing raised on a CPU: nothing stored
        assert roof.raised_ceiling is None
