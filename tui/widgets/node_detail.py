"""One node in detail, in tabs: its code, the diff against its parent, its profile, its plan and skill."""
from __future__ import annotations

import difflib
import re

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import ScrollableContainer, Vertical, VerticalScroll
from textual.widgets import DataTable, Static, TabbedContent, TabPane, TextArea

from kernelskill.evaluate.judge.roofline import fraction_text
from kernelskill.results import ProfileResult, VerifyResult
from kernelskill.trajectory import Node

from .plots import RunPlots
from ..model import STATUS_STYLE, fmt_ms, fmt_speedup, fmt_tokens, profile_of, skill_brief


def diff_text(parent: Node | None, node: Node) -> Text:
    """The unified diff parent → node, colored like ``git diff``."""
    if parent is None:
        return Text("The reference has no parent: its code is the task itself.", style="dim")
    if not node.code:
        return Text(f"No code: {node.message or 'the agents produced no candidate'}", style="yellow")
    lines = difflib.unified_diff(parent.code.splitlines(), node.code.splitlines(), f"{parent.id}.py",
                                 f"{node.id}.py", lineterm="", n=3)
    out = Text(no_wrap=True, overflow="ignore")
    for line in lines:
        style = ("bold" if line.startswith(("+++", "---")) else "green" if line.startswith("+")
                 else "red" if line.startswith("-") else "cyan" if line.startswith("@@") else "")
        out.append(line + "\n", style=style)
    return out if out.plain else Text(f"Same code as {parent.id}.", style="dim")


WORST = re.compile(r"^\s*at (\[[^\]]*\]|\S+): got (\S+), expected (\S+) \(\|diff\| ([^)]+)\)")
TRIAL = re.compile(r"^trial (\d+) \((.*)\) failed the (\S+) check:")
INLINE_WORST = re.compile(r"^(.*); worst: (at .*)$")      # "…outside tolerance; worst: at [1, 2]: got …"


def _report_lines(report: str) -> list[str]:
    """The report's lines with each trial's worst element on a line of its own, as the rest are: the
    evaluator writes the first one at the end of the trial's summary line, then "next worst:"."""
    out = []
    for line in report.splitlines():
        inline = INLINE_WORST.match(line)
        if inline and WORST.match(inline.group(2)):
            out += [inline.group(1) + "; worst:", "  " + inline.group(2)]
        elif line.strip() != "next worst:":
            out.append(line)
    return out


def mismatch_text(verify: VerifyResult | None) -> Text:
    """The evaluator's mismatch report as a table per trial: each worst element's index, what the
    candidate gave, what the reference gave, and the difference (columns as wide as their values)."""
    out = Text()
    report = verify.mismatch if verify is not None else ""
    if not report:
        return out
    lines = _report_lines(report)
    worst = [m.groups() for m in map(WORST.match, lines) if m]
    heads = ("index", "got", "expected", "|diff|")
    widths = [max([len(h)] + [len(w[i]) for w in worst]) for i, h in enumerate(heads)]
    head = "  " + " ".join(h.rjust(w) if i else h.ljust(w) for i, (h, w) in enumerate(zip(heads, widths, strict=True)))
    header = False
    for line in lines:
        row, trial = WORST.match(line), TRIAL.match(line)
        if row:
            if not header:
                out.append(head + "\n", style="dim")
                header = True
            index, got, want, diff = row.groups()
            out.append(f"  {index.ljust(widths[0])} ")
            out.append(got.rjust(widths[1]), style="red")
            out.append(" " + want.rjust(widths[2]), style="green")
            out.append(" " + diff.rjust(widths[3]) + "\n")
        elif trial:
            header = False
            out.append(f"trial {trial.group(1)}", style="bold")
            out.append(f" · {trial.group(2)} · {trial.group(3)}\n", style="dim")
        else:
            header = False
            text = line.removesuffix("; worst:").removesuffix(" worst:").removeprefix("output: ")
            style = "bold red" if line is lines[0] else "" if line.startswith("output") else "dim"
            out.append(text + "\n", style=style)
    return out


def fmt_rate(x: float) -> str:
    """1500, 26.6, 0.269: whole numbers from 100 up, three significant digits below."""
    return f"{x:.0f}" if x >= 100 else f"{x:.3g}"


def quality_note(prof: ProfileResult | None) -> str:
    """`` (noisy)`` / `` (contended)`` after a speedup whose measurement is not good; else nothing."""
    verdict = prof.quality.verdict if prof is not None and prof.quality is not None else None
    return f" ({verdict})" if verdict and verdict != "good" else ""


# Each evaluation times eager again, beside its candidate. When a node's eager reads further than this
# factor from the reference's (the head's figure), the Profile tab sets the two side by side.
EAGER_APART = 1.25


def _stats(s) -> str:
    return f" (IQR {fmt_ms(s.iqr_ms)}, n={s.n})" if s is not None else ""


