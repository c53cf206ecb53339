"""Skill retrieval benchmark: does the ranking put the skills an expert wants in the top k?

    .venv/bin/python benchmarks/retrieval/run.py [--backend cuda|cpp|both] [--k 5] [--json OUT]
                                                 [--tasks a,b,c] [--need 3] [--user-stats]

The tasks are KernelBench-format files written for this benchmark (tasks/level1-3, 70 files over
GEMM variants, GEMM/conv epilogues, 1-D/2-D/3-D, transposed, depthwise, grouped and pointwise
convolutions, library convolutions and GEMMs followed by a normalization or reduction tail, pooling,
the five normalizations, softmax, reductions, scans, losses, elementwise chains, attention,
recurrent layers and small networks); labels.toml lists, per task and backend,
the skills a CUDA (resp. CPU C++) expert would want an agent to see.

For every task and backend the top k come from the project's own retrieval, computed exactly as
``kernelskill skills search --task FILE --backend B --limit K`` does (``retrieve`` below mirrors
kernelskill/cli/skills.py cmd_search; tests/bench/test_retrieval_bench.py checks that the two agree).
Printed per backend: a markdown table (task, op kind, the task's op classes, the top k with the
labelled ones in **bold**, hits, and each labelled skill that missed with its rank in the full
list, "gated out" when the gate drops it), the worst cases, a summary per op kind, and the totals:

- precision@k: relevant skills in the top k / k, averaged over tasks;
- met: the share of tasks with at least ``--need`` (3) relevant skills in the top k (a task with
  fewer labels counts as met when all of them are there) — the issue's goal is >= 90 %;
- recall@k: the share of a task's labelled skills that are in the top k, averaged over tasks;
- reachable: tasks whose full list holds enough labels to meet the bar, so that a better order
  alone would do (the others need the gate or the task features to change).

The user's skill store and statistics are left out (a fresh, empty KERNELSKILL_HOME) so the
figures depend only on the shipped skills and the code; ``--user-stats`` keeps yours.
``--json`` writes everything above per backend and task.
"""
from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from statistics import mean

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TASKS_DIR = HERE / "tasks"
LABELS = HERE / "labels.toml"
BACKENDS = ("cuda", "cpp")
sys.path.insert(0, str(ROOT))


def task_files(tasks_dir: Path = TASKS_DIR) -> dict[str, Path]:
    """{task name (the file's stem): file}, by level then name."""
    files = sorted(tasks_dir.glob("level*/*.py"), key=lambda p: (p.parent.name, p.stem))
    out: dict[str, Path] = {}
    for f in files:
        if f.stem in out:
            raise SystemExit(f"{f}: a second task named {f.stem} ({out[f.stem]})")
        out[f.stem] = f
    return out


def load_labels(path: Path = LABELS) -> dict[str, dict]:
    """{task name: {"kind": …, "cuda": [skill ids], "cpp": [skill ids], "note": …}}."""
    data = tomllib.loads(path.read_text())
    for name, entry in data.items():
        for key in ("kind", *BACKENDS):
            if key not in entry:
                raise SystemExit(f"{path}: [{name}] has no `{key}`")
    return data


def task_info(task_path: Path) -> tuple[list[str], dict]:
    """The task's op classes and task features, and its facts (what skills' preconditions read), as
    ``skills search --task`` reads them."""
    from kernelskill.skills.predicates import gate_features, task_facts
    from kernelskill.task import Task
    info = Task.load(task_path).summary()
    return gate_features(info), task_facts(info)


def op_classes(task_path: Path) -> list[str]:
    """The task's op classes and task features."""
    return task_info(task_path)[0]


def retrieve(book, ops: list[str], backend: str, k: int | None, facts: dict | None = None) -> list[str]:
    """Skill ids, best first, as ``kernelskill skills search --task FILE --backend B --limit K``
    ranks them (kernelskill.cli.skills.cmd_search: no bottleneck, no query, no arch); k None: the whole list."""
    return [s.id for s in book.find(ops, None, query=None, backend=backend, arch=None, limit=k, facts=facts)]


