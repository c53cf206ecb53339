"""What ``kernelskill bench`` prints and writes: the summary line, markdown tables, report.md and
the machine the numbers come from."""
from __future__ import annotations

import contextlib
from collections import Counter
from pathlib import Path

from kernelskill.evaluate.judge.roofline import fraction_text
from ..vocab import EVALUATED, Status


def _x(v: float | None) -> str:
    return f"{v:.2f}×" if v is not None else "-"


def _pct(v: float | None) -> str:
    return f"{v:.0%}" if v is not None else "-"


def _ms(v: float | None) -> str:
    return f"{v:.3f}" if v is not None else "-"


def summary_line(s: dict) -> str:
    """``n 3 · correct 2 (67%) · fast_1 67% · fast_1.5 33% · fast_2 0% · geomean 1.42×``; with tasks
    that have no solution for the device, ``correct 14 (58%: 14 of the 14 run; 10 tasks have no
    solution for this device and count as not solved)``."""
    apart = s.get("timing_not_good") or 0
    # Tasks with no solution for the device count in n as not solved (KernelBench's rule); said
    # next to the rate, so that 14 of 14 solutions passing does not read as 58 % correct.
    none = (s.get("statuses") or {}).get("no_solution", 0)
    ran = s["n"] - none
    rate = (f"{s['correct_rate']:.0%}: {s['correct']} of the {ran} run; {none} task{'s' if none != 1 else ''} "
            f"{'have' if none != 1 else 'has'} no solution for this device and count{'' if none != 1 else 's'} "
            "as not solved" if none else f"{s['correct_rate']:.0%}")
    return (f"n {s['n']} · correct {s['correct']} ({rate}) · fast_0 {s['fast_0']:.0%} · "
            f"fast_1 {s['fast_1']:.0%} · fast_1.5 {s['fast_1_5']:.0%} · fast_2 {s['fast_2']:.0%} · "
            f"geomean {_x(s['geomean_speedup'])}"
            + (f" (clipped {_x(s['geomean_speedup_clipped'])})"
               if s.get("geomean_speedup_clipped") and s["geomean_speedup_clipped"] != s["geomean_speedup"] else "")
            + (f" · beyond the roofline floor (physically impossible): {', '.join(s['impossible_tasks'][:5])}"
               if s.get("impossible_tasks") else "")
            + (f" · timing not good on {apart} task(s), counted apart: "
               f"{', '.join(s.get('timing_not_good_tasks', [])[:5])}" if apart else ""))


def _shapes_counts_text(c: dict) -> str:
    return (f"{c['yes']} of {c['checked']} ({_pct(c['share'])}) · specialised {c['specialised']} · "
            f"incorrect at a shape {c['no']}")


def shapes_line(s: dict) -> str | None:
    """``--shapes``: ``generalize: 1 of 2 (50%) · specialised 1 · incorrect at a shape 0`` — of the
    solutions correct at the task's sizes and checked at derived shapes — then per backend when
    there are several; None when no solution was checked (a run without --shapes)."""
    sh = s.get("shapes")
    if not sh:
        return None
    text = "generalize to other shapes: " + _shapes_counts_text(sh) + " (correct solutions checked at derived shapes)"
    if sh.get("none_ran"):
        text += f" · {sh['none_ran']} with no shape run (the reference runs at none): not counted"
    by = sh.get("by_backend") or {}
    if len(by) > 1:
        text += " · " + "; ".join(f"{b}: {_shapes_counts_text(c)}" for b, c in by.items())
    return text


def _sp(r: dict) -> str:
    """A speedup with its interval, marked when its measurement was not good."""
    text = _x(r.get("speedup")) + (f" [{r['ci'][0]:.2f}–{r['ci'][1]:.2f}]" if r.get("speedup") and r.get("ci") else "")
    return text + (f" ({r['quality']})" if r.get("quality") not in ("good", None) else "")


