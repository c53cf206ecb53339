"""What the Run screen shows, rebuilt from the optimizer's events (live, or replayed from events.jsonl).

``RunView.apply(event)`` is the one place events turn into display state, so a live run and a
stored one read the same way. Formatting helpers for speedups, times and token counts live here
too: every widget prints numbers alike.
"""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field

from kernelskill.errors import UserError
from kernelskill.events import (AgentFinished, BaselineMeasured, BestImproved, BudgetUpdate, CandidateEvaluated,
                                EvaluationStep, Event, NodeSelected, RunError, RunFinished, RunStarted)
from kernelskill.results import ProfileResult
from kernelskill.runs import REASONS, RunState
from kernelskill.trajectory import INVALID, Node, Trajectory
from kernelskill.vocab import FAILURES, NodeStatus, Status, covering

# Status → (mark, style) for trees, tables and labels; beside the verdicts, a node can be invalid
# (no usable candidate) or pending (not evaluated yet).
STATUS_STYLE = covering(Status, {
    Status.ok: ("✓", "green"), Status.incorrect: ("✗", "red"), Status.compile_error: ("✗", "red"),
    Status.runtime_error: ("✗", "red"), Status.crashed: ("✗", "red"), Status.timeout: ("⏱", "red"),
    Status.flagged: ("⚑", "magenta"), Status.stochastic: ("⚠", "yellow"),
    NodeStatus.invalid: ("∅", "yellow"), NodeStatus.pending: ("…", "dim")}, "tui.model.STATUS_STYLE")
BUDGET_REASONS = ("attempts", "tokens", "usd", "minutes")


def fmt_speedup(sp: float | None, ci: list | None = None) -> str:
    """1.85× [1.70–2.01], or - when there is none."""
    if sp is None:
        return "-"
    return f"{sp:.2f}×" + (f" [{ci[0]:.2f}–{ci[1]:.2f}]" if ci and len(ci) == 2 else "")


def fmt_ms(ms: float | None) -> str:
    if ms is None:
        return "-"
    return f"{ms * 1e3:.1f} µs" if ms < 1 else f"{ms:.3f} ms"


def fmt_tokens(n: int) -> str:
    return f"{n / 1e6:.1f}M" if n >= 1e6 else f"{n / 1e3:.1f}k" if n >= 1e3 else str(n)


def fmt_usd(x: float) -> str:
    return "$0" if not x else f"${x:.4f}" if x < 0.01 else f"${x:.2f}"


def fmt_seconds(s: float) -> str:
    s = int(s)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def profile_of(node: Node | None) -> ProfileResult | None:
    """The node's profile (timing, roofline, kernels, bottleneck), None when it has none."""
    return node.profile if node is not None else None