def eager_of(node: Node | None) -> float | None:
    """The median of eager as timed in ``node``'s evaluation (the root's: the head's figure)."""
    prof = profile_of(node)
    return prof.baseline.median_ms if prof is not None and prof.baseline else None


def _timing(out: Text, node: Node, prof: ProfileResult, root: Node | None) -> None:
    """Time and speedup. The reference is eager itself: its time is eager's, its speedup "reference",
    never a ratio against itself. Another node's eager is labelled as timed beside it, and set beside the
    reference's when the two read apart (the machine was busier or quieter in one of the evaluations)."""
    cand, base = prof.candidate, prof.baseline
    if node.parent is None:
        out.append("eager ", style="dim")
        out.append(fmt_ms(base.median_ms if base else None), style="bold")
        out.append(_stats(base) + " · the reference's time (the head's figure)\n")
        out.append("speedup ", style="dim")
        out.append("reference", style="bold")
        out.append(" (1× by definition)\n", style="dim")
        if cand is not None:
            out.append("timed again ", style="dim")
            out.append(f"{fmt_ms(cand.median_ms)}{_stats(cand)}: the same code as a candidate; the kernel times "
                       f"below come from it\n", style="dim")
        return
    out.append("time ", style="dim")
    out.append(fmt_ms(cand.median_ms if cand else None), style="bold")
    out.append(f"{_stats(cand)} vs eager {fmt_ms(base.median_ms if base else None)} timed beside it\n")
    here, ref = (base.median_ms if base else None), eager_of(root)
    if here and ref and root is not None and max(here / ref, ref / here) > EAGER_APART:
        how = f"{here / ref:.1f}× slower" if here > ref else f"{ref / here:.1f}× faster"
        out.append(f"  eager read {fmt_ms(ref)} beside the reference ({root.id}, the head's figure): each evaluation "
                   f"times eager again; here it ran {how}{quality_note(prof)}\n", style="yellow")
    out.append("speedup ", style="dim")
    out.append(fmt_speedup(prof.speedup, prof.speedup_ci), style="bold")
    out.append(" (95% interval)")
    out.append(quality_note(prof) + "\n", style="bold yellow")


def _roofline(out: Text, node: Node, prof: ProfileResult) -> None:
    """The roofline position; above the roof (a fraction over 100 %), with the reason the evaluator gives."""
    roof = prof.roofline
    out.append("roofline ", style="dim")
    if roof is not None and None not in (roof.floor_ms, roof.fraction, roof.achieved_gbs, roof.roof):
        # The reference is eager: its own position and eager's are one (no second figure for it).
        eager = (f" (eager {fraction_text(roof, 'eager_fraction', what='')})"
                 if roof.eager_fraction is not None and node.parent is not None else "")
        out.append(f"floor {fmt_ms(roof.floor_ms)} · {fraction_text(roof, what='of its pace')}{eager} · "
                   f"{fmt_rate(roof.achieved_gbs)} GB/s · {roof.roof} roof\n")
        if roof.over_roof_detail:
            out.append(f"  {node.id} above the roof: {roof.over_roof_detail}\n", style="dim")
    else:
        # A partial record (a stored run's): every number and word it has.
        scalars = {k: v for k, v in (roof.to_dict() if roof is not None else {}).items()
                   if isinstance(v, (int, float, str))}
        out.append((", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in sorted(scalars.items()))
                    if scalars else "not measured") + "\n")


def profile_text(node: Node, root: Node | None = None) -> Text:
    """Status, the mismatch report of an incorrect node, timing with the speedup interval and its
    measurement quality, custom share, roofline and bottleneck. ``root``: the run's reference, whose
    eager time (the head's) a node's own eager is compared with."""
    mark, style = STATUS_STYLE.get(node.status, ("?", ""))
    mismatch = mismatch_text(node.result.verify if node.result is not None else None)
    # An incorrect node's message is the report's first trial again: the report alone says it. The
    # reference's message ends in its speedup against eager, i.e. against itself: left out.
    message = f"the reference (PyTorch eager): {node.message.split(';')[0]}" if node.parent is None else node.message
    out = Text.assemble((f"{mark} {node.status}", f"bold {style}"), "\n" if mismatch else f"  {message}\n")
    out.append_text(mismatch)
    prof = profile_of(node)
    if prof is None:
        out.append("No profile: the candidate failed before timing.\n" if node.failed else "No profile.\n", style="dim")
        return out
    _timing(out, node, prof, root)
    q = prof.quality
    if q is not None and q.verdict:
        out.append("measurement ", style="dim")
        rounds = f" · timed {q.rounds}×" if q.rounds > 1 else ""
        out.append(q.verdict + rounds + "\n", style="green" if q.verdict == "good" else "bold yellow")
        for why in (q.reasons or [])[:3]:
            out.append(f"  {why}\n", style="yellow")
    share = prof.custom_share
    out.append("custom share ", style="dim")
    out.append(f"{share:.0%}" if share is not None else "-")
    threads = f" · {prof.threads} threads" if prof.threads else ""
    out.append(f" · timer {prof.timer or '-'}{threads}\n", style="dim")
    _roofline(out, node, prof)
    out.append("bottleneck ", style="dim")
    out.append((prof.bottleneck or "not classified") + "\n")
    for note in prof.notes or []:
        out.append(f"note: {note}\n", style="dim")
    return out


