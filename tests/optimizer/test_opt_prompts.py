"""Prompts are data: every role has a table per backend; errors name the file and the key."""
from __future__ import annotations

import json
import re
import shutil

import pytest

from kernelskill.agents.templates import PROMPTS_DIR, SCHEMA, load_prompts
from kernelskill.errors import UserError
from kernelskill.vocab import BACKENDS


def test_shipped_prompts_cover_every_role_and_backend():
    prompts = load_prompts()
    assert set(prompts) == set(SCHEMA)
    for role, tables in prompts.items():
        assert set(tables) == set(BACKENDS)
        for backend, p in tables.items():
            system = p.render("system")
            assert backend in system and "{{" not in system
    text = prompts["planner"]["cpp"].render("user", task="T", reference="R", node="N", code="void f() { }", skills="S",
                                            context="C", tried="-", machine="M")
    assert "void f() { }" in text and "{{" not in text
    assert "<<<IMPROVE BEGIN>>>" in prompts["planner"]["cuda"].render("system")


@pytest.fixture
def prompt_dir(tmp_path):
    d = tmp_path / "prompts"
    shutil.copytree(PROMPTS_DIR, d)
    return d


@pytest.mark.parametrize("edit, words", [
    (lambda s: s.replace("[triton]", "[tritn]"), "unknown table 'tritn'"),
    (lambda s: s + "\n[cpp.extra]\n", "key 'cpp.extra'"),
    (lambda s: s.replace("{{failure}}", "{{failures}}"), "key 'common.user': unknown placeholder {{failures}}"),
    (lambda s: s.replace("corrective = ", "correctiv = "), "unknown key 'common.correctiv'"),
    (lambda s: s.replace("[cuda]", "[cuda]\nsystem = 3"), "key 'cuda.system': expected a string"),
    (lambda s: s + "\n[[broken", "cannot read prompts"),
])
def test_invalid_prompt_files_name_file_and_key(prompt_dir, edit, words):
    path = prompt_dir / "debugger.toml"
    path.write_text(edit(path.read_text()))
    with pytest.raises(UserError, match="debugger.toml") as err:
        load_prompts(prompt_dir)
    assert words in str(err.value)


def test_missing_key_and_missing_file(prompt_dir):
    path = prompt_dir / "coder.toml"
    text = path.read_text()
    start = text.index("corrective = ")
    end = text.index('"""', text.index('"""', start) + 3) + 3
    path.write_text(text[:start] + text[end:])
    with pytest.raises(UserError, match="coder.toml: missing key 'cuda.corrective'"):
        load_prompts(prompt_dir)
    (prompt_dir / "coder.toml").unlink()
    with pytest.raises(UserError, match="coder.toml: missing prompt file"):
        load_prompts(prompt_dir)


def test_a_prompt_dir_without_shared_rules_uses_the_shipped_ones_and_a_broken_one_is_named(prompt_dir):
    (prompt_dir / "shared.toml").unlink()
    assert load_prompts(prompt_dir)["coder"]["cpp"].shared == load_prompts()["coder"]["cpp"].shared
    (prompt_dir / "shared.toml").write_text((PROMPTS_DIR / "shared.toml").read_text().replace("[triton]\nbuild",
                                                                                             "[triton]\nbuilds"))
    with pytest.raises(UserError, match="shared.toml: unknown key 'triton.builds'"):
        load_prompts(prompt_dir)


# ---- issue 48, item 4: prompts that agree with each other -------------------------------------------

def _systems(root: bool = False) -> dict[tuple[str, str], str]:
    """Every role's rendered system prompt, by (role, backend)."""
    return {(role, backend): p.render("system", root=root)
            for role, tables in load_prompts().items() for backend, p in tables.items()}


def _team():
    from kernelskill.agents.team import Team
    from kernelskill.llm import ScriptedLLM
    from kernelskill.skills import SkillBook
    from kernelskill.task import Task
    from scenario import RELU_TASK, Scenario
    script = Scenario()
    task = Task.load(RELU_TASK)
    return Team(ScriptedLLM(script), load_prompts(None), "cpp", task, task.summary(), SkillBook.load(),
                emit=lambda ev: None), script


