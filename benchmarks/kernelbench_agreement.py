"""Does our evaluator agree with KernelBench's own harness? The same (task, candidate) pairs through
both, on one GPU: the verdicts, the eager (reference) times and the candidates' times.

    python benchmarks/kernelbench_agreement.py --kernelbench .kb              # the default sample
    python benchmarks/kernelbench_agreement.py --kernelbench .kb --only 64_conv --fresh
    python benchmarks/kernelbench_agreement.py --list                          # the sample, nothing run

Per pair, each side in a fresh process (KernelBench runs one evaluation per process):
- KernelBench, imported from `--kernelbench DIR/src` (never copied into this project):
  `timing.measure_ref_program_time` times the reference as `scripts/generate_baseline_time.py`
  does (its defaults: 5 warm-up calls, 100 timed, CUDA events, L2 flushed before each call, fp32),
  then `eval.eval_kernel_against_ref` judges the candidate as `scripts/eval_from_generations.py`
  does (seed 42, 5 correctness trials, 100 timed calls, cuda_event, fp32, its excessive-speedup
  check on). A CUDA candidate is built ahead with KernelBench's own `eval.build_compile_cache`
  (its `compile.batch_compile` step) into the build_dir its evaluation then loads from.
- Ours: `kernelskill.evaluate.evaluate(task, candidate, opts=Options(device="cuda"))`, the default
  protocol, with workers started ahead as `kernelskill bench` runs them.

Two things are observed in KernelBench's process, neither changing what it decides: the raw times
behind each `get_timing_stats` (so its median is known beside the mean it reports), and the largest
|difference| of every `torch.allclose` its correctness check makes (it reports one only for trials
that fail).

KernelBench's package imports dotenv, tqdm, openai, litellm (kernelbench/utils.py) and requests
(eval.py) at import time; the evaluation path never calls them (eval.py names `requests` only in its
import; utils.py uses OpenAI, completion and tqdm in query_server and the multiprocess helpers
only). Where one of them does not import, a stand-in module takes its place in KernelBench's process
only, and raises if anything calls it. pydantic is really used (KernelExecResult): without it the
run stops and says how to install it. Nothing is installed here.

The candidates: each task's own reference as a candidate (`class ModelNew(Model)`: a legal
candidate for both harnesses; ours labels it `no-custom-kernel`), and shipped CUDA solutions of
examples/ (KernelBench-format tasks). The table per pair: both verdicts, eager ms KernelBench /
ours / ratio, candidate ms, speedups, whether eager agrees within 2 %, whether the verdicts agree
("n/a" where our evaluator measured the default-flag eager, which is KernelBench's reference,
outside the strict reference's tolerance: KernelBench then judges against a reference that is
itself off). Every number goes to `--out` (JSON), rewritten after each pair; a rerun skips the
pairs already there (`--fresh` runs them again). Ctrl-C or SIGTERM keeps the finished pairs.

Exit: 0 when every pair has both results, 1 when some pair failed to produce one, 2 for usage errors.
"""
from __future__ import annotations

import argparse
import dataclasses
import gc
import hashlib
import importlib
import importlib.machinery
import importlib.util
import json
import math
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import time
import traceback
import types
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
KB_TOL = 1e-4          # KernelBench's get_tolerance_for_precision(fp32): atol = rtol = 1e-4
WITHIN = 0.02          # eager "agrees" when ours / KernelBench's is within ±2 %
KEY_VERSION = "1"      # bump when what a row measures changes: its old rows are run again
NA_STRICT = "n/a (KB reference outside strict tolerance)"
NO_DEVIATION = "no eager deviation in our result (verify.tolerances): comparability not known"
# Imported by kernelbench/__init__ → utils.py (dotenv, tqdm, openai, litellm) and eval.py (requests),
# never called on the evaluation path.
STANDINS = ("dotenv", "tqdm", "openai", "litellm", "requests")
PYDANTIC_HELP = ("KernelBench's eval.py needs pydantic (its KernelExecResult is a pydantic model), and "
                 "this Python ({exe}) does not have it. Install it, or on the GPU machine carry wheels: "
                 "here `../shared/scripts/fetch-wheels pydantic` (fills .whl/), there "
                 "`python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl` and "
                 "PYTHONPATH=/tmp/site.")


# ---- the sample ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Pair:
    """A task (`levelN/NAME` under KernelBench/, or `examples/NAME`, or a path) and its candidate:
    a solution file (relative to the task's folder, or a path), or None for the reference itself."""
    task: str
    candidate: str | None = None

    @property
    def label(self) -> str:
        return self.candidate or "reference"


# About 6 minutes on one H100 (docs/evaluator.md, "Agreement with KernelBench's harness"). Each line
# says what the pair covers.
DEFAULT_SAMPLE = (
    Pair("level1/64_conv_transposed_1D"),                # transposed conv 1D; the old evaluator disagreed
    Pair("level1/40_LayerNorm"),                         # a norm over 4M elements per sample: long reductions
    Pair("level1/47_Sum_reduction_over_a_dimension"),    # a plain reduction (8.6 GB input, as shipped)
    Pair("level1/88_MinGPTNewGelu"),                     # an elementwise chain (tanh, pow)
    Pair("level2/19_ConvTranspose2d_GELU_GroupNorm"),    # transposed conv 2D + GroupNorm
    Pair("level2/33_Gemm_Scale_BatchNorm"),              # matmul + training-mode BatchNorm
    Pair("level2/82_Conv2d_Tanh_Scaling_BiasAdd_Max"),   # convolution (cuDNN TF32 by default) + a chain
    Pair("level2/89_ConvTranspose3d_MaxPool_Softmax_Subtract_Swish_Max"),
    Pair("level3/27_RegNet"),                            # a whole network, launch-heavy
    Pair("examples/conv2d", "solutions/cuda_conv_implicit_gemm.py"),    # fp32-exact conv vs a TF32 reference
    # KernelBench shares no weights (both models are built under one seed): this reference draws its affine
    # parameters in __init__, the solution does not, and only our evaluator copies the state dict.
    Pair("examples/layernorm", "solutions/cuda_layernorm_regcache.py"),
    Pair("examples/matmul", "solutions/cuda_sgemm_tiled.py"),            # fp32 GEMM, no TF32 on either side
)
EXTENDED_SAMPLE = DEFAULT_SAMPLE + (
    Pair("level1/13_Matmul_for_symmetric_matrices"),
    Pair("level1/33_BatchNorm"),                         # training-mode BatchNorm alone (8.6 GB)
    Pair("level1/50_conv_standard_2D__square_input__square_kernel"),
    Pair("examples/softmax_rows", "solutions/cuda_softmax_regcache.py"),
)


