"""Tolerant parsing of model output, IMPROVE anchors, and the agents' corrective round-trip."""
from __future__ import annotations

import pytest

from kernelskill.agents.coder import Coder
from kernelskill.agents.debugger import Debugger
from kernelskill.agents.parsing import (AnchorError, defines_model_new, extract_code, extract_json,
                                        normalize_mechanism, parse_anchors, strip_anchors, strip_think)
from kernelskill.agents.planner import Planner
from kernelskill.agents.templates import load_prompts
from kernelskill.llm import ScriptedLLM

from scenario import ANCHORED, GOOD, REF, coder_reply, debugger_reply, planner_reply

PROMPTS = load_prompts()


def test_strip_think_closed_and_dangling():
    assert strip_think("<think>a {b}</think>answer") == "answer"
    assert strip_think("<THINKING>x</THINKING> y") == "y"
    assert strip_think("reasoning without an opening tag</think>\nthe reply") == "the reply"
    assert strip_think("plain") == "plain"


def test_extract_json_fenced_bare_and_with_trailing_prose():
    assert extract_json('```json\n{"a": 1}\n```\nmore') == {"a": 1}
    assert extract_json('Sure! {"skill": "x", "n": [1, 2]} and that is my answer.') == {"skill": "x", "n": [1, 2]}
    # braces of C++ code in a fenced block do not confuse it
    text = '{"skill": "s"}\n```python\nSRC = "void f() { return; }"\n```'
    assert extract_json(text) == {"skill": "s"}
    assert extract_json("no json here { not: json }") is None


def test_extract_code_fenced_prefers_model_new_and_handles_unterminated():
    text = "```python\nimport os\n```\nand\n```py\nimport torch\nclass ModelNew:\n    pass\n```"
    assert "class ModelNew" in extract_code(text)
    assert extract_code("```python\nclass ModelNew:\n    pass\n") == "class ModelNew:\n    pass\n"
    assert extract_code("```cpp\nint x;\n```") is None


def test_extract_code_bare_after_json_and_prose():
    text = '{"diagnosis": "d"}\nimport torch\nclass ModelNew(torch.nn.Module):\n    pass\n'
    code = extract_code(text)
    assert code.startswith("import torch") and defines_model_new(code)
    assert extract_code("just words, no code") is None


def test_anchors_cpp_and_python_with_advice():
    code = 'SRC = r"""\n// <<<IMPROVE BEGIN>>>\n// vectorize this loop\nfor (;;) {}\n// <<<IMPROVE END>>>\n"""\n' + ANCHORED
    anchors = parse_anchors(code)
    assert len(anchors) == 2
    assert "vectorize this loop" in anchors[0].advice and anchors[0].begin == 2 and anchors[0].end == 5
    assert "relu and the scale" in anchors[1].advice
    stripped = strip_anchors(code)
    assert "IMPROVE" not in stripped and "vectorize this loop" in stripped


@pytest.mark.parametrize("code, words", [
    ("x = 1\n", "no anchors"),
    ("# <<<IMPROVE BEGIN>>>\nx\n", "never closed"),
    ("# <<<IMPROVE END>>>\n", "without a matching"),
    ("# <<<IMPROVE BEGIN>>>\n# <<<IMPROVE BEGIN>>>\n# <<<IMPROVE END>>>\n", "inside the span"),
])
def test_anchor_errors_say_what_is_wrong(code, words):
    with pytest.raises(AnchorError, match=words):
        parse_anchors(code)


def test_model_new_detection_and_mechanism_normalization():
    assert defines_model_new(GOOD)
    assert not defines_model_new("class Model:\n    pass\n")
    assert defines_model_new("class ModelNew(nn.Module):\n  def f(:\n")        # syntax error: by text
    assert normalize_mechanism("Fuse  ReLU + scale!") == normalize_mechanism("fuse relu scale")


def _coder(replies):
    llm = ScriptedLLM(replies)
    return Coder(llm, PROMPTS["coder"]["cpp"]), llm


def test_malformed_output_gets_one_corrective_round_trip():
    coder, llm = _coder(["I would write a kernel.", coder_reply(GOOD)])
    res = coder.run(task="t", reference="r", plan="p", skill="s", anchored_code="c", context="-", relatives="-", machine="-")
    assert res.ok and res.data["code"] == GOOD and len(res.calls) == 2
    corrective = llm.calls[1][1]
    assert corrective[-2]["role"] == "assistant" and "could not be used" in corrective[-1]["content"]
    assert "no ```python block" in corrective[-1]["content"]


def test_second_malformed_output_fails_the_attempt():
    coder, _ = _coder([coder_reply("class Model:\n    pass\n"), "still nothing"])
    res = coder.run(task="t", reference="r", plan="p", skill="s", anchored_code="c", context="-", relatives="-", machine="-")
    assert not res.ok and len(res.calls) == 2 and "no ```python block" in res.error