def score(top: list[str], relevant: list[str] | set[str], k: int, need: int = 3) -> dict:
    """Hits of one ranked list against its labels: precision@k (over k slots, even when fewer
    were returned), recall (over the labels) and ``met`` (at least min(need, labels, k) hits)."""
    relevant = set(relevant)
    hits = [s for s in top[:k] if s in relevant]
    return {"hits": len(hits), "precision": len(hits) / k,
            "recall": len(hits) / len(relevant) if relevant else 0.0,
            "met": bool(relevant) and len(hits) >= min(need, len(relevant), k)}


def summarize(scores: list[dict]) -> dict:
    """Means over tasks of precision and recall, how many tasks met the bar, and (rows of
    ``evaluate``) how many could meet it by reordering alone: the gate keeps enough labels."""
    if not scores:
        return {"tasks": 0, "precision": 0.0, "recall": 0.0, "hits": 0, "met": 0, "met_share": 0.0,
                "reachable": 0}
    met = sum(s["met"] for s in scores)
    return {"tasks": len(scores), "precision": mean(s["precision"] for s in scores),
            "recall": mean(s["recall"] for s in scores), "hits": sum(s["hits"] for s in scores),
            "met": met, "met_share": met / len(scores),
            "reachable": sum(bool(s.get("reachable")) for s in scores)}


def evaluate(book, files: dict[str, Path], labels: dict[str, dict], backend: str, k: int,
             need: int = 3, classes: dict[str, list[str]] | None = None,
             facts: dict[str, dict] | None = None) -> list[dict]:
    """One row per task: its op classes, top k, score, and the rank of every missed label."""
    rows = []
    for name, path in files.items():
        if classes is not None and name in classes:
            ops, known = classes[name], (facts or {}).get(name)
        else:
            ops, known = task_info(path)
        relevant = labels[name][backend]
        top = retrieve(book, ops, backend, k, known)
        full = retrieve(book, ops, backend, None, known)
        missing = {s: (full.index(s) + 1 if s in full else None) for s in relevant if s not in top[:k]}
        kept = sum(s in full for s in relevant)        # labels the gate lets through, at any rank
        rows.append({"task": name, "level": int(path.parent.name.removeprefix("level")),
                     "kind": labels[name]["kind"], "op_classes": ops, "top": top,
                     "relevant": list(relevant), "missing": missing, "listed": len(full),
                     **score(top, relevant, k, need),
                     "reachable": bool(relevant) and kept >= min(need, len(relevant), k)})
    return rows


def _depth(row: dict) -> float:
    """Mean rank of the missed labels in the full list (a gated-out one counts as past its end)."""
    ranks = [r or row["listed"] + 1 for r in row["missing"].values()]
    return mean(ranks) if ranks else 0.0


def _missing_text(missing: dict[str, int | None]) -> str:
    return ", ".join(f"{s} ({r})" if r else f"{s} (gated out)" for s, r in missing.items()) or "-"