def plan_text(node: Node) -> Group:
    """The skill applied, the plan, the debugger's diagnosis and what the node cost."""
    head = Text()
    if node.parent is None:
        head.append("The reference (root of the tree).\n", style="bold")
    else:
        head.append(f"{node.id}: {node.kind} of {node.parent}\n", style="bold")
    title, summary = skill_brief(node.skill_id)
    head.append("skill ", style="dim")
    head.append(node.skill_id or "none", style="bold cyan")
    if title:
        head.append(f" — {title}")
    head.append("\n")
    if summary:
        head.append(summary + "\n", style="italic")
    if node.mechanism:
        head.append("mechanism ", style="dim")
        head.append(node.mechanism + (f" (differs: {node.differs})" if node.differs else "") + "\n")
    parts: list = [head]
    if node.plan:
        parts.append(Text.assemble(("plan\n", "dim"), node.plan.strip() + "\n"))
    if node.diagnosis:
        parts.append(Text.assemble(("diagnosis\n", "dim"), node.diagnosis.strip() + "\n"))
    cost = Text("cost ", style="dim")
    cost.append(f"{fmt_tokens(node.tokens)} tokens · ${node.cost:.4f} · evaluation {node.eval_seconds:.1f} s\n")
    for c in node.calls:
        cost.append(f"  {c.role:<9} {c.model or '?'} · {c.prompt_tokens}+{c.completion_tokens} tokens"
                    f"{' (estimated)' if c.estimated else ''} · {c.seconds:.1f} s\n", style="dim")
    parts.append(cost)
    return Group(*parts)


class NodeDetail(Vertical):
    """Tabs for the highlighted node; ``show(node, parent)`` fills them."""

    TABS = ("tab-code", "tab-diff", "tab-profile", "tab-plots", "tab-plan")

    def compose(self) -> ComposeResult:
        with TabbedContent(initial="tab-code", id="detail-tabs"):
            with TabPane("Code", id="tab-code"):
                yield TextArea("", language="python", read_only=True, show_line_numbers=True, soft_wrap=False,
                               id="code")
            with TabPane("Diff", id="tab-diff"):
                with ScrollableContainer():
                    yield Static("", id="diff")
            with TabPane("Profile", id="tab-profile"):
                with VerticalScroll():
                    yield Static("", id="profile")
                    yield DataTable(id="kernels", cursor_type="row", zebra_stripes=True, show_cursor=False)
            with TabPane("Plots", id="tab-plots"):
                yield RunPlots(id="plots")
            with TabPane("Plan", id="tab-plan"):
                with VerticalScroll():
                    yield Static("", id="plan")

    @property
    def active(self) -> str:
        return self.query_one(TabbedContent).active

    @active.setter
    def active(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab

    def next_tab(self) -> None:
        i = self.TABS.index(self.active) if self.active in self.TABS else -1
        self.active = self.TABS[(i + 1) % len(self.TABS)]

    def on_mount(self) -> None:
        table = self.query_one("#kernels", DataTable)
        table.add_columns("share", "time", "calls", "kernel")

    def show(self, node: Node, parent: Node | None, against: bool = False, root: Node | None = None) -> None:
        """Fill the tabs with ``node``; Diff compares it with ``parent`` (``against``: a node the user chose,
        named in the tab's title). ``root``: the run's reference (else the screen's run view's), whose eager
        time the Profile tab sets beside the node's."""
        if root is None:
            view = getattr(self.screen, "view", None) if self.is_attached else None
            root = getattr(view, "root", None)
        self.query_one(TabbedContent).get_tab("tab-diff").label = (
            Text.assemble("Diff ", (f"vs {parent.id}", "bold yellow")) if against and parent else Text("Diff"))
        code = self.query_one("#code", TextArea)
        code.load_text(node.code or f"# no code: {node.message}")
        self.query_one("#diff", Static).update(diff_text(parent, node))
        self.query_one("#profile", Static).update(profile_text(node, root))
        table = self.query_one("#kernels", DataTable)
        table.clear()
        prof = profile_of(node)
        kernels = sorted(prof.kernels if prof is not None else [], key=lambda k: -(k.share or 0))
        for k in kernels[:30]:
            name = Text(("* " if k.custom else "  ") + str(k.name), style="bold green" if k.custom else "")
            table.add_row(f"{k.share or 0:.1%}", fmt_ms(k.time_ms), str(k.calls), name)
        table.display = bool(kernels)
        self.query_one("#plan", Static).update(plan_text(node))