def test_planner_checks_skill_anchors_and_blocking():
    def blocked(data):
        return "already tried" if data["mechanism"] == "m" else None
    llm = ScriptedLLM([planner_reply("made-up-skill", "m"),
                       planner_reply("cpu-fused-single-pass", "m")])
    planner = Planner(llm, PROMPTS["planner"]["cpp"], allowed=["cpu-fused-single-pass"], blocked=blocked)
    res = planner.run(task="t", reference="r", node="n", code="c", skills="s", context="-", tried="-", machine="-")
    assert not res.ok and "not among the allowed skills" in llm.calls[1][1][-1]["content"]
    llm = ScriptedLLM([planner_reply("cpu-fused-single-pass", "m"), planner_reply("cpu-fused-single-pass", "m2")])
    planner = Planner(llm, PROMPTS["planner"]["cpp"], allowed=["cpu-fused-single-pass"], blocked=blocked)
    res = planner.run(task="t", reference="r", node="n", code="c", skills="s", context="-", tried="-", machine="-")
    assert res.ok and res.data["mechanism"] == "m2" and len(res.data["anchors"]) == 1
    assert "already tried" in llm.calls[1][1][-1]["content"]


def test_planner_may_decline_every_skill_with_a_reason():
    reply = planner_reply("none", "plain loop").replace('"differs"', '"why_no_skill": "too small", "differs"')
    planner = Planner(ScriptedLLM([reply]), PROMPTS["planner"]["cpp"], allowed=["a"])
    res = planner.run(task="t", reference="r", node="n", code="c", skills="s", context="-", tried="-", machine="-")
    assert res.ok and res.data["skill_id"] is None and res.data["why_no_skill"] == "too small"


def test_debugger_diagnosis_from_json_or_prose():
    dbg = Debugger(ScriptedLLM([debugger_reply(GOOD, "tail overwritten")]), PROMPTS["debugger"]["cpp"])
    res = dbg.run(task="t", reference="r", plan="p", base="b", code="c", failure="f", chain="-", context="-", machine="-")
    assert res.ok and res.data["diagnosis"] == "tail overwritten"
    dbg = Debugger(ScriptedLLM(["The loop bound is off by one.\n" + coder_reply(GOOD)]), PROMPTS["debugger"]["cpp"])
    res = dbg.run(task="t", reference="r", plan="p", base="b", code="c", failure="f", chain="-", context="-", machine="-")
    assert "off by one" in res.data["diagnosis"]


# ---- guarded edits: the planner's echo is the node's code plus anchors and advice -----------------

def test_echo_with_anchors_and_advice_passes():
    from kernelskill.agents.parsing import check_echo
    from scenario import anchor
    check_echo(REF, ANCHORED)
    check_echo(GOOD, anchor(GOOD))
    check_echo(REF, ANCHORED.replace("\n\n", "\n").replace("2.0\n", "2.0   \n"))   # blank lines, trailing spaces


def test_abbreviated_echo_is_caught():
    from kernelskill.agents.parsing import check_echo
    from scenario import anchor
    lines = anchor(GOOD).splitlines(keepends=True)
    cut = next(i for i, ln in enumerate(lines) if "load_inline" in ln)
    abbreviated = "".join(lines[:cut] + ["# ... the extension is unchanged ...\n"] + lines[cut + 3:])
    with pytest.raises(AnchorError, match=r"line \d+ of the current code, `.*load_inline.*`.* is missing from your copy"):
        check_echo(GOOD, abbreviated)
    dropped = "".join(lines[:cut] + lines[cut + 1:])                      # a line silently left out
    with pytest.raises(AnchorError, match="is missing from your copy"):
        check_echo(GOOD, dropped)


def test_an_edit_outside_the_spans_is_caught():
    from kernelskill.agents.parsing import check_echo
    sneaky = ANCHORED.replace("import torch\n", "import torch\nimport numpy  # planner's own change\n", 1)
    with pytest.raises(AnchorError, match="`import numpy.*`, is not in the current code and lies outside every IMPROVE span"):
        check_echo(REF, sneaky)


def test_planner_rejects_an_abbreviated_echo_with_a_corrective_message():
    from scenario import fenced
    good = planner_reply("cpu-fused-single-pass", "m")
    lazy = good.replace(fenced(ANCHORED), fenced("# <<<IMPROVE BEGIN>>>\n# fuse it\n# <<<IMPROVE END>>>\n"
                                                 "# ... rest of the module unchanged ...\n"))
    llm = ScriptedLLM([lazy, good])
    planner = Planner(llm, PROMPTS["planner"]["cpp"], allowed=["cpu-fused-single-pass"], base=REF)
    res = planner.run(task="t", reference="r", node="n", code=REF, skills="s", context="-", tried="-", machine="-")
    assert res.ok and len(res.calls) == 2 and res.data["anchored_code"] == ANCHORED
    assert "is missing from your copy" in llm.calls[1][1][-1]["content"]
    llm = ScriptedLLM([lazy, lazy])
    res = Planner(llm, PROMPTS["planner"]["cpp"], allowed=["cpu-fused-single-pass"], base=REF).run(
        task="t", reference="r", node="n", code=REF, skills="s", context="-", tried="-", machine="-")
    assert not res.ok and "is missing from your copy" in res.error