def markdown(rows: list[dict], backend: str, k: int, need: int, worst: int = 10) -> str:
    """The per-task table, the worst cases, the per-kind table and the totals of one backend."""
    out = [f"## {backend}: top {k} of `kernelskill skills search --task FILE --backend {backend} "
           f"--limit {k}` (**bold**: labelled relevant)", "",
           f"| task | kind | op classes | top {k} | hits | missed labels (rank in the full list of n) |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        top = ", ".join(f"**{s}**" if s in r["relevant"] else s for s in r["top"]) or "-"
        out.append(f"| {r['task']} | {r['kind']} | {','.join(r['op_classes']) or '-'} | {top} | "
                   f"{r['hits']}/{len(r['relevant'])} | {_missing_text(r['missing'])} (n={r['listed']}) |")
    bad = sorted(rows, key=lambda r: (r["hits"], r["recall"], -_depth(r), r["task"]))[:worst]
    out += ["", f"worst {len(bad)} ({backend}; fewest hits, then missed labels ranked lowest): task, "
            f"hits, what the top {k} missed", ""]
    out += [f"- {r['task']} ({r['kind']}, op classes {','.join(r['op_classes']) or '-'}): "
            f"{r['hits']}/{len(r['relevant'])}; missed {_missing_text(r['missing'])}" for r in bad]
    kinds: dict[str, list[dict]] = {}
    for r in rows:
        kinds.setdefault(r["kind"], []).append(r)
    out += ["", f"| kind | tasks | precision@{k} | >= {need} relevant in top {k} | recall@{k} |",
            "|---|---|---|---|---|"]
    for kind, rs in sorted(kinds.items()):
        s = summarize(rs)
        out.append(f"| {kind} | {s['tasks']} | {s['precision']:.2f} | {s['met']}/{s['tasks']} | "
                   f"{s['recall']:.2f} |")
    s = summarize(rows)
    out += ["", totals_line(backend, s, k, need)]
    return "\n".join(out)


def totals_line(backend: str, s: dict, k: int, need: int) -> str:
    return (f"{backend}: precision@{k} {s['precision']:.3f} ({s['hits']}/{s['tasks'] * k} slots); "
            f"tasks with >= {need} relevant in the top {k}: {s['met']}/{s['tasks']} "
            f"({100 * s['met_share']:.1f} %); recall@{k} of the labels {s['recall']:.3f}; "
            f"reachable by reordering alone (the gate keeps enough labels): {s['reachable']}/{s['tasks']}")


def _commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=(*BACKENDS, "both"), default="both")
    ap.add_argument("--k", type=int, default=5, help="the top k of each ranking (default 5)")
    ap.add_argument("--need", type=int, default=3, help="relevant skills in the top k for a task to "
                    "count as met (default 3)")
    ap.add_argument("--tasks", help="comma-separated task names (default: all)")
    ap.add_argument("--worst", type=int, default=10, help="worst cases listed per backend (default 10)")
    ap.add_argument("--user-stats", action="store_true", help="rank with your KERNELSKILL_HOME "
                    "(user skills and statistics) instead of an empty one")
    ap.add_argument("--json", metavar="OUT", help="write the rows and summaries as JSON")
    args = ap.parse_args(argv)
    if args.k < 1:
        ap.error("--k must be at least 1")
    if not args.user_stats:
        home = tempfile.mkdtemp(prefix="ks-retrieval-home-")
        atexit.register(shutil.rmtree, home, True)       # an empty store for this run only
        os.environ["KERNELSKILL_HOME"] = home
    from kernelskill.skills import SkillBook

    files, labels = task_files(), load_labels()
    unlabelled, orphans = sorted(set(files) - set(labels)), sorted(set(labels) - set(files))
    if unlabelled or orphans:
        raise SystemExit(f"labels.toml and tasks/ disagree: no labels for {unlabelled}, "
                         f"no task file for {orphans}")
    if args.tasks:
        names = [n.strip() for n in args.tasks.split(",") if n.strip()]
        unknown = [n for n in names if n not in files]
        if unknown:
            raise SystemExit(f"--tasks: no task named {', '.join(unknown)} (tasks: {', '.join(files)})")
        files = {n: p for n, p in files.items() if n in names}   # in the benchmark's order
    book = SkillBook.load()
    info = {name: task_info(path) for name, path in files.items()}
    classes = {name: ops for name, (ops, _) in info.items()}
    facts = {name: known for name, (_, known) in info.items()}
    backends = BACKENDS if args.backend == "both" else (args.backend,)
    result = {"k": args.k, "need": args.need, "commit": _commit(), "skills": len(book),
              "tasks": len(files), "backends": {}}
    for b in backends:
        rows = evaluate(book, files, labels, b, args.k, args.need, classes, facts)
        print(markdown(rows, b, args.k, args.need, args.worst) + "\n")
        result["backends"][b] = {"summary": summarize(rows), "rows": rows}
    print("| backend | tasks | precision@{0} | >= {1} relevant in top {0} | recall@{0} | reachable by "
          "reordering |".format(args.k, args.need))
    print("|---|---|---|---|---|---|")
    for b, res in result["backends"].items():
        s = res["summary"]
        print(f"| {b} | {s['tasks']} | {s['precision']:.3f} | {s['met']}/{s['tasks']} "
              f"({100 * s['met_share']:.1f} %) | {s['recall']:.3f} | {s['reachable']}/{s['tasks']} |")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
