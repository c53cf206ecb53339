"""A hung candidate is not a silent wait: `eval` shows how long the phase has run and when its
timeout stops it, and the time limits are flags."""
from __future__ import annotations

import io
import re
import subprocess
import sys
import time

from kernelskill.cli.common import PhaseCountdown

from helpers import RELU_TASK

HUNG = "import torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        while True:\n            pass\n"


def _until(check, bound: float = 60.0) -> None:
    deadline = time.monotonic() + bound
    while not check():
        assert time.monotonic() < deadline, "state not reached"
        time.sleep(0.01)


def test_a_long_phase_counts_towards_its_own_limit():
    out = io.StringIO()
    c = PhaseCountdown(build_timeout=4.0, run_timeout=2.0, stream=out, every=0.02)
    try:
        c("build")
        _until(lambda: re.search(r"extensions: [2-9] s of its 4 s limit", out.getvalue()))
        c("run")
        _until(lambda: re.search(r"trials: \d+ s of its 2 s limit", out.getvalue()))
    finally:
        c.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "  … building the candidate's extensions" and "  … running the correctness trials" in lines
    after_run = lines[lines.index("  … running the correctness trials"):]
    assert not any("extensions:" in ln for ln in after_run)        # the old phase's clock stopped


def test_a_short_phase_after_a_long_one_is_counted_without_waiting_for_the_long_tick():
    """Off a terminal a tick is a tenth of the phase's limit: 30 s during a 900 s build. A run phase of
    6 s that follows must not wait out that tick (the ticker slept through whole short runs)."""
    out = io.StringIO()
    c = PhaseCountdown(build_timeout=900.0, run_timeout=2.0, stream=out)
    try:
        c("build")
        time.sleep(1.5)        # not a wait for a state: time for the ticker to take the build's 30 s tick
        c("run")
        _until(lambda: re.search(r"trials: \d+ s of its 2 s limit", out.getvalue()), bound=15.0)
    finally:
        c.close()


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_phases_read_as_what_they_do_and_rounds_say_which():
    """`eval` printed bare words (`… await`, `… timed` three times); each line now says what the
    evaluator does, the judge's own step prints nothing, and a later round says it is one."""
    out = io.StringIO()
    c = PhaseCountdown(build_timeout=900, run_timeout=300, stream=out, every=60)
    try:
        for phase in ("setup", "build", "run", "await", "time", "timed", "time", "timed", "profile", "done"):
            c(phase)
    finally:
        c.close()
    lines = out.getvalue().splitlines()
    assert lines == ["  … starting the isolated worker", "  … building the candidate's extensions",
                     "  … running the correctness trials", "  … comparing the outputs with the reference",
                     "  … timing the candidate against eager",
                     "  … timing the candidate against eager (round 2, on fresh allocations of the inputs)",
                     "  … profiling the candidate's kernels", "  … finished"], lines


def test_on_a_terminal_the_countdown_rewrites_one_line():
    out = _Tty()
    c = PhaseCountdown(build_timeout=900, run_timeout=2.0, stream=out, every=0.02)
    try:
        c("run")
        _until(lambda: out.getvalue().count("\r\033[K") >= 2)
        c("done")
    finally:
        c.close()
    text = out.getvalue()
    assert re.search(r"\r\033\[K  … running the correctness trials: \d+ s of its 2 s limit", text)
    assert text.rstrip("\n").endswith("  … finished")


def test_eval_of_a_hung_candidate_counts_down_to_its_timeout(tmp_path):
    cand = tmp_path / "hung.py"
    cand.write_text(HUNG)
    # a 6 s limit: the countdown speaks from 3 s on, once a second; a busy machine may skip or
    # delay a tick, never all three
    r = subprocess.run([sys.executable, "-m", "kernelskill", "eval", str(RELU_TASK), str(cand), "--trials", "1",
                        "--run-timeout", "6"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 1, r.stderr[-2000:]
    assert re.search(r"… running the correctness trials: [3-7] s of its 6 s limit \(then the verdict is timeout\)",
                     r.stderr), r.stderr
    assert "timeout" in r.stdout and "run timeout 6 s" in r.stdout
