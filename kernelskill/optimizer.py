"""The loop: select a node, let the agents make a candidate, evaluate it, remember, repeat.

    opt = Optimizer(Task.load("task.py"), llm=ScriptedLLM(...), config=load_config())
    outcome = opt.run()          # or Optimizer.from_run("runs/<id>").run() to continue a run

Every step is an event on ``opt.bus``; the run store subscribes first, so what happened is on
disk before the next step starts. ``pause``/``resume``/``stop`` are safe to call from another
thread (the TUI); they take effect between attempts.
"""
from __future__ import annotations

import dataclasses
import random
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .candidate import Candidate
from .config import ROLES, Budget, Config, load_config  # Budget: kernelskill.Budget is read from here
from .errors import StochasticTask, TaskError, UserError
from kernelskill.evaluate.judge.quality import baseline_noise_only
from .events import (BaselineMeasured, BestImproved, BudgetUpdate, CandidateEvaluated, Event, EventBus,
                     EvaluationStep, FinalistsRetimed, NodeRetimed, NodeSelected, RunError, RunFinished, RunStarted)
from .runs import RunState, RunStore, load_run, new_run_id
from .search import make_policy
from .trajectory import INVALID, Node, Trajectory
from .vocab import DID_NOT_RUN, Backend, Status


@dataclass
class Spend:
    attempts: int = 0
    tokens: int = 0
    usd: float = 0.0
    seconds: float = 0.0          # wall time over all sessions of the run

    def exceeded(self, budget: Budget) -> str | None:
        """The first budget reached (attempts, tokens, usd, minutes), else None."""
        if budget.attempts is not None and self.attempts >= budget.attempts:
            return "attempts"
        if budget.tokens is not None and self.tokens >= budget.tokens:
            return "tokens"
        if budget.usd is not None and self.usd >= budget.usd:
            return "usd"
        if budget.minutes is not None and self.seconds >= budget.minutes * 60:
            return "minutes"
        return None


@dataclass
class RunOutcome:
    run_id: str
    path: Path
    reason: str
    best_node: str | None
    best_speedup: float | None         # as last measured: by the finalists' re-time when there was one
    attempts: int
    spend: Spend
    best_speedup_ci: list = dataclasses.field(default_factory=list)
    best_quality: str | None = None

    @property
    def improved(self) -> bool:
        """A verified candidate faster than the reference was found."""
        return self.best_speedup is not None and self.best_speedup > 1.0

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "path": str(self.path), "reason": self.reason, "best_node": self.best_node,
                "best_speedup": self.best_speedup, "best_speedup_ci": self.best_speedup_ci,
                "best_quality": self.best_quality, "improved": self.improved, "attempts": self.attempts,
                "best_file": str(self.path / "best.py") if self.best_node else None,
                "spend": dataclasses.asdict(self.spend)}


def eval_options(config: Config, device: str):
    """Evaluator Options from the [eval] table."""
    from kernelskill.evaluate.api import Options
    from kernelskill.evaluate.worker.timing import TimingConfig
    e = config.eval
    return Options(device=device, trials=e.trials, build_timeout=e.build_timeout_s, run_timeout=e.run_timeout_s,
                   flags=e.flags, shapes="auto" if config.search.require_generalize else None,
                   build=e.build, cuda_arch=e.cuda_arch or None,
                   timing=TimingConfig(warmup=e.warmup, min_reps=e.min_reps, max_reps=e.max_reps,
                                       time_cap_s=e.time_cap_s, retimes=e.retimes, backoff_s=e.backoff_s,
                                       rounds=e.rounds or None, processes=e.processes or None))


def resolve_target(config: Config) -> tuple[str, str]:
    """(backend, device): auto picks cpp on a CPU, cuda on a GPU."""
    from kernelskill.evaluate.api import resolve_device
    backend, device = config.agents.backend, config.eval.device
    if device == "auto":
        device = "cpu" if backend == Backend.cpp else resolve_device("auto")
    else:
        device = resolve_device(device)
    if backend == "auto":
        backend = Backend.cpp if device == "cpu" else Backend.cuda
    if backend == Backend.cpp and device != "cpu":
        raise UserError(f"backend cpp runs on CPU tensors but the device is {device}; use --device cpu")
    if backend in (Backend.cuda, Backend.triton) and device == "cpu":
        raise UserError(f"backend {backend} needs a CUDA device; use --device cuda, or backend = \"cpp\" in [agents]")
    return backend, device


