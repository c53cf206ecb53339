"""The tool's own background builds (a precompiled header's detached maker) never run beside a timing: paused.

Real makers (``pch.make_pch`` in a detached ``python -m kernelskill.evaluate.build.pch``),
whose compiler is a stand-in that burns CPU; real evaluations on the CPU. Every wait here is on a
state (a marker appears, a process ends), with a deadline only as a guard."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np

from kernelskill import Candidate, Task
from kernelskill.evaluate import compile, evaluate
from kernelskill.evaluate.build import own_builds, pch
from kernelskill.evaluate.judge import quality
from kernelskill.evaluate.api import Options
from kernelskill.evaluate.build.extensions import build_root
from kernelskill.evaluate.cache import cache_root
from kernelskill.evaluate.judge.quality import CONTENDED, RoundJudge
from kernelskill.evaluate.worker.timing import TimingConfig

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
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
    """Start a real detached maker (pch.make_pch_detached) for a header dir of its own under
    ``pch_root``, whose compiler is the stand-in; returns (header dir, go file)."""
    d = pch_root / f"standin-{uuid.uuid4().hex[:8]}"
    (d / "torch").mkdir(parents=True)
    (d / "torch" / "extension.h").write_text("// stand-in\n")
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    go = tmp_path / f"go-{d.name}"
    pch.make_pch_detached(d, [sys.executable, str(script), str(go), str(work)])
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


def _state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def _group_states(pgid: int) -> list[str]:
    """The states of every process in a process group (the maker and its compiler)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid:
                out.append(fields[0])
    return out