def test_the_root_step_marks_no_spans_the_planner_describes_the_module_and_the_coder_writes_it_whole():
    """At the root the current code is the bare reference: nothing to mark with IMPROVE spans (a model
    driving the loop by hand invented a span by the imports, inside `class Model`)."""
    from kernelskill.trajectory import Node, Trajectory
    from scenario import GOOD, REF
    team, script = _team()
    tree = Trajectory()
    root = tree.add(Node(id="n0", parent=None, kind="root", code=REF, status="ok", speedup=1.0))
    first = Node(id="n1", parent="n0", kind="plan", code="")
    assert team.expand(tree, root, first, 1)
    (_, planner), (_, coder) = script.seen
    for messages in (planner, coder):
        assert "IMPROVE" not in "\n".join(m["content"] for m in messages)       # no span instructions at all
    assert "nothing to mark" in planner[0]["content"] and "Describe the new module" in planner[0]["content"]
    assert "```python" not in planner[0]["content"].split("Reply with", 1)[1]       # the reply: the JSON alone
    assert "Write the\nnew module whole" in coder[0]["content"] and "## Code with the spans" not in coder[1]["content"]
    assert "outside them as it is" not in coder[0]["content"]
    assert (first.anchored_code, first.anchors, first.changed) == ("", [], [])
    assert first.plan == "write relu2 in C++" and first.code
    # From a candidate (it has a kernel and defines ModelNew) the spans are marked as before.
    child = tree.add(Node(id="n2", parent="n0", kind="plan", code=GOOD, status="ok", speedup=1.5))
    second = Node(id="n3", parent="n2", kind="plan", code="")
    assert team.expand(tree, child, second, 2)
    (_, planner), (_, coder) = script.seen[2:]
    assert "<<<IMPROVE BEGIN>>>" in planner[0]["content"] and "## Code with the spans to rewrite" in coder[1]["content"]
    assert second.anchors and "<<<IMPROVE BEGIN>>>" in second.anchored_code


def test_at_the_root_a_code_block_is_not_read_and_the_corrective_asks_for_the_json_alone():
    from kernelskill.agents.planner import Planner
    from kernelskill.llm import ScriptedLLM
    from scenario import REF, planner_reply
    echo = planner_reply("cpu-fused-single-pass", "m", code=REF).replace("# <<<IMPROVE END>>>", "")  # unpaired
    planner = Planner(ScriptedLLM([echo]), load_prompts()["planner"]["cpp"], allowed=["cpu-fused-single-pass"],
                      base=REF, root=True)
    res = planner.run(task="t", reference="r", node="n", code=REF, skills="s", context="-", tried="-", machine="-")
    assert res.ok and res.data["anchored_code"] == "" and res.data["anchors"] == []
    llm = ScriptedLLM(["no json", planner_reply("cpu-fused-single-pass", "m", echo=False)])
    res = Planner(llm, load_prompts()["planner"]["cpp"], allowed=["cpu-fused-single-pass"], root=True).run(
        task="t", reference="r", node="n", code=REF, skills="s", context="-", tried="-", machine="-")
    assert res.ok and len(res.calls) == 2
    corrective = llm.calls[1][1][-1]["content"]
    assert "JSON object alone" in corrective and "IMPROVE" not in corrective


def test_the_model_new_rule_is_stated_once_and_quoted_by_every_role():
    shared = load_prompts()["coder"]["cpp"].shared["model_new"]
    assert "class ModelNew(nn.Module)" in shared and "constructor" in shared and "reference-call" in shared
    for (role, backend), system in {**_systems(), **_systems(root=True)}.items():
        assert system.count(shared) == 1, (role, backend)
    # written in one file: no role's own prompts restate it
    files = {p.name: p.read_text() for p in PROMPTS_DIR.glob("*.toml")}
    assert [name for name, text in files.items() if "`class ModelNew(nn.Module)`" in text] == ["shared.toml"]
    assert not [name for name, text in files.items() if "same constructor arguments" in text]
    # and no span-keeping rule says to keep code the ModelNew rule changes: the root marks no spans
    assert not [name for name, text in files.items() if "Keep the unmarked code" in text]


def test_the_planner_is_told_the_build_the_coder_must_use():
    from kernelskill.agents.templates import build_flags
    prompts = load_prompts()
    assert build_flags("cpp") == {"extra_cflags": ["-O3", "-march=native", "-fopenmp"], "extra_ldflags": ["-fopenmp"]}
    assert build_flags("cuda") == {"extra_cuda_cflags": ["-O3"]} and build_flags("triton") == {}
    for backend in BACKENDS:
        build = prompts["coder"][backend].shared["build"]
        for role in ("planner", "coder", "debugger"):
            for root in (False, True):
                assert build in prompts[role][backend].render("system", root=root), (role, backend, root)
    # the flags are written once, in shared.toml; the MCP server's optimize_kernel prompt quotes them too
    holders = [p.name for p in PROMPTS_DIR.glob("*.toml") if "-march=native" in p.read_text()
               or "extra_cuda_cflags" in p.read_text()]
    assert holders == ["shared.toml"]
    from kernelskill.mcp_server.prompt import CONTRACT
    for backend in BACKENDS:
        assert " ".join(prompts["coder"][backend].shared["build"].split()) in CONTRACT, backend