def reference_candidate(task_source: str) -> str:
    """The task's own source as a candidate: its text and a ModelNew that is its Model, unchanged."""
    return (task_source.rstrip() + "\n\n\n"
            "# The reference itself as the candidate (benchmarks/kernelbench_agreement.py).\n"
            "class ModelNew(Model):\n"
            '    """The task\'s own Model, unchanged: a candidate both harnesses accept."""\n')


@dataclass
class Resolved:
    pair: Pair
    task_path: Path          # what our evaluator loads (a folder with task.toml, or the .py)
    ref_path: Path           # the reference's source file (what KernelBench reads)
    ref_src: str
    cand_path: Path | None
    cand_src: str
    backend: str             # KernelBench's backend argument: cuda (also plain PyTorch) or triton
    key: str
    built: bool = False      # the candidate builds an extension (load_inline): both harnesses build it ahead


def resolve(pair: Pair, kb_dir: Path | None) -> Resolved:
    """The pair's files (raises ValueError naming what is missing)."""
    if pair.task.startswith("examples/"):
        task_path = ROOT / pair.task
    elif re.fullmatch(r"level\d+/[^/]+", pair.task) and kb_dir is not None:
        task_path = kb_dir / "KernelBench" / f"{pair.task}.py"
    else:
        task_path = Path(pair.task)
    ref_path = task_path / "reference.py" if task_path.is_dir() else task_path
    if not ref_path.is_file():
        raise ValueError(f"{pair.task}: no task file at {ref_path}")
    ref_src = ref_path.read_text()
    cand_path = None
    if pair.candidate is None:
        cand_src = reference_candidate(ref_src)
    else:
        cand_path = ref_path.parent / pair.candidate
        if not cand_path.is_file():
            cand_path = Path(pair.candidate)
        if not cand_path.is_file():
            raise ValueError(f"{pair.task}: no candidate file {pair.candidate}")
        cand_src = cand_path.read_text()
    from kernelskill.candidate import detect_backend
    kind = detect_backend(cand_src)
    toml = ref_path.parent / "task.toml"
    meta = toml.read_text() if toml.is_file() and ref_path.name == "reference.py" else ""
    key = hashlib.sha256("\0".join((KEY_VERSION, ref_src, meta, cand_src)).encode()).hexdigest()[:16]
    return Resolved(pair, task_path.resolve(), ref_path.resolve(), ref_src, cand_path, cand_src,
                    "triton" if kind == "triton" else "cuda", key, built=kind in ("cuda", "cpp"))


# ---- KernelBench's process: stand-ins for what it imports and never calls ----------------------------

class _Unavailable:
    """What a stand-in module hands out: anything that calls or instantiates it is told why it can't."""

    def __init__(self, module: str, name: str):
        self._what = f"{module}.{name}"

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self._what} is a stand-in (benchmarks/kernelbench_agreement.py): the module is not "
                           f"installed, and KernelBench's evaluation path was not expected to call it")

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Unavailable(self._what, attr)


class StandIn(types.ModuleType):
    """A module installed in place of one that does not import; `load_dotenv` (called at import) is a no-op."""

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        if self.__name__ == "dotenv" and attr == "load_dotenv":
            return lambda *a, **k: False
        return _Unavailable(self.__name__, attr)


def install_standins(names=STANDINS) -> list[str]:
    """Put a stand-in into sys.modules for each of ``names`` that fails to import; return those."""
    installed = []
    for name in names:
        if name in sys.modules:
            continue
        try:
            importlib.import_module(name)
        except ImportError:
            mod = StandIn(name)
            mod.__spec__ = importlib.machinery.ModuleSpec(name, None)
            sys.modules[name] = mod
            installed.append(name)
    return installed


def require_pydantic() -> None:
    try:
        importlib.import_module("pydantic")
    except ImportError:
        raise SystemExit(PYDANTIC_HELP.format(exe=sys.executable)) from None


