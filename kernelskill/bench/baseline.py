"""Baseline files: what a suite's references cost on one machine, for later runs to be scored against.

``kernelskill bench SUITE --reference`` writes ``OUT/baseline.json``: per task its verdict (the
reference against itself), eager time, torch.compile time (with ``--baseline both``), roofline floor
and fraction, bottleneck and op classes, with the machine and settings they were measured under.

``kernelskill bench SUITE --compare BASELINE.json`` (any mode) scores the run against it: for every
task in both, the run's time (the best solution's, or eager's in a reference run) against the
baseline's eager and torch.compile times — fast_p against each, their geometric means — and the
tasks whose verdict changed. Times from two runs are only comparable on the same kind of device;
a baseline from another GPU is refused unless ``--compare-any-machine`` says otherwise. Each task
keeps the GPU its row was measured on (a resumed run can hold rows from several machines): a task
measured on another GPU than this run's is left out of the scores and counted, not compared.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import UserError
from .score import geomean

KIND = "kernelskill-baseline"
VERSION = 1
FIELDS = ("level", "status", "eager_ms", "compile_ms", "floor_ms", "eager_fraction", "bottleneck", "op_classes",
          "quality", "message", "seconds", "gpu")
FAST = (0.0, 1.0, 1.5, 2.0)


def make(doc: dict) -> dict:
    """The baseline of a finished bench (its report document)."""
    return {"kind": KIND, "version": VERSION, "suite": doc["suite"], "device": doc["device"],
            "preset": doc["preset"], "machine": doc["machine"], "settings": doc["settings"],
            "finished": doc["finished"],
            "tasks": {r["task"]: {k: r.get(k) for k in FIELDS} for r in doc["tasks"]}}


def write(doc: dict, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(make(doc), indent=1, default=str), encoding="utf-8")
    tmp.replace(path)
    return path


def load(path: Path) -> dict:
    """A baseline file, checked: UserError saying what is wrong and how to make one."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise UserError(f"--compare {path}: cannot read it ({e.strerror}); a baseline is written by "
                        f"`kernelskill bench SUITE --reference` to OUT/baseline.json") from None
    except ValueError as e:
        raise UserError(f"--compare {path}: not JSON ({e})") from None
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise UserError(f"--compare {path}: not a baseline file (written by `kernelskill bench SUITE --reference`, "
                        f"OUT/baseline.json; report.json is not one)")
    if data.get("version") != VERSION:
        raise UserError(f"--compare {path}: baseline version {data.get('version')}, this kernelskill reads "
                        f"{VERSION}; run `kernelskill bench SUITE --reference` again")
    return data


def _gpus(machine: dict) -> list[str]:
    return sorted(set(machine.get("gpus") or [])) or [machine.get("cpu") or "?"]


def base_gpus(base: dict) -> list[str]:
    """The devices a baseline's rows were measured on: each task's GPU where it says, else the
    machine of the run that wrote the file."""
    machine = _gpus(base.get("machine") or {})
    tasks = (base.get("tasks") or {}).values()
    return sorted({g for t in tasks for g in ([t["gpu"]] if t.get("gpu") else machine)}) or machine


def check_machine(base: dict, machine: dict, any_machine: bool = False) -> None:
    """UserError when no row of the baseline was measured on this run's device (checked before a
    run starts)."""
    here, there = _gpus(machine), base_gpus(base)
    if not set(here) & set(there) and not any_machine:
        raise UserError(f"--compare: the baseline was measured on {', '.join(there)} and this run on "
                        f"{', '.join(here)}; times from different devices are not comparable "
                        f"(--compare-any-machine compares them anyway)")


def compare(rows: list[dict], doc: dict, base: dict, any_machine: bool = False) -> dict:
    """The run's rows scored against a baseline (see the module docstring)."""
    check_machine(base, doc["machine"], any_machine)
    there, here, base_machine = base_gpus(base), _gpus(doc["machine"]), _gpus(base.get("machine") or {})[0]
    tasks = base.get("tasks") or {}
    per_task, vs_eager, vs_compile, changed = [], [], [], []
    n = other_gpu = 0
    for r in rows:
        b = tasks.get(r["task"])
        if b is None:
            continue
        measured_on = b.get("gpu") or base_machine
        if not any_machine and measured_on not in ([r["gpu"]] if r.get("gpu") else here):
            other_gpu += 1              # times from two kinds of device say nothing about each other
            continue
        n += 1
        ms = r.get("eager_ms") if doc.get("mode") == "reference" else \
            next((s.get("cand_ms") for s in r.get("solutions", []) if s.get("solution") == r.get("solution")), None)
        ok = r["status"] == "ok" and ms
        e = b["eager_ms"] / ms if ok and b.get("eager_ms") else None
        c = b["compile_ms"] / ms if ok and b.get("compile_ms") else None
        if e:
            vs_eager.append(e)
        if c:
            vs_compile.append(c)
        if r["status"] != b.get("status"):
            changed.append({"task": r["task"], "was": b.get("status"), "now": r["status"]})
        per_task.append({"task": r["task"], "status": r["status"], "baseline_status": b.get("status"), "ms": ms,
                         "vs_baseline_eager": e, "vs_baseline_compile": c})
    out = {"baseline": {"suite": base.get("suite"), "device": base.get("device"), "machine": there,
                        "finished": base.get("finished")},
           "n": n, "missing_from_baseline": sum(r["task"] not in tasks for r in rows), "other_gpu": other_gpu,
           "geomean_vs_eager": geomean(vs_eager), "geomean_vs_compile": geomean(vs_compile),
           "changed": changed, "tasks": per_task}
    for p in FAST:
        key = f"{p:g}".replace(".", "_")
        out[f"fast_{key}_vs_eager"] = sum(x > p for x in vs_eager) / n if n else 0.0
        out[f"fast_{key}_vs_compile"] = sum(x > p for x in vs_compile) / n if n else 0.0
    out["with_compile_baseline"] = sum(1 for b in tasks.values() if b.get("compile_ms"))
    return out


def compare_line(c: dict) -> str:
    """``against baseline (NVIDIA H100 …, 2026-11-24): n 250 · fast_1 vs eager 40% · vs compile 12% · …``."""
    x = lambda v: f"{v:.2f}×" if v is not None else "-"  # noqa: E731
    text = (f"against the baseline ({', '.join(c['baseline']['machine'])}, {c['baseline']['finished']}): "
            f"n {c['n']} · fast_1 vs eager {c['fast_1_vs_eager']:.0%} · geomean vs eager {x(c['geomean_vs_eager'])}")
    if c["with_compile_baseline"]:
        text += (f" · fast_1 vs torch.compile {c['fast_1_vs_compile']:.0%} · geomean vs torch.compile "
                 f"{x(c['geomean_vs_compile'])}")
    if c["changed"]:
        text += f" · verdict changed on {len(c['changed'])}: " + ", ".join(
            f"{d['task']} ({d['was']} → {d['now']})" for d in c["changed"][:5])
    if c.get("other_gpu"):
        text += f" · {c['other_gpu']} task(s) measured on another GPU, not compared"
    if c["missing_from_baseline"]:
        text += f" · {c['missing_from_baseline']} task(s) not in the baseline"
    return text
