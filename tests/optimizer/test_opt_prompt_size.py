"""The prompts stay bounded as the tree deepens (benchmarks/prompt_size.py measures the table in
docs/optimizer.md)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

from kernelskill.runs import load_run
from kernelskill.skills import SkillBook

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "prompt_size.py"


def _bench():
    spec = importlib.util.spec_from_file_location("prompt_size", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_prompt_size_per_role_is_bounded_in_the_depth(baseline_run):
    bench = _bench()
    root = load_run(baseline_run).tree.root.result            # a real measurement of the reference
    sizes = {d: bench.prompt_sizes(d, root) for d in (1, 10, 30)}
    assert sizes[1]["_nodes"] < sizes[10]["_nodes"] < sizes[30]["_nodes"]
    for role in bench.ROLES:
        s1, s10, s30 = (sizes[d][role]["chars"] for d in (1, 10, 30))
        assert s10 <= s1 + 1500, (role, s1, s10)     # depth 10: the context window and the failed list filled
        assert s30 <= s10 + 100, (role, s10, s30)               # and saturated: deeper adds nothing material
        assert sizes[30][role]["tokens"] <= 12_000, (role, sizes[30][role])
        assert sizes[30][role]["messages"] == 2                 # system + user, no history carried along


def test_the_planner_gets_a_catalogue_and_the_coder_the_chosen_skill(baseline_run):
    """Issue 21: the offered skills were pasted in full (58-79 % of the planner's prompt) on every call."""
    bench = _bench()
    sizes = bench.prompt_sizes(1, load_run(baseline_run).tree.root.result)
    planner, coder = sizes["planner"]["prompt"], sizes["coder"]["prompt"]
    skills = planner.split("## Allowed skills", 1)[1].split("## What the search knows", 1)[0]
    entries = [line for line in skills.splitlines() if line.startswith("[")]
    assert len(entries) >= 3 and "Steps:" not in skills and "Example (" not in skills
    assert all(" — when: " in e and " — expected: " in e and " — record: " in e for e in entries)
    book = SkillBook.load()
    in_full = sum(len(book.get(e.split("]")[0][1:]).as_prompt(full=True)) for e in entries)
    assert len(skills) < 0.25 * in_full, (len(skills), in_full)          # a catalogue, not the texts
    chosen = entries[0].split("]")[0][1:]                    # the scripted planner picks the first one
    assert f"[{chosen}]" in coder and "Steps:" in coder and "Example (" in coder


def test_a_prompt_budget_cuts_the_optional_parts_and_says_so(baseline_run):
    bench = _bench()
    root = load_run(baseline_run).tree.root.result
    free = bench.prompt_sizes(10, root)
    capped = bench.prompt_sizes(10, root, budget=1200)
    for role in bench.ROLES:
        assert free[role]["trimmed"] == ""
        assert capped[role]["tokens"] < free[role]["tokens"]
        assert capped[role]["tokens"] <= 1200 or "still" in capped[role]["trimmed"], capped[role]
        assert "prompt budget" in capped[role]["prompt"] and capped[role]["trimmed"]
    planner = capped["planner"]["prompt"]
    assert "class Model" in planner and "## Task" in planner       # the task, reference and code are never cut