def jsonable(x):
    """Plain JSON data from KernelBench's metadata (exceptions and other objects as text, NaN as None)."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, float):
        return None if math.isnan(x) or math.isinf(x) else x
    if x is None or isinstance(x, (str, int, bool)):
        return x
    return str(x)[:4000]


# ---- the children: each prepares (imports), waits for "go" on stdin, runs, writes its result -----

def _kb_import(req: dict):
    sys.path.insert(0, str(Path(req["kernelbench"]) / "src"))
    standins = install_standins()
    require_pydantic()
    import torch
    from kernelbench import eval as kb_eval, timing as kb_timing
    return torch, kb_eval, kb_timing, standins


def _record_timings(kb_timing) -> list[list[float]]:
    """Every list of times KernelBench turns into stats, in order (its stats keep the mean, rounded)."""
    raw: list[list[float]] = []
    original = kb_timing.get_timing_stats

    def get_timing_stats(elapsed_times, device=None):
        raw.append([float(t) for t in elapsed_times])
        return original(elapsed_times, device=device)
    kb_timing.get_timing_stats = get_timing_stats
    return raw


def _observe_allclose(torch) -> list:
    """The largest |a − b| of each torch.allclose that KernelBench's eval.py makes (its verdict unchanged)."""
    diffs: list = []
    original = torch.allclose

    def allclose(a, b, *args, **kwargs):
        ok = original(a, b, *args, **kwargs)
        if sys._getframe(1).f_globals.get("__name__") == "kernelbench.eval":
            try:
                diffs.append(float(torch.max(torch.abs(a - b))))
            except (RuntimeError, TypeError, ValueError):
                diffs.append(None)
        return ok
    torch.allclose = allclose
    return diffs


def kb_child(req: dict):
    torch, kb_eval, kb_timing, standins = _kb_import(req)
    raw = _record_timings(kb_timing)
    diffs = _observe_allclose(torch)

    def run() -> dict:
        device = torch.device("cuda:0")
        gpu = torch.cuda.get_device_name(device) if torch.cuda.is_available() else None
        out = {"standins": standins, "gpu": gpu, "torch": torch.__version__}
        t = time.perf_counter()
        stats = kb_timing.measure_ref_program_time(ref_arch_name=req["name"], ref_arch_src=req["ref_src"],
                                                   device=device, precision="fp32")
        out["ref"] = {"stats": jsonable(stats), "times_ms": raw[0] if raw else None,
                      "seconds": round(time.perf_counter() - t, 2)}
        raw.clear()
        gc.collect()
        torch.cuda.empty_cache()
        t = time.perf_counter()
        res = kb_eval.eval_kernel_against_ref(
            original_model_src=req["ref_src"], custom_model_src=req["cand_src"], seed_num=42,
            num_correct_trials=5, num_perf_trials=100, measure_performance=True, timing_method="cuda_event",
            verbose=False, build_dir=req.get("build_dir"), device=device, backend=req["backend"],
            precision=torch.float32)
        dump = None if res is None else (res.model_dump() if hasattr(res, "model_dump") else res.dict())
        out["eval"] = jsonable(dump)
        out["eval_times_ms"] = list(raw)
        out["observed_max_diff"] = list(diffs)
        out["eval_seconds"] = round(time.perf_counter() - t, 2)
        return out
    return run


def kb_build_child(req: dict):
    _, kb_eval, _, standins = _kb_import(req)

    def run() -> dict:
        ok, stdout, err = kb_eval.build_compile_cache(custom_model_src=req["cand_src"], verbose=False,
                                                      build_dir=req["build_dir"])
        return {"ok": bool(ok), "error": jsonable(err), "log_tail": (stdout or "")[-3000:], "standins": standins}
    return run


def _ours_import():
    from kernelskill.candidate import Candidate
    from kernelskill.evaluate.api import Options, compile, evaluate
    from kernelskill.evaluate.launch.isolation import prestarting
    from kernelskill.task import Task
    return Candidate, Options, compile, evaluate, prestarting, Task


def _candidate(Candidate, req: dict):
    return Candidate.from_file(req["cand_path"]) if req.get("cand_path") else Candidate.from_source(req["cand_src"])


def ours_child(req: dict):
    Candidate, Options, _, evaluate, prestarting, Task = _ours_import()

    def run() -> dict:
        task, cand = Task.load(req["task_path"], preset=req.get("preset")), _candidate(Candidate, req)
        with prestarting(req.get("prestart", True)):
            r = evaluate(task, cand, opts=Options(**req["options"]))     # the benchmark: {"device": "cuda"}
        return {"result": r.to_dict()}
    return run


def ours_build_child(req: dict):
    Candidate, _, compile, _, _, _ = _ours_import()

    def run() -> dict:
        res = compile(_candidate(Candidate, req), device=req["options"]["device"])
        return {"ok": res.ok, "seconds": res.seconds, "log_tail": res.log_tail[-3000:]}
    return run


CHILDREN = {"kb": kb_child, "kb-build": kb_build_child, "ours": ours_child, "ours-build": ours_build_child}


def child_main(kind: str, request: str, result: str) -> int:
    """A child's life: import, wait for "go" (EOF: the parent is gone, do nothing), run, write the result."""
    req = json.loads(Path(request).read_text())
    try:
        run = CHILDREN[kind](req)
    except SystemExit as e:           # a missing requirement, said in words
        Path(result).write_text(json.dumps({"error": str(e), "fatal": True}))
        return 3
    if sys.stdin.readline().strip() != "go":
        return 0
    t = time.perf_counter()
    try:
        out = run()
    except Exception:  # noqa: BLE001 — any failure of the harness under test is a result
        out = {"error": traceback.format_exc()[-4000:]}
    out["seconds"] = round(time.perf_counter() - t, 2)
    Path(result).write_text(json.dumps(out))
    return 0


# ---- the parent's side of a child --------------------------------------------------------------

