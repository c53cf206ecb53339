"""Why does one honest kernel, evaluated again, read a different time? (issue 43, item 4)

On an H100 the same LayerNorm CUDA candidate (KernelBench level1/40_LayerNorm), evaluated four
times, gave candidate medians 0.349, 0.375, 0.367, 0.435 ms (24.6 % apart) while eager held 0.4 %,
and two `good` evaluations had disjoint 95 % intervals. The goal: 5 evaluations of each hold-out-like
kernel (a LayerNorm, an elementwise kernel at shipped size, a conv epilogue) with pairwise
overlapping intervals and medians ≤ 1 % apart. This probe measures, per kernel:

  (a) evaluations   K full ``evaluate(task, candidate, opts=Options(device="cuda"))`` calls, each with
                    fresh worker processes: candidate and eager medians (and the raw samples of the
                    reported round), the speedup's 95 % interval, the quality verdict, nvidia-smi's
                    SM clock, temperature and power before and after;
  (b) factors       ONE fresh process times the candidate (and eager, interleaved) with CUDA events
                    and the evaluator's L2 flush, changing one factor at a time from a plain setting
                    (inputs at offset 0, each output dropped so its block is reused, flush on, one
                    input set, no empty_cache):
                      pad        inputs at byte offset 0 / 256 B / 4 KiB / 64 KiB / 2 MiB + 256 B in
                                 their buffer (data_ptr % 4096 and % 2 MiB of inputs and outputs shown)
                      outputs    each output dropped (its block reused) / one held per input set
                                 (the evaluator's pattern) / a ring of 8 held (addresses cycle)
                      flush      L2 flush before each call on / off
                      rotation   1 / 3 input sets
                      empty_cache  torch.cuda.empty_cache() before each call (the output is then a
                                 fresh cudaMalloc inside the timed call) off / on
                      placement  inputs in fresh segments after a spacer of 0 / 1 / 4 GiB: other
                                 virtual and physical memory, as another process would get
                      prelude    the worker's trials first (5 calls, each after guards.poison, output
                                 copied to the host), then timed as the evaluator times, or not
                      loop       this simple loop / the evaluator's own timing.time_pair
                      repeat     the plain setting at the start, middle and end: the noise floor
                    plus the effective SM clock (a torch.cuda._sleep spin timed by events) per setting;
  (c) processes     K fresh processes (``--procs``), each timing the candidate the plain way and with
                    timing.time_pair: does the spread between processes show without the evaluator?

Reading the tables: a factor whose spread is well above the noise floor (`repeat`) and near the
spread between evaluations is a cause; a spread between processes (c) as large as between
evaluations (a) says the cause is per process (placement, allocator, clocks), not the evaluator's
machinery; (c) stable but (a) not points at what the evaluator does before timing (prelude, loop).

Run on the GPU machine (PYTHONPATH = the repository; KernelBench extracted under .kb for kb40):

    python3 benchmarks/probe_rerun_spread.py                    # ~5 min on one H100 (+ ~1 min cold)
    python3 benchmarks/probe_rerun_spread.py --quick            # ~2.5 min: 2 evaluations, fewer settings
    python3 benchmarks/probe_rerun_spread.py --kernels kb40_layernorm --evals 8 --steps evals,procs

The JSON (``--out``, default benchmarks/results/probe_rerun_spread_<card>.json) is rewritten after
every step with every sample, and says ``complete: false`` when the run was cut off.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

KB40 = ".kb/KernelBench/level1/40_LayerNorm.py"
KERNELS = {   # name: (task, candidate), paths relative to the repository
    "kb40_layernorm": (KB40, "benchmarks/probe_candidates/layernorm_kb40.py"),
    "layernorm": ("examples/layernorm", "examples/layernorm/solutions/cuda_layernorm_regcache.py"),
    "add_layernorm": ("examples/add_layernorm", "examples/add_layernorm/solutions/cuda_warp_per_row.py"),
    "relu_gelu": ("examples/relu_gelu", "examples/relu_gelu/solutions/cuda_gelu_vec4.py"),
    "conv_bn_relu": ("examples/conv_bn_relu", "examples/conv_bn_relu/solutions/cuda_cudnn_fused_bn_relu.py"),
}
# The goal: a LayerNorm, an elementwise kernel at shipped size, a conv epilogue.
DEFAULT_KERNELS = ("kb40_layernorm", "relu_gelu", "conv_bn_relu")
FALLBACK = {"kb40_layernorm": "layernorm"}   # when KernelBench is not extracted
STEPS = ("evals", "factors", "procs")
SEED = 42
MIB = 1 << 20
PAD_ROOM = 2 * MIB + 4096    # room before the inputs in their buffers: the largest pad probed fits
GOAL_SPREAD_PCT = 1.0
CLOCK_CYCLES = 200_000       # torch.cuda._sleep spins this many SM cycles: its time gives the clock


# ---- numbers into summaries (pure; tested on the CPU) ---------------------------------------------
def spread_pct(values) -> float | None:
    """(max / min − 1) in %, of the values that are there; None for fewer than two."""
    xs = [float(v) for v in values if v is not None]
    if len(xs) < 2 or min(xs) <= 0:
        return None
    return (max(xs) / min(xs) - 1.0) * 100.0


def overlaps(a, b) -> bool:
    """Whether two closed intervals [lo, hi] share a point."""
    return a[0] <= b[1] and b[0] <= a[1]


def pairwise_overlap(intervals) -> dict:
    """{"all": every two intervals overlap, "disjoint": [(i, j), …]}; missing intervals are skipped."""
    disjoint = [(i, j) for i in range(len(intervals)) for j in range(i + 1, len(intervals))
                if intervals[i] and intervals[j] and not overlaps(intervals[i], intervals[j])]
    return {"all": not disjoint, "disjoint": disjoint}


def median_ci(ms) -> list[float] | None:
    """Distribution-free 95 % interval of the median (the order statistics timing.py stops on)."""
    a = np.sort(np.asarray(ms, dtype=float))
    n = len(a)
    if n < 6:
        return None
    k = max(int(np.floor(n / 2 - 0.98 * np.sqrt(n))), 0)
    return [float(a[k]), float(a[n - 1 - k])]


def sample_stats(ms) -> dict | None:
    """Median, IQR, minimum, 10th percentile, n and the median's 95 % interval of samples in ms."""
    if not ms:
        return None
    a = np.asarray(ms, dtype=float)
    q1, med, q3 = np.percentile(a, [25, 50, 75])
    return {"median": float(med), "iqr": float(q3 - q1), "min": float(a.min()),
            "p10": float(np.percentile(a, 10)), "n": int(len(a)), "ci": median_ci(a)}