def test_pause_stops_the_maker_and_its_compiler_and_resume_continues_them(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELSKILL_CACHE", str(tmp_path / "cache"))
    assert own_builds.pause() == []                                   # none running: nothing to pause
    d, go = _stand_in_maker(build_root() / "_pch", tmp_path, work=50)
    _until(lambda: _marker_of(d) and Path(str(go) + ".started").exists(), "the maker and its compiler")
    [b] = own_builds.pause()
    _until(lambda: set(_group_states(b["pid"])) == {"T"}, "the maker's whole group to stop")
    assert len(_group_states(b["pid"])) >= 2                          # the maker and the stand-in compiler
    assert _marker_of(d)[0]["paused"] and quality.own_builds_now() == []   # paused: not running beside a timing
    go.write_text("go")
    assert not (d / "torch" / "extension.h.gch").exists()
    own_builds.resume()
    _until(lambda: (d / "torch" / "extension.h.gch").exists() and not _marker_of(d), "the maker to finish")


def test_a_maker_paused_by_a_process_that_died_goes_on(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELSKILL_CACHE", str(tmp_path / "cache"))
    d, go = _stand_in_maker(build_root() / "_pch", tmp_path, work=50)
    _until(lambda: _marker_of(d), "the maker's marker")
    # Another process pauses it and dies mid-timing, never resuming it.
    subprocess.run([sys.executable, "-c", "import os; from kernelskill.evaluate.build import own_builds; "
                    "assert own_builds.pause(); os._exit(0)"], check=True, env=dict(os.environ))
    [b] = _marker_of(d)                                   # the look itself continues it: no live pauser
    assert not b["paused"] and _state(b["pid"]) != "T"
    go.write_text("go")
    _until(lambda: (d / "torch" / "extension.h.gch").exists() and not _marker_of(d), "the maker to finish")


def test_a_round_beside_the_tools_own_build_is_contended_and_paused_before_the_next(tmp_path, monkeypatch):
    """A build that started after the timing's pause (here: one the judge never saw before the
    round) makes the round contended whatever its samples say; it is paused for the next round and
    continued once the timing is done."""
    monkeypatch.setenv("KERNELSKILL_CACHE", str(tmp_path / "cache"))
    rng = np.random.default_rng(0)
    quiet = {"eager": {"ms": list(1.0 + 0.001 * rng.random(60))}, "candidate": {"ms": list(0.5 + 0.001 * rng.random(60))}}
    for k in (0, 1):
        (tmp_path / f"timing_{k}.json").write_text(json.dumps({"times": quiet}))
    judge = RoundJudge("cpu", 2, retimes=1, backoff_s=0.0)
    judge.phase("time")
    judge.poll(tmp_path)                                              # the round begins: nothing to pause yet
    d, go = _stand_in_maker(build_root() / "_pch", tmp_path, work=20)
    _until(lambda: _marker_of(d), "the maker's marker")               # ... and a maker starts during it
    # It is let go only once paused: let go before the round is judged, a maker that finished in
    # the meantime (a busy machine slows this process, not it) would have left no marker to see.
    answer = judge.round(tmp_path, 0)
    assert answer.startswith("again")
    first = judge.rounds[0]
    assert first["verdict"] == CONTENDED and "the tool's own background build ran during the round" in first["reasons"][0]
    [b] = _marker_of(d)
    assert b["paused"]                                                # paused before the next round
    go.write_text("go")                                               # it works on once resumed
    judge.phase("time")
    judge.poll(tmp_path)
    assert judge.round(tmp_path, 1) == "done 1"                    # quiet samples, the maker paused: good
    s = judge.summary()
    assert s["chosen_round"] == 1 and s["verdict"] == "good"
    assert any(r.startswith("paused the tool's own background build") for r in s["reasons"])
    _until(lambda: (d / "torch" / "extension.h.gch").exists() and not _marker_of(d), "the maker to go on and finish")


# ---- a whole evaluation ------------------------------------------------------------------------------
def test_an_evaluation_never_times_beside_the_tools_own_header_build(tmp_path):
    """The first `kernelskill eval` on a fresh 2-core machine was judged CONTENDED by the header maker
    its own build had started. Here a maker of the tool's own, burning a core, runs when the
    evaluation reaches ``await``: it is paused while the candidate is timed, goes on afterwards, and
    the quality says so."""
    task = Task.load(SOFTMAX, preset="small")
    cand = Candidate.from_file(SOFTMAX_CPP)
    assert compile(cand).ok                       # its build (cached after the first run) ...
    # ... and the headers that build may have started: ended, so that only the stand-in runs.
    _until(lambda: not own_builds.own_builds(), "the headers the build started", deadline_s=600)
    pch = build_root() / "_pch"
    d, go = _stand_in_maker(pch, tmp_path, work=1500)          # ~1-2 s of one core at full speed
    try:
        _until(lambda: _marker_of(d), "the maker's marker")
        seen: dict[str, object] = {}

        def on_phase(name: str) -> None:
            if name == "await":
                seen["maker_at_await"] = _marker_of(d)
                go.write_text("go")               # the maker starts burning now, as the timing would
            elif name == "time" and "maker_at_time" not in seen:
                seen["maker_at_time"] = _marker_of(d)

        t = TimingConfig(warmup=1, min_reps=5, max_reps=30, time_cap_s=1.0, retimes=0)
        r = evaluate(task, cand, opts=Options(device="cpu", timing=t, build_timeout=600, run_timeout=300),
                     on_phase=on_phase)
        assert r.ok, r.message
        assert seen["maker_at_await"], "the maker ran when the candidate went to timing"
        [at_time] = seen["maker_at_time"]
        assert at_time["paused"], "the timing began while the tool's own header build ran"
        q = r.profile.quality
        paused = [w for w in q.reasons if w.startswith("paused the tool's own background build") and d.name in w]
        assert paused, q.reasons
        assert q.metrics["own_builds_paused"] >= 1
        assert not any("the tool's own background build ran during the round" in w for w in q.reasons)
        # Continued once the timing was done: it runs to its end.
        _until(lambda: (d / "torch" / "extension.h.gch").exists() and not _marker_of(d), "the maker to finish")
    finally:
        go.write_text("go")
        own_builds.resume()
        _until(lambda: not _marker_of(d), "the stand-in maker to end")
        shutil.rmtree(d, ignore_errors=True)
    assert cache_root().exists()
