"""Short-term memory: repeat blocking, code dedup, repair chains, outcomes, node round trip."""
from __future__ import annotations

import json

from kernelskill.trajectory import LLMCall, Node

from helpers import eval_result
from test_opt_search import tree_of


def test_repeats_are_found_by_meaning_skill_and_spans():
    """Issue 21: repeat blocking was an exact string match on the mechanism, per parent only."""
    t = tree_of()
    t.add(Node(id="n1", parent="n0", kind="plan", code="a", skill_id="s", status="ok",
               mechanism="Vectorize the inner loop with AVX2", changed=[14, 15]))
    # another phrasing of the same idea, same skill, same code marked: a repeat
    assert [n.id for n in t.repeats("n0", "s", "AVX2 SIMD over the inner loops", [15])] == ["n1"]
    assert [n.id for n in t.repeats("n0", "s", "vectorized inner loop (avx2)")] == ["n1"]   # spans unknown
    assert t.repeats("n0", "other", "vectorize the inner loop with AVX2") == []            # another skill
    assert t.repeats("n0", "s", "OpenMP over the rows") == []                              # another idea
    assert t.repeats("n0", "s", "vectorize the inner loop with AVX2", [30, 31]) == []      # other code
    assert t.repeats("n1", "s", "vectorize the inner loop with AVX2") == []   # another parent, and n1 is ok


def test_a_failure_for_good_is_a_repeat_anywhere_in_the_tree():
    t = tree_of()
    t.add(Node(id="n1", parent="n0", kind="plan", code="a", skill_id="s", status="ok", mechanism="fused pass"))
    t.add(Node(id="n2", parent="n0", kind="plan", code="b", skill_id="v", status="compile_error",
               mechanism="AVX-512 intrinsics"))
    assert [n.id for n in t.repeats("n1", "v", "avx512 intrinsics")] == ["n2"]
    t.add(Node(id="n3", parent="n2", kind="repair", code="c", skill_id="v", status="ok", mechanism="AVX-512 intrinsics"))
    assert t.repeats("n1", "v", "avx512 intrinsics") == []          # its repair made it correct: not a failure


def test_identical_code_is_found_once_evaluated():
    t = tree_of()
    t.add(Node(id="n1", parent="n0", kind="plan", code="a", code_hash="h1", result=eval_result("ok"), status="ok"))
    t.add(Node(id="n2", parent="n0", kind="plan", code="a", code_hash="h1", result=eval_result("ok"), status="ok",
               duplicate_of="n1"))
    assert t.find_code("h1").id == "n1"
    assert t.find_code("h2") is None


def test_repair_chain_and_base():
    t = tree_of(("n1", "n0", "ok", 1.5), ("n2", "n1", "incorrect", None), ("n3", "n2", "compile_error", None, "repair"),
                ("n4", "n3", "ok", 1.2, "repair"))
    assert [n.id for n in t.repair_chain("n3")] == ["n2", "n3"]
    assert t.repair_chain("n4") == []
    assert t.base_of("n4").id == "n1" and t.base_of("n1").id == "n0"
    assert t.outcome(t.get("n4")) == "no_gain"           # 1.2× < its base n1 at 1.5×
    assert t.outcome(t.get("n1")) == "success"
    assert t.outcome(t.get("n2")) == "failure"
    assert t.best().id == "n1" and [n.id for n in t.leaders(2)] == ["n1", "n4"]


def test_node_round_trips_through_json():
    n = Node(id="n1", parent="n0", kind="plan", code="x", skill_id="s", anchors=[{"begin": 1, "end": 3, "advice": "a"}],
             calls=[LLMCall(role="planner", model="m", prompt_tokens=10, completion_tokens=5, cost=0.01, seconds=0.2)],
             result=eval_result("ok"), status="ok", speedup=1.4)
    back = Node.from_dict(json.loads(json.dumps(n.to_dict())))
    assert back == n and back.tokens == 15 and back.cost == 0.01
