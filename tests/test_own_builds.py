"""The tool's own background builds (a precompiled header's detached maker) never run beside a timing.

Real makers (``toolchain.make_pch`` in a detached ``python -m kernelskill.evaluate.toolchain pch``),
whose compiler is a stand-in that burns CPU; real evaluations on the CPU. Every wait here is on a
state (a marker appears, a process ends), with a deadline only as a guard."""
from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import threading
import time
import uuid
from pathlib import Path

import numpy as np

from kernelskill import Candidate, Task
from kernelskill.evaluate import compile, evaluate, own_builds, quality, toolchain
from kernelskill.evaluate.api import Options
from kernelskill.evaluate.build import build_root, cache_root
from kernelskill.evaluate.quality import CONTENDED, RoundJudge
from kernelskill.evaluate.timing import TimingConfig

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SOFTMAX = EXAMPLES / "softmax_rows"
SOFTMAX_CPP = SOFTMAX / "solutions" / "cpp_softmax_openmp.py"

# The stand-in compiler: idle until GO exists, then a fixed amount of CPU work (the header being
# "compiled"), then the output file make_pch moves into place. Its arguments end with make_pch's
# own ("-x c++-header HEADER -o OUT").
STAND_IN = """
import hashlib, os, sys, time
go, work = sys.argv[1], int(sys.argv[2])
open(go + ".started", "w").close()
while not os.path.exists(go):
    time.sleep(0.02)
data = b"x" * (1 << 20)
for _ in range(work):
    hashlib.sha256(data).digest()
open(sys.argv[-1], "w").write("pch")
"""


def _until(cond, what: str, deadline_s: float = 300.0, poll_s: float = 0.05):
    """Wait for a state; the deadline only guards against a hang."""
    end = time.monotonic() + deadline_s
    while not cond():
        assert time.monotonic() < end, f"never happened: {what}"
        time.sleep(poll_s)


def _stand_in_maker(pch_root: Path, tmp_path: Path, work: int) -> tuple[Path, Path]:
    """Start a real detached maker (toolchain.make_pch_detached) for a header dir of its own under
    ``pch_root``, whose compiler is the stand-in; returns (header dir, go file)."""
    d = pch_root / f"standin-{uuid.uuid4().hex[:8]}"
    (d / "torch").mkdir(parents=True)
    (d / "torch" / "extension.h").write_text("// stand-in\n")
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    go = tmp_path / f"go-{d.name}"
    toolchain.make_pch_detached(d, [sys.executable, str(script), str(go), str(work)])
    return d, go


def _marker_of(d: Path) -> list[dict]:
    return [b for b in own_builds.own_builds() if d.name in b["what"]]


