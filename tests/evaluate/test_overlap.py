"""The evaluation's overlapped work, with real workers: trials compared while the worker runs the
next one, the kernel breakdown from a profiling worker of its own, and workers started ahead."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import torch

from kernelskill import Candidate, Task
from kernelskill.evaluate import evaluate
from kernelskill.evaluate.launch import isolation
from kernelskill.evaluate.judge import verdict
from kernelskill.evaluate.launch.reply import ReferenceMeta
from kernelskill.evaluate.options import request
from kernelskill.evaluate.reference import reference

from helpers import RELU_TASK, hear, limits, toolkit_candidate

GOOD = toolkit_candidate("return ext.relu2(x)")


def gated(go: Path, wait_s: float = 120) -> str:
    """A candidate whose every call after the first waits (at most ``wait_s``) for the file ``go``."""
    return toolkit_candidate(f"CALLS[0] += 1\ndeadline = time.monotonic() + {wait_s}\n"
                             "while CALLS[0] > 1 and not os.path.exists(GO) and time.monotonic() < deadline:\n"
                             "    time.sleep(0.01)\nreturn ext.relu2(x)",
                             extra=f"import os\nimport time\nCALLS = [0]\nGO = {str(go)!r}\n")
WRONG = toolkit_candidate("return ext.relu2(x) + 1.0")


# ---- trials compared as they appear -----------------------------------------------------------
def test_trials_are_compared_while_the_worker_runs_the_next(fast, monkeypatch, tmp_path):
    events, go = [], tmp_path / "go"
    real = verdict.compare_trial

    def spy(i, *a, **k):
        events.append(f"compare {i}")
        if i == 0:
            go.touch()                      # lets the worker go on past trial 1
        return real(i, *a, **k)

    monkeypatch.setattr(verdict, "compare_trial", spy)
    r = evaluate(RELU_TASK, Candidate.from_source(gated(go)), opts=fast, timing=None,
                 on_phase=events.append)
    assert r.verify.correct and len(r.verify.trials) == 6, r.message
    # Trial 1 waited for the comparison of trial 0: compared while the worker ran, not after it ended.
    assert events.index("compare 0") < events.index("done"), events
    assert sorted(n for n in events if n.startswith("compare")) == [f"compare {i}" for i in range(6)]


def _judge_dir(tmp_path, fast):
    task = Task.load(RELU_TASK)
    ref_dir = reference(task, "cpu", fast)
    meta = ReferenceMeta.load(ref_dir)
    return task, ref_dir, meta, verdict.reference_outputs(ref_dir)


def test_judge_compares_only_what_is_written_and_names_what_is_missing(tmp_path, fast):
    task, ref_dir, meta, ref = _judge_dir(tmp_path, fast)
    judge = verdict.TrialJudge(task, ref_dir, meta)
    torch.save(ref[0], tmp_path / "cand_outputs_0.pt")
    torch.save([o + 1 for o in ref[1]], tmp_path / "cand_outputs_1.pt")
    judge.poll(tmp_path)
    assert sorted(judge.done) == [0, 1]
    assert judge.done[0][0].ok and not judge.done[1][0].ok
    v, flags = judge.verdict(tmp_path)
    assert v is None and flags == ["output-type: no outputs were written for trial 2"]
    for i in range(2, len(ref)):
        torch.save(ref[i], tmp_path / f"cand_outputs_{i}.pt")
    v, flags = judge.verdict(tmp_path)
    assert flags == [] and not v.correct and [t.ok for t in v.trials] == [True, False] + [True] * (len(ref) - 2)
    assert "trial 1" in v.mismatch


def test_judge_flags_outputs_that_are_not_plain_tensors(tmp_path, fast):
    task, ref_dir, meta, ref = _judge_dir(tmp_path, fast)
    (tmp_path / "cand_outputs_0.pt").write_bytes(b"not a tensor file")
    judge = verdict.TrialJudge(task, ref_dir, meta)
    v, flags = judge.verdict(tmp_path)
    assert v is None and flags[0].startswith("output-type: the outputs are not plain tensors")


# ---- the profile apart --------------------------------------------------------------------------
def test_profiling_worker_gives_the_breakdown_and_the_timer_never_profiles(fast, tmp_path):
    phases = []
    r = evaluate(RELU_TASK, Candidate.from_source(GOOD), opts=fast, profile_apart=True, keep_dir=tmp_path,
                 on_phase=phases.append)
    assert r.status == "ok", r.message
    p = r.profile
    # The custom kernel is in the breakdown (its share of one profiled call on a busy CPU can be any:
    # a preemption inside aten::empty_like took 69 % of one under two busy threads).
    assert p.custom_share > 0 and any(k.custom and "relu2" in k.name for k in p.kernels), p.kernels
    assert p.cost_s["profile"] < 0.05              # the timing worker ran no profiler
    assert p.cost_s["apart: profiler_setup"] > 0 and "apart: profile" in p.cost_s
    # It waited for the timing to finish before profiling: its "profile" phase follows the timer's.
    base = next(tmp_path.iterdir())
    apart = (base / "profile" / "out" / "phases").read_text().split()
    assert apart[-3:] == ["await", "profile", "done"], apart
    assert json.loads((base / "profile" / "out" / "result.json").read_text())["status"] == "ok"


def test_profiling_worker_of_an_incorrect_candidate_never_runs_it(fast, tmp_path):
    t0 = time.monotonic()
    r = evaluate(RELU_TASK, Candidate.from_source(WRONG), opts=fast, profile_apart=True, keep_dir=tmp_path)
    assert r.status == "incorrect" and r.profile is None
    out = next(tmp_path.iterdir()) / "profile" / "out"
    # Told to stop at its decision, or killed before it got there: either way it never profiled.
    if (out / "result.json").exists():
        assert json.loads((out / "result.json").read_text())["status"] == "stopped"
    assert "profile" not in ((out / "phases").read_text().split() if (out / "phases").exists() else [])
    assert time.monotonic() - t0 < 60


def _fresh(marker: str, typo: bool = False) -> str:
    """GOOD with its C++ source made new (never built before); with ``typo``, a name nobody declares."""
    line = "const int64_t n = xc.numel();"
    assert line in GOOD
    return GOOD.replace(line, line + f" int {marker} = 0; (void){marker};" + (" undeclared_name;" if typo else ""))


def test_the_profiling_worker_builds_after_the_run_worker_and_loads_its_extension(fast, tmp_path):
    # Both workers build the same source; at once, they queued on its build lock and the verdict
    # waited on whichever took it first. The run worker builds; the profiling one loads its build.
    r = evaluate(RELU_TASK, Candidate.from_source(_fresh(f"tok_{uuid.uuid4().hex[:10]}")), opts=fast,
                 profile_apart=True, keep_dir=tmp_path)
    assert r.status == "ok", r.message
    assert any(text == "compile kernel.cpp" for _, text in r.compile.steps), r.compile.steps
    prof = json.loads((next(tmp_path.iterdir()) / "profile" / "out" / "result.json").read_text())
    assert prof["status"] == "ok" and [t for _, t in prof["build"]["steps"]] == ["cached extension", "load"], prof["build"]


def test_the_profiling_worker_never_builds_a_source_that_fails(fast, tmp_path):
    r = evaluate(RELU_TASK, Candidate.from_source(_fresh(f"tok_{uuid.uuid4().hex[:10]}", typo=True)), opts=fast,
                 profile_apart=True, keep_dir=tmp_path)
    assert r.status == "compile_error" and "undeclared_name" in r.message + str(r.compile.diagnostics), r.message
    assert [text for _, text in r.compile.steps if "failed after" in text] == [
        next(t for _, t in r.compile.steps if t.startswith("kernel.cpp failed after"))]
    phases = next(tmp_path.iterdir()) / "profile" / "out" / "phases"
    lines = phases.read_text().splitlines() if phases.exists() else []
    assert not any(line.startswith("step ") for line in lines), lines       # it compiled nothing


def test_a_compile_error_is_reported_without_waiting_for_the_profiling_worker(fast, tmp_path):
    # The profiling worker of this candidate never gets past its import (it sleeps there); the run
    # worker's import fails. The verdict must not wait on the profiling worker (it used to join it for
    # up to 60 s): it is stopped where it is, and no process of it outlives the evaluation.
    src = ("import json as _j, pathlib as _p, time as _t\n"
           "if _j.loads((_p.Path.cwd().parent / 'out' / 'request.json').read_text())['mode'] == 'profile':\n"
           "    _t.sleep(3600)\n"
           "raise RuntimeError('broken on purpose')\n") + GOOD
    r = evaluate(RELU_TASK, Candidate.from_source(src), opts=fast, profile_apart=True, keep_dir=tmp_path)
    assert r.status == "compile_error" and "broken on purpose" in r.message + str(r.compile.diagnostics), r.message
    profile_out = next(tmp_path.iterdir()) / "profile" / "out"
    assert not (profile_out / "result.json").exists()           # stopped, not finished
    alive = subprocess.run(["pgrep", "-f", str(profile_out / "request.json")], capture_output=True, text=True)
    assert alive.stdout.strip() == "", f"the profiling worker outlived the evaluation: pids {alive.stdout.split()}"


# ---- workers started ahead ----------------------------------------------------------------------
@pytest.fixture
def spawned(monkeypatch):
    """CPU workers spawned, not forked: the spare mechanism these tests cover is what GPU workers
    use (a CPU request exercises it here, where no GPU is)."""
    monkeypatch.setattr(isolation, "FORK", False)


@pytest.fixture
def prestart(spawned):
    isolation.prestart_workers(True)
    yield
    isolation.prestart_workers(False)


def _compile_request(fast, tmp_path, threads=None):
    import dataclasses
    opts = dataclasses.replace(fast, threads=threads) if threads else fast
    base = tmp_path / f"req{len(list(tmp_path.iterdir()))}"
    base.mkdir()
    return request("compile", None, Candidate.from_source(GOOD), "cpu", opts, base), base


def _spare_pids() -> list[int]:
    return [sp.proc.pid for kind in isolation._SPARES.values() for sp in kind if sp.proc.poll() is None]


def test_a_prestarted_worker_serves_the_next_request_and_leaves_its_files_in_place(prestart, fast, tmp_path):
    req, base = _compile_request(fast, tmp_path)
    first = isolation.run_worker(req, limits(), keep=base)
    assert first.result.status == "ok" and not first.prestarted
    (spare,) = _spare_pids()
    req, base = _compile_request(fast, tmp_path)
    second = isolation.run_worker(req, limits(), keep=base)
    assert second.result.status == "ok" and second.prestarted
    # Its folders became the caller's; the spare that served is gone, a new one waits.
    assert second.out_dir == base / "out" and (base / "out" / "result.json").exists()
    assert (base / "scratch").is_dir()
    assert not Path(f"/proc/{spare}").exists() or _zombie(spare)
    assert _spare_pids() and _spare_pids()[0] != spare


def test_wait_for_spares_returns_once_every_spare_has_imported_what_it_needs(prestart, fast, tmp_path):
    req, base = _compile_request(fast, tmp_path)
    isolation.run_worker(req, limits(), keep=base)
    spares = [sp for kind in isolation._SPARES.values() for sp in kind]
    assert spares                                   # one started as the worker ended (a CPU request)
    assert isolation.wait_for_spares(timeout=300)
    assert all((sp.base / "out" / "spare-ready").exists() for sp in spares)
    assert all(_warm_arg(sp.proc.pid) is None for sp in spares)        # a CPU's spare starts nothing
    # A spare that has not got there yet is waited for; the timeout says so when it never does.
    (spares[0].base / "out" / "spare-ready").unlink()
    assert not isolation.wait_for_spares(timeout=0.2)


def test_a_worker_started_ahead_serves_a_one_shot_compile_and_none_follows_it(spawned):
    # `kernelskill compile` starts its worker before importing torch itself (start_one_ahead); the
    # compile takes that worker, and with prestart_workers off nothing is started after it.
    from kernelskill.evaluate import compile
    assert not _spare_pids()
    isolation.start_one_ahead()
    (pid,) = _spare_pids()
    res = compile(Candidate.from_source(GOOD), device="cpu")
    assert res.ok, res.to_dict()
    assert not Path(f"/proc/{pid}").exists() or _zombie(pid)      # it served the request and exited
    assert not _spare_pids() and not any(isolation._SPARES.values())


def test_on_a_gpu_the_next_spare_starts_while_the_worker_runs(prestart, fast, tmp_path):
    # A request for a GPU (the compile mode of a pure-Python candidate never touches CUDA, so this
    # runs here): the spare for the next request exists while this worker is still in its build.
    req, base = _compile_request(fast, tmp_path)
    req.device = "cuda"
    seen = []
    first = isolation.run_worker(req, limits(), hear(lambda phase: seen.append((phase, list(_spare_pids())))),
                                 keep=base)
    assert first.result.status == "ok" and not first.prestarted
    assert seen and all(pids for _, pids in seen), seen       # started before the first phase was seen
    req, base = _compile_request(fast, tmp_path)
    req.device = "cuda"
    second = isolation.run_worker(req, limits(), keep=base)
    assert second.result.status == "ok" and second.prestarted
    # Three wait on a GPU (a reference, a run and a server worker follow each other within seconds);
    # never more, however many requests came.
    assert len(_spare_pids()) == isolation.SPARE_DEPTH_GPU == 3
    # Each starts CUDA's runtime while it waits (the build reads the GPU's arch through it), and
    # got to ready doing so (here, a CPU torch: nothing to start).
    assert all(_warm_arg(pid) == isolation.SPARE_CUDA_RUNTIME for pid in _spare_pids())
    assert isolation.wait_for_spares(timeout=300)


def _warm_arg(pid: int) -> str | None:
    """A spare's warm-up argument: after ``--spare OUT PARENT``."""
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]
    i = argv.index("--spare")
    return argv[i + 3] if len(argv) > i + 3 else None