def summarize_evaluations(rows: list[dict]) -> dict:
    """Between-evaluation spreads and whether the intervals overlap pairwise (the issue's goal)."""
    ok = [r for r in rows if r.get("candidate")]
    cand = [r["candidate"]["median"] for r in ok]
    out = {"n": len(ok), "candidate_spread_pct": spread_pct(cand),
           "eager_spread_pct": spread_pct([r["eager"]["median"] for r in ok if r.get("eager")]),
           "speedup_spread_pct": spread_pct([r.get("speedup") for r in ok]),
           "speedup_ci_overlap": pairwise_overlap([r.get("speedup_ci") for r in ok]),
           "candidate_ci_overlap": pairwise_overlap([r["candidate"].get("ci") for r in ok]),
           "verdicts": [r.get("quality") for r in ok]}
    # Each evaluation's first round against its later ones (timed on fresh allocations right after):
    # how far the first moved, in %.
    first = []
    for r in ok:
        h = [x["speedup"] for x in r.get("history") or [] if x.get("speedup")]
        if len(h) > 1:
            first.append(round(100 * (h[0] / float(np.median(h[1:])) - 1), 2))
    out["first_round_off_pct"] = first
    s = out["candidate_spread_pct"]
    out["goal_met"] = bool(len(ok) >= 2 and s is not None and s <= GOAL_SPREAD_PCT
                           and out["speedup_ci_overlap"]["all"])
    return out


def summarize_factors(settings: list[dict]) -> dict:
    """Per factor: spread of the candidate's (and eager's) medians across its settings, the fastest
    and slowest setting; and the factors that move the candidate beyond the noise floor."""
    by: dict[str, list[dict]] = {}
    for s in settings:
        if s.get("candidate"):
            by.setdefault(s["factor"], []).append(s)
    out: dict = {}
    for factor, rows in by.items():
        meds = [r["candidate"]["median"] for r in rows]
        out[factor] = {"settings": len(rows), "spread_pct": spread_pct(meds),
                       "eager_spread_pct": spread_pct([r["eager"]["median"] for r in rows if r.get("eager")]),
                       "fastest": rows[int(np.argmin(meds))]["setting"], "slowest": rows[int(np.argmax(meds))]["setting"]}
    floor = (out.get("repeat") or {}).get("spread_pct")
    bar = max(GOAL_SPREAD_PCT, 2 * floor) if floor is not None else GOAL_SPREAD_PCT
    moves = [f for f, v in out.items() if f != "repeat" and v["spread_pct"] is not None and v["spread_pct"] > bar]
    return {"factors": out, "noise_floor_pct": floor, "bar_pct": bar, "moves": moves}


def summarize_processes(rows: list[dict]) -> dict:
    ok = [r for r in rows if r.get("plain")]
    pair = [r for r in ok if r.get("time_pair")]
    return {"n": len(ok), "plain_spread_pct": spread_pct([r["plain"]["candidate"]["median"] for r in ok]),
            "plain_eager_spread_pct": spread_pct([r["plain"]["eager"]["median"] for r in ok]),
            "time_pair_spread_pct": spread_pct([r["time_pair"]["candidate"]["median"] for r in pair]),
            "time_pair_eager_spread_pct": spread_pct([r["time_pair"]["eager"]["median"] for r in pair]),
            "plain_ci_overlap": pairwise_overlap([r["plain"]["candidate"].get("ci") for r in ok])}


# ---- tables -----------------------------------------------------------------------------------------
def _f(x, nd: int = 4) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def _pct(x) -> str:
    return "-" if x is None else f"{x:.2f} %"


def _ci(ci, nd: int = 3) -> str:
    return "-" if not ci else f"[{ci[0]:.{nd}f}–{ci[1]:.{nd}f}]"


def _smi(s) -> str:
    if not s:
        return "-"
    return f"{_f(s.get('sm_mhz'), 0)}/{_f(s.get('max_sm_mhz'), 0)} MHz {_f(s.get('temp_c'), 0)} C {_f(s.get('power_w'), 0)} W"


def _ptrs(p) -> str:
    if not p:
        return "-"
    return f"{p['mod_4k']}/{p['mod_2m']}"