class Step:
    """One child process, started now (it imports), told to go later; its group is killed on timeout."""

    def __init__(self, kind: str, request: dict, folder: Path):
        folder.mkdir(parents=True, exist_ok=True)
        self.kind, self.folder = kind, folder
        self.result_path = folder / "result.json"
        self.result_path.unlink(missing_ok=True)
        (folder / "request.json").write_text(json.dumps(request))
        self.log_path = folder / "log.txt"
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "--child", kind, str(folder / "request.json"),
                 str(self.result_path)], stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                cwd=folder, env=env, start_new_session=True)
        self.started = None

    def go(self) -> None:
        self.started = time.monotonic()
        try:
            self.proc.stdin.write(b"go\n")
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass                                   # it ended already: its result (or log) says why

    def wait(self, timeout: float) -> dict:
        """{"result": the child's JSON or None, "status": finished|timeout|died, "log_tail", "wall_s"}."""
        status = "finished"
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            rc, status = self.proc.wait(), "timeout"
        try:
            result = json.loads(self.result_path.read_text())
        except (OSError, ValueError):
            result = None
            if status == "finished":
                status = "died"
        tail = self.log_path.read_text(errors="replace")[-3000:] if self.log_path.exists() else ""
        return {"result": result, "status": status, "rc": rc, "log_tail": tail,
                "wall_s": round(time.monotonic() - (self.started or time.monotonic()), 2)}

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()


# ---- one side's numbers, read from its child's output --------------------------------------------------

@dataclass
class KbSide:
    status: str                     # correct | incorrect | compile_error | runtime_error | error | timeout | died
    correct: bool | None            # None: no verdict (the child died, timed out, or eval returned None)
    max_diff: float | None = None   # KernelBench's own max_difference (failed trials), else the largest observed
    ref_ms: float | None = None     # measure_ref_program_time: the mean of its 100 times (what KernelBench reports)
    ref_median_ms: float | None = None
    cand_ms: float | None = None    # KernelExecResult.runtime: the candidate's mean
    cand_median_ms: float | None = None
    eval_ref_ms: float | None = None  # ref_runtime: the reference timed again inside eval (excessive-speedup check)
    message: str = ""
    seconds: float | None = None
    detail: dict = field(default_factory=dict)

    @property
    def speedup(self) -> float | None:
        return self.ref_ms / self.cand_ms if self.ref_ms and self.cand_ms else None


@dataclass
class OursSide:
    status: str                     # our Status, or error | timeout | died (the child's)
    correct: bool | None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    atol: float | None = None       # the tolerance the verdict used (may be raised above the task's)
    rtol: float | None = None
    eager_deviation: float | None = None   # default-flag eager vs the strict reference, × the task tolerance
    eager_ms: float | None = None
    cand_ms: float | None = None
    speedup: float | None = None
    speedup_ci: list = field(default_factory=list)
    quality: str | None = None
    flags: list = field(default_factory=list)
    message: str = ""
    seconds: float | None = None
    env: dict = field(default_factory=dict)
    detail: dict = field(default_factory=dict)


def _mean(xs):
    return statistics.fmean(xs) if xs else None


def _median(xs):
    return statistics.median(xs) if xs else None


def kb_side(out: dict) -> KbSide:
    """KernelBench's verdict and times from its child's output (``Step.wait``)."""
    res = out.get("result") or {}
    if out.get("status") != "finished" or res.get("fatal"):
        why = res.get("error") or out.get("log_tail", "")[-300:]
        return KbSide(status=out.get("status") if out.get("status") != "finished" else "error", correct=None,
                      message=why.strip()[-300:], detail={"log_tail": out.get("log_tail", "")})
    ref = res.get("ref") or {}
    ref_times = ref.get("times_ms") or []
    side = KbSide(status="error", correct=None, ref_ms=_mean(ref_times) or (ref.get("stats") or {}).get("mean"),
                  ref_median_ms=_median(ref_times), seconds=res.get("seconds"),
                  detail={k: res.get(k) for k in ("standins", "gpu", "torch", "observed_max_diff", "eval_seconds")})
    side.detail.update(ref_stats=ref.get("stats"), ref_seconds=ref.get("seconds"), ref_times_ms=ref_times,
                       eval_times_ms=res.get("eval_times_ms"))
    if res.get("error"):           # an exception out of eval_kernel_against_ref: no verdict of its own
        side.status, side.message = "error", res["error"].strip().splitlines()[-1][:300]
        side.detail["traceback"] = res["error"]
        return side
    ev = res.get("eval")
    if ev is None:                 # eval returned None: a build lock error, "please retry"
        side.status, side.message = "error", "eval_kernel_against_ref returned None (a lock file error: retry)"
        return side
    meta = ev.get("metadata") or {}
    side.detail.update(metadata=meta, runtime_stats=ev.get("runtime_stats"),
                       ref_runtime_stats=ev.get("ref_runtime_stats"))
    side.correct = bool(ev.get("compiled") and ev.get("correctness"))
    if not ev.get("compiled"):
        side.status = "compile_error"
        side.message = str(meta.get("compilation_error") or meta.get("other_error") or "")[:300]
    elif side.correct:
        side.status = "correct"
    elif "runtime_error" in meta or "cuda_error" in meta:
        side.status, side.message = "runtime_error", str(meta.get("runtime_error") or meta.get("cuda_error"))[:300]
    else:
        side.status, side.message = "incorrect", str(meta.get("correctness_issue") or "")[:300]
    reported = [float(x) for x in meta.get("max_difference") or []]
    observed = [x for x in res.get("observed_max_diff") or [] if x is not None]
    side.max_diff = max(reported) if reported else (max(observed) if observed else None)
    times = res.get("eval_times_ms") or []
    if (ev.get("runtime") or -1) > 0 and times:          # timed: the candidate first, then the reference
        side.cand_ms, side.cand_median_ms = _mean(times[0]), _median(times[0])
        times = times[1:]
    elif (ev.get("runtime") or -1) > 0:
        side.cand_ms = ev["runtime"]
    if (ev.get("ref_runtime") or -1) > 0:
        side.eval_ref_ms = _mean(times[0]) if times else ev["ref_runtime"]
    return side