def tasks_markdown(rows: list[dict], compile_column: bool = False) -> str:
    head = ["task", "level", "status", "speedup vs eager"] + (["vs torch.compile"] if compile_column else []) + \
        ["custom share", "eager (ms)", "best solution"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["task"], str(r["level"] if r["level"] is not None else "-"), r["status"], _sp(r)]
        cells += [_x(r["speedup_vs_compile"])] if compile_column else []
        cells += [_pct(r["custom_share"]), _ms(r["eager_ms"]), r["solution"] or "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _classes(r: dict) -> str:
    return ", ".join(r.get("op_classes") or []) or ("?" if r.get("op_classes") is None else "-")


def reference_markdown(rows: list[dict]) -> str:
    """A --reference run: what each task's reference costs and where its floor lies."""
    lines = ["| task | level | verdict | eager (ms) | torch.compile (ms) | floor (ms) | eager / floor | bottleneck | "
             "op classes | seconds |", "|" + "---|" * 10]
    for r in rows:
        verdict = r["status"] + ("" if r["status"] in ("ok",) else f": {_short(r['message'])}")
        lines.append(f"| {r['task']} | {r['level'] if r['level'] is not None else '-'} | {verdict} | "
                     f"{_ms(r.get('eager_ms'))} | {_ms(r.get('compile_ms'))} | {_ms(r.get('floor_ms'))} | "
                     f"{fraction_text(r, 'eager_fraction', what='') if r.get('eager_fraction') is not None else '-'} | "
                     f"{r.get('bottleneck') or '-'} | {_classes(r)} | "
                     f"{_s(r.get('seconds'))} |")
    return "\n".join(lines)


def reference_line(s: dict) -> str:
    """``n 250 · evaluated 249 (ok 248, stochastic 1) · task_error 1 · torch.compile faster on 120 of 200 …``."""
    st = s["statuses"]
    done = sum(st.get(k, 0) for k in EVALUATED)
    rest = " · ".join(f"{k} {v}" for k, v in st.items() if k not in EVALUATED)
    text = (f"n {s['n']} · evaluated {done} (ok {st.get(Status.ok, 0)}, stochastic {st.get(Status.stochastic, 0)})"
            + (f" · {rest}" if rest else ""))
    c = s.get("compile_over_eager")
    if c:
        text += f" · torch.compile faster than eager on {c['faster']} of {c['n']} (geomean {_x(c['geomean'])})"
    if s.get("bottlenecks"):
        text += " · " + ", ".join(f"{k} {v}" for k, v in s["bottlenecks"].items())
    text += f" · {s.get('job_seconds', 0):.0f} s of evaluation"
    steps = s.get("phase_seconds") or {}
    total = sum(steps.values())
    if total > 0:
        text += " (" + ", ".join(f"{k} {v / total:.0%}" for k, v in list(steps.items())[:3]) + ")"
    return text


def _short(text: str, n: int = 90) -> str:
    text = " ".join((text or "").split()).replace("|", "/")
    return text if len(text) <= n else text[: n - 1] + "…"


def _s(v: float | None) -> str:
    return f"{v:.0f}" if v is not None else "-"


def solutions_markdown(rows: list[dict]) -> str:
    """Every solution: examples_table's table (verdict, eager and solution times, speedup with CI);
    with --shapes, a column: generalizes (yes, specialised, no; - unchecked) and its summary."""
    sols = [s for row in rows for s in row["solutions"]]
    shapes = any(s.get("generalizes") for s in sols)
    lines = ["| task | level | solution | verdict | eager (ms) | solution (ms) | speedup [95% CI] | custom share |"
             + (" other shapes |" if shapes else ""), "|---|---|---|---|---|---|---|---|" + ("---|" if shapes else "")]
    for r in sols:
        sp = _sp(r)
        verdict = r["status"] + ("" if r["as_expected"] else f" (expected {r['expected']})")
        gen = (f" {r['generalizes']}: {_short(r.get('shapes_summary') or '', 70)} |" if r.get("generalizes")
               else " - |") if shapes else ""
        lines.append(f"| {r['task']} | {r['level']} | {r['solution']} | {verdict} | {_ms(r['eager_ms'])} | "
                     f"{_ms(r['cand_ms'])} | {sp} | {_pct(r['custom_share'])} |" + gen)
    return "\n".join(lines)


def verdicts_line(s: dict) -> str:
    """examples_table's last line: verdicts as expected, honest solutions rejected, faster than eager."""
    v = s["verdicts"]
    return (f"{v['as_expected']}/{v['solutions']} verdicts as expected; false positives on honest solutions: "
            f"{v['honest_rejected']}; faster than eager: {v['faster_than_eager']}/{v['honest']}")


CSV_FIELDS = ("task", "level", "preset", "status", "speedup", "quality", "speedup_vs_compile", "custom_share", "eager_ms",
              "compile_ms", "floor_ms", "eager_fraction", "bottleneck", "solution", "message", "generalizes")


def row_gpus_lines(doc: dict) -> list[str]:
    """Where the rows were measured, when that is not just this run's machine: a resumed run
    reuses rows that an earlier chunk measured, perhaps on another kind of GPU."""
    counts = Counter(r["gpu"] for r in doc["tasks"] if r.get("gpu"))
    this_run = not doc["machine"]["executor"].startswith("none")       # not --report-only
    if not counts or (this_run and len(counts) == 1 and set(counts) == set(doc["machine"]["gpus"])):
        return []
    return ["- rows measured on: " + ", ".join(f"{g} ({n})" for g, n in counts.most_common()) +
            " — reused rows keep the GPU that measured them; compare times only within one GPU"]


def report_markdown(doc: dict) -> str:
    """``report.md``: settings, machine, summary, the task table and every solution."""
    m, s, cfg = doc["machine"], doc["summary"], doc["settings"]
    gpus = f"; GPUs: {', '.join(m['gpus'])}" if m["gpus"] else ""
    cuda = f", CUDA {m['cuda']}" if m["cuda"] else ""
    timing = ", ".join(f"{k} {v:g}" for k, v in cfg["timing"].items())
    if m["executor"].startswith("none"):      # --report-only: no run here, the rows' GPUs below
        where = [f"- device: {doc['device']} · preset: {doc['preset']} · mode: {doc['mode']} · written by "
                 f"--report-only from results.jsonl"]
    else:
        where = [f"- device: {doc['device']} · preset: {doc['preset']} · mode: {doc['mode']} · executor: "
                 f"{m['executor']} ({len(m['slots'])} timing slot(s), {m['threads'] or 'all'} threads each)",
                 f"- machine: {m['cpu']}, {m['cores']} cores{gpus}; torch {m['torch']}{cuda}"]
    lines = [f"# kernelskill bench: {doc['suite']}", "", *where,
             *row_gpus_lines(doc),
             f"- timing: {timing}; {cfg['trials']} trials; baseline {cfg['baseline']}",
             f"- finished {doc['finished']}; {doc['evaluated']} jobs run, {doc['reused']} reused from results.jsonl",
             "", "## Summary", ""]
    if doc.get("mode") == "reference":       # a reference against itself: no speedup to score
        lines += [reference_line(s)]
    else:
        lines += [summary_line(s), "",
                  "| n | correct_rate | fast_0 | fast_1 | fast_1_5 | fast_2 | geomean_speedup |",
                  "|---|---|---|---|---|---|---|",
                  f"| {s['n']} | {s['correct_rate']:.3f} | {s['fast_0']:.3f} | {s['fast_1']:.3f} | "
                  f"{s['fast_1_5']:.3f} | {s['fast_2']:.3f} | {_x(s['geomean_speedup'])} |"]
        if shapes_line(s):
            lines += ["", shapes_line(s)]
    lines += ["", "## Tasks", ""]
    if doc.get("mode") == "reference":
        lines += [reference_markdown(doc["tasks"])]
    else:
        lines += [tasks_markdown(doc["tasks"], cfg["baseline"] != "eager")]
    if doc.get("compare"):
        from .baseline import compare_line
        lines += ["", "## Against the baseline", "", compare_line(doc["compare"])]
    if doc.get("baseline_file"):
        lines += ["", f"Baseline file: `{doc['baseline_file']}` (`kernelskill bench SUITE --compare` it)."]
    if doc.get("mode") != "reference" and any(r["solutions"] for r in doc["tasks"]):
        lines += ["", "## Solutions", "", solutions_markdown(doc["tasks"]), "", verdicts_line(s)]
    return "\n".join(lines) + "\n"


def rows_machine(rows: list[dict]) -> dict:
    """``--report-only``'s machine: the GPUs the rows name, nothing of the machine that writes it."""
    gpus = sorted({r["gpu"] for r in rows if r.get("gpu")})
    return {"cpu": "(report only: the rows' machines)", "cores": None, "gpus": gpus, "platform": None,
            "python": None, "torch": "-", "cuda": None, "executor": "none (--report-only)", "slots": [],
            "threads": None}


def machine_info(executor) -> dict:
    """Where the numbers were measured."""
    import platform
    import sys

    import torch

    from .executors import cpu_cores
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    gpus = []
    if executor.slots()[0].startswith("cuda") and torch.cuda.is_available():     # a Ray head may have none
        gpus = [torch.cuda.get_device_name(int(d.split(":")[1]) if ":" in d else 0) for d in executor.slots()]
    return {"cpu": cpu, "cores": cpu_cores(), "gpus": gpus, "platform": platform.platform(),
            "python": sys.version.split()[0], "torch": torch.__version__, "cuda": torch.version.cuda,
            "executor": executor.name, "slots": executor.slots(), "threads": executor.threads()}
