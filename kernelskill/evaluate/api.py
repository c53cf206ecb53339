"""compile(), verify(), profile(), evaluate(): what the CLI, optimizer, TUI and MCP server call.

Candidate code never runs in this process: workers do (``isolation.run_worker``); this module
decides the verdict from the data they send back.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

import torch

from ..candidate import Candidate
from ..errors import TaskError, UserError
from ..results import CompileResult, Diagnostic, Env, EvalResult
from ..task import Task, _Expr
from . import static
from .verdict import (TrialJudge, judge_outputs, reference_outputs, replay_flags, stochastic_message,
                      verify_run)
from .build import cache_root, store_json
from .isolation import Cancelled, WorkerOutcome, run_worker
from .quality import RoundJudge
from .timing import TimingConfig

PROTOCOL = "v5"   # bump when the reference cache's contents change (v5: one file per trial, memory plan)
BASELINES = ("eager", "compile", "both")


@dataclasses.dataclass
class Options:
    """How to evaluate. The defaults are the protocol; tests and quick looks shrink them."""
    device: str = "auto"
    trials: int = 5
    seed: int = 42
    timing: TimingConfig | None = dataclasses.field(default_factory=TimingConfig)
    profile: bool = True
    # Profile in a worker of its own that sets the profiler up while the candidate is verified
    # and timed (CUPTI's set-up costs seconds, and a process that ran a profiler session times
    # launches slower afterwards). None: on a GPU yes, on a CPU (no such set-up) no.
    profile_apart: bool | None = None
    baseline: str = "eager"          # eager | compile | both: which baselines are timed with the candidate
    ncu: bool = False                # Nsight Compute metrics of the candidate's kernels (GPU only)
    build_timeout: float = 900.0
    run_timeout: float = 300.0
    threads: int | None = None
    memory_fraction: float = 0.5     # CPU runs: the worker's address-space cap, of physical memory
    remeasure_ceilings: bool = False # measure the device's roofline ceilings again (replacing the cache)
    # At most this many bytes of trial inputs or reference outputs are written to the reference
    # cache (None: the memory plan's own budgets, trials.py); beyond it inputs come from seeds and
    # outputs are recomputed on demand.
    store_limit: int | None = None
    keep_dir: Path | None = None
    # Set by another thread to stop the evaluation: its workers are killed at once and evaluate()
    # raises isolation.Cancelled (the MCP server sets it when a client cancels or goes away).
    cancel: threading.Event | None = dataclasses.field(default=None, compare=False, repr=False)
    # Hears each step of a build as the worker reports it ("compile kernel.cpp", "link", …): the
    # CLI's progress line, MCP progress notifications, the bench's per-job status.
    on_step: Callable[[str], None] | None = dataclasses.field(default=None, compare=False, repr=False)


def _resolve(task, candidate) -> tuple[Task | None, Candidate | None]:
    if task is not None and not isinstance(task, Task):
        task = Task.load(task)
    # A Path is a file to read; a string is always source (never a path a caller could smuggle in).
    if isinstance(candidate, Path):
        candidate = Candidate.from_file(candidate)
    elif candidate is not None and not isinstance(candidate, Candidate):
        candidate = Candidate.from_source(str(candidate))
    return task, candidate


def resolve_device(device: str, backend: str | None = None) -> str:
    """auto → cuda when the backend needs it or a GPU is present, else cpu."""
    has_cuda = bool(torch.version.cuda) and torch.cuda.is_available()
    if device == "auto":
        if backend == "cpp":
            return "cpu"
        return "cuda" if has_cuda else "cpu"
    if device.startswith("cuda") and not has_cuda:
        raise UserError(f"--device {device}: this machine has no usable CUDA device "
                        f"(torch {torch.__version__}, CUDA {torch.version.cuda}); use --device cpu")
    if device not in ("cpu",) and not device.startswith("cuda"):
        raise UserError(f"--device {device}: expected cpu, cuda or cuda:N")
    return device


def _threads(opts: Options) -> int:
    """The threads a worker pins torch and OpenMP to: the option, else every core this process may use."""
    return opts.threads or (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count())


def _request(mode: str, task: Task | None, cand: Candidate | None, device: str, opts: Options, base: Path) -> dict:
    req = {"mode": mode, "device": device, "seed": opts.seed, "trials": opts.trials, "threads": _threads(opts),
           "cache_root": str(cache_root())}
    # OpenMP in C++ candidates gets the same pinned thread count as torch; torch.compile's
    # artifacts persist per environment (Inductor keys them by graph, torch and hardware).
    req["env"] = {"OMP_NUM_THREADS": str(req["threads"]),
                  "TORCHINDUCTOR_CACHE_DIR": str(cache_root() / "inductor")}
    req["baseline"] = opts.baseline
    if task is not None:
        req["task"] = {"path": str(task.path), "preset": task.preset,
                       "overrides": {k: ({"expr": str(v)} if isinstance(v, _Expr) else v) for k, v in task.overrides.items()}}
        req["allow_tf32"] = task.allow_tf32
    if cand is not None:
        path = base / "candidate.py"
        path.write_text(cand.source)
        req["candidate_path"] = str(path)
    if device == "cpu":
        try:
            req["memory_limit"] = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * opts.memory_fraction)
        except (ValueError, OSError):
            pass
    return req


def _workdir(opts: Options) -> Path:
    return Path(tempfile.mkdtemp(prefix="kernelskill-", dir=opts.keep_dir))


# ---- reference --------------------------------------------------------------------------------
def reference_key(task: Task, device: str, opts: Options) -> str:
    """The reference cache's key. ``cuda`` and ``cuda:N`` share one: the bench's pool names GPUs
    by index and its local executor does not, and each spelling used to compute its own copy."""
    limit = f"-s{opts.store_limit}" if opts.store_limit is not None else ""
    return f"{PROTOCOL}-{task.hash}-{device.split(':')[0]}-{opts.trials}-{opts.seed}{limit}"


def reference(task: Task, device: str, opts: Options) -> Path:
    """Seeded inputs, reference outputs and weights for ``task`` on ``device``; cached on disk."""
    ref_dir = cache_root() / "ref" / reference_key(task, device, opts)
    if (ref_dir / "meta.json").exists():
        return ref_dir
    base = _workdir(opts)
    req = _request("reference", task, None, device, opts, base)
    req["rotate"] = opts.timing.rotate if opts.timing else 3
    if opts.store_limit is not None:
        req["store_limit"] = opts.store_limit
    out = run_worker(req, build_timeout=opts.build_timeout, run_timeout=opts.run_timeout, keep=base,
                     cancel=opts.cancel)
    if out.result is None or out.result.get("status") != "ok":
        why = (out.result or {}).get("error") or out.died or "unknown failure"
        if out.result and out.result.get("status") == "task_error":
            raise TaskError(why)
        raise TaskError(f"{task.path}: the reference failed on {device}: {why}\n{out.log_tail[-1500:]}")
    tmp = Path(tempfile.mkdtemp(prefix="ref-", dir=_mkdir(ref_dir.parent)))
    for path in [out.out_dir / "state.pt", *out.out_dir.glob("inputs_*.pt"), *out.out_dir.glob("outputs_*.pt")]:
        shutil.move(str(path), tmp / path.name)
    (tmp / "meta.json").write_text(json.dumps(out.result))
    try:
        os.replace(tmp, ref_dir)
    except OSError:              # another process cached it first
        shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(base, ignore_errors=True)
    return ref_dir


class RefServer:
    """A trusted reference worker beside an evaluation whose reference outputs are not stored
    (memory plan ``recompute``): ``get(i)`` asks it for trial i's outputs and returns them; the
    file it wrote is deleted once read. Runs no candidate code; stopped by ``close``."""

    def __init__(self, task: Task, device: str, opts: Options, ref_dir: Path):
        self.base = _workdir(opts)
        self.out = _mkdir(self.base / "out")
        self.opts = opts
        req = _request("refserve", task, None, device, opts, self.base) | {"ref_dir": str(ref_dir)}
        self.outcome: WorkerOutcome | None = None
        self._n = 0
        # An empty launcher: never a prestarted spare (this folder is where the requests go).
        self._thread = threading.Thread(target=self._run, args=(req,), daemon=True, name="kernelskill-refserve")
        self._thread.start()

    def _run(self, req: dict) -> None:
        try:
            self.outcome = run_worker(req, build_timeout=self.opts.build_timeout, run_timeout=self.opts.run_timeout,
                                      keep=self.base, launcher=[], cancel=self.opts.cancel)
        except Cancelled:
            pass                                   # the evaluation raises it; this thread just ends

    def get(self, i: int) -> list:
        """Trial i's reference outputs, on the host."""
        got = self._ask(f"want_{i}", "", f"ref_{i}.pt")
        outs = torch.load(got, weights_only=True)
        got.unlink(missing_ok=True)
        return outs

    def compare(self, trial: int, file: Path, *, key=None, seed: int, dist: str, atol: float, rtol: float) -> dict:
        """A candidate's outputs (a file its worker wrote) compared with trial ``trial``'s reference on
        the reference worker's device: the TrialResult as a dict, or {"unreadable": why}."""
        self._n += 1
        name = f"cmp_{trial}_{self._n}.json"
        ask = {"file": str(file), "key": key, "trial": trial, "seed": seed, "dist": dist, "atol": atol, "rtol": rtol}
        got = self._ask(name, json.dumps(ask), name.replace("cmp_", "res_"))
        answer = json.loads(got.read_text())
        got.unlink(missing_ok=True)
        return answer

    def _ask(self, name: str, text: str, reply: str) -> Path:
        tmp = self.out / (name + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, self.out / name)
        got = self.out / reply
        deadline = time.monotonic() + self.opts.run_timeout
        while not got.exists():
            if self.opts.cancel is not None and self.opts.cancel.is_set():
                raise Cancelled("cancelled while the reference recomputed its outputs")
            if not self._thread.is_alive() or time.monotonic() > deadline:
                why = (self.outcome.died or (self.outcome.result or {}).get("error")) if self.outcome else "timed out"
                raise TaskError(f"the reference worker that recomputes trial outputs stopped: {why}\n"
                                + (self.outcome.log_tail[-1500:] if self.outcome else ""))
            time.sleep(0.01)
        return got

    def close(self) -> None:
        (self.out / "stop").write_text("")
        self._thread.join(timeout=60)
        if self.opts.keep_dir is None:
            shutil.rmtree(self.base, ignore_errors=True)