def test_a_spare_started_for_another_environment_is_not_used(prestart, fast, tmp_path):
    req, base = _compile_request(fast, tmp_path, threads=1)
    isolation.run_worker(req, limits(), keep=base)
    req, base = _compile_request(fast, tmp_path, threads=2)    # OMP_NUM_THREADS differs
    out = isolation.run_worker(req, limits(), keep=base)
    assert out.result.status == "ok" and not out.prestarted


def test_evaluations_with_prestarted_workers_are_judged_the_same(prestart, fast):
    for src, status in ((GOOD, "ok"), (WRONG, "incorrect"), (GOOD, "ok")):
        r = evaluate(RELU_TASK, Candidate.from_source(src), opts=fast)
        assert r.status == status, r.message
    isolation.prestart_workers(False)
    assert not _spare_pids() and not isolation._SPARES


def test_a_spare_exits_when_its_parent_dies(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(
        "import os, sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parent.parent)!r})\n"
        "from kernelskill import Candidate\n"
        "from kernelskill.evaluate.launch import isolation\n"
        "from kernelskill.evaluate.api import compile\n"
        "from helpers import toolkit_candidate\n"
        "isolation.FORK = False      # a spare of a CPU request, as the GPU's are\n"
        "isolation.prestart_workers(True)\n"
        "compile(Candidate.from_source(toolkit_candidate('return ext.relu2(x)')), device='cpu')\n"
        "print([sp.proc.pid for kind in isolation._SPARES.values() for sp in kind][0], flush=True)\n"
        "os._exit(0)     # no atexit: only the spare's own watch on its parent can end it\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    pid = int(out.stdout.split()[-1])
    assert _gone(pid), f"spare {pid} outlived its parent"


def _gone(pid: int, within: float = 60.0) -> bool:
    """Wait until ``pid`` has exited (at most ``within`` seconds); a survivor is killed, and False."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists() and not _zombie(pid):
        time.sleep(0.2)
    alive = Path(f"/proc/{pid}").exists() and not _zombie(pid)
    if alive:
        os.kill(pid, 9)
    return not alive


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


_ORPHAN_PARENT = '''
import dataclasses, os, sys, threading, time
from pathlib import Path
sys.path.insert(0, {tests!r})
from kernelskill import Candidate, Task
from kernelskill.evaluate.launch import isolation
from kernelskill.evaluate.options import Options, request
from kernelskill.evaluate.reference import reference
from kernelskill.evaluate.worker.timing import TimingConfig
from helpers import RELU_TASK, toolkit_candidate
isolation.FORK = {fork}
opts = Options(device="cpu", timing=TimingConfig(warmup=1, min_reps=5, max_reps=20, time_cap_s=0.5, retimes=0))
task = Task.load(RELU_TASK)
ref_dir = reference(task, "cpu", opts)
base = Path({base!r})
base.mkdir(parents=True, exist_ok=True)
req = request("run", task, Candidate.from_source(toolkit_candidate("return ext.relu2(x)")), "cpu", opts, base)
req = req.replace(ref_dir=str(ref_dir), timing=dataclasses.asdict(opts.timing), profile="off", poison_bytes=0)
# The bench's shape: the worker is run from a thread other than the main one.
from helpers import hear
threading.Thread(target=isolation.run_worker, args=(req, opts, hear(decide=lambda d: time.sleep(3600))), daemon=True,
                 kwargs=dict(keep=base)).start()
while "await" not in ((base / "out" / "phases").read_text() if (base / "out" / "phases").exists() else ""):
    time.sleep(0.05)
import json
pid = json.loads((base / "out" / "checks.json").read_text())["pid"]
ppid = int(Path(f"/proc/{{pid}}/stat").read_text().rsplit(")", 1)[1].split()[1])
print(ppid, [z.proc.pid for z in isolation._ZYGOTES.values()], flush=True)
print(pid, flush=True)
{ending}
'''


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "spawned"])
@pytest.mark.parametrize("ending", ["os._exit(0)", "raise KeyboardInterrupt"], ids=["killed", "ctrl-c"])
def test_a_worker_never_outlives_its_parent(tmp_path, ending, fork):
    # A worker waiting for its parent's decision (or for a timing round's answer) whose parent
    # is gone: killed without clean-up (the worker's own watch ends it), or Ctrl-C'd while the
    # worker runs from another thread (the parent's exit kills it). Either way it must not hold
    # its memory (gigabytes on a GPU) for the ten minutes the wait allows. A forked worker's
    # zygote goes too.
    script = tmp_path / "parent.py"
    script.write_text(_ORPHAN_PARENT.format(tests=str(Path(__file__).parent.parent), base=str(tmp_path / "w"),
                                            ending=ending, fork=fork))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    lines = out.stdout.splitlines()
    assert len(lines) >= 2, out.stdout + out.stderr[-2000:]
    ppid, zygotes = lines[-2].split(" ", 1)
    zygotes, pid = json.loads(zygotes), int(lines[-1])
    if fork:
        assert zygotes == [int(ppid)], lines          # the zygote forked it
    else:
        assert zygotes == []
    for p in [pid, *zygotes]:
        assert _gone(p), f"process {p} outlived its parent ({ending}, fork={fork})\n{out.stderr[-2000:]}"


def test_a_profiling_workers_successor_starts_only_after_it_ended(prestart, fast, tmp_path, monkeypatch):
    """A profiling spare sets the profiler up on the GPU while it waits: started beside its
    evaluation it did so during the first timing round. It starts once the profiling worker ended
    (the request is addressed to `cuda`, the parent's GPU path; the worker itself fails at once
    here, which is all the order needs)."""
    events: list[str] = []
    monkeypatch.setattr(isolation, "_spawn_spare", lambda req: events.append(("successor", len(isolation._LIVE))))
    req, base = _compile_request(fast, tmp_path)
    req.mode, req.device = "profile", "cuda"
    real_spawn = isolation.spawn

    def spawn(*a, **k):
        proc = real_spawn(*a, **k)
        events.append("worker started")
        return proc
    monkeypatch.setattr(isolation, "spawn", spawn)
    out = isolation.run_worker(req, limits(), hear(events.append), keep=base)
    assert out.returncode is not None
    # Started once, after the worker: nothing of ours was alive then.
    assert events.count(("successor", 0)) == 1 and events[-1] == ("successor", 0), events
    assert events.index("worker started") < events.index(("successor", 0)), events


def test_on_a_gpu_the_next_spare_starts_beside_the_build(prestart, fast, tmp_path, monkeypatch):
    """On a GPU a taken worker's successor starts at once (its import overlaps this one's work),
    before this worker's build. The order of the phases this worker reported and the successor's
    start is what is checked (a C++ compile request addressed to `cuda`, which takes the GPU's path
    in the parent)."""
    events: list[str] = []
    real = isolation._spawn_spare
    monkeypatch.setattr(isolation, "_spawn_spare", lambda req: (events.append("successor"), real(req))[1])
    req, base = _compile_request(fast, tmp_path)
    req.device = "cuda"
    out = isolation.run_worker(req, limits(), hear(events.append), keep=base)
    assert out.result is not None, out.log_tail
    assert "build" in events and events.count("successor") == 1, events
    assert events.index("successor") < events.index("build"), events


def _run_request(fast, tmp_path, baseline: str):
    """A run request as an evaluation sends it (never launched here: only its kind and baseline count)."""
    import dataclasses
    base = tmp_path / f"run{len(list(tmp_path.iterdir()))}"
    base.mkdir()
    return request("run", None, Candidate.from_source(GOOD), "cpu", dataclasses.replace(fast, baseline=baseline), base,
                   timing=dataclasses.asdict(fast.timing))


def test_after_a_request_that_times_torch_compile_the_spares_import_inductor(prestart, fast, tmp_path):
    # A run request with torch.compile's baseline: the spares started after it import Dynamo and
    # Inductor while they wait (seconds of the next evaluation's set-up), and say so when ready.
    both = _run_request(fast, tmp_path, "both")
    assert both.mode == "run" and both.baseline == "both" and both.timing
    isolation._note_baseline(both)
    isolation._spawn_spare(both)
    (sp,) = [s for kind in isolation._SPARES.values() for s in kind]
    assert isolation.wait_for_spares(timeout=300)        # (its command line is its own once it runs)
    assert _warm_arg(sp.proc.pid) == isolation.SPARE_INDUCTOR
    assert (sp.base / "out" / "spare-ready").read_text() == "inductor"      # imported, not only asked for
    # An eager run request turns it off: the next spares import only what every worker needs.
    isolation.prestart_workers(False)
    isolation.prestart_workers(True)
    eager = _run_request(fast, tmp_path, "eager")
    isolation._note_baseline(eager)
    isolation._spawn_spare(eager)
    (sp,) = [s for kind in isolation._SPARES.values() for s in kind]
    assert isolation.wait_for_spares(timeout=300)
    assert _warm_arg(sp.proc.pid) is None
    assert (sp.base / "out" / "spare-ready").read_text() == ""
    # A compile or reference request says nothing about the baseline: the setting stays.
    isolation._note_baseline(both)
    isolation._note_baseline(_compile_request(fast, tmp_path)[0])
    assert isolation._INDUCTOR_AHEAD


@pytest.mark.slow
def test_an_evaluation_against_torch_compile_takes_a_spare_that_imported_inductor(prestart, fast):
    import dataclasses
    opts = dataclasses.replace(fast, baseline="both")
    first = evaluate(RELU_TASK, Candidate.from_source(GOOD), opts=opts)
    assert first.status == "ok", first.message
    assert isolation.wait_for_spares(timeout=300)
    assert [_warm_arg(pid) for pid in _spare_pids()] == [isolation.SPARE_INDUCTOR]
    second = evaluate(RELU_TASK, Candidate.from_source(GOOD), opts=opts)
    assert second.status == "ok", second.message
    assert second.profile.compile_baseline is not None and second.profile.compile_baseline.median_ms > 0
