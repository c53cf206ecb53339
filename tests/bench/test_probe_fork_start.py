"""benchmarks/probe_fork_start.py: a child forked from a process that imported torch computes what a
freshly started one computes (on the intra-op thread pool it creates after the fork), and starts
with a fraction of the CPU; the table and JSON say both."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_forked_child_computes_the_same_and_costs_less_cpu(tmp_path):
    out = tmp_path / "fork.json"
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "probe_fork_start.py"), "--runs", "2",
                        "--size", "96", "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "| spawn |" in r.stdout and "| fork |" in r.stdout
    summary = json.loads(out.read_text())["summary"]
    assert summary["spawn"]["equal"] and summary["fork"]["equal"]
    assert summary["spawn"]["statuses"] == [0] and summary["fork"]["statuses"] == [0]
    assert summary["fork"]["threads"] == summary["spawn"]["threads"]
    # The spawned child imports torch (seconds of a core); the forked one does not. CPU time, not
    # wall time: a busy machine slows both alike.
    assert summary["fork"]["child_cpu_s"] < summary["spawn"]["child_cpu_s"] / 4, summary