def table_evaluations(name: str, rows: list[dict], summary: dict) -> list[str]:
    lines = [f"### {name}: (a) {len(rows)} evaluations, each with fresh workers", "",
             "| # | status | quality | cand median ms | IQR | min | cand 95 % CI | eager median ms | speedup [95 %] "
             "| SM clock before → after | wall s |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(rows):
        if not r.get("candidate"):
            lines.append(f"| {i} | {r.get('status', '?')} | - | - | - | - | - | - | - | - | {_f(r.get('seconds'), 1)} |  "
                         f"{(r.get('error') or r.get('message') or '')[:80]}")
            continue
        c, e = r["candidate"], r.get("eager") or {}
        lines.append(f"| {i} | {r['status']} | {r.get('quality')} | {_f(c['median'])} | {_f(c['iqr'])} | {_f(c['min'])} "
                     f"| {_ci(c.get('ci'), 4)} | {_f(e.get('median'))} | {_f(r.get('speedup'), 3)} {_ci(r.get('speedup_ci'))} "
                     f"| {_smi(r.get('smi_before'))} → {_smi(r.get('smi_after'))} | {_f(r.get('seconds'), 1)} |")
    plans = sorted({(r.get("memory_plan") or {}).get("summary") for r in rows} - {None})
    lines += [""] + [f"{p}" for p in plans]
    ov = summary["speedup_ci_overlap"]
    if summary["n"] < 2:
        return lines + ["", f"between evaluations: {summary['n']} timed, too few to compare", ""]
    lines += ["", f"between evaluations: candidate medians {_pct(summary['candidate_spread_pct'])} apart, eager "
              f"{_pct(summary['eager_spread_pct'])}, speedups {_pct(summary['speedup_spread_pct'])}; speedup intervals "
              + ("overlap pairwise" if ov["all"] else f"DISJOINT for pairs {ov['disjoint']}")
              + ("" if summary["candidate_ci_overlap"]["all"] else
                 f"; candidate-median intervals disjoint for {summary['candidate_ci_overlap']['disjoint']}"),
              f"goal (medians ≤ {GOAL_SPREAD_PCT:g} % apart, intervals overlapping): "
              + ("MET" if summary["goal_met"] else "NOT MET"), ""]
    return lines


def table_factors(name: str, settings: list[dict], summary: dict) -> list[str]:
    lines = [f"### {name}: (b) one process, one factor at a time", "",
             "| factor | setting | cand median ms | IQR | min | eager median ms | cand/eager | in ptr %4K/%2M "
             "| out ptr %4K/%2M (distinct) | eff. SM MHz |", "|---|---|---|---|---|---|---|---|---|---|"]
    for s in settings:
        if not s.get("candidate"):
            lines.append(f"| {s['factor']} | {s['setting']} | failed: {(s.get('error') or '')[:80]} |||||||| ")
            continue
        c, e = s["candidate"], s.get("eager") or {}
        ratio = c["median"] / e["median"] if e.get("median") else None
        lines.append(f"| {s['factor']} | {s['setting']} | {_f(c['median'])} | {_f(c['iqr'])} | {_f(c['min'])} "
                     f"| {_f(e.get('median'))} | {_f(ratio, 3)} | {_ptrs(s.get('in_ptr'))} "
                     f"| {_ptrs(s.get('out_ptr'))} ({s.get('out_distinct', '-')}) | {_f(s.get('eff_mhz'), 0)} |")
    lines += ["", "| factor | settings | spread of cand medians | spread of eager medians | fastest | slowest |",
              "|---|---|---|---|---|---|"]
    for f, v in summary["factors"].items():
        lines.append(f"| {f} | {v['settings']} | {_pct(v['spread_pct'])} | {_pct(v['eager_spread_pct'])} "
                     f"| {v['fastest']} | {v['slowest']} |")
    lines += ["", f"noise floor (repeat): {_pct(summary['noise_floor_pct'])}; factors beyond "
              f"{_pct(summary['bar_pct'])}: {', '.join(summary['moves']) or 'none'}", ""]
    return lines


def table_processes(name: str, rows: list[dict], summary: dict) -> list[str]:
    lines = [f"### {name}: (c) {len(rows)} fresh processes, no evaluator", "",
             "| proc | plain cand median ms | IQR | min | plain eager ms | time_pair cand ms | time_pair eager ms "
             "| in ptr %4K/%2M | out ptr %4K/%2M | eff. SM MHz |", "|---|---|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(rows):
        if not r.get("plain"):
            lines.append(f"| {i} | failed: {(r.get('error') or '')[:80]} |||||||||")
            continue
        p, t = r["plain"], r.get("time_pair") or {}
        lines.append(f"| {i} | {_f(p['candidate']['median'])} | {_f(p['candidate']['iqr'])} | {_f(p['candidate']['min'])} "
                     f"| {_f(p['eager']['median'])} | {_f((t.get('candidate') or {}).get('median'))} "
                     f"| {_f((t.get('eager') or {}).get('median'))} | {_ptrs(p.get('in_ptr'))} | {_ptrs(p.get('out_ptr'))} "
                     f"| {_f(p.get('eff_mhz'), 0)} |")
    lines += ["", f"between processes: plain candidate {_pct(summary['plain_spread_pct'])} (eager "
              f"{_pct(summary['plain_eager_spread_pct'])}), time_pair candidate {_pct(summary['time_pair_spread_pct'])} "
              f"(eager {_pct(summary['time_pair_eager_spread_pct'])}); plain intervals "
              + ("overlap pairwise" if summary["plain_ci_overlap"]["all"] else
                 f"DISJOINT for {summary['plain_ci_overlap']['disjoint']}"), ""]
    return lines


def table_summary(kernels: dict) -> list[str]:
    lines = ["### summary: spread of candidate medians (max/min − 1)", "",
             "| kernel | between evaluations | eager | intervals overlap | goal | noise floor (one process) "
             "| factors beyond it (spread) | between processes (plain / time_pair) |",
             "|---|---|---|---|---|---|---|---|"]
    for name, k in kernels.items():
        if k.get("skipped"):
            lines.append(f"| {name} | skipped: {k['skipped']} |||||||")
            continue
        ev, fa, pr = k.get("evaluations_summary") or {}, k.get("factors_summary") or {}, k.get("processes_summary") or {}
        moves = ", ".join(f"{m} {_pct(fa['factors'][m]['spread_pct'])}" for m in fa.get("moves", [])) if fa else "-"
        two = ev.get("n", 0) >= 2
        lines.append(f"| {name} | {_pct(ev.get('candidate_spread_pct'))} | {_pct(ev.get('eager_spread_pct'))} "
                     f"| {'-' if not two else 'yes' if ev['speedup_ci_overlap']['all'] else 'NO'} "
                     f"| {'-' if not two else 'met' if ev['goal_met'] else 'NOT met'} | {_pct(fa.get('noise_floor_pct'))} "
                     f"| {moves or 'none'} | {_pct(pr.get('plain_spread_pct'))} / {_pct(pr.get('time_pair_spread_pct'))} |")
    return lines + [""]


def card_name(gpu_name: str | None) -> str:
    """'NVIDIA H100 80GB HBM3' → 'h100' (the results files' suffix)."""
    import re
    m = re.search(r"\b([A-Z]{1,2}\d{2,4}[A-Z]?)\b", gpu_name or "")
    return m.group(1).lower() if m else "gpu"


# ---- the GPU's state, from nvidia-smi (any process; starts no CUDA context) ----------------------------
def _gpu_index() -> str:
    vis = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return vis or "0"


def smi_state() -> dict | None:
    """SM clock, its maximum, temperature, power and active clock-event reasons, or None."""
    try:
        r = subprocess.run(["nvidia-smi", "-i", _gpu_index(), "--query-gpu=clocks.sm,clocks.max.sm,temperature.gpu,"
                            "power.draw,clocks_event_reasons.active,name", "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    f = [x.strip() for x in r.stdout.strip().split(",")] if r.returncode == 0 else []
    if len(f) < 6:
        return None
    num = lambda s: float(s) if s.replace(".", "", 1).isdigit() else None  # noqa: E731
    return {"sm_mhz": num(f[0]), "max_sm_mhz": num(f[1]), "temp_c": num(f[2]), "power_w": num(f[3]),
            "event_reasons": f[4], "name": f[5]}


# ---- (a) full evaluations ----------------------------------------------------------------------------
def run_evaluations(task: str, cand: str, k: int, say, timing: dict | None = None) -> list[dict]:
    from kernelskill.evaluate import evaluate
    from kernelskill.evaluate.options import Options
    from kernelskill.evaluate.worker.timing import TimingConfig
    rows = []
    for i in range(k):
        keep = Path(tempfile.mkdtemp(prefix="probe-eval-"))
        row: dict = {"eval": i, "smi_before": smi_state()}
        t0 = time.perf_counter()
        try:
            res = evaluate(task, Path(cand), opts=Options(device="cuda", keep_dir=keep,
                                                          timing=TimingConfig(**(timing or {}))))
            row.update(eval_row(res, keep))
        except Exception as e:  # noqa: BLE001 — a failed evaluation is a row, and the probe goes on
            row.update(status="error", error=f"{type(e).__name__}: {e}")
        finally:
            import shutil
            shutil.rmtree(keep, ignore_errors=True)
        row["seconds"] = round(time.perf_counter() - t0, 2)
        row["smi_after"] = smi_state()
        c = row.get("candidate") or {}
        say(f"  eval {i + 1}/{k}: {row.get('status')} {row.get('quality') or ''} cand {_f(c.get('median'))} ms, "
            f"speedup {_f(row.get('speedup'), 3)} {_ci(row.get('speedup_ci'))}, {row['seconds']} s")
        rows.append(row)
    return rows


def eval_row(res, keep: Path) -> dict:
    """One evaluation's numbers; the reported round's raw samples from the worker's kept folder."""
    prof = res.profile
    row = {"status": str(res.status), "message": res.message, "flags": list(res.flags), "phases": res.phases}
    if res.verify is not None:        # outputs "recompute": a reference worker shares the GPU with the run worker
        plan = res.verify.memory_plan or {}
        row["memory_plan"] = {k: plan.get(k) for k in ("inputs", "outputs", "rotate", "summary")}
    if prof is None or prof.candidate is None:
        return row
    q = prof.quality
    row.update(quality=q.verdict if q else None, reasons=q.reasons if q else [], rounds=q.rounds if q else None,
               chosen_round=q.chosen_round if q else None, chosen_rounds=(q.chosen_rounds or [q.chosen_round]) if q else None,
               metrics=q.metrics if q else {},
               history=q.history if q else [], speedup=prof.speedup, speedup_ci=list(prof.speedup_ci), cost_s=prof.cost_s,
               reported={"candidate": asdict(prof.candidate), "eager": asdict(prof.baseline) if prof.baseline else None})
    from kernelskill.evaluate.worker.timing import merge_rounds
    # The reported rounds' raw samples, merged as the evaluator merged them.
    rounds = []
    for k in ((q.chosen_rounds or [q.chosen_round]) if q else [0]):
        # The evaluation's own worker's (a race in another worker process keeps its files beside
        # them, its candidate named c0).
        got = [t for t in (json.loads(f.read_text())["times"] for f in sorted(keep.rglob(f"timing_{k}.json")))
               if "candidate" in t]
        if got:
            rounds.append(got[0])
    times = merge_rounds(rounds) if rounds else {}
    for name, reported in (("candidate", prof.candidate), ("eager", prof.baseline)):
        ms = (times.get(name) or {}).get("ms")
        row[name] = sample_stats(ms) if ms else None
        row[f"{name}_ms"] = ms
        if row[name] is not None and reported is not None:
            # The median the evaluator reports (of several rounds: the median of the rounds' own),
            # not the pooled samples' (a round sampled longer would outweigh the others).
            row[name]["median"] = reported.median_ms
    if row["candidate"] is None:      # no raw samples kept: the reported statistics, without an interval
        row["candidate"] = {"median": prof.candidate.median_ms, "iqr": prof.candidate.iqr_ms, "min": prof.candidate.min_ms,
                            "n": prof.candidate.n, "ci": None}
        if prof.baseline:
            row["eager"] = {"median": prof.baseline.median_ms, "iqr": prof.baseline.iqr_ms, "min": prof.baseline.min_ms,
                            "n": prof.baseline.n, "ci": None}
    return row


# ---- (b), (c): the candidate in this process --------------------------------------------------------
@dataclass
class Setting:
    """How one measurement in (b)/(c) is taken; the defaults are the plain setting."""
    pad: int = 0                   # bytes before each input in its buffer
    outputs: str = "reuse"         # reuse (dropped: its block comes back) | per-set (held per set) | ring (8 held)
    flush: bool = True
    sets: int = 1
    empty_cache: bool = False      # before every call
    spacer_gib: float | None = None   # inputs in fresh segments after a spacer of this size
    prelude: bool = False          # the worker's trials (poison, call, copy out) before timing
    loop: str = "simple"           # simple | time_pair


def factor_jobs(quick: bool) -> list[tuple[str, str, Setting]]:
    """(factor, setting, Setting) in the order measured; `repeat` spread over the run."""
    p = Setting()
    pads = [0, 256, 4096, 64 * 1024, 2 * MIB + 256] if not quick else [0, 4096, 2 * MIB + 256]
    groups = [
        [("pad", _bytes(x), replace(p, pad=x)) for x in pads],
        [("outputs", "dropped (block reused)", p),
         ("outputs", "last one held (2 blocks alternate)", replace(p, outputs="per-set")),
         ("outputs", "ring of 8 held", replace(p, outputs="ring"))][: 2 if quick else 3],
        [("flush", "on", p), ("flush", "off", replace(p, flush=False))],
        [("rotation", "1 set", p), ("rotation", "3 sets", replace(p, sets=3))],
        [("empty_cache", "off", p), ("empty_cache", "before each call", replace(p, empty_cache=True))],
        [("placement", f"fresh segments, spacer {g:g} GiB", replace(p, spacer_gib=g))
         for g in ((0, 1, 4) if not quick else (0, 1))],
        [("prelude", "none (3 sets, held per set)", replace(p, sets=3, outputs="per-set", spacer_gib=0)),
         ("prelude", "5 trials + poison first", replace(p, sets=3, outputs="per-set", spacer_gib=0, prelude=True))],
        [("loop", "simple (3 sets, held per set)", replace(p, sets=3, outputs="per-set")),
         ("loop", "timing.time_pair", replace(p, sets=3, loop="time_pair"))],
    ]
    jobs = [("repeat", "plain #1", p)]
    for i, g in enumerate(groups):
        jobs += g
        if i == len(groups) // 2:
            jobs.append(("repeat", "plain #2", p))
    return jobs + [("repeat", "plain #3", p)]


def _bytes(n: int) -> str:
    if n == 0:
        return "0 B"
    if n % MIB == 0 or n > MIB:
        return f"{n // MIB} MiB" + (f" + {n % MIB} B" if n % MIB else "")
    return f"{n // 1024} KiB" if n % 1024 == 0 else f"{n} B"


def _addr(p: int) -> dict:
    return {"ptr": hex(p), "mod_4k": p % 4096, "mod_2m": p % (2 * MIB)}


class Bench:
    """The task's eager model and the candidate's, built as the worker builds them, and their inputs."""

    def __init__(self, task_path: str, cand_path: str, say, device: str = "cuda"):
        import importlib.util

        import torch

        from kernelskill.evaluate.build import extensions as _build
        from kernelskill.evaluate.worker import guards
        from kernelskill.evaluate.worker import trials as trials_mod
        from kernelskill.task import Task
        self.torch, self.say, self.dev = torch, say, device
        task = Task.load(task_path)
        torch.backends.cuda.matmul.allow_tf32 = task.allow_tf32     # as the worker sets them
        torch.backends.cudnn.allow_tf32 = task.allow_tf32
        mod = task.module()
        init = task.init_inputs(mod)
        source = Path(cand_path).read_text()
        t0 = time.perf_counter()
        _build.install(source, _build.BuildLog())            # the evaluator's build cache: a hit after (a)
        spec = importlib.util.spec_from_file_location("probe_candidate", cand_path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["probe_candidate"] = module
        spec.loader.exec_module(module)
        self.build_s = time.perf_counter() - t0
        torch.manual_seed(SEED)
        ref = task.build_model(mod, init=init)
        torch.manual_seed(SEED)
        cand = module.ModelNew(*init)
        guards.align_weights(cand, ref.state_dict())
        self.ref, self.cand = ref.to(self.dev), cand.to(self.dev)       # as the worker: .to(device), nothing else
        self.base = [trials_mod.generate(task, mod, SEED, i, self.dev) for i in range(3)]
        # One buffer per input, allocated once with room for the largest pad: every setting but the
        # placement ones puts its inputs in the same memory, at the offset it asks for.
        self.bufs = [[torch.empty(x.numel() * x.element_size() + PAD_ROOM, dtype=torch.uint8, device=self.dev)
                      if isinstance(x, torch.Tensor) else None for x in xs] for xs in self.base]
        with torch.no_grad():
            want, got = self.ref(*self.base[0]), self.cand(*self.base[0])
            want, got = _first(want), _first(got)
            atol, rtol = task.tolerance
            self.correct = bool(torch.allclose(got, want, atol=atol, rtol=rtol))
            self.max_abs_err = float((got.float() - want.float()).abs().max())
            self.out_bytes = want.numel() * want.element_size()
        del want, got
        l2 = torch.cuda.get_device_properties(0).L2_cache_size or (50 << 20)
        self.flush = torch.empty(int(l2 * 2) // 4, dtype=torch.float32, device=self.dev)   # as timing.time_pair
        self.guards = guards
        self.gpu = torch.cuda.get_device_name()

    def facts(self) -> dict:
        return {"gpu": self.gpu, "correct": self.correct, "max_abs_err": self.max_abs_err, "build_s": round(self.build_s, 2),
                "out_bytes": self.out_bytes, "in_bytes": [x.numel() * x.element_size() for x in self.base[0]
                                                          if isinstance(x, self.torch.Tensor)]}

    def place(self, s: Setting) -> tuple[list, object]:
        """s.sets input sets, copies of the base sets at byte offset s.pad of the probe's own buffers;
        with s.spacer_gib, of fresh buffers in new segments after a spacer (held while timed)."""
        torch = self.torch
        spacer = None
        if s.spacer_gib is not None:
            torch.cuda.empty_cache()
            spacer = torch.empty(int(s.spacer_gib * (1 << 30)), dtype=torch.uint8, device=self.dev) if s.spacer_gib else None
        sets = []
        for i in range(s.sets):
            xs = []
            for j, x in enumerate(self.base[i]):
                if not isinstance(x, torch.Tensor):
                    xs.append(x)
                    continue
                n = x.numel() * x.element_size()
                buf = self.bufs[i][j] if s.spacer_gib is None else torch.empty(n + s.pad, dtype=torch.uint8, device=self.dev)
                y = buf[s.pad:s.pad + n].view(x.dtype).view(x.shape)
                y.copy_(x)
                xs.append(y)
            sets.append(xs)
        return sets, spacer

    def prelude(self, sets: list) -> None:
        """What the run worker does before timing: per trial, clones, poison, a call, the output to the host."""
        torch = self.torch
        with torch.no_grad():
            for i in range(5):
                clones = [x.clone() if isinstance(x, torch.Tensor) else x for x in sets[i % len(sets)]]
                self.guards.poison(self.dev, 2 * self.out_bytes, [self.out_bytes])
                out = _first(self.cand(*clones))
                torch.cuda.synchronize()
                out.cpu()
                del clones, out

    def measure(self, s: Setting, reps: int) -> dict:
        torch = self.torch
        torch.cuda.synchronize()
        sets, spacer = self.place(s)
        if s.prelude:
            self.prelude(sets)
        in_ptr = next((_addr(x.data_ptr()) for x in sets[0] if isinstance(x, torch.Tensor)), None)
        if s.loop == "time_pair":
            from kernelskill.evaluate.worker.timing import TimingConfig, time_pair
            res = time_pair({"eager": self.ref, "candidate": self.cand}, sets, self.dev, TimingConfig())
            ms = {n: res["times"][n]["ms"] for n in ("candidate", "eager")}
            outs = [_first(o).data_ptr() for o in res["last_outputs"]["candidate"].values()]
            del res
        else:
            ms, outs = self.simple_loop(sets, s, reps)
        row = {"candidate": sample_stats(ms["candidate"]), "eager": sample_stats(ms["eager"]),
               "candidate_ms": ms["candidate"], "eager_ms": ms["eager"], "in_ptr": in_ptr,
               "out_ptr": _addr(outs[-1]) if outs else None, "out_distinct": len(set(outs)),
               "out_ptrs": sorted({hex(p) for p in outs})[:16], "eff_mhz": self.effective_mhz(), "smi": smi_state()}
        del sets, spacer
        torch.cuda.synchronize()
        if s.spacer_gib is not None:      # the spacer's cached block would hold later settings' inputs
            torch.cuda.empty_cache()
        return row

    def simple_loop(self, sets: list, s: Setting, reps: int) -> tuple[dict, list]:
        """Candidate and eager interleaved (order alternating), CUDA events around each call, the
        evaluator's L2 flush queued before the start event."""
        from collections import deque
        torch = self.torch
        models = [("candidate", self.cand), ("eager", self.ref)]
        ms = {"candidate": [], "eager": []}
        outs, held, ring = [], {}, deque(maxlen=8)
        flush = self.flush if s.flush else None
        with torch.no_grad():
            t0, i = time.perf_counter(), 0
            while i < 3 or time.perf_counter() - t0 < 0.1:      # warm-up, as timing.time_pair
                for _, fn in models:
                    fn(*sets[i % len(sets)])
                torch.cuda.synchronize()
                i += 1
            for rep in range(reps):
                idx = rep % len(sets)
                for name, fn in (models if rep % 2 == 0 else models[::-1]):
                    if s.empty_cache:
                        torch.cuda.empty_cache()
                    torch.cuda.synchronize()
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    if flush is not None:
                        flush.zero_()
                    start.record()
                    out = fn(*sets[idx])
                    end.record()
                    torch.cuda.synchronize()
                    ms[name].append(start.elapsed_time(end))
                    if name == "candidate":
                        outs.append(_first(out).data_ptr())
                    if s.outputs == "per-set":
                        held[(name, idx)] = out
                    elif s.outputs == "ring":
                        ring.append(out)
                    del out
        del held, ring
        return ms, outs

    def effective_mhz(self, n: int = 5) -> float:
        """The SM clock the GPU ran at just now: a spin of CLOCK_CYCLES cycles timed by events."""
        torch = self.torch
        vals = []
        for _ in range(n):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            torch.cuda._sleep(CLOCK_CYCLES)
            e.record()
            e.synchronize()
            vals.append(CLOCK_CYCLES / s.elapsed_time(e) / 1e3)
        return float(np.median(vals))


def _first(out):
    return out[0] if isinstance(out, (list, tuple)) else out


def child(args) -> int:
    """A fresh process: (b) every factor, or (c) the plain setting and timing.time_pair; JSON to --child-out."""
    say = lambda m: print(f"    [{args.child} pid {os.getpid()}] {m}", file=sys.stderr, flush=True)  # noqa: E731
    out_path = Path(args.child_out)
    result: dict = {"pid": os.getpid(), "settings": []}
    write = lambda: out_path.write_text(json.dumps(result, default=str))  # noqa: E731
    try:
        bench = Bench(args.child_task, args.child_candidate, say)
        result["facts"] = bench.facts()
        write()
        if not bench.correct:
            say(f"WARNING: the candidate differs from eager (max abs err {bench.max_abs_err:.3g}); timing anyway")
        if args.child == "factors":
            jobs = factor_jobs(args.quick)
            for j, (factor, setting, s) in enumerate(jobs):
                t0 = time.perf_counter()
                try:
                    row = bench.measure(s, args.reps)
                except Exception as e:  # noqa: BLE001 — one setting failing (out of memory) leaves the rest
                    row = {"error": f"{type(e).__name__}: {e}"}
                    bench.torch.cuda.empty_cache()
                result["settings"].append({"factor": factor, "setting": setting, "config": asdict(s), **row})
                write()
                c = row.get("candidate") or {}
                say(f"{j + 1}/{len(jobs)} {factor}: {setting}: cand {_f(c.get('median'))} ms "
                    f"({time.perf_counter() - t0:.1f} s)")
        else:
            result["plain"] = bench.measure(Setting(), args.reps)
            result["time_pair"] = bench.measure(Setting(sets=3, loop="time_pair"), args.reps)
            write()
            say(f"plain cand {_f(result['plain']['candidate']['median'])} ms, time_pair cand "
                f"{_f(result['time_pair']['candidate']['median'])} ms")
    except Exception as e:  # noqa: BLE001 — the parent reads the error from the JSON
        import traceback
        result["error"] = f"{type(e).__name__}: {e}"
        result["traceback"] = traceback.format_exc()[-3000:]
        write()
        return 1
    return 0


def run_child(kind: str, task: str, cand: str, args, timeout: float) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = Path(f.name)
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", kind, "--child-task", task,
            "--child-candidate", cand, "--child-out", str(out), "--reps", str(args.reps)] + (["--quick"] if args.quick else [])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    try:
        proc = subprocess.run(argv, env=env, timeout=timeout, stdout=subprocess.DEVNULL)
        data = json.loads(out.read_text()) if out.stat().st_size else {}
        if proc.returncode and "error" not in data:
            data["error"] = f"exit status {proc.returncode}"
    except subprocess.TimeoutExpired:
        data = {"error": f"timed out after {timeout:.0f} s"}
    except (OSError, ValueError) as e:
        data = {"error": f"{type(e).__name__}: {e}"}
    finally:
        out.unlink(missing_ok=True)
    return data


# ---- the run ----------------------------------------------------------------------------------------------
def resolve_kernels(names: list[str], kb40: str, say) -> dict[str, tuple[str, str] | str]:
    """name → (task, candidate) paths, or the reason it is skipped; kb40 falls back to examples/layernorm."""
    out: dict = {}
    for name in names:
        if name not in KERNELS:
            raise SystemExit(f"--kernels: unknown kernel {name!r} (known: {', '.join(KERNELS)})")
        task, cand = KERNELS[name]
        if name == "kb40_layernorm":
            task = kb40
        if not (ROOT / task).exists() and not Path(task).exists():
            why = f"{task} is missing (extract KernelBench into .kb, or pass --kb40 PATH)"
            out[name] = why
            alt = FALLBACK.get(name)
            if alt and alt not in names:
                say(f"note: {name} skipped: {why}; probing {alt} instead")
                out[alt] = tuple(str(ROOT / p) for p in KERNELS[alt])
            else:
                say(f"note: {name} skipped: {why}")
            continue
        out[name] = (str(ROOT / task) if (ROOT / task).exists() else str(Path(task).resolve()), str(ROOT / cand))
    return out


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", default=",".join(DEFAULT_KERNELS),
                    help=f"comma-separated, or 'all' (known: {', '.join(KERNELS)}; default: %(default)s)")
    ap.add_argument("--evals", type=int, default=None, help="full evaluations per kernel, step (a) (default 5; --quick 2)")
    ap.add_argument("--procs", type=int, default=None, help="fresh processes per kernel, step (c) (default 3; --quick 2)")
    ap.add_argument("--reps", type=int, default=None,
                    help="timed calls per model per setting in (b) and (c) (default 40; --quick 20)")
    ap.add_argument("--steps", default=",".join(STEPS), help="which of evals,factors,procs to run (default: all)")
    ap.add_argument("--quick", action="store_true", help="2 evaluations, 2 processes, fewer settings and calls (~2.5 min)")
    ap.add_argument("--no-prestart", action="store_true",
                    help="start each evaluation's workers when it begins (a one-shot `kernelskill eval`); by default "
                         "they are started ahead, as the optimizer does")
    ap.add_argument("--timing", action="append", default=[], metavar="KEY=VALUE",
                    help="a TimingConfig field for the evaluations of (a), e.g. warmup_s=1.0 or rounds=1 (repeatable)")
    ap.add_argument("--no-gpu-state", action="store_true",
                    help="(a) without the round judge's nvidia-smi queries (clocks, pmon) beside each round: "
                         "does querying the GPU move the timing?")
    ap.add_argument("--kb40", default=KB40, help="KernelBench's level1/40_LayerNorm.py (default: %(default)s)")
    ap.add_argument("--out", help="the JSON (default: benchmarks/results/probe_rerun_spread_<card>.json)")
    for name in ("--child", "--child-task", "--child-candidate", "--child-out"):
        ap.add_argument(name, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    a.evals = a.evals if a.evals is not None else (2 if a.quick else 5)
    a.procs = a.procs if a.procs is not None else (2 if a.quick else 3)
    a.reps = a.reps if a.reps is not None else (20 if a.quick else 40)
    a.steps = [s.strip() for s in a.steps.split(",") if s.strip()]
    a.timing_fields = {}
    for kv in a.timing:
        key, _, value = kv.partition("=")
        try:
            a.timing_fields[key.strip()] = json.loads(value)
        except ValueError:
            ap.error(f"--timing {kv}: VALUE must be a number, true/false or null")
    bad = [s for s in a.steps if s not in STEPS]
    if bad:
        ap.error(f"--steps: unknown {bad} (known: {', '.join(STEPS)})")
    return a


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    os.replace(tmp, path)


def _interrupted(signum, frame):
    raise KeyboardInterrupt


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.child:
        return child(args)
    signal.signal(signal.SIGTERM, _interrupted)        # `timeout`'s SIGTERM: print and keep what finished
    say = lambda m: print(m, flush=True)  # noqa: E731
    from kernelskill.evaluate import host as hostinfo
    from kernelskill.evaluate.launch.isolation import prestart_workers, stop_spares
    names = list(KERNELS) if args.kernels == "all" else [n.strip() for n in args.kernels.split(",") if n.strip()]
    kernels = resolve_kernels(names, args.kb40, say)
    smi = smi_state()
    gpu = (smi or {}).get("name")
    out = Path(args.out) if args.out else ROOT / "benchmarks" / "results" / f"probe_rerun_spread_{card_name(gpu)}.json"
    data: dict = {"probe": "probe_rerun_spread", "complete": False, "argv": sys.argv[1:], "gpu": gpu,
                  "started": time.strftime("%Y-%m-%d %H:%M:%S"), "host": hostinfo.host_line(hostinfo.host_busy_cores(1.0), "before"),
                  "prestart": not args.no_prestart, "evals": args.evals, "procs": args.procs, "reps": args.reps,
                  "quick": args.quick, "timing": args.timing_fields, "no_gpu_state": args.no_gpu_state,
                  "smi_start": smi, "kernels": {}}
    if args.no_gpu_state:                  # the round judge (quality.py) reads the GPU's state through this name
        from kernelskill.evaluate.judge import quality
        quality.gpu_state = lambda uuid, pid: None
    say(f"probe_rerun_spread on {gpu or 'an unknown GPU'}: kernels {', '.join(kernels)}; steps {', '.join(args.steps)}; "
        f"{args.evals} evaluations, {args.procs} processes, {args.reps} calls per setting -> {out}")
    say(data["host"])
    t_start = time.perf_counter()
    try:
        for name, spec in kernels.items():
            k = data["kernels"][name] = {}
            if isinstance(spec, str):
                k["skipped"] = spec
                continue
            task, cand = spec
            k.update(task=task, candidate=cand)
            if "evals" in args.steps:
                say(f"[{name}] (a) {args.evals} evaluations ({time.perf_counter() - t_start:.0f} s in)")
                prestart_workers(not args.no_prestart)
                k["evaluations"] = run_evaluations(task, cand, args.evals, say, args.timing_fields)
                prestart_workers(False)
                stop_spares()           # no idle worker beside the probe's own processes
                k["evaluations_summary"] = summarize_evaluations(k["evaluations"])
                write_json(out, data)
            if "factors" in args.steps:
                say(f"[{name}] (b) factors in one process ({time.perf_counter() - t_start:.0f} s in)")
                r = run_child("factors", task, cand, args, timeout=600)
                k["factors"] = r
                if r.get("error"):
                    say(f"  (b) failed: {r['error']}")
                k["factors_summary"] = summarize_factors(r.get("settings") or [])
                write_json(out, data)
            if "procs" in args.steps:
                say(f"[{name}] (c) {args.procs} fresh processes ({time.perf_counter() - t_start:.0f} s in)")
                k["processes"] = []
                for i in range(args.procs):
                    r = run_child("simple", task, cand, args, timeout=300)
                    if r.get("error"):
                        say(f"  process {i + 1} failed: {r['error']}")
                    k["processes"].append(r)
                    k["processes_summary"] = summarize_processes(k["processes"])
                    write_json(out, data)
            for line in kernel_tables(name, k):
                print(line)
        data["complete"] = True
    except KeyboardInterrupt:
        say("\ninterrupted: the tables and JSON hold what finished")
    finally:
        data["seconds"] = round(time.perf_counter() - t_start, 1)
        data["smi_end"] = smi_state()
        write_json(out, data)
        print("\n".join(table_summary(data["kernels"])))
        say(f"{'complete' if data['complete'] else 'INCOMPLETE'} after {data['seconds']} s; JSON: {out}")
    return 0 if data["complete"] else 1


def kernel_tables(name: str, k: dict) -> list[str]:
    lines = [""]
    if k.get("evaluations") is not None:
        lines += table_evaluations(name, k["evaluations"], k["evaluations_summary"])
    if k.get("factors") is not None:
        f = k["factors"]
        facts = f.get("facts") or {}
        lines.append(f"(b) candidate correct: {facts.get('correct')} (max abs err {facts.get('max_abs_err')}); "
                     f"build/load {facts.get('build_s')} s" + (f"; ERROR {f['error']}" if f.get("error") else ""))
        lines += table_factors(name, f.get("settings") or [], k["factors_summary"])
    if k.get("processes") is not None:
        lines += table_processes(name, k["processes"], k["processes_summary"])
    return lines


if __name__ == "__main__":
    sys.exit(main())