def eager_deviation(verify: dict) -> float | None:
    """The worst default-flag eager deviation from the strict reference over the outputs, in multiples of
    the task's tolerance as allclose reads it (``verify.tolerances[*].eager_allclose_ratio``: ≤ 1 means
    KernelBench's reference, which runs under the default flags, is within tolerance of the strict one)."""
    devs = []
    for t in verify.get("tolerances") or []:
        d = t.get("eager_allclose_ratio") if isinstance(t, dict) else None
        if isinstance(d, (int, float)) and not isinstance(d, bool):
            devs.append(float(d))
    return max(devs) if devs else None


def ours_side(out: dict) -> OursSide:
    """Our verdict and times from the child's output, or from ``{"result": EvalResult.to_dict()}``."""
    res = out.get("result") or {}
    r = res.get("result")
    if r is None:
        status = out.get("status", "finished")
        why = res.get("error") or out.get("log_tail", "")[-300:]
        return OursSide(status="error" if status == "finished" else status, correct=None,
                        message=why.strip().splitlines()[-1][:300] if why.strip() else "",
                        detail={"log_tail": out.get("log_tail", ""), "error": res.get("error")})
    verify, prof = r.get("verify") or {}, r.get("profile") or {}
    base, cand = prof.get("baseline") or {}, prof.get("candidate") or {}
    status = r.get("status")
    # A candidate that did not build or run is a "not correct" verdict; stochastic is the task's problem.
    correct = None if status == "stochastic" else bool(verify.get("correct"))
    return OursSide(status=status, correct=correct, max_abs_err=verify.get("max_abs_err"),
                    max_rel_err=verify.get("max_rel_err"), atol=verify.get("atol"), rtol=verify.get("rtol"),
                    eager_deviation=eager_deviation(verify), eager_ms=base.get("median_ms"),
                    cand_ms=cand.get("median_ms"), speedup=prof.get("speedup"),
                    speedup_ci=prof.get("speedup_ci") or [], quality=r.get("quality"), flags=r.get("flags") or [],
                    message=r.get("message", ""), seconds=r.get("seconds"), env=r.get("env") or {},
                    detail={"tolerances": verify.get("tolerances"), "phases": r.get("phases"),
                            "compile_cache_hit": (r.get("compile") or {}).get("cache_hit"),
                            "trials_max_abs_err": [t.get("max_abs_err") for t in verify.get("trials") or []],
                            "baseline": base, "candidate": cand, "mismatch": verify.get("mismatch", "")[:2000]})


# ---- a row: both sides of one pair, and how they compare --------------------------------------------

@dataclass
class Row:
    task: str
    candidate: str
    key: str
    task_atol: float | None = None
    task_rtol: float | None = None
    kb: KbSide | None = None
    ours: OursSide | None = None
    builds: dict = field(default_factory=dict)
    wall_s: float | None = None

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["comparison"] = compare(self)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Row":
        d = _fields(cls, d)
        for name, side in (("kb", KbSide), ("ours", OursSide)):
            if d.get(name) is not None:
                d[name] = side(**_fields(side, d[name]))
        return cls(**d)

    @property
    def finished(self) -> bool:
        return self.kb is not None and self.ours is not None


def _fields(cls, d: dict) -> dict:
    """The keys of ``d`` that ``cls`` has (a file written by another version may hold more)."""
    return {k: v for k, v in d.items() if k in {f.name for f in dataclasses.fields(cls)}}


def _ratio(a, b):
    return a / b if a and b else None


def kb_deviation(row: Row) -> float | None:
    """Our eager deviation as a multiple of KernelBench's tolerance (the task's may differ: examples/)."""
    dev = row.ours.eager_deviation if row.ours else None
    if dev is None:
        return None
    tol = max(row.task_atol or 0.0, row.task_rtol or 0.0)
    return dev * tol / KB_TOL if tol > 0 else None


def compare(row: Row) -> dict:
    """Ratios (ours / KernelBench), eager within 2 %, and whether the verdicts agree (yes, no, n/a (why))."""
    kb, ours = row.kb, row.ours
    c = {"eager_ratio": _ratio(ours and ours.eager_ms, kb and kb.ref_ms),
         "eager_ratio_median": _ratio(ours and ours.eager_ms, kb and kb.ref_median_ms),
         "cand_ratio": _ratio(ours and ours.cand_ms, kb and kb.cand_ms),
         "kb_eager_deviation": kb_deviation(row), "verdicts_equal": None, "notes": []}
    for name in ("eager", "eager_median", "cand"):
        r = c[f"{name}_ratio"] if name != "eager_median" else c["eager_ratio_median"]
        c[f"{name}_within_2pct"] = None if r is None else abs(r - 1) <= WITHIN
    if kb is None or kb.correct is None:
        c["verdicts_agree"] = f"n/a (no KB verdict: {kb.status if kb else 'not run'})"
    elif ours is None or ours.correct is None:
        c["verdicts_agree"] = f"n/a (no verdict of ours: {ours.status if ours else 'not run'})"
    else:
        c["verdicts_equal"] = kb.correct == ours.correct
        dev = c["kb_eager_deviation"]
        c["verdicts_agree"] = NA_STRICT if dev is not None and dev > 1 else "yes" if c["verdicts_equal"] else "no"
    if row.task_atol is not None and (row.task_atol != KB_TOL or row.task_rtol != KB_TOL):
        c["notes"].append(f"tolerance: ours atol {row.task_atol:g} rtol {row.task_rtol:g} (task.toml), "
                          f"KernelBench {KB_TOL:g}")
    if ours is not None and ours.eager_deviation is None and ours.correct is not None:
        c["notes"].append(NO_DEVIATION)
    return c


def _ms(x) -> str:
    return "-" if x is None else f"{x:.3f}" if x < 10 else f"{x:.2f}"


