"""An Evaluation's steps, one at a time, on a real C++ candidate (the same steps evaluate() runs)."""
from __future__ import annotations

import dataclasses

from kernelskill import Candidate
from kernelskill.evaluate.evaluation import Evaluation
from kernelskill.evaluate.launch.reply import ReferenceMeta, Samples, TimingReply, WorkerReply
from kernelskill.task import Task
from kernelskill.vocab import ProfileMode

from helpers import RELU_TASK, toolkit_candidate


def _evaluation(source: str, fast, tmp_path) -> tuple[Evaluation, list[str]]:
    phases: list[str] = []
    opts = dataclasses.replace(fast, keep_dir=tmp_path)      # the worker's folder is the test's
    return Evaluation(Task.load(RELU_TASK), Candidate.from_source(source), opts, phases.append), phases


def test_the_steps_of_an_evaluation_in_order(fast, tmp_path):
    ev, phases = _evaluation(toolkit_candidate("return ext.relu2(x)"), fast, tmp_path)
    assert ev.device == "cpu" and ev.flags == [] and ev.outcome is None

    # plan: the reference (its meta and memory plan) and the request of the run worker.
    assert ev.plan() is False
    assert (ev.ref_dir / "meta.json").exists() and isinstance(ev.meta, ReferenceMeta) and not ev.meta.recompute
    assert ev.meta.plan["outputs"] == "stored" and ev.meta.distributions[-1] == "signed"
    assert ev.request.mode == "run" and ev.request.ref_dir == str(ev.ref_dir)
    assert ev.request.profile == ProfileMode.here and ev.apart is None        # a CPU profiles in the timing worker
    # Before each trial call the worker poisons blocks of each reference output's exact size.
    assert ev.request.poison_sizes == [64 * 1000 * 4] and ev.request.poison_bytes == 2 * 64 * 1000 * 4

    # build, verify, time: one worker. The relu task's outputs are stored, so no reference server runs.
    ev.build_and_run()
    assert isinstance(ev.reply, WorkerReply) and ev.reply.status == "ok" and ev.reply.build["extensions"]
    # Each phase once, in order; the verdict on the trials came before any timing.
    order = ["build", "run", "await", "time", "timed", "profile", "done"]
    assert [p for p in phases if p in order] == order, phases
    verify, cheats = ev.verified
    assert verify.correct and cheats == []
    assert ev.replay == []               # the timed outputs re-checked while the worker profiled
    timing = ev.reply.timing
    assert isinstance(timing, TimingReply) and isinstance(timing.times["candidate"], Samples)
    assert timing.times["candidate"].ms and len(timing.times["eager"].ms) == len(timing.times["candidate"].ms)
    assert timing.threads and timing.reps > 0 and ev.reply.kernels

    # profile: the rounds' quality into the reply, the device's ceilings.
    ev.profile()
    assert ev.reply.timing.quality["verdict"] and ev.roof

    # judge: the verdict, from the fields the steps filled.
    ev.judge()
    r = ev.result
    assert r.status == "ok" and r.message.startswith("correct on ") and r.compile.ok, r.message
    assert r.verify is ev.verified[0] and r.profile.custom_share > 0.5 and r.profile.roofline is not None
    assert r.env.threads == ev.reply.env["threads"]


def test_a_wrong_candidate_is_stopped_at_verify_and_never_timed(fast, tmp_path):
    ev, phases = _evaluation(toolkit_candidate("return ext.relu2(x) + 1"), fast, tmp_path)
    assert ev.plan() is False
    ev.build_and_run()
    assert "await" in phases and "time" not in phases and "profile" not in phases
    assert ev.verified[0].correct is False and ev.reply.timing is None and ev.replay is None
    ev.profile()
    assert ev.roof == {}
    ev.judge()
    assert ev.result.status == "incorrect" and ev.result.profile is None, ev.result.message


def test_a_reply_that_is_not_an_object_is_no_reply():
    assert WorkerReply.parse(["status", "ok"]) is None
    reply = WorkerReply.parse({"status": "runtime_error", "error": "boom", "line": 3, "build": None})
    assert reply.status == "runtime_error" and reply.line == 3 and reply.build == {} and reply.source_line == ""


def test_a_replys_timing_is_read_into_records_and_a_malformed_one_is_no_reply():
    wire = {"times": {"candidate": {"ms": [1.0, 1.2], "host_ms": [1.1, 1.3], "rounds": [1, 1]},
                      "eager": {"ms": [2.0, 2.2]}, "compile": {"ms": [1.5, 1.6]}},
            "reps": 2, "threads": 4, "rounds": 2, "chosen_rounds": [0, 1], "first_call_ms": 9.0,
            "compile": {"ok": True, "seconds": 3.5, "agrees_with_eager": False}, "flush_l2": False,
            "cost_s": {"timing": 0.4}}
    t = WorkerReply.parse({"status": "ok", "timing": wire}).timing
    assert t.times["candidate"] == Samples(ms=[1.0, 1.2], host_ms=[1.1, 1.3], rounds=[1, 1])
    assert t.times["eager"].rounds is None and t.times["eager"].host_ms == []
    assert t.compile.seconds == 3.5 and t.compile.agrees_with_eager is False and t.flush_l2 is False
    assert t.kept_rounds() == [0, 1] and t.cost_s == {"timing": 0.4} and t.quality is None
    # The round judge's statistics read the wire form: the same samples come back.
    assert t.raw_times() == {"candidate": wire["times"]["candidate"], "eager": wire["times"]["eager"],
                             "compile": wire["times"]["compile"]}
    assert WorkerReply.parse({"status": "ok"}).timing is None
    # Written by the process that ran candidate code: a timing of the wrong shape is no reply at all
    # (the parent then says the worker crashed), never a KeyError deep in the verdict.
    for forged in ({"times": [1.0]}, {"times": {"candidate": 3}}, "fast", {"times": {"eager": {"ms": None}}, "reps": 1}):
        assert WorkerReply.parse({"status": "ok", "timing": forged}) is None, forged


def test_run_says_where_the_seconds_went(fast, tmp_path):
    ev, _ = _evaluation(toolkit_candidate("return ext.relu2(x)"), fast, tmp_path)
    r = ev.run()
    assert r.ok, r.message
    # The parent's steps and the worker's phases, each summed over its spans, nothing counted twice.
    assert {"plan", "reference", "start", "build", "run", "await", "time", "profile", "judge"} <= set(r.phases), r.phases
    assert all(s >= 0 for s in r.phases.values())
    assert sum(r.phases.values()) <= r.seconds + 0.01, (r.phases, r.seconds)
    assert sum(r.phases.values()) >= 0.9 * r.seconds, (r.phases, r.seconds)   # and nothing left out
