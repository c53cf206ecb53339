"""``kernelskill skills …``: list, show, gate, search, stats and validate the skill library.

``add_parser(subparsers)`` registers the command; every subcommand sets ``args.func``, which
returns the exit code. UserError propagates to the main CLI (message, exit 2).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..errors import UserError
from ..skills import (CATEGORIES, SkillBook, check_dir, load_skill_file, shipped_dir,
                     user_home)
from ..skills.book import arch_key
from ..skills.predicates import gate_features, profile_facts, task_facts
from ..vocab import BACKENDS, BOTTLENECKS, OP_CLASSES


def _out(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    fmt = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([fmt(header), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows])


def _dump(data) -> None:
    _out(json.dumps(data, indent=2, sort_keys=False))


def markdown_table(skills) -> str:
    """The skills as the Markdown table of docs/skills.md."""
    lines = ["| id | category | backends | applies_to | bottlenecks | arch |",
             "|---|---|---|---|---|---|"]
    for s in skills:
        lines.append(f"| `{s.id}` | {s.category} | {', '.join(s.backends)} | "
                     f"{', '.join(s.applies_to)} | {', '.join(s.bottlenecks)} | "
                     f"{', '.join(s.arch) or 'any'} |")
    return "\n".join(lines)


def cmd_list(args: argparse.Namespace) -> int:
    """List skills, optionally filtered by backend and category."""
    book = SkillBook.load()
    skills = [s for s in book
              if (args.backend is None or args.backend in s.backends)
              and (args.category is None or s.category == args.category)]
    if args.json:
        _dump([s.to_dict() for s in skills])
        return 0
    if args.markdown:
        _out(markdown_table(skills))
        return 0
    rows = [[s.id, s.category, ",".join(s.backends), s.title] for s in skills]
    _out(_table(rows, ["id", "category", "backends", "title"]))
    _out(f"\n{len(skills)} skill(s)")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """Print one skill in full."""
    book = SkillBook.load()
    skill = book.get(args.id)
    if args.json:
        _dump(skill.to_dict() | {"stats": book.stats.get(skill.id).to_dict()})
        return 0
    _out(skill.as_prompt(full=True))
    _out(f"\napplies to: {', '.join(skill.applies_to)}; bottlenecks: "
         f"{', '.join(skill.bottlenecks)}; arch: {', '.join(skill.arch) or 'any'}; "
         f"priority: {skill.priority}")
    _out(f"requires: {', '.join(skill.requires) or '-'}; specific to: {', '.join(skill.features) or '-'}"
         + (f"; ranks lower with: {', '.join(skill.against)}" if skill.against else ""))
    _out(f"source: {skill.source} ({skill.origin})")
    return 0


def _result_profile(path: str) -> dict:
    """The profile of an evaluation result (``kernelskill eval --json > r.json``, or a run's node)."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as exc:
        raise UserError(f"--result {path}: cannot read: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"--result {path}: line {exc.lineno}: not JSON ({exc.msg}); give the output of "
                        f"kernelskill eval --json") from None
    profile = data.get("profile") if isinstance(data, dict) else None
    if not isinstance(profile, dict):
        raise UserError(f"--result {path}: no 'profile' in it; give the output of kernelskill eval --json "
                        f"of a correct candidate")
    return profile


def cmd_gate(args: argparse.Namespace) -> int:
    """Print the skills the gate allows for a task (or op classes) and a node's profile; with
    --explain, every skill in or out with the reason for each condition."""
    facts: dict = {}
    if args.task is not None:
        info = _task_summary(args.task)
        ops = gate_features(info)
        facts = task_facts(info)
    else:
        ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    profile: dict = _result_profile(args.result) if args.result else {}
    if args.bottleneck:
        profile["bottleneck"] = args.bottleneck
    book = SkillBook.load()
    decisions = book.explain(ops, profile or None, backend=_backend(args.backend), arch=args.arch, facts=facts)
    allowed = [d for d in decisions if d.allowed]
    shown = decisions if args.explain else allowed[:args.limit] if args.limit is not None else allowed
    if args.json:
        _dump([d.skill.to_dict() | d.to_dict() | {"rank": i if d.allowed else None,
                                                  "stats": book.stats.get(d.skill.id).to_dict()}
               for i, d in enumerate(shown, 1)])
        return 0
    if args.explain:
        if facts or profile:
            known = {**facts, **profile_facts(profile)}
            _out("facts: " + ", ".join(f"{k} = {v:.4g}" if isinstance(v, float) else f"{k} = {v}"
                                       for k, v in known.items()) + "\n")
        for i, d in enumerate(shown, 1):
            head = f"{i:>2}. IN   {d.skill.id}" if d.allowed else f"    OUT  {d.skill.id}"
            _out(head + (f"  (specificity {d.specificity})" if d.allowed and d.specificity else ""))
            for reason in d.reasons:
                _out(f"           {reason}")
        _out(f"\n{len(allowed)} of {len(decisions)} skill(s) allowed; + holds, - keeps it out, ? not known "
             f"(decides nothing)")
        return 0
    rows = []
    classes = [o for o in ops if o in OP_CLASSES] or None
    for i, d in enumerate(shown, 1):
        s = d.skill
        c = book.stats.get(s.id).counts(classes, args.backend, arch_key(args.arch))
        rate = f"{c.succeeded}/{c.tried}" if c.tried else "-"
        summary = s.summary if len(s.summary) <= 100 else s.summary[:99] + "…"
        rows.append([str(i), s.id, s.category, rate, summary])
    _out(_table(rows, ["#", "id", "category", "ok/tried", "summary"]))
    _out(f"\n{len(allowed)} skill(s) allowed (--explain says why each is in or out)")
    return 0


def _task_summary(spec: str) -> dict:
    """``Task.summary()`` of a task file/directory or a shipped example name (e.g. softmax_rows)."""
    from ..paths import resolve_task_path
    from ..errors import TaskError
    from ..task import Task
    try:
        return Task.load(resolve_task_path(spec)).summary()
    except TaskError as exc:
        raise UserError(f"--task: {exc}") from None


def _backend(value: str | None) -> str | None:
    """--backend's value: auto is this machine's backend, any (or none) is no filter."""
    if value == "auto":
        from kernelskill.evaluate.options import machine_backend
        return str(machine_backend())
    return None if value in (None, "any") else value


def cmd_search(args: argparse.Namespace) -> int:
    """Ranked skills for a task, a bottleneck, a backend and/or a text query, best first."""
    words = list(args.words or []) + ([args.query] if args.query else [])
    query = " ".join(words) if words else None
    if query is not None and not query.strip():
        raise UserError("--query: empty text")
    if args.task is None and args.bottleneck is None and query is None and args.backend in ("auto", "any"):
        raise UserError("skills search: give at least one of --task, --bottleneck, --query, "
                        "--backend (e.g. --task softmax_rows --bottleneck memory-bound)")
    args.backend_auto = args.backend == "auto"
    args.backend = _backend(args.backend)
    info = _task_summary(args.task) if args.task is not None else None
    ops = gate_features(info) if info is not None else None
    book = SkillBook.load()
    skills = book.find(ops, args.bottleneck, query=query, backend=args.backend, arch=args.arch,
                       limit=args.limit, facts=task_facts(info))
    if args.json:
        _dump([s.to_dict() | {"rank": i, "stats": book.stats.get(s.id).to_dict()}
               for i, s in enumerate(skills, 1)])
        return 0
    if ops is not None:
        from ..vocab import OP_CLASSES
        classes = [o for o in ops if o in OP_CLASSES]
        feats = [o for o in ops if o not in OP_CLASSES]
        _out(f"task {args.task}: op classes {', '.join(classes) or '(none)'}; features "
             f"{', '.join(feats) or '(none)'}\n")
    if args.backend:
        _out(f"backend {args.backend}" + (" (this machine's; --backend any for every backend)"
                                          if args.backend_auto else "") + "\n")
    rows = [[str(i), s.id, s.category, ",".join(s.backends), s.title]
            for i, s in enumerate(skills, 1)]
    _out(_table(rows, ["#", "id", "category", "backends", "title"]))
    _out(f"\n{len(skills)} skill(s)")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    """Print the recorded outcomes, one row per skill and context (op class, backend, GPU arch)."""
    book = SkillBook.load()
    data = {sid: st for sid, st in sorted(book.stats.data.items())}
    if args.json:
        _dump({sid: st.to_dict() for sid, st in data.items()})
        return 0
    if not data:
        _out(f"no outcomes recorded yet ({book.stats.path})")
        return 0
    rows = []
    for sid, st in data.items():
        kept = ",".join(f"{k}:{v}" for k, v in sorted(st.unranked.items())) or "-"
        for (op, backend, arch), c in sorted(st.contexts.items()):
            mean = c.mean_speedup()
            rows.append([sid, op, backend, arch, str(c.tried), str(c.succeeded), str(c.failed), str(c.no_gain),
                         f"{c.rate:.0%}" if c.rate is not None else "-", f"{mean:.2f}x" if mean else "-", kept])
            kept = ""
        if not st.contexts:
            rows.append([sid, "-", "-", "-", "0", "0", "0", "0", "-", "-", kept])
    _out(_table(rows, ["id", "op class", "backend", "arch", "tried", "ok", "failed", "no_gain", "rate",
                       "speedup", "unranked"]))
    _out("\nA task's ranking reads only the rows of its op classes, its backend and its GPU arch ('*': not "
         "recorded, from an older file). A skill not listed has never been tried: it has no rate.")
    if any(st.unranked for st in data.values()):
        _out("unranked: outcomes kept but not counted in the ranking — timed noisy or contended, or "
             "not timed by the evaluator itself (unmeasured)")
    _out(f"\n{book.stats.path}")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    """Validate a skill directory or one skill file (default: shipped + user skills); exit 1
    with one line per error (each naming the file and the key) when any is invalid."""
    paths = [Path(args.path)] if args.path else [shipped_dir(), user_home() / "skills"]
    total, errors = 0, []
    for p in paths:
        if p.is_dir():
            skills, errs = check_dir(p)
            total += len(skills)
            errors += errs
        elif p.is_file():
            try:
                load_skill_file(p)
                total += 1
            except UserError as exc:
                errors.append(str(exc))
        elif args.path:
            errors.append(f"{p}: no such skill file or directory")
    for e in errors:
        sys.stderr.write(e + "\n")
    _out(f"{total} valid skill(s), {len(errors)} error(s)")
    return 1 if errors else 0


cmd_check = cmd_validate   # the old name of the command


def cmd_export(args: argparse.Namespace) -> int:
    """Write the library (shipped and user skills) as Agent Skills folders."""
    from ..skills.export import export_agent_skills
    book = SkillBook.load()
    skills = [s for s in book if args.backend is None or args.backend in s.backends]
    folders = export_agent_skills(skills, args.dir)
    _out(f"{len(folders)} skill folder(s) written to {args.dir} (one SKILL.md each, example under references/)")
    _out("Claude Code: copy or link them into .claude/skills/ (project) or ~/.claude/skills/ (personal)")
    return 0


def cmd_distill(args: argparse.Namespace) -> int:
    """Turn a verified node that beat its parent with confidence into a draft skill file."""
    from ..runs import find_run, load_run
    from ..skills.distill import draft, save
    state = load_run(find_run(args.run, args.runs_dir))
    book = SkillBook.load()
    d = draft(state, args.node, args.id, book=book)
    save(book, d, args.out, force=args.force)
    if args.json:
        _dump({"path": str(d.path), "node": d.node_id, "base": d.base_id, "gain": round(d.gain, 4),
               "gain_low": round(d.gain_low, 4), "skill": d.skill.to_dict()})
        return 0
    _out(f"draft skill {d.skill.id} from node {d.node_id} (over {d.base_id}: {d.gain:.2f}x, at least "
         f"{d.gain_low:.2f}x by the intervals)")
    _out(f"  applies to {', '.join(d.skill.applies_to)}; features {', '.join(d.skill.features) or '-'}")
    _out(f"  preconditions: {'; '.join(d.skill.preconditions) or '-'}")
    _out(f"  expect: {', '.join(f'{k} {v}' for k, v in d.skill.expect.items())}")
    _out(f"written to {d.path}: review it (title, when, steps), then it is offered like any skill "
         f"(kernelskill skills gate --task T --explain)")
    return 0


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register the ``skills`` command on an argparse subparsers object."""
    p = subparsers.add_parser("skills", help="browse, gate and check the skill library",
                              description="Browse, gate and check the skill library.")
    sub = p.add_subparsers(dest="skills_command", metavar="COMMAND", required=True)

    q = sub.add_parser("list", help="list skills")
    q.add_argument("--backend", choices=BACKENDS, help="only the skills for this backend")
    q.add_argument("--category", choices=CATEGORIES, help="only the skills of this category")
    q.add_argument("--json", action="store_true", help="print JSON")
    q.add_argument("--markdown", action="store_true", help="print the docs/skills.md table")
    q.set_defaults(func=cmd_list)

    q = sub.add_parser("show", help="show one skill in full")
    q.add_argument("id", help="the skill's id (kernelskill skills list shows them)")
    q.add_argument("--json", action="store_true", help="print JSON")
    q.set_defaults(func=cmd_show)

    q = sub.add_parser("gate", help="skills the gate allows for a task and a profile, ranked; --explain says why",
                       description="The skills the gate allows for a task (or op classes and features) and, "
                       "optionally, a node's profile, best first. Each skill's conditions are checked: backend, "
                       "op classes, required structure, bottleneck, arch, and its preconditions and forbidden "
                       "patterns over the task's facts (GEMM sizes, reduction sizes, intensity, dtype) and the "
                       "profile's (roofline fraction, custom share, launches, Nsight Compute metrics). A fact "
                       "not known decides nothing.",
                       epilog="examples:\n  kernelskill skills gate --task softmax_rows --explain\n"
                              "  kernelskill eval softmax_rows cand.py --json > r.json && "
                              "kernelskill skills gate --task softmax_rows --result r.json\n"
                              "  kernelskill skills gate --ops matmul,gemv --bottleneck memory-bound",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    what = q.add_mutually_exclusive_group(required=True)
    what.add_argument("--task", metavar="T", help="a task file or directory, or a shipped example name: its "
                      "op classes, features and facts are traced")
    what.add_argument("--ops", help="comma-separated op classes and task features instead, e.g. "
                      "softmax,reduction,reduction-long (no facts: preconditions on them decide nothing)")
    q.add_argument("--result", metavar="FILE", help="an evaluation result (kernelskill eval --json): its profile "
                   "decides the profile preconditions")
    q.add_argument("--bottleneck", choices=BOTTLENECKS, help="the node's bottleneck (default: the result's, or any)")
    q.add_argument("--backend", choices=(*BACKENDS, "auto"), default="auto", help="the backend the kernel is "
                   "written for (default auto: this machine's, cuda with a GPU, else cpp)")
    q.add_argument("--arch", help="target arch, e.g. sm_90 (default: do not filter)")
    q.add_argument("--limit", type=int, metavar="N", help="the first N skills of the ranking (default: all)")
    q.add_argument("--explain", action="store_true", help="every skill, in or out, with each condition's verdict")
    q.add_argument("--json", action="store_true", help="print JSON")
    q.set_defaults(func=cmd_gate)

    q = sub.add_parser("search", help="ranked skills for a task, bottleneck, backend or text",
                       description="Skills ranked best first. --task and --bottleneck (and "
                       "--backend, --arch) filter through the gate; --query keeps the skills "
                       "that match the text, ordered by relevance, then by the gate's ranking.")
    q.add_argument("words", nargs="*", metavar="WORDS",
                   help="query words (same as --query; both may be given)")
    q.add_argument("--task", metavar="T",
                   help="a task file or directory, or a shipped example name (e.g. softmax_rows); "
                   "its op classes select the skills")
    q.add_argument("--bottleneck", metavar="B", choices=BOTTLENECKS,
                   help=f"one of {', '.join(BOTTLENECKS)}")
    q.add_argument("--query", metavar="TEXT", help="text to search in id, title, summary, when, "
                   "guidance")
    q.add_argument("--backend", metavar="X", choices=(*BACKENDS, "auto", "any"), default="auto",
                   help=f"one of {', '.join(BACKENDS)}; auto (the default): this machine's, cuda with a GPU, else "
                   "cpp, as MCP's lookup_skills; any: every backend")
    q.add_argument("--arch", help="target arch, e.g. sm_90 (default: do not filter)")
    q.add_argument("--limit", type=int, metavar="N", help="the first N skills of the ranking (default: all)")
    q.add_argument("--json", action="store_true", help="print JSON")
    q.set_defaults(func=cmd_search)

    q = sub.add_parser("stats", help="recorded outcomes per skill")
    q.add_argument("--json", action="store_true", help="print JSON")
    q.set_defaults(func=cmd_stats)

    q = sub.add_parser("validate", aliases=["check"],
                       help="validate skill files (exit 1 if any is invalid)")
    q.add_argument("path", nargs="?", metavar="PATH",
                   help="a directory of *.toml skills or one skill file (default: shipped + user)")
    q.set_defaults(func=cmd_validate)

    q = sub.add_parser("export", help="write the library as Agent Skills folders (Claude Code, Codex, Cursor)",
                       description="Write every skill (shipped and yours) as an Agent Skills folder: DIR/<id>/SKILL.md "
                       "with YAML front matter (name, description) and the skill as Markdown, and the example under "
                       "references/. The TOML files stay the source of truth: export again after a change.",
                       epilog="example:\n  kernelskill skills export --format agent-skills ~/.claude/skills",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    q.add_argument("dir", metavar="DIR", help="the directory to write the folders into (created if missing)")
    q.add_argument("--format", choices=("agent-skills",), default="agent-skills", help="the format (default "
                   "agent-skills)")
    q.add_argument("--backend", choices=BACKENDS, help="only the skills for this backend")
    q.set_defaults(func=cmd_export)

    q = sub.add_parser("distill", help="turn a node that beat its parent with confidence into a draft skill",
                       description="Read a run, pick a verified node whose speedup interval lies above its parent's "
                       "(default: the one with the largest such gain), and write a draft skill: the task's op "
                       "classes and features, lower bounds on its sizes and its dtype as preconditions, the "
                       "metric changes measured as its expected effect, the plan as guidance, the node's code as "
                       "its example. It is validated and written to your skill directory for review.",
                       epilog="examples:\n  kernelskill skills distill 20261124-1830-softmax_rows-ab12\n"
                              "  kernelskill skills distill runs/20261124-1830-softmax_rows-ab12 n4 --id online-softmax-wide",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    q.add_argument("run", metavar="RUN", help="a run directory, or a run id (or a unique prefix) under --runs-dir")
    q.add_argument("node", nargs="?", metavar="NODE", help="the node id (default: the largest confident gain)")
    q.add_argument("--id", help="the draft's skill id (default: learned-<task>-<mechanism>)")
    q.add_argument("--out", metavar="DIR", help="where to write it (default: your skill directory, "
                   "$KERNELSKILL_HOME/skills)")
    q.add_argument("--runs-dir", default="runs", help="where run ids are looked up (default runs)")
    q.add_argument("--force", action="store_true", help="replace a skill with the same id")
    q.add_argument("--json", action="store_true", help="print JSON")
    q.set_defaults(func=cmd_distill)
    return p
