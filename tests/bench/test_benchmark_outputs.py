"""The build and loop benchmarks keep what they measured when they are cut off (the GPU machine's
10-minute limit, `timeout`'s SIGTERM, Ctrl-C): their JSON is rewritten after every build, each row
holds every sample and the build's timeline, and the table of what finished is still printed."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import build_cost  # noqa: E402


def test_the_table_and_json_rows_hold_only_what_was_measured(tmp_path):
    typo = [(1.8, 2.9, "direct", [[0.01, "compile kernel.cpp"], [1.8, "kernel.cpp failed after 1.8 s"]]),
            (2.0, 3.1, "direct", [[0.01, "compile kernel.cpp"], [2.0, "kernel.cpp failed after 2.0 s"]])]
    table = {("cpp", "compile error (a typo)", "direct", "cold"): typo}
    modes = [("direct", "cold"), ("direct", "ahead")]
    lines, rows = build_cost.summarize(table, ["cpp"], modes)
    assert lines[2] == "| cpp | compile error (a typo) | 1.90 / 3.00 | - | direct |"      # the median of two
    assert len(lines) == 3                       # rows never measured are left out, not shown as zeros
    (row,) = rows
    assert row["samples"] == [[1.8, 2.9], [2.0, 3.1]]
    assert row["timelines"][1][-1] == [2.0, "kernel.cpp failed after 2.0 s"]
    out = tmp_path / "r.json"
    build_cost.write_json(str(out), "x86_64", build_cost.HostWatch(), rows, complete=False)
    data = json.loads(out.read_text())
    assert data["complete"] is False and data["rows"] == rows and "cpu_quota" in data
    assert not list(tmp_path.glob("*.tmp"))      # written whole, then moved into place


@pytest.mark.slow
def test_build_cost_cut_off_by_sigterm_prints_and_keeps_the_builds_it_finished(tmp_path):
    """The real benchmark, stopped as `timeout` stops it once its first build is in the JSON: it
    exits, prints the table of what finished, and the file says the run was cut off."""
    out = tmp_path / "bc.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "build_cost.py"), "--device", "cpu",
                             "--backends", "cpp", "--paths", "direct", "--workers", "cold", "--repeat", "3",
                             "--rows", "typo,cold", "--json", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        deadline = time.monotonic() + 600
        while not (out.exists() and json.loads(out.read_text())["rows"]):
            assert proc.poll() is None, proc.communicate()[0]
            assert time.monotonic() < deadline, "no build measured in 10 minutes"
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        text, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, text
    assert "interrupted" in text and "(cut off: the rounds that finished)" in text, text
    assert "| cpp | compile error (a typo) |" in text, text
    data = json.loads(out.read_text())
    assert data["complete"] is False
    typo = next(r for r in data["rows"] if r["build"] == "compile error (a typo)")
    assert typo["timelines"][0][-1][1].startswith("kernel.cpp failed after"), typo