def _r(x) -> str:
    return "-" if x is None else f"{x:.3f}"


def _x(x) -> str:
    return "-" if x is None else f"{x:.2f}×"


def _yn(x) -> str:
    return "-" if x is None else "yes" if x else "no"


def _kb_verdict(kb: KbSide | None) -> str:
    if kb is None:
        return "-"
    return kb.status + (f" (max diff {kb.max_diff:.2g})" if kb.max_diff is not None else "")


def _our_verdict(o: OursSide | None) -> str:
    if o is None:
        return "-"
    return o.status + (f" (max err {o.max_abs_err:.2g})" if o.max_abs_err is not None else "")


def table(rows: list[Row]) -> list[str]:
    """The markdown table, one line per pair, then notes (tolerances, failures' messages)."""
    lines = ["| task | candidate | KB verdict | ours | eager ms KB / ours / ratio | candidate ms KB / ours / ratio "
             "| speedup KB / ours | eager within 2 % | verdicts agree |",
             "|---|---|---|---|---|---|---|---|---|"]
    notes, unknown = [], 0
    for row in rows:
        c, kb, o = compare(row), row.kb, row.ours
        lines.append(
            f"| {row.task} | {row.candidate} | {_kb_verdict(kb)} | {_our_verdict(o)} "
            f"| {_ms(kb and kb.ref_ms)} / {_ms(o and o.eager_ms)} / {_r(c['eager_ratio'])} "
            f"| {_ms(kb and kb.cand_ms)} / {_ms(o and o.cand_ms)} / {_r(c['cand_ratio'])} "
            f"| {_x(kb and kb.speedup)} / {_x(o and o.speedup)} | {_yn(c['eager_within_2pct'])} "
            f"| {c['verdicts_agree']} |")
        unknown += NO_DEVIATION in c["notes"]
        for n in c["notes"]:
            if n != NO_DEVIATION:
                notes.append(f"- {row.task} {row.candidate}: {n}")
        for side, name in ((kb, "KB"), (o, "ours")):
            if side is not None and side.message and side.status not in ("correct", "ok"):
                notes.append(f"- {row.task} {row.candidate}: {name} {side.status}: {' '.join(side.message.split())}")
    if unknown:
        notes.append(f"- {unknown} of {len(rows)} rows: {NO_DEVIATION}")
    return lines + ([""] + notes if notes else [])


def summarize(rows: list[Row]) -> dict:
    cs = [compare(r) for r in rows]

    def count(key):
        vals = [c[key] for c in cs if c[key] is not None]
        return sum(vals), len(vals)
    equal = [c["verdicts_equal"] for c in cs if c["verdicts_agree"] in ("yes", "no")]
    return {"pairs": len(rows), "eager_within_2pct": count("eager_within_2pct"),
            "verdicts_equal_any": count("verdicts_equal"),   # n/a (strict) included: both gave a verdict
            "eager_median_within_2pct": count("eager_median_within_2pct"),
            "cand_within_2pct": count("cand_within_2pct"),
            "verdicts_equal": (sum(equal), len(equal)),
            "na_strict": sum(c["verdicts_agree"] == NA_STRICT for c in cs),
            "na_no_verdict": sum(c["verdicts_agree"].startswith("n/a (no") for c in cs)}


def summary_line(s: dict) -> str:
    (e, m), (em, mm), (ce, cm), (v, vm) = (s["eager_within_2pct"], s["eager_median_within_2pct"],
                                           s["cand_within_2pct"], s["verdicts_equal"])
    na = [f"{s['na_strict']} with KB's reference outside the strict tolerance"] if s["na_strict"] else []
    na += [f"{s['na_no_verdict']} without a verdict"] if s["na_no_verdict"] else []
    va, vam = s["verdicts_equal_any"]
    return (f"eager within 2 %: {e} of {m} (against KernelBench's mean; {em} of {mm} against its median) · "
            f"candidate within 2 %: {ce} of {cm} · verdicts equal: {v} of {vm} where comparable"
            + (f" ({', '.join(na)}: n/a; equal on {va} of {vam} with both verdicts)" if na else ""))


# ---- the run ----------------------------------------------------------------------------------

def machine() -> dict:
    info = {"python": platform.python_version(), "host_cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count()}
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip().splitlines()
        info["gpus"] = [line.split(",")[0].strip() for line in out]
        info["driver"] = out[0].split(",")[1].strip() if out and "," in out[0] else None
    except (OSError, subprocess.SubprocessError):
        info["gpus"], info["driver"] = [], None
    info["gpu"] = info["gpus"][0] if info["gpus"] else None
    import torch
    info.update(torch=torch.__version__, cuda=torch.version.cuda)
    return info


def card_name(gpu: str | None) -> str:
    """h100, h200, … from the GPU's name (as benchmarks/kernelbench_chunk.sh names its results), else gpu."""
    m = re.search(r"h\d+", (gpu or "").lower())
    return m.group(0) if m else "gpu"


def check_kernelbench(path: Path | None) -> str | None:
    """Why ``path`` is not a KernelBench checkout this benchmark can use, or None."""
    want = "src/kernelbench/eval.py and src/kernelbench/timing.py, and KernelBench/level1/, level2/, level3/"
    how = ("extract one: mkdir -p .kb && git --git-dir=<a KernelBench mirror> archive HEAD src KernelBench/level1 "
           "KernelBench/level2 KernelBench/level3 | tar -x -C .kb")
    if path is None:
        return f"--kernelbench DIR is required: a KernelBench checkout holding {want} ({how})"
    if not path.is_dir():
        return f"--kernelbench {path}: no such folder; it should hold {want} ({how})"
    missing = [p for p in ("src/kernelbench/eval.py", "src/kernelbench/timing.py", "KernelBench/level1",
                           "KernelBench/level2", "KernelBench/level3") if not (path / p).exists()]
    if missing:
        return (f"--kernelbench {path}: not a KernelBench checkout ({', '.join(missing)} missing); "
                f"it should hold {want} ({how})")
    return None


def harness_hash(kb_dir: Path) -> str:
    """Which KernelBench harness ran: a hash of its eval.py, timing.py and utils.py."""
    h = hashlib.sha256()
    for name in ("eval.py", "timing.py", "utils.py"):
        p = kb_dir / "src" / "kernelbench" / name
        h.update(p.read_bytes() if p.exists() else b"")
    return h.hexdigest()[:12]


def load_rows(path: Path) -> dict[str, Row]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {r["key"]: Row.from_dict(r) for r in data.get("rows", []) if r.get("key")}


def save(path: Path, rows: list[Row], head: dict, complete: bool) -> None:
    data = {**head, "updated": time.strftime("%Y-%m-%dT%H:%M:%S"), "complete": complete,
            "summary": summarize(rows), "summary_line": summary_line(summarize(rows)),
            "rows": [r.to_dict() for r in rows]}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)


