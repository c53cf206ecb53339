"""Search policies (STARK ε-greedy, KernelSkill line) and the role-specific context windows."""
from __future__ import annotations

from kernelskill.search import LinePolicy, StarkPolicy, context, make_policy
from kernelskill.trajectory import Node, Trajectory


def tree_of(*specs) -> Trajectory:
    """specs: (id, parent, status, speedup[, kind]) after an implicit root n0."""
    t = Trajectory()
    t.add(Node(id="n0", parent=None, kind="root", code="ref", status="ok", speedup=1.0))
    for spec in specs:
        nid, parent, status, speedup, *kind = spec
        t.add(Node(id=nid, parent=parent, kind=kind[0] if kind else "plan", code=nid, status=status, speedup=speedup))
    return t


def sequence(policy_factory, tree: Trajectory, n: int = 20) -> list[tuple[str, str]]:
    """Selections on trees that grow by one failed-free ok node each time (a fresh policy each run)."""
    policy, out = policy_factory(), []
    t = Trajectory()
    for node in tree:
        t.add(Node(**{**node.to_dict(), "calls": []}))
    for i in range(n):
        sel = policy.select(t)
        out.append((sel.node_id, sel.action))
        t.add(Node(id=f"x{i}", parent=sel.node_id, kind="plan", code=str(i), status="ok", speedup=1.0 + (i % 3) / 10))
    return out


def test_stark_is_deterministic_with_a_seed():
    base = tree_of(("n1", "n0", "ok", 1.5), ("n2", "n0", "ok", 1.2), ("n3", "n1", "ok", 2.0))
    a = sequence(lambda: StarkPolicy(epsilon=0.3, seed=42), base)
    b = sequence(lambda: StarkPolicy(epsilon=0.3, seed=42), base)
    c = sequence(lambda: StarkPolicy(epsilon=0.3, seed=43), base)
    assert a == b
    assert a != c


def test_stark_exploits_the_best_and_explores_uniformly():
    t = tree_of(("n1", "n0", "ok", 1.5), ("n2", "n0", "ok", 3.0), ("n3", "n1", "ok", 2.0))
    assert StarkPolicy(epsilon=0.0, seed=1).select(t).node_id == "n2"
    picks = {StarkPolicy(epsilon=1.0, seed=s).select(t).node_id for s in range(60)}
    assert picks == {"n0", "n1", "n2", "n3"}


def test_root_cap_and_closed_nodes():
    t = tree_of(*[(f"n{i}", "n0", "ok", 0.5) for i in range(1, 6)])
    assert "n0" not in {s.node_id for s in StarkPolicy(root_children=5).expandable(t)}
    assert "n0" in {s.node_id for s in StarkPolicy(root_children=6).expandable(t)}
    # n1's four children all failed (and have used up their repairs): n1 is closed
    t = tree_of(("n1", "n0", "ok", 2.0), *[(f"n{i}", "n1", "incorrect", None) for i in range(2, 6)])
    policy = StarkPolicy(close_after=3, max_repairs=0)
    assert t.closed("n1", 3) and not t.closed("n1", 4)
    assert [s.node_id for s in policy.expandable(t)] == ["n0"]
    # one success among the children keeps it open
    t.add(Node(id="n6", parent="n1", kind="plan", code="6", status="ok", speedup=2.1))
    assert "n1" in {s.node_id for s in policy.expandable(t)}


def test_failed_node_is_repaired_first_on_a_tie_and_repairs_are_capped():
    t = tree_of(("n1", "n0", "incorrect", None))
    sel = StarkPolicy(epsilon=0.0).select(t)
    assert (sel.node_id, sel.action) == ("n1", "repair")
    t = tree_of(("n1", "n0", "incorrect", None), ("n2", "n1", "compile_error", None, "repair"),
                ("n3", "n2", "incorrect", None, "repair"))
    assert [s.action for s in StarkPolicy(max_repairs=2).expandable(t)] == ["expand"]
    assert t.get("n3").id in {s.node_id for s in StarkPolicy(max_repairs=3).expandable(t)}


def test_nothing_left_to_try():
    t = tree_of(("n1", "n0", "invalid", None))
    assert StarkPolicy(root_children=1).select(t) is None


def test_line_policy_thresholds():
    line = LinePolicy(ratio=1.3, gain=0.3)
    assert not line.moves(2.0, 2.29) and line.moves(2.0, 2.3)        # +0.3
    assert not line.moves(0.5, 0.64) and line.moves(0.5, 0.65)       # 1.3×
    assert not line.moves(1.0, None)
    t = tree_of(("n1", "n0", "ok", 1.2), ("n2", "n0", "ok", 1.31), ("n3", "n2", "ok", 1.5), ("n4", "n2", "ok", 1.7))
    assert line.base(t).id == "n4"          # n1 too small; n2 moves; n3 +0.19 no; n4 +0.39 yes
    sel = line.select(t)
    assert (sel.node_id, sel.action) == ("n4", "expand")


def test_line_policy_repairs_the_last_attempt_on_the_line():
    line = LinePolicy()
    t = tree_of(("n1", "n0", "incorrect", None))
    assert (line.select(t).node_id, line.select(t).action) == ("n1", "repair")
    t = tree_of(("n1", "n0", "invalid", None))
    assert (line.select(t).node_id, line.select(t).action) == ("n0", "expand")


def test_make_policy_from_config():
    from kernelskill.config import load_config
    cfg = load_config({"search.policy": "line", "search.line_ratio": 2.0})
    assert isinstance(make_policy(cfg.search), LinePolicy)
    assert make_policy(load_config({"search.seed": 3}).search).seed == 3


def test_context_windows_per_role():
    t = tree_of(("n1", "n0", "ok", 1.5), ("n2", "n0", "ok", 3.0), ("n3", "n1", "ok", 2.0), ("n4", "n1", "incorrect", None),
                ("n5", "n2", "ok", 4.0), ("n6", "n5", "ok", 5.0), ("n7", "n2", "ok", 1.1))
    ids = lambda role, node: [n.id for n in context(t, node, role)]  # noqa: E731
    assert ids("planner", "n1") == ["n1", "n0", "n3", "n4", "n6"]     # + the top leader elsewhere, cap 5
    assert ids("planner", "n3") == ["n3", "n0", "n6", "n5"]
    assert ids("coder", "n1") == ["n1", "n0", "n3", "n4", "n5"]       # + siblings' children (n2's)
    assert ids("debugger", "n4") == ["n4", "n0", "n3"]                # + siblings
    assert all(len(context(t, n.id, r)) <= 5 for n in t for r in ("planner", "coder", "debugger"))