# ---- the markers ------------------------------------------------------------------------------------
def test_a_maker_is_marked_while_it_works_and_unmarked_when_done(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELSKILL_CACHE", str(tmp_path / "cache"))
    pch = build_root() / "_pch"
    d, go = _stand_in_maker(pch, tmp_path, work=1)
    _until(lambda: _marker_of(d), "the maker's marker")
    [b] = _marker_of(d)
    assert b["pid"] != os.getpid() and "precompiled header" in b["what"]
    go.write_text("go")
    _until(lambda: (d / "torch" / "extension.h.gch").exists() and not _marker_of(d), "the maker to finish")
    assert own_builds.own_builds() == [] and not list((pch / "busy").glob("*.json"))


def test_a_killed_makers_marker_counts_for_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELSKILL_CACHE", str(tmp_path / "cache"))
    d, go = _stand_in_maker(build_root() / "_pch", tmp_path, work=1)
    _until(lambda: _marker_of(d), "the maker's marker")
    [b] = _marker_of(d)
    os.killpg(os.getpgid(b["pid"]), signal.SIGKILL)        # the maker and its compiler, as an OOM kill would
    _until(lambda: not Path(f"/proc/{b['pid']}").exists() or
           Path(f"/proc/{b['pid']}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z", "the maker to die")
    # Its marker is still on disk, but its process is gone: not a running build, and cleaned away.
    assert Path(b["marker"]).exists()
    assert own_builds.own_builds() == [] and not Path(b["marker"]).exists()


def test_wait_for_own_builds_waits_until_the_maker_ends(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELSKILL_CACHE", str(tmp_path / "cache"))
    assert quality.wait_for_own_builds(5.0) is None                  # none running: no wait at all
    d, go = _stand_in_maker(build_root() / "_pch", tmp_path, work=50)
    _until(lambda: _marker_of(d), "the maker's marker")
    threading.Thread(target=lambda: (_until(lambda: Path(str(go) + ".started").exists(), "stand-in"),
                                     go.write_text("go")), daemon=True).start()
    info = quality.wait_for_own_builds(300.0)
    assert info and not info["still_running"] and any(d.name in w for w in info["builds"])
    assert not _marker_of(d) and (d / "torch" / "extension.h.gch").exists()
    assert "waited" in quality.own_wait_text(info) and "for the tool's own header build" in quality.own_wait_text(info)


def test_a_round_beside_the_tools_own_build_is_contended_and_retimed_after_it(tmp_path, monkeypatch):
    """The fallback (a maker still running when the round began, or a race, which has no ``await``):
    the round is contended whatever its samples say, and the answer to re-time comes once it ended."""
    monkeypatch.setenv("KERNELSKILL_CACHE", str(tmp_path / "cache"))
    rng = np.random.default_rng(0)
    quiet = {"eager": {"ms": list(1.0 + 0.001 * rng.random(60))}, "candidate": {"ms": list(0.5 + 0.001 * rng.random(60))}}
    for k in (0, 1):
        (tmp_path / f"timing_{k}.json").write_text(json.dumps({"times": quiet}))
    judge = RoundJudge("cpu", 2, retimes=1, backoff_s=0.0)
    d, go = _stand_in_maker(build_root() / "_pch", tmp_path, work=20)
    _until(lambda: _marker_of(d), "the maker's marker")
    judge.on_phase("time")
    judge.poll(tmp_path)                                              # the round begins beside the maker
    go.write_text("go")
    answer = judge.on_round(tmp_path, 0)                               # returns once the maker has ended
    assert answer.startswith("again") and not _marker_of(d)
    first = judge.rounds[0]
    assert first["verdict"] == CONTENDED and "the tool's own background build ran during the round" in first["reasons"][0]
    assert any(r.startswith("waited") and "before the next round" in r for r in first["reasons"])
    judge.on_phase("time")
    judge.poll(tmp_path)
    assert judge.on_round(tmp_path, 1) == "done 1"                    # quiet samples, no maker: good
    s = judge.summary()
    assert s["chosen_round"] == 1 and s["verdict"] == "good"


# ---- a whole evaluation ------------------------------------------------------------------------------
def test_an_evaluation_never_times_beside_the_tools_own_header_build(tmp_path):
    """The first `kernelskill eval` on a fresh 2-core machine was judged CONTENDED by the header maker
    its own build had started. Here a maker of the tool's own, burning a core, runs when the
    evaluation reaches ``await``: the timing starts only after it ended, and the quality says so."""
    task = Task.load(SOFTMAX, preset="small")
    cand = Candidate.from_file(SOFTMAX_CPP)
    assert compile(cand).ok                       # its build (cached after the first run) ...
    quality.wait_for_own_builds(600.0)            # ... and the headers that build may have started
    pch = build_root() / "_pch"
    d, go = _stand_in_maker(pch, tmp_path, work=1500)          # ~1-2 s of one core at full speed
    try:
        _until(lambda: _marker_of(d), "the maker's marker")
        seen: dict[str, object] = {}

        def on_phase(name: str) -> None:
            if name == "await":
                seen["maker_at_await"] = bool(_marker_of(d))
                go.write_text("go")               # the maker starts burning now, as the timing would
            elif name == "time" and "maker_at_time" not in seen:
                seen["maker_at_time"] = bool(_marker_of(d))

        t = TimingConfig(warmup=1, min_reps=5, max_reps=30, time_cap_s=1.0, retimes=0)
        r = evaluate(task, cand, opts=Options(device="cpu", timing=t, build_timeout=600, run_timeout=300),
                     on_phase=on_phase)
        assert r.ok, r.message
        assert seen["maker_at_await"] is True, "the maker ran when the candidate went to timing"
        assert seen["maker_at_time"] is False, "the timing began while the tool's own header build ran"
        assert (d / "torch" / "extension.h.gch").exists()          # it ran to its end, and was waited for
        q = r.profile.quality
        waited = [w for w in q.reasons if w.startswith("waited") and d.name in w]
        assert waited and "for the tool's own header build" in waited[0] and "still ran" not in waited[0], q.reasons
        assert q.metrics["own_build_wait_s"] > 0
        assert not any("the tool's own background build ran during the round" in w for w in q.reasons)
    finally:
        go.write_text("go")
        _until(lambda: not _marker_of(d), "the stand-in maker to end")
        shutil.rmtree(d, ignore_errors=True)
    assert cache_root().exists()