def _requests(rp: Resolved, kb_dir: Path, work: Path, prestart: bool) -> dict:
    build_dir = str(work / "kb-builds" / rp.key) if rp.built else None
    cand = {"cand_path": str(rp.cand_path)} if rp.cand_path else {"cand_src": rp.cand_src}
    return {"ours": {"task_path": str(rp.task_path), **cand, "options": {"device": "cuda"}, "prestart": prestart},
            "kb": {"kernelbench": str(kb_dir), "name": rp.pair.task, "ref_src": rp.ref_src,
                   "cand_src": rp.cand_src, "backend": rp.backend, "build_dir": build_dir}}


def prebuild(todo: list[Resolved], kb_dir: Path, work: Path, timeout: float, log) -> dict[str, dict]:
    """Every CUDA candidate built ahead, at once, by both harnesses (KernelBench: build_compile_cache into
    the build_dir its evaluation loads from; ours: compile() into the build cache). Nothing is timed meanwhile."""
    built = [rp for rp in todo if rp.built]
    if not built:
        return {}
    log(f"building {len(built)} CUDA candidate(s) ahead with both harnesses, in parallel …")
    t0 = time.monotonic()
    steps = []
    for rp in built:
        req = _requests(rp, kb_dir, work, False)
        steps.append((rp, "kb", Step("kb-build", {**req["kb"]}, work / rp.key / "kb-build")))
        steps.append((rp, "ours", Step("ours-build", req["ours"], work / rp.key / "ours-build")))
    for *_, s in steps:
        s.go()
    ex = ThreadPoolExecutor(len(steps))
    try:
        outs = list(ex.map(lambda s: s[2].wait(timeout), steps))
    except BaseException:            # Ctrl-C, SIGTERM: the builds die now, not after their timeout
        for *_, s in steps:
            s.kill()
        raise
    finally:
        ex.shutdown(wait=True)
    builds: dict[str, dict] = {}
    for (rp, side, _), out in zip(steps, outs):
        res = out["result"] or {}
        builds.setdefault(rp.key, {})[side] = {"ok": res.get("ok"), "status": out["status"], "wall_s": out["wall_s"],
                                               "error": res.get("error"), "log_tail": res.get("log_tail")}
    log(f"built in {time.monotonic() - t0:.0f} s: " + ", ".join(
        f"{rp.pair.task} KB {'ok' if builds[rp.key]['kb']['ok'] else 'FAILED'} / ours "
        f"{'ok' if builds[rp.key]['ours']['ok'] else 'FAILED'}" for rp in built))
    return builds


