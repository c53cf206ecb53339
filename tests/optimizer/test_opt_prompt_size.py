"""The prompts stay bounded as the tree deepens (benchmarks/prompt_size.py measures the table in
docs/optimizer.md)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

from kernelskill.runs import load_run

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
        assert s10 <= s1 * 1.05 + 300, (role, s1, s10)          # depth 10: at most a few lines more than depth 1
        assert s30 <= s10 + 100, (role, s10, s30)               # and saturated: deeper adds nothing material
        assert sizes[30][role]["tokens"] <= 12_000, (role, sizes[30][role])
        assert sizes[30][role]["messages"] == 2                 # system + user, no history carried along