@dataclass
class RunView:
    """Display state of one run. ``phase``: starting, running, paused, stopping, finished, error."""
    run_id: str = ""
    task: str = ""
    backend: str = ""
    device: str = ""
    policy: str = ""
    tree: Trajectory = field(default_factory=Trajectory)
    limits: dict = field(default_factory=dict)
    attempts: int = 0
    tokens: int = 0
    usd: float = 0.0
    seconds: float = 0.0
    curve: list[float] = field(default_factory=list)     # best speedup after each attempt
    phase: str = "starting"
    reason: str = ""                                      # why it finished (RunFinished.reason)
    error: str = ""
    current: str = ""                                     # what the loop is doing now
    progress: str = ""                                    # a replay's position and speed
    live: bool = True
    _clock: float | None = None                           # monotonic time of the last BudgetUpdate

    @classmethod
    def stored(cls, state: RunState) -> "RunView":
        """The head of a stored run (read-only); its events are applied by whoever shows them."""
        run = state.info.get("run", {})
        return cls(run_id=state.path.name, task=run.get("task_name", ""), backend=run.get("backend", ""),
                   device=run.get("device", ""), live=False, phase="incomplete",
                   limits=dict(state.info.get("config", {}).get("budget", {})))

    def settle(self) -> None:
        """After a stored run's last event: one that never finished was interrupted."""
        self.progress = ""
        if self.phase not in ("finished", "error"):
            self.phase, self.current = "incomplete", "interrupted (kernelskill resume)"

    # ---- events ---------------------------------------------------------------------------------
    def apply(self, ev: Event) -> None:
        """Fold one event into the view."""
        if isinstance(ev, RunStarted):
            self.run_id, self.backend, self.device, self.policy = ev.run_id, ev.backend, ev.device, ev.policy
            self.limits = dict(ev.config.get("budget", self.limits))
            self.task = self.task or ev.task.rsplit("/", 1)[-1].removesuffix(".py")
            if self.live:
                self.phase, self.current = "running", "measuring the reference"
        elif isinstance(ev, (BaselineMeasured, CandidateEvaluated, BestImproved)):
            if self.tree.apply(ev):          # the one replay (kernelskill.trajectory); the view follows it
                self._follow(ev)
        elif isinstance(ev, NodeSelected):
            verb = "repairing" if ev.action == "repair" else "expanding"
            self.current = f"attempt {ev.attempt}: {verb} {ev.node_id}"
        elif isinstance(ev, EvaluationStep):
            # a build's steps while a candidate is evaluated: the summary's "now" line follows them
            self.current = f"evaluating {ev.node_id}: {ev.text} ({ev.seconds:.0f} s)"
        elif isinstance(ev, AgentFinished) and ev.call:
            # Counted now so the meters move within an attempt; BudgetUpdate sets the exact sums.
            self.tokens += int(ev.call.get("prompt_tokens", 0)) + int(ev.call.get("completion_tokens", 0))
            self.usd += float(ev.call.get("cost", 0.0))
        elif isinstance(ev, BudgetUpdate):
            self.attempts, self.tokens, self.usd, self.seconds = ev.attempts, ev.tokens, ev.usd, ev.seconds
            self.limits = dict(ev.limits) or self.limits
            self._clock = time.monotonic()
        elif isinstance(ev, RunFinished):
            self.phase, self.reason = "finished", ev.reason
            self.current = REASONS.get(ev.reason, ev.reason)
        elif isinstance(ev, RunError):
            self.phase, self.error = "error", ev.message
            self.current = f"stopped by an error ({ev.kind})"

    def _follow(self, ev: Event) -> None:
        """The display state a change of the tree moves: the "now" line, attempts, the best-speedup curve."""
        if isinstance(ev, BaselineMeasured):
            self.current = "baseline measured"
        elif isinstance(ev, CandidateEvaluated):
            self.attempts = max(self.attempts, len(self.tree) - 1)
            best = self.tree.best()
            self.curve.append(best.speedup if best else 0.0)
        elif isinstance(ev, BestImproved) and self.curve:
            self.curve[-1] = self.tree.best().speedup or 0.0

    # ---- reading --------------------------------------------------------------------------------
    @property
    def root(self) -> Node | None:
        return self.tree.root if len(self.tree) else None

    @property
    def best(self) -> Node | None:
        return self.tree.best() if len(self.tree) else None

    @property
    def active(self) -> bool:
        """The optimizer is (or may still be) working."""
        return self.live and self.phase in ("starting", "running", "paused", "stopping")

    def elapsed(self) -> float:
        """Wall seconds spent, ticking between BudgetUpdates while the run works."""
        if self._clock is not None and self.phase in ("running", "stopping"):
            return self.seconds + time.monotonic() - self._clock
        return self.seconds

    def start_clock(self) -> None:
        self._clock = time.monotonic()

    def pause_clock(self) -> None:
        """Stop the clock while paused (a pause is not spent time)."""
        self.seconds, self._clock = self.elapsed(), None

    def resume_clock(self) -> None:
        self._clock = time.monotonic()

    def finish_note(self) -> tuple[str, str] | None:
        """(message, severity) to notify when the run ends, else None."""
        if self.phase == "error":
            return f"Run stopped by an error: {self.error}", "error"
        if self.phase != "finished":
            return None
        best = self.best
        tail = f"best {best.id} at {fmt_speedup(best.speedup)}" if best else "no correct candidate"
        text = f"Run finished: {REASONS.get(self.reason, self.reason)} — {tail}."
        return text, ("warning" if self.reason in BUDGET_REASONS else "information")


def failure_note(node: Node) -> str | None:
    """A one-line notification for a candidate that failed, else None."""
    status = node.status
    if status not in FAILURES and status != INVALID:
        return None
    msg = node.message.splitlines()[0][:160] if node.message else ""
    return f"{node.id} {status}" + (f": {msg}" if msg else "")


@functools.lru_cache(maxsize=1)
def _book():
    from kernelskill.skills import SkillBook
    try:
        return SkillBook.load()
    except UserError:                    # a broken user skill file must not take the viewer down
        return None


def skill_brief(skill_id: str | None) -> tuple[str, str]:
    """(title, summary) of a skill from the SkillBook ("", "" when unknown)."""
    book = _book() if skill_id else None
    skill = book.skills.get(skill_id) if book is not None else None
    return (skill.title, skill.summary) if skill else ("", "")