# Eager's medians in two evaluations this far apart (GPU, CPU) make their speedups incomparable:
# the candidates are re-timed head to head. A GPU's eager moves by about this much between quiet
# evaluations; a CPU's moves more (figures: docs/optimizer.md, "Measurements behind the code").
EAGER_DRIFT = {True: 0.01, False: 0.03}


def eager_drift(a: Node, b: Node) -> float | None:
    """How far eager's median in ``a``'s evaluation is from that in ``b``'s (relative), None
    when either has none."""
    ma, mb = (n.profile.baseline.median_ms if n.profile is not None and n.profile.baseline else None for n in (a, b))
    return abs(ma / mb - 1.0) if ma and mb else None


def _own_ms(n: Node) -> float:
    """The node's own median time (infinite when untimed)."""
    p = n.profile
    return p.candidate.median_ms if p is not None and p.candidate is not None else float("inf")


def _stop_if_stochastic(result) -> None:
    """A reference that differs from itself under one seed is the task's problem: the run stops
    (what no candidate can fix is not handed to the debugger)."""
    if result.status == Status.stochastic:
        raise StochasticTask(result.message)       # it names the task file and what to do


class Optimizer:
    def __init__(self, task, *, llm=None, config: Config | None = None, runs_dir: Path | str | None = None,
                 eval_opts=None, skills=None, evaluator: Callable | None = None, state: RunState | None = None,
                 racer: Callable | None = None):
        from .agents.templates import load_prompts
        from .skills import SkillBook
        self.task = task
        self.config = config or load_config()
        if self.config.search.seed is None:     # fixed now, so a resumed run draws the same numbers
            self.config.search.seed = random.randrange(2**31)
        self.backend, self.device = resolve_target(self.config)
        self.eval_opts = eval_opts or eval_options(self.config, self.device)
        if racer is None and evaluator is None:
            from kernelskill.evaluate.race import race as racer
        if evaluator is None:
            from kernelskill.evaluate.api import evaluate as evaluator
        self.evaluator = evaluator
        # Head-to-head re-times (evaluate.race): a child whose interval overlaps the best's, and the
        # finalists at the end. None (a custom evaluator without one): the low ends of the intervals decide.
        self.racer = racer
        self.prompts = load_prompts(self.config.agents.prompts_dir)
        self.book = skills if skills is not None else SkillBook.load()
        if llm is None:
            from .llm import make_llm
            llm = make_llm(self.config)
        self.llm = llm
        self.policy = make_policy(self.config.search)
        self.bus = EventBus()
        self.state = state
        self.tree = state.tree if state else Trajectory()
        self.spend = Spend(state.attempts, state.tokens, state.usd, state.seconds) if state else Spend()
        self.run_id = state.path.name if state else new_run_id(task.name)
        self.runs_dir = Path(runs_dir or self.config.runs_dir)
        self.path = state.path if state else self.runs_dir / self.run_id
        # Seconds spent: in LLM calls, in evaluations, in run() before the loop, in run() overall.
        self.timers = {"llm": 0.0, "eval": 0.0, "setup": 0.0, "wall": 0.0}
        self._go, self._stop = threading.Event(), threading.Event()
        self._go.set()
        self._parked = threading.Event()     # set while the loop waits at a pause
        self.team = None

    @classmethod
    def from_run(cls, path: Path | str, *, llm=None, flags: dict | None = None, **kw) -> "Optimizer":
        """Continue a stored run: its task, its config (``flags`` override it), its tree."""
        from .task import Task, parse_value
        state = load_run(path)
        run = state.info.get("run", {})
        overrides = {k: parse_value(str(v)) for k, v in run.get("overrides", {}).items()}
        task = Task.load(run["task"], preset=run.get("preset"), overrides=overrides)
        config = load_config(flags, base=state.info.get("config"))
        return cls(task, llm=llm, config=config, state=state, **kw)

    # ---- controls (thread-safe) -----------------------------------------------------------
    def pause(self) -> None:
        self._go.clear()

    def resume(self) -> None:
        self._go.set()

    def stop(self) -> None:
        self._stop.set()
        self._go.set()

    @property
    def paused(self) -> bool:
        return not self._go.is_set()

    @property
    def parked(self) -> bool:
        """True while the loop waits at a pause, between attempts: nothing starts until ``resume``."""
        return self._parked.is_set()

    def emit(self, event: Event) -> Event:
        return self.bus.emit(event)

    # ---- the loop --------------------------------------------------------------------------
    def run(self) -> RunOutcome:
        """Run until a budget is reached, nothing is left to try, or ``stop()``; UserError on a user's mistake."""
        from kernelskill.evaluate.launch.isolation import prestarting
        with prestarting():      # each evaluation's worker starts while the agents think
            return self._run()

    def _run(self) -> RunOutcome:
        setup = time.perf_counter()
        if hasattr(self.llm, "check"):
            self.llm.check()                 # an unreachable endpoint fails before anything is written
        summary = self.task.summary()
        exists = (self.path / "run.toml").is_file()
        store = RunStore(self.path) if exists else RunStore.create(self.runs_dir, self.run_id, self._info())
        self.timers["setup"] = time.perf_counter() - setup
        store.tree = self.tree
        unsubscribe = self.bus.subscribe(store.write, first=True)
        self._started, self._prior = time.perf_counter(), self.spend.seconds
        started = self._started
        try:
            self.emit(RunStarted(run_id=self.run_id, task=str(self.task.path), task_hash=self.task.hash,
                                 backend=self.backend, device=self.device, policy=self.policy.name,
                                 config=self.config.to_dict(), resumed=len(self.tree) > 0))
            if not len(self.tree):
                self._baseline()
            arch = self._arch()
            from .agents.team import Team
            self.team = Team(self.llm, self.prompts, self.backend, self.task, summary, self.book, emit=self.emit,
                             arch=arch, skills_limit=self.config.agents.skills_limit,
                             context_nodes=self.config.search.context_nodes, machine=self._machine(),
                             budgets={role: self.config.role(role).prompt_tokens for role in ROLES})
            reason = self._loop()
            final = self._finalists() if reason != "stopped" else None
            best = self.tree.best()
            self._budget_update()
            sp, ci, q = final or ((best.speedup, best.speedup_ci, best.quality) if best else (None, [], None))
            self.emit(RunFinished(reason=reason, best_node=best.id if best else None, best_speedup=sp,
                                  attempts=self.spend.attempts, best_speedup_ci=ci, best_quality=q))
        except (UserError, KeyboardInterrupt) as e:
            self.emit(RunError(message=str(e) or type(e).__name__, kind=type(e).__name__))
            raise
        except Exception as e:
            # A bug, or a failure nobody foresaw: the run's record ends with it (events.jsonl,
            # traceback.txt, report.md) before it propagates, and the run can be resumed.
            import traceback
            self.emit(RunError(message=f"{type(e).__name__}: {e}", kind="crash", traceback=traceback.format_exc()))
            raise
        finally:
            self.timers["wall"] += time.perf_counter() - started
            unsubscribe()
            store.close()
        return RunOutcome(self.run_id, self.path, reason, best.id if best else None, sp, self.spend.attempts,
                          self.spend, best_speedup_ci=list(ci or []), best_quality=q)

    def _machine(self) -> str:
        """The machine profile the agents read (``evaluate.machine``): measured once per machine and
        cached, so a resumed run's prompts say the same."""
        from kernelskill.evaluate.api import machine
        from kernelskill.evaluate.machine import render
        try:
            return render(machine(self.device, self.eval_opts), self.backend)
        except (UserError, OSError) as e:
            return f"(not measured: {e})"

    def _arch(self) -> str | None:
        """The GPU's compute capability from the baseline's environment (None on the CPU or when unknown)."""
        from .skills import parse_arch
        root = self.tree.root.result
        cap = root.env.capability if root is not None and self.backend != Backend.cpp else None
        try:
            return f"sm_{parse_arch(str(cap))[0]}" if cap else None
        except UserError:
            return None

    def _elapsed(self) -> float:
        return self._prior + time.perf_counter() - self._started

    def _loop(self) -> str:
        while True:
            paused_at = time.perf_counter()
            if not self._go.is_set():
                self._parked.set()
            self._go.wait()
            self._parked.clear()
            self._started += time.perf_counter() - paused_at          # a pause is not spent time
            self.spend.seconds = self._elapsed()
            if self._stop.is_set():
                return "stopped"
            reason = self.spend.exceeded(self.config.budget) or self._at_roof()
            if reason:
                return reason
            sel = self.policy.select(self.tree)
            if sel is None:
                return "exhausted"
            attempt = self.spend.attempts + 1
            self.emit(NodeSelected(node_id=sel.node_id, action=sel.action, reason=sel.reason, attempt=attempt))
            self._attempt(sel, attempt)

    def _baseline(self) -> None:
        cand = Candidate.from_source(self.task.source + "\n\nModelNew = Model\n")
        t = time.perf_counter()
        # The reference runs at every shape by construction: no shapes for the baseline.
        result = self.evaluator(self.task, cand, opts=dataclasses.replace(self.eval_opts, shapes=None))
        seconds = time.perf_counter() - t
        self.timers["eval"] += seconds
        if result.status in DID_NOT_RUN:
            raise TaskError(f"{self.task.path}: the reference itself failed to run: {result.status}: {result.message}")
        _stop_if_stochastic(result)
        root = Node(id="n0", parent=None, kind="root", code=self.task.source, code_hash=cand.hash,
                    result=result, status=result.status, speedup=1.0, message=result.message,
                    eval_seconds=seconds)
        self.tree.add(root)
        self.emit(BaselineMeasured(node=root.snapshot(), seconds=seconds))

    def _attempt(self, sel, attempt: int) -> Node:
        parent = self.tree.get(sel.node_id)
        node = Node(id=self.tree.new_id(), parent=parent.id, kind="plan" if sel.action == "expand" else "repair",
                    code="")
        made = self.team.expand(self.tree, parent, node, attempt, why=sel.reason) if sel.action == "expand" else \
            self.team.repair(self.tree, parent, node, attempt)
        self.timers["llm"] += sum(c.seconds for c in node.calls)
        if node.retime_of:
            return self._planner_retime(node)
        evaluated = made and self._evaluate(node)
        best_before = self.tree.best()
        why = self._promotion(node, best_before) if evaluated else None
        self.tree.add(node)
        self.spend.attempts += 1
        self.spend.tokens += node.tokens
        self.spend.usd += node.cost
        self.emit(CandidateEvaluated(node=node.snapshot(), evaluated=evaluated))
        if evaluated and (node.skill_id or node.secondary_skill):
            self._record(node)
        if why:
            self.tree.promote(node.id)
            self.emit(BestImproved(node_id=node.id, speedup=node.speedup,
                                   previous=best_before.speedup if best_before else None, why=why))
        self._budget_update()
        return node

    # ---- what counts as progress ----------------------------------------------------------------
    def _promotion(self, node: Node, best: Node | None) -> str | None:
        """Why ``node`` becomes the best, or None: it must be faster with confidence, never by noise.

        Measured well and its interval entirely above the best's: yes. Faster by the point estimate
        but the intervals overlap: a head-to-head re-time of the two decides (``node.race``). Two
        ratios to eager runs that drifted apart are not compared at all: the re-time decides, and
        one whose own time is faster is re-timed even when its ratio is lower. A candidate whose
        round was noisy only for the baseline's sake is re-timed, not left out."""
        if not (node.ok and node.duplicate_of is None and node.speedup is not None):
            return None
        if not node.measured_well:
            if self.racer is None or not baseline_noise_only(node.profile.quality if node.profile else None,
                                                             self.device):
                return None
            self._retime(node, best, "its own samples were clean; the eager beside it was noisy")
            if not node.measured_well:
                return None
            if best is None:
                return "the first correct candidate measured well (re-timed after a noisy baseline)"
            return "faster in a head-to-head re-time" if node.race.get("winner") == 1 else None
        if best is None:
            return "the first correct candidate measured well"
        drift = eager_drift(node, best)
        drifted = drift is not None and drift > EAGER_DRIFT[self.device.startswith("cuda")]
        if node.speedup <= best.speedup and not (drifted and _own_ms(node) < _own_ms(best)):
            return None
        best_hi = best.speedup_ci[1] if best.speedup_ci else best.speedup
        if best.measured_well and node.conservative > best_hi and not drifted:
            return "faster with confidence: the intervals are apart"
        if self.racer is None:
            return "faster by the low end of its interval" if node.conservative > best.conservative else None
        why = (f"eager drifted {drift:.1%} between the two evaluations: their ratios are not comparable"
               if drifted else "the intervals overlap")
        self._retime(node, best, why)
        return "faster in a head-to-head re-time" if node.race.get("winner") == 1 else None

    def _planner_retime(self, asked: Node) -> Node:
        """The planner asked for a node's re-time instead of a plan: race it with the best (alone
        when it is the best); its tokens count, the attempt does not, and a win promotes it."""
        target, best = self.tree.get(asked.retime_of), self.tree.best()
        self.spend.tokens += asked.tokens
        self.spend.usd += asked.cost
        if self.racer is not None:
            self._retime(target, best, f"the planner asked (from {asked.parent})")
            if best is not None and best.id != target.id and target.race.get("winner") == 1:
                self.tree.promote(target.id)
                self.emit(BestImproved(node_id=target.id, speedup=target.speedup, previous=best.speedup,
                                       why="faster in a head-to-head re-time the planner asked for"))
        else:                           # nothing can re-time: the planner's request is noted, once
            target.race = {"status": "failed", "why": "the planner asked", "message": "no racer in this run"}
        self._budget_update()
        return asked

    def _retime(self, node: Node, best: Node | None, why: str) -> None:
        """Re-time ``node`` head to head with the best (alone against eager when there is none):
        ``node.race`` holds the race, ``against`` and ``why``."""
        codes = [best.code, node.code] if best is not None and best.id != node.id else [node.code]
        t = time.perf_counter()
        res = self.racer(self.task, codes, opts=self.eval_opts)
        self.timers["eval"] += time.perf_counter() - t
        node.race = {"against": best.id if len(codes) == 2 else None, "why": why, **res.to_dict()}
        if len(codes) == 1:             # alone: the race's winner field is about eager, not a rival
            node.race["winner"] = None
        self.emit(NodeRetimed(node_id=node.id, against=node.race["against"], why=why, race=res))

    def _finalists(self) -> tuple | None:
        """Re-time the top candidates head to head; the winner (with confidence) becomes the best.

        Returns (speedup, interval, quality) of the best as that race measured it, or None."""
        k = self.config.search.finalists
        pool = self.tree.leaders(k)
        if not pool:
            return None
        if self.racer is None or (len(pool) == 1 and pool[0].measured_well):
            if self.tree.best() is None:        # nothing measured well: report the highest low end, as such
                self.tree.promote(pool[0].id)
                self.emit(BestImproved(node_id=pool[0].id, speedup=pool[0].speedup, why="no candidate measured "
                                       "well; the highest low end of the interval, not confident"))
            return None
        self.emit(NodeSelected(node_id=pool[0].id, action="finalists",
                               reason=f"re-timing the top {len(pool)} head to head: {', '.join(n.id for n in pool)}",
                               attempt=self.spend.attempts))
        t = time.perf_counter()
        res = self.racer(self.task, [n.code for n in pool], opts=self.eval_opts)
        self.timers["eval"] += time.perf_counter() - t
        winner = pool[res.winner] if res.winner is not None else None
        self.emit(FinalistsRetimed(node_ids=[n.id for n in pool], race=res,
                                   winner=winner.id if winner else None))
        best = self.tree.best()
        pick = winner or (best if best is not None else pool[0])
        if best is None or pick.id != best.id:
            why = ("the finalists' head-to-head re-time" if winner else
                   "no candidate measured well; the highest low end of the interval, not confident")
            self.tree.promote(pick.id)
            self.emit(BestImproved(node_id=pick.id, speedup=pick.speedup, previous=best.speedup if best else None,
                                   why=why))
        if res.status != "ok":
            return None
        entry = res.entries[pool.index(pick)]
        return entry.speedup, entry.speedup_ci, res.quality.verdict if res.quality else None

    def _at_roof(self) -> str | None:
        """"roof" when the best runs within the configured share of its roofline floor's pace."""
        limit = self.config.search.stop_at_roof
        best = self.tree.best()
        if limit is None or best is None or not best.measured_well:
            return None
        roof = best.profile.roofline if best.profile is not None else None
        frac = roof.fraction if roof is not None else None
        return "roof" if isinstance(frac, (int, float)) and frac >= limit else None

    def _budget_update(self) -> None:
        self.spend.seconds = self._elapsed()
        self.emit(BudgetUpdate(attempts=self.spend.attempts, tokens=self.spend.tokens, usd=round(self.spend.usd, 6),
                               seconds=round(self.spend.seconds, 3), limits=dataclasses.asdict(self.config.budget)))

    def _evaluate(self, node: Node) -> bool:
        """Evaluate the node's code unless identical code was evaluated before; True when it ran."""
        try:
            cand = Candidate.from_source(node.code)
        except UserError as e:
            node.status, node.message = INVALID, str(e)
            return False
        node.code_hash = cand.hash
        prior = self.tree.find_code(cand.hash)
        if prior is not None:
            node.result, node.status, node.speedup = prior.result, prior.status, prior.speedup
            node.duplicate_of, node.message = prior.id, f"identical to {prior.id}: not evaluated again"
            return False
        t = time.perf_counter()
        opts = dataclasses.replace(self.eval_opts, on_step=lambda text: self.emit(
            EvaluationStep(node_id=node.id, text=text, seconds=round(time.perf_counter() - t, 2))))
        try:
            result = self.evaluator(self.task, cand, opts=opts)
        except TaskError:
            raise
        except UserError as e:          # e.g. a candidate for another backend than this machine runs
            node.status, node.message = INVALID, str(e)
            return False
        finally:
            node.eval_seconds = time.perf_counter() - t
            self.timers["eval"] += node.eval_seconds
        _stop_if_stochastic(result)
        node.result, node.status, node.message = result, result.status, result.message
        node.speedup = result.speedup if result.ok else None
        return True

    def _record(self, node: Node) -> None:
        """The node's outcome in the statistics of its skill, and of its second skill the same."""
        sp = node.speedup if node.speedup and node.speedup > 0 else None
        for skill in (node.skill_id, node.secondary_skill):
            if skill in self.book.skills:
                self.book.record_outcome(skill, self.team.op_classes, self.tree.outcome(node), sp,
                                         quality=node.quality or "good", backend=self.backend, arch=self.team.arch)

    def _info(self) -> dict[str, Any]:
        from . import __version__
        t = self.task
        return {"run": {"id": self.run_id, "created": time.strftime("%Y-%m-%dT%H:%M:%S"), "task": str(t.path),
                        "task_name": t.name, "preset": t.preset, "overrides": {k: str(v) for k, v in t.overrides.items()},
                        "backend": self.backend, "device": self.device, "kernelskill": __version__},
                "config": self.config.to_dict()}