@contextlib.contextmanager
def reference_server(task: Task, device: str, opts: Options, ref_dir: Path, meta: dict):
    """A RefServer while the block runs when the task's outputs are recomputed, else None."""
    if (meta.get("plan") or {}).get("outputs") != "recompute":
        yield None
        return
    server = RefServer(task, device, opts, ref_dir)
    try:
        yield server
    finally:
        server.close()


def _mkdir(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p


# ---- compile ----------------------------------------------------------------------------------
def _compile_result(cand: Candidate, result: dict | None, out: WorkerOutcome | None) -> CompileResult:
    build = (result or {}).get("build") or {}
    diags = [Diagnostic.from_dict(d) for d in build.get("diagnostics", [])]
    for d in diags:               # the worker knows only "candidate"; name the user's file where there is one
        if d.file == "candidate":
            d.file = cand.label
    status = (result or {}).get("status")
    if status is None:      # no report: it compiled only if the worker got past the build phase
        ok = out is not None and out.phase not in ("setup", "build")
    else:
        ok = status != "compile_error"
    return CompileResult(ok=ok, backend=cand.backend, seconds=round(build.get("seconds", 0.0), 3),
                         cache_hit=bool(build.get("cache_hit", False)) and bool(build.get("extensions")),
                         compile_only=bool(build.get("compile_only")), diagnostics=diags,
                         log_tail=user_paths(build.get("log_tail") or (out.log_tail if out and not ok else ""), cand),
                         extensions=build.get("extensions", []), path=build.get("path", ""),
                         fallback=build.get("fallback", ""), units=build.get("units") or {})


def compile(candidate, *, device: str = "auto", opts: Options | None = None) -> CompileResult:
    """Build the candidate's extensions in a worker (compile-only nvcc check where CUDA can't run)."""
    opts = opts or Options()
    _, cand = _resolve(None, candidate)
    if cand.backend == "triton" and not _has_triton():
        raise UserError(f"{cand.name}: a Triton candidate needs the triton package, which this Python "
                        f"({sys.executable}) does not have: pip install triton (its kernels compile at their first "
                        f"launch, on a CUDA GPU)")
    device = resolve_device(device, cand.backend) if device != "auto" else ("cpu" if cand.backend == "cpp" else
                                                                          resolve_device("auto"))
    base = _workdir(opts)
    out = run_worker(_request("compile", None, cand, device, opts, base),
                     build_timeout=opts.build_timeout, run_timeout=opts.run_timeout, keep=base, cancel=opts.cancel,
                     on_step=opts.on_step)
    res = _compile_result(cand, out.result, out)
    if out.died:
        res.ok = False
        res.diagnostics.append(Diagnostic("error", out.died, origin="python"))
        res.log_tail = user_paths(out.log_tail, cand)
    shutil.rmtree(base, ignore_errors=True)
    return res


# ---- evaluate ---------------------------------------------------------------------------------
def _has_triton() -> bool:
    import importlib.util
    return importlib.util.find_spec("triton") is not None


def check_triton(cand: Candidate, device: str) -> None:
    """A UserError that says what is missing and what to do when a Triton candidate cannot run here.

    Triton kernels run on a CUDA GPU, or on CPU tensors under Triton's interpreter (TRITON_INTERPRET=1,
    which the workers inherit): without either, the import or the first launch would fail and read
    as the candidate's compile_error."""
    has_triton = _has_triton()
    has_cuda = bool(torch.version.cuda) and torch.cuda.is_available()
    if has_triton and os.environ.get("TRITON_INTERPRET") == "1":
        return
    interpreter = ("run its kernels on the CPU with Triton's interpreter (slow; for correctness, not speed): "
                   + ("" if has_triton else "pip install triton, then ") + "set TRITON_INTERPRET=1")
    if not has_cuda:
        lacks = "no CUDA GPU" + ("" if has_triton else " and no triton package")
        raise UserError(f"{cand.name}: a Triton candidate runs on a CUDA GPU and this machine has {lacks}; evaluate "
                        f"it on a GPU machine{'' if has_triton else ' with triton installed'}, or {interpreter}")
    if not has_triton:
        raise UserError(f"{cand.name}: a Triton candidate needs the triton package, which this Python "
                        f"({sys.executable}) does not have: pip install triton")
    if device == "cpu":
        raise UserError(f"{cand.name}: a Triton candidate runs on CUDA tensors; use --device cuda, or {interpreter}")


def evaluate(task, candidate, *, opts: Options | None = None, on_phase: Callable[[str], None] | None = None,
             **overrides) -> EvalResult:
    """compile → verify → time → profile one candidate against its task; every failure is data."""
    opts = dataclasses.replace(opts or Options(), **overrides)
    task, cand = _resolve(task, candidate)
    started = time.perf_counter()
    device = resolve_device(opts.device, cand.backend)
    if cand.backend == "cpp" and device != "cpu":
        raise UserError(f"{cand.name}: a C++ (cpp backend) candidate runs on CPU tensors; use --device cpu")
    if cand.backend == "triton":
        check_triton(cand, device)
    flags = static.check_source(cand.source, task.dtype)
    env = _env(device)
    result = EvalResult(status="ok", compile=CompileResult(ok=False, backend=cand.backend), env=env,
                        task=task.name, candidate_hash=cand.hash)
    if cand.backend == "cuda" and device == "cpu":
        result.compile = compile(cand, device="cpu", opts=opts)
        if result.compile.ok:
            raise UserError(f"{cand.name}: CUDA candidate compiled (compile-only check with nvcc passed) but "
                            f"this machine has no CUDA device to run it; evaluate it on a GPU machine")
        return _finish(result, "compile_error", "the CUDA source does not compile", flags, started)
    ref_dir = reference(task, device, opts)
    meta = json.loads((ref_dir / "meta.json").read_text())
    if meta.get("stochastic"):       # the task's problem: nothing a candidate does can be verified
        return _finish(result, "stochastic", stochastic_message(task, meta), flags, started)
    base = _workdir(opts)
    req = _request("run", task, cand, device, opts, base)
    req["ref_dir"] = str(ref_dir)
    req["poison_bytes"] = 2 * meta["output_bytes"]
    req["timing"] = dataclasses.asdict(opts.timing) if opts.timing else None
    req["profile"] = opts.profile and opts.timing is not None
    apart = None
    # A task whose outputs are recomputed fills the GPU with two workers already: no third one.
    huge = (meta.get("plan") or {}).get("outputs") == "recompute"
    if req["profile"] and (opts.profile_apart if opts.profile_apart is not None else
                           device.startswith("cuda") and not huge):
        req["profile"] = "apart"
        apart = _ApartProfile(_request("profile", task, cand, device, opts, base) | {"ref_dir": str(ref_dir)}, opts)
    # A task whose reference outputs are not stored: a trusted worker recomputes them on demand.
    with reference_server(task, device, opts, ref_dir, meta) as server:
        judge = TrialJudge(task, ref_dir, meta, server)
        verified = {}

        def decide(out_dir: Path) -> bool:
            verified["v"] = verify_run(out_dir, task, ref_dir, meta, judge)
            v, cheats = verified["v"]
            go = v is not None and v.correct and not cheats and not any(static.is_cheat(f) for f in flags)
            if go and apart is not None:
                apart.ready.wait(opts.run_timeout)   # its profiler set-up never overlaps the timing
            return go

        def recheck_timed(out_dir: Path) -> None:
            if apart is not None:
                apart.release(True)
            verified["replay"] = replay_flags(out_dir, task, reference_outputs(ref_dir, server), meta["distributions"], live=True)

        if opts.baseline not in BASELINES:
            raise UserError(f"baseline {opts.baseline!r}: expected one of {', '.join(BASELINES)}")
        t = opts.timing
        rounds = RoundJudge(device, req["threads"], t.retimes if t else 0, t.backoff_s if t else 0.0)

        def phase(name: str) -> None:
            rounds.on_phase(name)
            if on_phase:
                on_phase(name)

        def poll(out_dir: Path) -> None:
            judge.poll(out_dir)
            rounds.poll(out_dir)

        try:
            out = run_worker(req, build_timeout=opts.build_timeout, run_timeout=opts.run_timeout, keep=base,
                             on_phase=phase, decide=decide, on_timed=recheck_timed, on_poll=poll,
                             on_round=rounds.on_round, cancel=opts.cancel, on_step=opts.on_step)
        finally:
            if apart is not None:
                apart.release(False)    # never timed (incorrect, crashed): it exits without running
                apart.join()
        if apart is not None and (out.result or {}).get("timing"):
            apart.merge_into(out.result)
        if (out.result or {}).get("timing"):
            out.result["timing"]["quality"] = rounds.summary(out.result["timing"].get("chosen_round"))
        if "v" not in verified and (out.result or {}).get("status") == "ok" and not out.timed_out:
            verified["v"] = verify_run(out.out_dir, task, ref_dir, meta, judge)   # verify only: no await
        try:
            profiled = bool((out.result or {}).get("timing")) and req["profile"]
            roof = ceilings(device, (out.result or {}).get("env") or {}, opts,
                            refresh=opts.remeasure_ceilings) if profiled else {}
            result = _judge(result, task, cand, out, ref_dir, meta, flags, started, opts, verified.get("v"), roof,
                            verified.get("replay"), server)
            if roof:
                store_raised_ceiling(result, device, (out.result or {}).get("env") or {}, roof)
        finally:
            if opts.keep_dir is None:
                shutil.rmtree(base, ignore_errors=True)
        if opts.ncu and result.ok and result.profile is not None:
            if on_phase:
                on_phase("ncu")
            from .ncu import run_ncu
            run_ncu(result, task, cand, device, ref_dir, opts)
            result.seconds = round(time.perf_counter() - started, 3)
        return result


class _ApartProfile:
    """The profiling worker of one evaluation, run from a thread beside the timing worker.

    It starts with the timing worker, sets the profiler up and loads the candidate, then waits
    (``ready``) for ``release``: go once the candidate is verified and timed, stop otherwise."""

    def __init__(self, req: dict, opts: Options):
        self.ready, self._released, self._go = threading.Event(), threading.Event(), False
        self.outcome: WorkerOutcome | None = None
        self.error: str | None = None
        self._base = Path(req["candidate_path"]).parent / "profile"
        self._thread = threading.Thread(target=self._run, args=(req, opts), daemon=True, name="kernelskill-profile")
        self._thread.start()

    def _run(self, req: dict, opts: Options) -> None:
        try:
            self.outcome = run_worker(req, build_timeout=opts.build_timeout, run_timeout=opts.run_timeout,
                                      keep=self._base, decide=self._decide, cancel=opts.cancel)
        except Exception as e:  # noqa: BLE001 — a profile that fails is a note, never the verdict
            self.error = f"{type(e).__name__}: {e}"
        finally:
            self.ready.set()

    def _decide(self, out_dir: Path) -> bool:
        self.ready.set()
        self._released.wait()
        return self._go

    def release(self, go: bool) -> None:
        if not self._released.is_set():
            self._go = go
            self._released.set()

    def join(self) -> None:
        # Released, it finishes in moments; one stuck in its own set-up is left to its timeouts.
        self._thread.join(timeout=60)

    def merge_into(self, result: dict) -> None:
        """The kernel breakdown into the timing worker's result, or a note saying why there is none."""
        res = (self.outcome.result if self.outcome else None) or {}
        if res.get("status") == "ok" and res.get("kernels"):
            result["kernels"] = res["kernels"]
            result.setdefault("timing", {}).setdefault("cost_s", {}).update(
                {f"apart: {k}": v for k, v in (res.get("cost_s") or {}).items()})
            return
        why = (self.error or res.get("error") or (self.outcome.died if self.outcome else "still running")
               or res.get("status"))
        result["kernels_note"] = f"kernel breakdown: the profiling worker failed ({why})"[:500]


def _ceilings_key(device: str, worker_env: dict) -> tuple[str, int | None]:
    """The ceilings cache key of this device (as the worker saw it), and the CPU threads it counts."""
    from . import roofline
    name = worker_env.get("gpu") if device.startswith("cuda") else _env(device).cpu
    threads = worker_env.get("threads") if not device.startswith("cuda") else None
    return roofline.cache_key(name or "unknown", device, threads, torch.__version__), threads


def ceilings(device: str, worker_env: dict, opts: Options, refresh: bool = False) -> dict:
    """This device's measured ceilings: from the cache, or measured once (in a worker) and cached."""
    from . import roofline
    key, threads = _ceilings_key(device, worker_env)
    hit = roofline.cached(cache_root(), key)
    if hit and not refresh and not roofline.stale(hit):
        return hit
    base = _workdir(opts)
    out = run_worker(_request("ceilings", None, None, device, dataclasses.replace(opts, threads=threads), base),
                     build_timeout=opts.build_timeout, run_timeout=opts.run_timeout, keep=base, cancel=opts.cancel)
    shutil.rmtree(base, ignore_errors=True)
    if not out.result or out.result.get("status") != "ok":
        return hit or {}
    new = out.result["ceilings"]
    # Asked to measure again: the new values replace the old. Re-measured because the old ones
    # were taken under load: the higher of each is kept.
    data = new if (refresh or not hit) else roofline.merge(hit, new)
    roofline.store(cache_root(), key, data)
    return data


def store_raised_ceiling(result: EvalResult, device: str, worker_env: dict, measured: dict) -> None:
    """Eager ran faster than its floor (verdict._roofline raised the ceiling it beat): store the
    raise in the cached ceilings, so later evaluations measure against it. Only from an evaluation
    whose status is ok: eager ran beside the candidate, and a flagged one may have touched it."""
    from . import roofline
    prof = result.profile
    raised = (prof.roofline or {}).get("raised_ceiling") if prof is not None else None
    if not raised:
        return
    if result.status != "ok":
        raised["stored"] = False
        prof.notes.append(f"roofline: the raised {raised['ceiling']} ceiling is not stored: the evaluation is "
                          f"{result.status}")
        return
    key, _ = _ceilings_key(device, worker_env)
    # Re-read the cache: another evaluation may have stored (or raised) it since this one began.
    current = roofline.cached(cache_root(), key) or measured
    roofline.store(cache_root(), key, roofline.raise_ceiling(current, raised["ceiling"], raised["to"]))
    raised["stored"] = True


def machine(device: str, opts: Options | None = None, refresh: bool = False) -> dict:
    """What the agents are told about this machine (``evaluate.machine``): the CPU and, for a GPU
    device, the GPU's facts, read once and cached per machine; the measured ceilings from their own
    cache (measured now when there are none), so a raised ceiling shows at once."""
    from . import machine as mach
    opts = opts or Options(device=device)
    path = cache_root() / "machine" / f"{mach.cache_key(device)}.json"
    profile = None
    if not refresh:
        try:
            profile = json.loads(path.read_text())
        except (OSError, ValueError):
            profile = None
        if not isinstance(profile, dict) or profile.get("version") != mach.MACHINE_VERSION:
            profile = None
    if profile is None:
        profile = {"version": mach.MACHINE_VERSION, "device": device,
                   "measured_at": time.strftime("%Y-%m-%d %H:%M:%S"), "cpu": mach.cpu_facts()}
        if device.startswith("cuda"):
            base = _workdir(opts)
            out = run_worker(_request("machine", None, None, device, opts, base), build_timeout=opts.build_timeout,
                             run_timeout=opts.run_timeout, keep=base, cancel=opts.cancel)
            shutil.rmtree(base, ignore_errors=True)
            if not out.result or out.result.get("status") != "ok":
                why = (out.result or {}).get("error") or out.died or "no result"
                raise UserError(f"cannot read the GPU's properties on {device}: {why}")
            profile["gpu"], profile["env"] = out.result["gpu"], out.result.get("env") or {}
        else:
            profile["env"] = {"threads": _threads(opts)}
        store_json(path, profile)
    profile["ceilings"] = ceilings(device, profile.get("env") or {}, opts)
    return profile


def verify(task, candidate, **kw) -> EvalResult:
    """Correctness only: compile and the trials, no timing."""
    return evaluate(task, candidate, timing=None, profile=False, **kw)


def profile(task, candidate=None, **kw) -> EvalResult:
    """Timing and kernel breakdown of a candidate (or of the reference itself when None)."""
    task, cand = _resolve(task, candidate)
    if cand is None:
        cand = Candidate.from_source(task.source + "\n\nModelNew = Model\n")
    return evaluate(task, cand, **kw)


def _finish(result: EvalResult, status: str, message: str, flags: list[str], started: float) -> EvalResult:
    result.status, result.message = status, message
    result.flags = list(dict.fromkeys(result.flags + flags))
    result.seconds = round(time.perf_counter() - started, 3)
    return result


# The worker imports the candidate from a copy in its scratch directory (Triton needs a file):
# tracebacks name that copy, and the user's file is what a person can open.
_SCRATCH_COPY = re.compile(r"""[^\s"'()]*candidate_module\.py""")


def user_paths(text: str, cand: Candidate) -> str:
    """``text`` with the worker's scratch copy of the candidate named as the user's file (``cand.label``)."""
    return _SCRATCH_COPY.sub(lambda m: cand.label, text) if text else text


def _judge(result: EvalResult, task: Task, cand: Candidate, out: WorkerOutcome, ref_dir: Path, meta: dict,
           flags: list[str], started: float, opts: Options, verified=None, roof: dict | None = None,
           replay: list[str] | None = None, server=None) -> EvalResult:
    res = out.result or {}
    result.compile = _compile_result(cand, res, out)
    if res.get("env"):
        result.env = Env.from_dict({**dataclasses.asdict(result.env), **res["env"]})
    if out.timed_out:
        result.log_tail = user_paths(out.log_tail, cand)
        building = out.phase in ("setup", "build")
        if building:
            result.compile.ok = False
        limit = f"build timeout {opts.build_timeout:g} s" if building else f"run timeout {opts.run_timeout:g} s"
        return _finish(result, "timeout", f"{out.died} ({limit})", flags, started)
    if out.died:
        result.log_tail = user_paths(out.log_tail, cand)
        return _finish(result, "crashed", out.died, flags, started)
    status = res.get("status")
    if status == "task_error":
        raise TaskError(res.get("error", "task failed"))
    if status == "compile_only":
        raise UserError("CUDA candidate compiled but cannot run on this machine")
    if status == "compile_error":
        result.compile.ok = False
        first = next((d for d in result.compile.diagnostics if d.severity == "error"), None)
        return _finish(result, "compile_error", str(first or res.get("error", "build failed")).splitlines()[0], flags, started)
    if status == "runtime_error":
        result.log_tail = user_paths(res.get("traceback", out.log_tail), cand)
        line, text = res.get("line"), res.get("source_line", "").strip()
        where = "" if not line else f" ({cand.label}:{line}: {text})" if cand.path else f" (candidate line {line}: {text})"
        return _finish(result, "runtime_error", res.get("error", "runtime error") + where, flags, started)
    return judge_outputs(result, task, out, ref_dir, meta, flags, res, started, _finish, verified, roof, replay,
                         server)


def _env(device: str) -> Env:
    import platform
    try:
        import triton  # noqa: F401
        triton_v = triton.__version__
    except Exception:  # noqa: BLE001 — triton is optional
        triton_v = None
    env = Env(python=sys.version.split()[0], torch=torch.__version__, cuda=torch.version.cuda, triton=triton_v,
              device=device, cpu=platform.processor() or platform.machine(), platform=platform.platform())
    env.fingerprint = f"{env.torch}|{env.cuda}|{env.python}|{platform.machine()}"
    return env
