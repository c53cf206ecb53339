"""``kernelskill bench SUITE``: every task of a suite through an executor, with KernelBench's metrics.

Parses, calls ``kernelskill.bench``, prints; the progress display lives here too.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import threading
import time
from pathlib import Path

from ..errors import UserError
from ..bench.executors import RUNNING, _clock
from ..bench.store import Row
from kernelskill.evaluate.judge.roofline import fraction_text

EPILOG = """examples:
  kernelskill bench examples                          # the shipped solutions on this machine's device
  kernelskill bench examples --levels 1 --limit 5 --json
  kernelskill bench examples --include-wrong --md      # the wrong solutions too: each gets its expected verdict?
  kernelskill bench examples --device cuda --baseline both     # also the speedup vs torch.compile
  kernelskill bench examples --shapes auto             # also: does each solution work at other sizes?
  kernelskill bench examples --executor ray --ray-address auto # the same jobs on a Ray cluster
  kernelskill bench KernelBench/level1 --optimize --limit 10 --base-url http://localhost:8000/v1 \\
      --model qwen2.5-coder-32b --budget 20
  kernelskill bench KernelBench --levels 1,2,3 --reference   # no LLM: each reference, timed; OUT/baseline.json
  kernelskill bench KernelBench --solutions --compare OUT/baseline.json   # scored against that baseline