def optimize(task, *, llm=None, budget: "int | Budget | None" = None, config: Config | None = None,
             runs_dir: Path | str | None = None, device: str | None = None, policy: str | None = None,
             flags: dict | None = None, on_event: Callable[[Event], Any] | None = None, **kw) -> RunOutcome:
    """Optimize ``task`` (a Task, or a task file/directory path) and return the run's outcome.

    ``llm``: an object with ``complete`` (e.g. ``ScriptedLLM``); None uses the configured
    OpenAI-compatible endpoint. ``budget``: an int (attempts) or a ``Budget``. ``flags`` are more
    config settings ({dotted key: value}); ``config`` replaces the config files entirely.
    ``on_event`` is subscribed to the event bus (progress displays). Further keywords go to
    ``Optimizer`` (``skills``, ``evaluator``, ``eval_opts``).
    """
    from .config import flatten, nest
    from .task import Task
    if not isinstance(task, Task):
        task = Task.load(task)
    if isinstance(budget, bool) or not isinstance(budget, (int, Budget, type(None))):
        raise UserError(f"budget: expected an int (attempts) or a Budget, got {budget!r}")
    settings = {**(flags or {}), **{k: v for k, v in {"eval.device": device, "search.policy": policy,
                                                       "runs_dir": str(runs_dir) if runs_dir else None}.items()
                                     if v is not None}}
    if isinstance(budget, int):
        settings["budget.attempts"] = budget
    if config is None:
        config = load_config(settings)
    else:                                   # a copy: the caller's Config is not changed
        config = config.copy()
        for key, value in flatten(nest(settings), "optimize()").items():
            config.set(key, value)
    if isinstance(budget, Budget):          # every limit as given; None is no limit
        for key, value in dataclasses.asdict(budget).items():
            if value is not None:
                flatten(nest({f"budget.{key}": value}), "optimize(budget=…)")     # validates
        config.budget = dataclasses.replace(budget)
    opt = Optimizer(task, llm=llm, config=config, **kw)
    if on_event is not None:
        opt.bus.subscribe(on_event)
    return opt.run()
