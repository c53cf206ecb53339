"""scripts/busy-tests: one line per run, its exit status follows the runs, and no spinner outlives it.

The runs here are of a one-line test file outside the suite (a few seconds each), not of the suite."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "busy-tests"


def busy_tests(*args: str, tmp: Path | None = None) -> subprocess.CompletedProcess:
    # The script keeps its logs for the user (it prints where): in a test they go to the test's folder.
    env = dict(os.environ, TMPDIR=str(tmp)) if tmp else None
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env=env)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_each_run_is_one_line_and_the_spinners_are_gone(tmp_path):
    (tmp_path / "test_ok.py").write_text("def test_ok():\n    assert True\n")
    (tmp_path / "test_bad.py").write_text("def test_bad():\n    assert False\n")
    ok = busy_tests("--runs", "2", "--", "-p", "no:cacheprovider", str(tmp_path / "test_ok.py"), tmp=tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert re.findall(r"^run (\d): 1 passed in [\d.]+s, \d+ s wall, exit 0$", ok.stdout, re.M) == ["1", "2"], ok.stdout
    pids = [int(p) for p in re.search(r"with 2 busy processes \(pids (\d+) (\d+)\)", ok.stdout).groups()]
    assert not any(_alive(pid) for pid in pids)

    bad = busy_tests("--runs", "1", "--spinners", "1", "-p", "no:cacheprovider", str(tmp_path / "test_bad.py"),
                     tmp=tmp_path)
    assert bad.returncode == 1 and "run 1: 1 failed in" in bad.stdout and "test_bad.py::test_bad" in bad.stdout

    assert busy_tests("--help").returncode == 0 and busy_tests("--runs", "x").returncode == 2
    assert len(list(tmp_path.glob("busy-tests.*"))) == 2          # each run's logs, where TMPDIR says