SUITE is `examples` (the shipped suite), a directory of task directories (task.toml, reference.py,
solutions/) or a directory of plain KernelBench files (level1/19_ReLU.py; solutions of a plain file,
if any, in level1/solutions/19_ReLU/*.py). --solutions evaluates each task's solutions for the
device (cpu: C++; cuda: CUDA and Triton); --optimize lets the agents write them; --reference
evaluates each task's reference as its own candidate (verdict against itself, eager and
torch.compile times, roofline floor and fraction, bottleneck, op classes) and writes a baseline
file that --compare scores any later run against (fast_p vs eager and vs torch.compile).

Metrics (KernelBench's): n tasks (a task without a solution counts), correct_rate = correct / n,
fast_p = (correct and speedup > p) / n for p = 0, 1, 1.5, 2, geomean_speedup over correct tasks.

Results: one JSON line per finished job in OUT/results.jsonl (OUT: --out, default
bench-runs/<suite>-<device>-<preset>); the same command again skips every finished job (--fresh
starts over); OUT/report.md and OUT/report.json are rewritten at the end.

Exit codes: 0 every solution got its expected verdict (solutions/: ok; solutions/wrong/: its
`# expect:` line; --optimize: a verified candidate per task; --reference: every task a verdict of
its own, ok or stochastic); 1 some did not; 2 usage error;
130 interrupted (every finished job is kept for the rerun)."""


class Progress:
    """done/total, ok count, elapsed and ETA on stderr: one line redrawn on a terminal, else a
    line per finished job (logs, CI)."""

    def __init__(self, stream=None, slots: int = 1):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.slots = max(1, slots)            # jobs that run at once
        self.total = self.done = self.ok = 0
        self.busy = 0.0                       # seconds the finished jobs took, summed
        self.started = self.last_line = time.monotonic()
        self._open = False
        self._lock = threading.RLock()        # the heartbeat's thread prints too

    def start(self, total: int, reused: int, store: Path) -> None:
        self.total, self.started = total, time.monotonic()
        self.last_line = self.started
        if reused:
            self.note(f"reused {reused} of {reused + total} jobs from {store}; running {total}")
        elif total:
            self.note(f"running {total} jobs")

    def __call__(self, job, row: Row) -> None:
        with self._lock:
            self._finished(job, row)

    def _finished(self, job, row: Row) -> None:
        self.done += 1
        self.ok += row.status == "ok"
        self.busy += row.seconds or 0.0
        elapsed = time.monotonic() - self.started
        # From the jobs' own durations, not the wall clock: the pool's build phase comes first.
        eta = self.busy / self.done * (self.total - self.done) / self.slots
        sp = row.speedup
        what = row.status + (f" {sp:.2f}×" if sp is not None else "")
        if job.expected != "ok":                  # a wrong solution: its verdict is the point
            what += " (as expected)" if row.status == job.expected else f" (expected {job.expected})"
        text = (f"[{self.done}/{self.total}] {self.ok} ok · {_clock(elapsed)} elapsed · ETA {_clock(eta)} · "
                f"{job.task} {job.solution}: {what}")
        if self.tty:
            self.stream.write("\r\x1b[K" + text[:160])
            self.stream.flush()
            self._open = True
        else:
            print(text, file=self.stream, flush=True)
        self.last_line = time.monotonic()

    def note(self, text: str) -> None:
        with self._lock:
            self.close()
            print(text, file=self.stream, flush=True)
            self.last_line = time.monotonic()

    # A job that runs long leaves the display still: every QUIET seconds without a finished job,
    # a line names what is running and for how long (the local and pool executors).
    QUIET = 60.0

    def beat(self, running: list[tuple[str, str, float]], now: float | None = None) -> bool:
        """Print the running jobs if nothing was printed for QUIET seconds; whether it printed."""
        now = time.monotonic() if now is None else now
        if not running or now - self.last_line < self.QUIET:
            return False
        jobs = "; ".join(f"{label} on {device} for {_clock(secs)}" for label, device, secs in running[:4])
        more = f" (+{len(running) - 4} more)" if len(running) > 4 else ""
        self.note(f"  … {_clock(now - self.started)} elapsed, running: {jobs}{more}")
        return True

    def close(self) -> None:
        if self._open:
            self.stream.write("\n")
            self.stream.flush()
            self._open = False


def _levels(text: str | None) -> set[int] | None:
    if not text:
        return None
    try:
        return {int(x) for x in text.split(",") if x.strip()}
    except ValueError:
        raise UserError(f"--levels {text!r}: expected numbers separated by commas, e.g. 1,2") from None


def _optimize_config(args):
    """The optimizer's config (files, env, then these flags), its endpoint checked before any run."""
    from ..config import load_config
    from ..llm import make_llm
    flags = {"llm.base_url": args.base_url, "llm.model": args.model, "llm.api_key_env": args.api_key_env,
             "budget.attempts": args.budget, "eval.trials": args.trials, "eval.time_cap_s": args.time_cap}
    config = load_config(flags)
    make_llm(config).check()
    return config


def _stored_device(out: str | None) -> str:
    """--report-only --device auto: the device kind of the stored rows (cuda or cpu)."""
    path = Path(out or "") / "results.jsonl"
    if not out or not path.is_file():
        raise UserError(f"--report-only: no {path if out else 'OUT/results.jsonl'} to report; pass --out DIR of a "
                        f"bench run (its results.jsonl)")
    return "cuda" if '"device": "cuda' in path.read_text(encoding="utf-8") else "cpu"


def setup(args):
    """(suite, settings, executor, plans, out dir, preset label) from the flags; UserError on a mistake."""
    from ..bench import DEFAULT_TIMING, BenchSettings, plan
    from kernelskill.evaluate.api import resolve_device
    from ..bench.executors import cpu_cores, make_executor
    from ..bench.suite import discover, resolve_suite, select
    if args.limit is not None and args.limit < 1:
        raise UserError(f"--limit {args.limit}: expected 1 or more")
    suite = resolve_suite(args.suite)
    tasks = select(discover(suite), _levels(args.levels), args.limit)
    # A Ray driver may sit on a machine without the GPUs its cluster has: cuda is not checked here.
    remote_gpu = args.executor == "ray" and args.device.startswith("cuda")
    if args.report_only:            # no device needed: the rows say where they ran
        device = args.device if args.device != "auto" else _stored_device(args.out)
    else:
        device = args.device if remote_gpu else resolve_device(args.device)
    mode = "optimize" if args.optimize else "reference" if args.reference else "solutions"
    if mode == "solutions" and not args.solutions and not any(t.has_solutions() for t in tasks):
        raise UserError(f"{suite}: no task here has solutions to evaluate; pass --reference to evaluate and time "
                        f"each task's reference (no LLM), or --optimize to let the agents write solutions "
                        f"(with --base-url and --model, or [llm] in kernelskill.toml)")
    env = {}
    settings = BenchSettings(device=device, mode=mode, preset=args.preset, include_wrong=args.include_wrong,
                             baseline=args.baseline, flags=args.flags, trials=args.trials or 5, shapes=args.shapes,
                             timing={**DEFAULT_TIMING, **({"time_cap_s": args.time_cap} if args.time_cap else {}),
                                     # A reference timed against itself: its speedup is a check on the
                                     # harness, not a decision; one worker process times it.
                                     **({"processes": 1} if mode == "reference" else {})})
    if args.optimize:
        config = _optimize_config(args)
        settings.optimize_config = config.data      # plain tables: they travel to the bench's workers (Ray too)
        key_env = config.llm.api_key_env
        env = {key_env: os.environ[key_env]} if key_env else {}     # Ray workers read the key by that name
    executor = make_executor("local" if args.report_only else args.executor, device,
                             workers=None if args.report_only else args.workers, jobs=args.jobs,
                             ray_address=args.ray_address, env=env)
    settings.threads = executor.threads() or (None if settings.device_kind == "cuda" else cpu_cores())
    plans = plan(tasks, settings)
    label = args.preset or ("small" if any(p.preset == "small" for p in plans) else "default")
    out = Path(args.out) if args.out else Path("bench-runs") / (
        f"{suite.name}-{device.replace(':', '')}-{label}" + ("" if mode == "solutions" else f"-{mode}"))
    settings.runs_dir = str(out / "runs")
    for p in plans:
        for j in p.jobs:
            if j.kind == "optimize":
                j.runs_dir = settings.runs_dir
    return suite, settings, executor, plans, out, label


def cmd_bench(args) -> int:
    from ..bench import ResultStore, all_as_expected, all_evaluated, run, stored, summarize, task_rows, unique_jobs
    from ..bench import baseline as baselines
    from ..bench.report import machine_info, report_markdown, rows_machine
    suite, settings, executor, plans, out, label = setup(args)
    base = baselines.load(Path(args.compare)) if args.compare else None
    if base is not None and not args.report_only:     # a bad file, or another device, fails before any run
        baselines.check_machine(base, machine_info(executor), args.compare_any_machine)
    store = ResultStore(out / "results.jsonl")
    progress = Progress(slots=len(executor.slots()) if executor.name == "pool" else (args.workers or 1))
    started = time.monotonic()
    quiet = threading.Event()

    def heartbeat() -> None:                 # what runs, when nothing has finished for a minute
        while not quiet.wait(5.0):
            progress.beat(RUNNING.now())
    threading.Thread(target=heartbeat, daemon=True, name="kernelskill-bench-heartbeat").start()
    try:
        if args.report_only:
            records, reused = stored(plans, store)
        else:
            records, reused = run(plans, executor, store, fresh=args.fresh, on_result=progress, note=progress.note,
                                  on_start=lambda total, reused: progress.start(total, reused, store.path))
    except KeyboardInterrupt:
        progress.note(f"interrupted: {progress.done} finished jobs are kept in {store.path}; "
                      f"run the same command again to go on")
        raise
    finally:
        quiet.set()
    progress.close()
    rows = task_rows(plans, records)
    doc = {"suite": str(suite), "device": settings.device, "preset": label, "mode": settings.mode,
           "out": str(out), "machine": rows_machine(rows) if args.report_only else machine_info(executor),
           "settings": {"trials": settings.trials, "timing": settings.timing, "baseline": settings.baseline,
                        **({"shapes": settings.shapes} if settings.shapes else {}),
                        "include_wrong": settings.include_wrong, "executor": executor.name,
                        "threads": settings.threads},
           "summary": summarize(rows), "tasks": rows, "jobs": len(unique_jobs(plans)), "reused": reused,
           "evaluated": progress.done, "seconds": round(time.monotonic() - started, 1),
           "finished": time.strftime("%Y-%m-%dT%H:%M:%S")}
    if base is not None:
        doc["compare"] = baselines.compare(rows, doc, base, any_machine=args.compare_any_machine)
    out.mkdir(parents=True, exist_ok=True)
    if settings.mode == "reference":
        doc["baseline_file"] = str(baselines.write(doc, out / "baseline.json"))
    (out / "report.md").write_text(report_markdown(doc), encoding="utf-8")
    (out / "report.json").write_text(json.dumps(doc, indent=2, default=str), encoding="utf-8")
    _print(doc, args)
    if settings.mode == "reference":
        return 0 if all_evaluated(rows) else 1
    return 0 if all_as_expected(rows) else 1


def _print(doc: dict, args) -> None:
    from ..bench.report import (CSV_FIELDS, reference_line, reference_markdown, shapes_line, summary_line,
                                tasks_markdown)
    rows = doc["tasks"]
    reference = doc["mode"] == "reference"
    summary = reference_line(doc["summary"]) if reference else summary_line(doc["summary"])
    if not reference and shapes_line(doc["summary"]):
        summary += "\n" + shapes_line(doc["summary"])
    if doc.get("compare"):
        from ..bench.baseline import compare_line
        summary += "\n" + compare_line(doc["compare"])
    if args.json:
        print(json.dumps(doc, default=str), flush=True)
    elif args.csv:
        w = csv.DictWriter(sys.stdout, fieldnames=CSV_FIELDS, extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    elif args.md:
        print(reference_markdown(rows) if reference else tasks_markdown(rows, doc["settings"]["baseline"] != "eager"))
        print(f"\n{summary}")
    elif reference:
        print(f"{'task':<34} {'level':>5}  {'verdict':<12} {'eager ms':>9} {'compile ms':>10} {'floor ms':>9} "
              f"{'of floor':>8}  {'bottleneck':<14} op classes")
        f = lambda v, spec: format(v, spec) if v is not None else "-"  # noqa: E731
        for r in rows:
            print(f"{r['task'][:34]:<34} {str(r['level'] or '-'):>5}  {r['status'][:12]:<12} "
                  f"{f(r.get('eager_ms'), '.3f'):>9} {f(r.get('compile_ms'), '.3f'):>10} {f(r.get('floor_ms'), '.3f'):>9} "
                  f"{f(r.get('eager_fraction'), '.0%'):>8}  {(r.get('bottleneck') or '-'):<14} "
                  f"{', '.join(r.get('op_classes') or []) or '-'}")
            if r["status"] not in ("ok",):
                print(f"{'':<42}{r['message'][:110]}")
            elif (r.get("eager_fraction") or 0) > 1:      # above the roof: never a bare number
                print(f"{'':<42}eager {fraction_text(r, 'eager_fraction', what='')}")
        print(f"\n{summary}")
        print(f"report: {Path(doc['out']) / 'report.md'}; baseline: {doc.get('baseline_file')} "
              f"({doc['evaluated']} run, {doc['reused']} reused, {doc['seconds']:.0f} s)")
    else:
        vs_compile = doc["settings"]["baseline"] != "eager"
        print(f"{'task':<28} {'level':>5}  {'status':<14} {'speedup':>8}" + ("  vs compile" if vs_compile else "")
              + f" {'custom':>7}  solution")
        for r in rows:
            sp = f"{r['speedup']:.2f}×" if r["speedup"] is not None else "-"
            vc = f"  {r['speedup_vs_compile']:>9.2f}×" if r["speedup_vs_compile"] else ("  " + " " * 9 + "-"
                                                                                       if vs_compile else "")
            cs = f"{r['custom_share']:.0%}" if r["custom_share"] is not None else "-"
            detail = r["solution"] or (r["message"][:60] if r["status"] != "ok" else "")
            if r.get("generalizes"):              # --shapes: the best solution's label
                detail += f" (other shapes: {r['generalizes']})"
            print(f"{r['task'][:28]:<28} {str(r['level'] or '-'):>5}  {r['status']:<14} {sp:>8}{vc} {cs:>7}  {detail}")
        print(f"\n{summary}")
        print(f"report: {Path(doc['out']) / 'report.md'} ({doc['evaluated']} run, {doc['reused']} reused, "
              f"{doc['seconds']:.0f} s)")


def add_parser(sub) -> None:
    """Register ``bench``."""
    p = sub.add_parser("bench", help="evaluate a suite of tasks (the shipped examples, KernelBench) with "
                       "KernelBench's metrics", description="Run every task of SUITE — its shipped solutions, or "
                       "the optimizer — through an executor, and report correct_rate, fast_p and the geometric "
                       "mean speedup.", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("suite", help="`examples`, or a directory of task directories or KernelBench files")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--solutions", action="store_true", help="evaluate each task's solutions/ (the default "
                      "when the suite has any)")
    mode.add_argument("--optimize", action="store_true", help="run the optimizer on each task; report its best "
                      "verified candidate")
    mode.add_argument("--reference", action="store_true", help="each task's reference as its own candidate (no "
                      "LLM, no solutions): its verdict against itself, eager (and torch.compile) time, roofline "
                      "floor and fraction, bottleneck, op classes; writes OUT/baseline.json")
    p.add_argument("--include-wrong", action="store_true", help="also the solutions/wrong/ files: each must get "
                   "the verdict its `# expect:` line names")
    p.add_argument("--levels", metavar="1,2,3", help="only tasks of these levels")
    p.add_argument("--limit", type=int, metavar="N", help="the first N tasks (after --levels)")
    p.add_argument("--device", default="auto", help="cpu, cuda or cuda:N (default: cuda when a GPU is present)")
    p.add_argument("--preset", help="a size preset of every task (default on a CPU: small, where a task has it)")
    p.add_argument("--baseline", choices=("eager", "compile", "both"), default="eager",
                   help="baselines timed with each solution: eager always; compile/both add torch.compile")
    p.add_argument("--flags", choices=("default", "strict"), default="default",
                   help="PyTorch backend flags the timings run under: default (PyTorch's own, as a user's process has "
                   "them) or strict (TF32 off everywhere; speedups say so)")
    p.add_argument("--trials", type=int, metavar="N", help="correctness trials per solution (default 5)")
    p.add_argument("--shapes", metavar="auto|PRESETS", help="each solution correct at the task's sizes is checked "
                   "again at derived shapes (auto: the task's other presets, each size constant halved, doubled and "
                   "made a prime; or preset names, small,large) and labelled generalizes yes, specialised (a clean "
                   "refusal) or no (a wrong value or crash there: its verdict fails); the summary gives the share "
                   "that generalize. Default off")
    p.add_argument("--time-cap", type=float, metavar="S",
                   help=f"seconds of timing per model at most (default {3.0:g})")
    g = p.add_argument_group("executors")
    g.add_argument("--executor", choices=("local", "pool", "ray"), default="pool",
                   help="local: one job after another; pool (default): builds in parallel on the CPU cores, then "
                   "one timing worker per GPU (or --workers on a CPU); ray: Ray tasks, one GPU each")
    g.add_argument("--workers", type=int, metavar="N", help="pool/ray on a CPU: evaluations at once, each with "
                   "cores/N threads (default 1: precise timings); pool on CUDA: the first N GPUs")
    g.add_argument("--jobs", type=int, metavar="N", help="pool: builds at once (default: every core)")
    g.add_argument("--ray-address", metavar="ADDR", help="a Ray cluster (e.g. auto, ray://head:10001); default: "
                   "start a local Ray for this bench")
    g = p.add_argument_group("results")
    g.add_argument("--out", metavar="DIR", help="results.jsonl, report.md and report.json (default "
                   "bench-runs/<suite>-<device>-<preset>)")
    g.add_argument("--fresh", action="store_true", help="ignore finished results in OUT; run everything again")
    g.add_argument("--report-only", action="store_true", help="run nothing: write report.md, report.json (and "
                   "baseline.json with --reference) from OUT/results.jsonl, on any machine (e.g. after chunks run "
                   "on a GPU host); give the run's flags (--levels, --baseline, ...) so its rows are found")
    g.add_argument("--compare", metavar="BASELINE", help="score this run against a baseline file (OUT/baseline.json "
                   "of a --reference run): fast_p and geomean against its eager and torch.compile times, verdicts "
                   "that changed")
    g.add_argument("--compare-any-machine", action="store_true", help="compare with a baseline measured on "
                   "another device (refused otherwise: times from two devices are not comparable)")
    fmt = g.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print one JSON object: suite, device, machine, summary, "
                     "tasks")
    fmt.add_argument("--csv", action="store_true", help="print one CSV row per task")
    fmt.add_argument("--md", action="store_true", help="print the markdown table")
    g = p.add_argument_group("--optimize")
    g.add_argument("--model", help="LLM model (all roles unless [llm.roles.*] say otherwise)")
    g.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1")
    g.add_argument("--api-key-env", metavar="VAR", help="name of the environment variable that holds the API key")
    g.add_argument("--budget", type=int, metavar="N", help="attempts per task at most (default 30)")
    p.set_defaults(func=cmd_bench)