def run_pairs(todo: list[Resolved], kb_dir: Path, work: Path, args, on_row, log) -> None:
    """Each pair: ours, then KernelBench, each in a fresh process; with overlap, the next process is
    started (it imports torch and waits) while the current one runs."""
    plan = [(rp, side) for rp in todo for side in ("ours", "kb")]
    live: list[Step] = []

    def start(i: int) -> Step:
        rp, side = plan[i]
        step = Step(side, _requests(rp, kb_dir, work, not args.no_overlap)[side], work / rp.key / side)
        live.append(step)
        return step
    try:
        nxt = start(0) if plan else None
        outs: dict[str, dict] = {}
        for i, (rp, side) in enumerate(plan):
            step = nxt
            step.go()
            nxt = start(i + 1) if i + 1 < len(plan) and not args.no_overlap else None
            outs[side] = step.wait(args.timeout)
            live.remove(step)
            if nxt is None and i + 1 < len(plan):
                nxt = start(i + 1)
            if side == "kb":
                on_row(rp, outs.pop("ours"), outs.pop("kb"))
    finally:
        for s in live:
            s.kill()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return child_main(*argv[1:4])
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="On the GPU machine (docs/evaluator.md, \"Agreement with KernelBench's harness\"): carry .kb and "
               ".whl (pydantic), install the wheels into /tmp/site, PYTHONPATH=/tmp/site, then run this script.")
    ap.add_argument("--kernelbench", type=Path, metavar="DIR",
                    help="a KernelBench checkout: DIR/src/kernelbench/ and DIR/KernelBench/level{1,2,3}/")
    ap.add_argument("--out", type=Path, help="the JSON (default benchmarks/results/kernelbench_agreement_<card>.json)")
    ap.add_argument("--fresh", action="store_true", help="run every pair again (default: skip those in --out)")
    ap.add_argument("--only", metavar="SUBSTR", help="only the pairs whose task or candidate contains SUBSTR")
    ap.add_argument("--limit", type=int, metavar="N", help="at most N pairs (after --only)")
    ap.add_argument("--extended", action="store_true", help="the default sample and four more pairs (about 3 minutes more, estimated)")
    ap.add_argument("--add", action="append", default=[], metavar="TASK[=CANDIDATE]",
                    help="another pair: levelN/NAME, examples/NAME or a path; the candidate a file (default: the "
                         "reference itself); repeatable")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per process (default 600)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/kernelbench_agreement"),
                    help="requests, logs and KernelBench's build dirs (default /tmp/kernelbench_agreement)")
    ap.add_argument("--no-overlap", action="store_true",
                    help="start each process only when the last one ended (default: the next one imports "
                         "torch while the current one runs, as the bench's spare workers do)")
    ap.add_argument("--list", action="store_true", help="print the sample and exit")
    args = ap.parse_args(argv)

    sample = list(EXTENDED_SAMPLE if args.extended else DEFAULT_SAMPLE)
    for spec in args.add:
        task, _, cand = spec.partition("=")
        sample.append(Pair(task, cand or None))
    if args.only:
        sample = [p for p in sample if args.only in p.task or args.only in (p.candidate or "reference")]
    if args.limit is not None:
        sample = sample[:args.limit]
    if args.list:
        for p in sample:
            print(f"{p.task}  {p.label}")
        print(f"{len(sample)} pairs")
        return 0
    why = check_kernelbench(args.kernelbench)
    if why:
        print(why, file=sys.stderr)
        return 2
    kb_dir = args.kernelbench.resolve()
    if importlib.util.find_spec("pydantic") is None:
        print(PYDANTIC_HELP.format(exe=sys.executable), file=sys.stderr)
        return 2
    try:
        resolved = [resolve(p, kb_dir) for p in sample]
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    info = machine()
    if not info.get("gpu"):
        print("no NVIDIA GPU here (nvidia-smi lists none): KernelBench's harness runs on CUDA only", file=sys.stderr)
        return 2
    out = args.out or ROOT / "benchmarks" / "results" / f"kernelbench_agreement_{card_name(info['gpu'])}.json"
    old = {} if args.fresh else load_rows(out)
    head = {"benchmark": "kernelbench_agreement", "machine": info,
            "kernelbench": {"dir": str(kb_dir), "harness_sha": harness_hash(kb_dir)},
            "settings": {"kernelbench": {"reference": "timing.measure_ref_program_time defaults: 5 warm-up, 100 "
                                                      "timed, discard_first 1, cuda_event, L2 flushed, fp32",
                                         "eval": "eval_kernel_against_ref: seed 42, 5 correctness trials, 100 "
                                                 "perf trials, cuda_event, fp32, excessive-speedup check",
                                         "tolerance": KB_TOL},
                         "ours": "evaluate(task, candidate, opts=Options(device='cuda')), workers started ahead",
                         "overlap": not args.no_overlap, "within": WITHIN}}
    rows: dict[str, Row] = {}
    for rp in resolved:
        if rp.key in old and old[rp.key].finished:
            rows[rp.key] = old[rp.key]
    todo = [rp for rp in resolved if rp.key not in rows]
    t0 = time.monotonic()

    def log(text: str) -> None:
        print(f"[{time.monotonic() - t0:6.0f} s] {text}", flush=True)

    def ordered() -> list[Row]:
        return [rows[rp.key] for rp in resolved if rp.key in rows]

    log(f"{len(resolved)} pairs on {info['gpu']} (torch {info['torch']}); {len(resolved) - len(todo)} already in "
        f"{out}, {len(todo)} to run")
    done = [0]

    def on_row(rp: Resolved, ours_out: dict, kb_out: dict) -> None:
        from kernelskill.task import Task
        atol, rtol = Task.load(rp.task_path).tolerance
        row = Row(task=rp.pair.task, candidate=rp.pair.label, key=rp.key, task_atol=atol, task_rtol=rtol,
                  kb=kb_side(kb_out), ours=ours_side(ours_out), builds=builds.get(rp.key, {}),
                  wall_s=round(ours_out["wall_s"] + kb_out["wall_s"], 1))
        rows[rp.key] = row
        save(out, ordered(), head, complete=False)
        done[0] += 1
        c = compare(row)
        log(f"[{done[0]}/{len(todo)}] {row.task} {row.candidate}: ours {row.ours.status} "
            f"{_ms(row.ours.eager_ms)} ms ({ours_out['wall_s']:.0f} s) · KB {row.kb.status} {_ms(row.kb.ref_ms)} ms "
            f"({kb_out['wall_s']:.0f} s) · eager ratio {_r(c['eager_ratio'])} · verdicts {c['verdicts_agree']}")

    def stop(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, stop)
    interrupted = False
    builds: dict[str, dict] = {}
    try:
        args.work.mkdir(parents=True, exist_ok=True)
        builds = prebuild(todo, kb_dir, args.work, args.timeout, log)
        run_pairs(todo, kb_dir, args.work, args, on_row, log)
    except KeyboardInterrupt:
        interrupted = True
        log("interrupted: the finished pairs are kept")
    final = ordered()
    complete = not interrupted and len(final) == len(resolved)
    save(out, final, head, complete=complete)
    print()
    print("\n".join(table(final)))
    print()
    print(summary_line(summarize(final)) + ("" if complete else " (cut off: the pairs that finished)"))
    print(f"{out} · {time.monotonic() - t0:.0f} s")
    if interrupted:
        return 130
    return 0 if all(r.kb.correct is not None and r.ours.correct is not None for r in final) else 1


if __name__ == "__main__":
    raise SystemExit(main())