CACHED_IN_INIT = '''
import torch, torch.nn as nn
class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.linear = nn.Linear(n, n)
        self.register_buffer("w_t", self.linear.weight.detach().t().contiguous(), persistent=False)
    def forward(self, x):
        return x @ self.w_t + self.linear.bias
'''
CACHED_AT_FIRST_CALL = '''
import torch, torch.nn as nn
class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.linear = nn.Linear(n, n)
        self.w_t = None
    def forward(self, x):
        if self.w_t is None:
            self.w_t = self.linear.weight.t().contiguous()
        return x @ self.w_t + self.linear.bias
'''


def test_cache_parameters_yes_results_no_in_the_words_of_the_evaluators_guards():
    """A skill's "pack the weights once and cache them" read as a breach of the coder's old "no caching
    of results between calls"; the rule now says what may be cached, where, and what the guards flag."""
    from kernelskill.evaluate.judge.static import CHEATS, check_source
    rule = load_prompts()["coder"]["cpp"].shared["caching"]
    for (role, backend), system in {**_systems(), **_systems(root=True)}.items():
        assert rule in system, (role, backend)
    # every flag it names is one the evaluator raises (the static cheats; `replay` from the timed outputs)
    named = set(re.findall(r"`([a-z]+(?:-[a-z]+)+|replay)`", rule))
    assert named == {"stateful-forward", "data-ptr", "replay"} and named - {"replay"} <= CHEATS
    assert "__init__" in rule and "first call" in rule and "register_buffer" in rule
    # and what it allows passes the guards, what it forbids is flagged
    assert check_source(CACHED_IN_INIT) == []
    assert [f.split(":")[0] for f in check_source(CACHED_AT_FIRST_CALL)] == ["stateful-forward"]
    assert "no caching of results" not in (PROMPTS_DIR / "coder.toml").read_text()


def test_the_plan_schema_is_in_the_planners_prompt_and_every_reply_is_checked_against_it():
    from kernelskill.agents.parsing import PLAN_SCHEMA
    from kernelskill.agents.planner import Planner
    from kernelskill.llm import ScriptedLLM
    from scenario import ANCHORED, fenced
    for root in (False, True):
        system = load_prompts()["planner"]["cpp"].render("system", root=root)
        text = system[system.index('{"type": "object"'):]
        assert json.JSONDecoder().raw_decode(text)[0] == PLAN_SCHEMA
        assert "plan: a list of strings, one step each" in system

    def reply(**head):
        return json.dumps(head) + "\n" + fenced(ANCHORED)
    as_string = reply(skill="s", mechanism="fuse", plan="one loop")
    good = reply(skill="s", mechanism="fuse", plan=["one C++ loop", "relu and scale in registers"])
    llm = ScriptedLLM([as_string, good])
    res = Planner(llm, load_prompts()["planner"]["cpp"], allowed=["s"]).run(
        task="t", reference="r", node="n", code="c", skills="s", context="-", tried="-", machine="-")
    assert res.ok and res.data["plan"] == "one C++ loop\nrelu and scale in registers"
    corrective = llm.calls[1][1][-1]["content"]
    assert ('the JSON object does not match the schema: "plan" must be an array of strings, not string "one loop"'
            in corrective)
    for head, words in [({"skill": "s", "plan": ["a"]}, 'the JSON object lacks "mechanism"'),
                        ({"skill": "s", "mechanism": "m", "plan": ["a"] * 9}, '"plan" has 9 items, at most 8'),
                        ({"skill": "s", "mechanism": "m", "plan": ["a", {"b": 1}]}, '"plan"[1] must be a string'),
                        ({"skill": "s", "mechanism": " ", "plan": []}, '"mechanism" is empty; "plan" has 0 items')]:
        res = Planner(ScriptedLLM([reply(**head)] * 2), load_prompts()["planner"]["cpp"], allowed=["s"]).run(
            task="t", reference="r", node="n", code="c", skills="s", context="-", tried="-", machine="-")
        assert not res.ok and words in res.error, (head, res.error)


def test_every_role_is_told_how_the_evaluator_times():
    """Issue 48, item 1: whether the caches are flushed decides what is worth doing (a model
    prefetched data that only a cold run needed); every role hears how calls are timed, per device."""
    prompts = load_prompts()
    for backend in BACKENDS:
        timing = prompts["coder"][backend].shared["timing"]
        words = " ".join(timing.split())
        gpu = backend != "cpp"
        assert ("the L2 cache is flushed" in words) == gpu and ("caches are not flushed" in words) == (not gpu)
        assert "3 sets of fresh tensors" in words and "95 % interval" in words and "no decision" in words
        for role in ("planner", "coder", "debugger"):
            for root in (False, True):
                assert timing in prompts[role][backend].render("system", root=root), (role, backend, root)
