"""The dashboard's "now" line follows a candidate's build steps (EvaluationStep, live only)."""
from __future__ import annotations

from kernelskill.events import EvaluationStep, NodeSelected
from kernelskill.tui.model import RunView


def test_the_now_line_follows_the_build_steps():
    view = RunView()
    view.apply(NodeSelected(node_id="n1", action="expand", reason="best", attempt=2))
    assert view.current == "attempt 2: expanding n1"
    view.apply(EvaluationStep(node_id="n2", text="compile kernel.cpp", seconds=0.4))
    assert view.current == "evaluating n2: compile kernel.cpp (0 s)"
    view.apply(EvaluationStep(node_id="n2", text="kernel.cpp compiled in 2.9 s", seconds=3.1))
    assert view.current == "evaluating n2: kernel.cpp compiled in 2.9 s (3 s)"
