"""Run: a live run (driven in a thread worker, fed by the optimizer's event bus) or a stored one (replayed
from events.jsonl, read-only). Both go through ``RunView.apply`` and the same widgets."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Header, Input, Static, TabbedContent
from textual.worker import Worker, WorkerState

from kernelskill.errors import UserError
from kernelskill.events import (AgentDelta, AgentFinished, AgentStarted, BestImproved, CandidateEvaluated, Event,
                                NodeSelected, RunError, RunFinished, RunStarted)
from kernelskill.runs import RunState
from kernelskill.trajectory import Node
from kernelskill.vocab import Status

from ..launch import RunRequest, build_optimizer, resume_flags
from ..model import RunView, failure_note, fmt_speedup
from ..widgets.activity import ActivityLog
from ..widgets.candidate_tree import CandidateTree
from ..widgets.node_detail import NodeDetail, quality_note
from ..widgets.notices import NoticeBar
from ..widgets.plots import RunPlots
from ..widgets.summary import RunSummary
from .kernel_actions import KernelWork
from .overlays import MIN_HEIGHT, MIN_WIDTH, KeepsFocus, TooSmall

class RunScreen(KernelWork, KeepsFocus, Screen):
    """The candidate tree, the selected node in tabs, the agents' activity, the run's head."""

    FOCUS_HOME = "CandidateTree"

    HORIZONTAL_BREAKPOINTS = [(0, "-too-narrow"), (MIN_WIDTH, "-narrow"), (150, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-too-short"), (MIN_HEIGHT, "-short"), (36, "-tall")]
    BINDINGS = [Binding("p", "pause", "Pause"), Binding("r", "resume", "Resume"), Binding("s", "stop", "Stop"),
                Binding("plus,equals_sign", "faster", "Faster", key_display="+"),
                Binding("minus", "slower", "Slower", key_display="-"),
                Binding("e", "to_end", "To end"),
                Binding("t", "next_tab", "Next tab"), Binding("v", "next_plot", "Next plot"),
                Binding("slash", "filter", "Filter", key_display="/"),
                Binding("b", "best", "Best"), Binding("u", "duplicates", "Hide duplicates", show=False),
                Binding("m", "mark", "Mark for diff", show=False),
                Binding("D", "diff_run", "Diff with a run's best", show=False),
                # On the shown node of a stored run (tui.screens.kernel_actions), in a worker.
                Binding("G", "generalize", "Generalize: the node at other shapes", show=False),
                Binding("X", "export_package", "Export the node as a package (<run>/export/<node>)", show=False),
                Binding("h", "history", "History"), Binding("escape", "back", "Back")]
    HELP_KEYS = (("↑↓ ←→", "move in the tree (a focused pane scrolls)"),
                 ("enter", "show the node under the cursor (so does a click)"),
                 ("space", "fold / unfold the node's children in the tree (▶ marks a folded node)"),
                 ("tab, shift+tab", "the tree, the tabs, the activity log"),
                 ("esc in the filter", "clear it"), ("esc", "hide the generalize / export panel once it is done"))
    # When a key that does not apply now would (the keys overlay shows it dimmed, with this).
    HELP_WHEN = {"pause": "a live run, or a replay while it plays", "resume": "a paused live run or replay",
                 "stop": "a live run", "faster": "a replay, while it plays", "slower": "a replay, while it plays",
                 "to_end": "a replay, while it plays", "next_plot": "the Plots tab, narrower than 150 columns",
                 "back": "once the run is over", "generalize": "a stored run (or a replay) that is over",
                 "export_package": "a stored run (or a replay) that is over"}
    REPLAY_GAP_S = 2.0            # a replay waits at most this long (at 1×) between two events

    @dataclass
    class OptimizerEvent(Message):
        """An event of the run, posted from the optimizer's thread."""
        event: Event

    @dataclass
    class OptimizerReady(Message):
        """The optimizer is built (the task loaded, the LLM client made) and about to run."""
        optimizer: object

    @dataclass
    class RunEnded(Message):
        """The worker returned; ``error`` is a UserError's message."""
        error: str = ""

    def __init__(self, view: RunView, request: RunRequest | None = None, events: list[Event] | None = None,
                 speed: float | None = None, resume: Path | None = None) -> None:
        super().__init__()
        self.view, self.request, self._replay = view, request, events or []
        self.resume_path = resume          # a stored run to continue (its events are shown first)
        self._replay_path: Path | None = resume
        self.speed = speed                 # a replay's speed (1: the run's own pace); None: shown at once
        self.played = 0                    # events of a replay applied so far
        self.replay_paused = False
        self._replay_timer = None
        self.optimizer = None
        self._latest: str | None = None
        self.diff_base: Node | None = None         # m (or D): the Diff tab compares against this node
        self.shown_id: str | None = None           # the node in the tabs

    @classmethod
    def live(cls, request: RunRequest) -> "RunScreen":
        return cls(RunView(task=request.task.rstrip("/").rsplit("/", 1)[-1].removesuffix(".py")), request)

    @classmethod
    def stored(cls, state: RunState) -> "RunScreen":
        """A stored run, read-only."""
        screen = cls(RunView.stored(state), events=state.events)
        screen._replay_path = state.path
        return screen

    @classmethod
    def resumed(cls, state: RunState) -> "RunScreen":
        """Continue a stored run live (as ``kernelskill resume``): its events first, then the new ones."""
        view = RunView(task=RunView.stored(state).task)
        return cls(view, events=state.events, resume=state.path)

    @classmethod
    def replayed(cls, state: RunState, speed: float = 1.0) -> "RunScreen":
        """A stored run whose events play as they came, ``speed`` times faster (read-only)."""
        view = RunView.stored(state)
        view.phase = "replaying"
        screen = cls(view, events=state.events, speed=speed)
        screen._replay_path = state.path
        return screen

    @property
    def replaying(self) -> bool:
        """A replay with events still to play."""
        return self.speed is not None and self.played < len(self._replay)

    # ---- layout ---------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header()
        yield RunSummary(id="summary")
        with Container(id="run-body"):
            with Vertical(id="tree-pane"):
                yield Input(placeholder="filter: id, status, skill", id="tree-filter", compact=True)
                yield CandidateTree(id="tree")
            yield NodeDetail(id="detail")
            yield ActivityLog(id="activity")
        yield Static("", id="kernel-work")
        yield NoticeBar(id="notice")
        yield TooSmall()
        yield Footer(show_command_palette=False, compact=True)

    def on_mount(self) -> None:
        self.sub_title = "starting a run" if self.view.live else f"{self.view.run_id} · read-only"
        self.query_one("#tree-pane").border_title = "Candidates"
        self.query_one("#tree-filter", Input).display = False
        self.query_one("#tree-filter", Input).can_focus = False      # hidden: never the focus Textual falls back to
        self.query_one("#activity").border_title = "Agent activity"
        self.query_one("#kernel-work", Static).display = False
        self.query_one(CandidateTree).focus()
        if self.speed is not None:
            self.sub_title = f"{self.view.run_id} · replay"
            self._show_progress()
            self._replay_timer = self.set_timer(0.05, self._replay_next)
        elif self._replay:
            for ev in self._replay:
                self._apply(ev, replay=True)
            self.view.settle()
            best = self.view.best or self.view.root
            if best is not None:
                self._sync_tree()
                self.query_one(CandidateTree).select_id(best.id)
        self._refresh_summary()
        if self.request is not None or self.resume_path is not None:
            self.set_interval(1.0, self._tick)
            self._drive()

    # ---- the live run -------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="optimizer", exit_on_error=False)
    def _drive(self) -> None:
        """Build the optimizer and run it; its events come back as messages (post_message is thread-safe)."""
        try:
            if self.resume_path is not None:
                from kernelskill.optimizer import Optimizer
                opt = Optimizer.from_run(self.resume_path, flags=resume_flags(self.app.config))
            else:
                opt = build_optimizer(self.request, self.app.config)
            opt.bus.subscribe(lambda ev: self.post_message(self.OptimizerEvent(ev)))
            self.post_message(self.OptimizerReady(opt))
            opt.run()
        except UserError as e:
            self.post_message(self.RunEnded(error=str(e)))
            return
        self.post_message(self.RunEnded())

    def on_run_screen_optimizer_ready(self, message: OptimizerReady) -> None:
        self.optimizer = message.optimizer
        self.view.phase = "paused" if self.optimizer.paused else "running"
        self.view.current = "measuring the reference"
        self.view.start_clock()
        self._refresh_summary()

    def on_run_screen_optimizer_event(self, message: OptimizerEvent) -> None:
        self._apply(message.event)

    def on_run_screen_run_ended(self, message: RunEnded) -> None:
        if not message.error:
            return
        if self.view.phase == "error":
            return                                  # the RunError event said it already
        if not self.view.run_id:                    # nothing was stored: back to the form to fix it
            self.app.notify(message.error, title="Run not started", severity="error", timeout=15)
            if self.is_current:
                self.dismiss()
            return
        self.view.phase, self.view.error = "error", message.error
        self.notify(message.error, title="Run stopped", severity="error", timeout=15)
        self._refresh_summary()
        self.refresh_bindings()

    @on(Worker.StateChanged)
    def _worker_failed(self, event: Worker.StateChanged) -> None:
        """A bug (not a user's mistake) in the run: say so; the store kept every event before it."""
        if event.worker.group == "optimizer" and event.state == WorkerState.ERROR:
            err = event.worker.error
            self.view.phase, self.view.error = "error", f"{type(err).__name__}: {err}"
            where = f"; the run is saved in {self.optimizer.path}" if self.optimizer is not None else ""
            self.notify(f"{self.view.error}{where}", title="Run failed", severity="error", timeout=20)
            self._refresh_summary()
            self.refresh_bindings()

    def _tick(self) -> None:
        if self.view.active:
            self._refresh_summary()

    # ---- a replay -----------------------------------------------------------------------------
    def _replay_next(self) -> None:
        """Apply the next stored events (those of one instant together) as if they came from a live run,
        then wait for the next instant, the run's own gap divided by the speed (at most REPLAY_GAP_S)."""
        self._replay_timer = None
        gap = 0.0
        while self.replaying and not self.replay_paused and gap < 0.005:
            ev = self._replay[self.played]
            self.played += 1
            self._apply(ev)
            if self.replaying:
                gap = min(max(self._replay[self.played].t - ev.t, 0.0), self.REPLAY_GAP_S) / self.speed
        if not self.replaying:
            self._replay_done()
            return
        self._show_progress()
        if not self.replay_paused:
            self._replay_timer = self.set_timer(gap, self._replay_next)

    def _replay_done(self, following: bool | None = None) -> None:
        """The last event is played: the cursor goes to the best node, unless the user moved it."""
        self.view.settle()
        tree = self.query_one(CandidateTree)
        if following is None:
            following = tree.current_id in (None, self._latest)
        if self.view.best is not None and following:
            tree.select_id(self.view.best.id)
        self._refresh_summary()
        self.refresh_bindings()

    def _show_progress(self) -> None:
        state = "paused" if self.replay_paused else f"{self.speed:g}×"
        self.view.progress = f"{self.played}/{len(self._replay)} events · {state}"
        self._refresh_summary()

    def action_faster(self) -> None:
        self.speed = min(self.speed * 2, 256.0)
        self._show_progress()

    def action_slower(self) -> None:
        self.speed = max(self.speed / 2, 0.25)
        self._show_progress()

    def action_to_end(self) -> None:
        """Play the rest of a replay at once."""
        if self._replay_timer is not None:
            self._replay_timer.stop()
            self._replay_timer = None
        following = self.query_one(CandidateTree).current_id in (None, self._latest)
        while self.replaying:
            self._apply(self._replay[self.played], replay=True)
            self.played += 1
        self._sync_tree()
        self._replay_done(following)

    # ---- events → widgets ---------------------------------------------------------------------
    def _apply(self, ev: Event, replay: bool = False) -> None:
        activity = self.query_one(ActivityLog)
        if isinstance(ev, AgentDelta):
            activity.delta(ev.role, ev.text)
            return
        paused = self.view.phase == "paused"
        self.view.apply(ev)
        if paused and self.view.phase == "running":
            self.view.phase = "paused"              # a resumed run's RunStarted does not undo a pause
        if isinstance(ev, RunStarted):
            kind = "live" if self.view.live else "replay" if self.speed is not None else "read-only"
            self.sub_title = f"{ev.run_id} · {kind}"
            activity.note(f"run {ev.run_id}: {ev.backend} on {ev.device}, policy {ev.policy}"
                          + (" (resumed)" if ev.resumed else ""), "bold")
        elif isinstance(ev, AgentStarted):
            activity.started(ev.role, ev.node_id, ev.attempt)
        elif isinstance(ev, AgentFinished):
            activity.finished(ev.role, ev.ok, ev.text, ev.error)
        elif isinstance(ev, NodeSelected):
            activity.note(f"▶ attempt {ev.attempt}: {ev.action} {ev.node_id} ({ev.reason})", "bold")
        elif isinstance(ev, CandidateEvaluated):
            note = failure_note(ev.node)
            node = self.view.tree.get(ev.node.id)            # the view's copy, added by its apply above
            dup = node.duplicate_of
            ok = f"{node.id} ok {fmt_speedup(node.speedup, node.speedup_ci)}{quality_note(node.profile)}" + (
                f" (same code as {dup}, not evaluated again)" if dup else "")
            activity.note(f"■ {note or ok}", "red" if note else "green")
            if note and not replay and ev.evaluated:
                self.notify(note, title="Candidate failed", severity="warning", timeout=6)
        elif isinstance(ev, BestImproved):
            activity.note(f"★ new best {ev.node_id}: {fmt_speedup(ev.speedup)}", "bold yellow")
        elif isinstance(ev, (RunFinished, RunError)):
            activity.note(f"■ {self.view.current}" + (f": {self.view.error}" if self.view.error else ""), "bold")
            note = self.view.finish_note()
            if note and not replay:
                self.notify(note[0], title="Run stopped" if note[1] == "error" else "Run finished", severity=note[1],
                            timeout=15 if note[1] != "information" else 8)
            self.refresh_bindings()
        if replay:
            return
        if isinstance(ev, (CandidateEvaluated, BestImproved)) or ev.name == "BaselineMeasured":
            self._sync_tree(follow=True)
            current = self.query_one(CandidateTree).current_id
            if current in self.view.tree:
                self.query_one(RunPlots).show(self.view, self.view.tree.get(current))
        self._refresh_summary()

    def _sync_tree(self, follow: bool = False) -> None:
        tree = self.query_one(CandidateTree)
        added = tree.sync(self.view)
        if follow and added:
            # Follow the newest node unless the user moved away to look at another one.
            if tree.current_id in (None, self._latest):
                tree.select_id(added[-1])
            self._latest = added[-1]
        elif added:
            self._latest = added[-1]

    def _refresh_summary(self) -> None:
        self.query_one(RunSummary).show(self.view)

    @on(CandidateTree.NodeChosen)
    def _show_node(self, event: CandidateTree.NodeChosen) -> None:
        if event.node_id in self.view.tree:
            self._show(event.node_id)

    def _show(self, node_id: str) -> None:
        """The node in the tabs; its Diff against the marked node (m, D) when there is one, else its parent."""
        node = self.view.tree.get(node_id)
        self.shown_id = node_id
        base = self.diff_base if self.diff_base is not None and self.diff_base.id != node.id else None
        parent = base or (self.view.tree.get(node.parent) if node.parent else None)
        self.query_one(NodeDetail).show(node, parent, against=base is not None)
        self.query_one(RunPlots).show(self.view, node)

    def _tree_changed(self) -> None:
        """After a filter or the duplicate setting: say what is hidden in the pane's subtitle."""
        tree = self.query_one(CandidateTree)
        tree.refilter()
        parts = [f"“{tree.filter_text}”"] if tree.filter_text else []
        if tree.hide_duplicates:
            parts.append("no duplicates")
        hidden = f" · {tree.hidden} hidden" if tree.hidden else ""
        self.query_one("#tree-pane").border_subtitle = " · ".join(parts) + hidden if parts else ""

    # ---- actions --------------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Run controls only on a live run (dimmed when they do not apply now); Back once it is over."""
        if action == "next_plot":
            return self.is_mounted and self.query_one(NodeDetail).active == "tab-plots"
        if action in ("faster", "slower", "to_end"):
            return self.replaying
        if self.speed is not None and action in ("pause", "resume"):
            if not self.replaying:
                return False                         # the replay is over: nothing to pause
            return True if (action == "pause") != self.replay_paused else None
        if action in ("pause", "resume", "stop"):
            if not self.view.live:
                return False
            if action == "pause":
                return True if self.optimizer is not None and self.view.phase == "running" else None
            if action == "resume":
                return True if self.view.phase == "paused" else None
            return True if self.view.active and self.view.phase != "stopping" else None
        if action in ("generalize", "export_package"):
            return self._replay_path is not None and not self.view.active and self.optimizer is None
        if action == "back":
            if self.is_mounted and self.query_one("#tree-filter", Input).display:
                return True                                  # esc clears the filter
            return None if self.view.active else True
        return True

    def action_pause(self) -> None:
        if self.speed is not None:
            self.replay_paused = True
            if self._replay_timer is not None:
                self._replay_timer.stop()
                self._replay_timer = None
            self._show_progress()
            self.refresh_bindings()
            return
        self.optimizer.pause()
        self.view.pause_clock()
        self.view.phase, self.view.current = "paused", "r resumes"
        self._controls_changed("Paused: the attempt in flight finishes, then the run waits.")

    def action_resume(self) -> None:
        if self.speed is not None:
            self.replay_paused = False
            self._show_progress()
            self.refresh_bindings()
            if self._replay_timer is None:
                self._replay_next()
            return
        self.optimizer.resume()
        self.view.resume_clock()
        self.view.phase, self.view.current = "running", "resumed"
        self._controls_changed("Resumed.")

    def action_stop(self) -> None:
        if self.optimizer is None:
            self.notify("The run is still starting; stop it once it runs.", severity="warning")
            return
        self.optimizer.stop()
        self.view.phase, self.view.current = "stopping", "after the attempt in flight"
        self._controls_changed("Stopping after the attempt in flight; the run is saved.")

    def _controls_changed(self, text: str) -> None:
        self.notify(text, timeout=4)
        self._refresh_summary()
        self.refresh_bindings()

    def action_next_tab(self) -> None:
        self.query_one(NodeDetail).next_tab()

    def action_next_plot(self) -> None:
        self.query_one(RunPlots).next_plot()

    @on(TabbedContent.TabActivated)
    def _tab_changed(self) -> None:
        self.refresh_bindings()                      # v applies on the Plots tab only

    def action_filter(self) -> None:
        box = self.query_one("#tree-filter", Input)
        box.display = box.can_focus = True
        box.focus()

    @on(Input.Changed, "#tree-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.query_one(CandidateTree).filter_text = event.value.strip()
        self._tree_changed()

    @on(Input.Submitted, "#tree-filter")
    def _filter_done(self) -> None:
        self.query_one(CandidateTree).focus()

    def action_duplicates(self) -> None:
        """Hide (or show again) the nodes whose code is identical to an earlier node's."""
        tree = self.query_one(CandidateTree)
        tree.hide_duplicates = not tree.hide_duplicates
        self._tree_changed()
        n = sum(1 for node in self.view.tree if node.duplicate_of)
        self.notify(f"{n} duplicate node{'s' if n != 1 else ''} {'hidden' if tree.hide_duplicates else 'shown'}"
                    " (u again: " + ("show" if tree.hide_duplicates else "hide") + ")", timeout=4)

    def action_best(self) -> None:
        best = self.view.best
        if best is None:
            self.notify("No correct candidate yet.", severity="warning")
        elif not self.query_one(CandidateTree).select_id(best.id):
            self.notify(f"The best node {best.id} is hidden by the filter (/ then esc clears it).", severity="warning")

    def action_mark(self) -> None:
        """Mark the node under the cursor: Diff then compares every node against it (m on it again unmarks)."""
        tree = self.query_one(CandidateTree)
        node_id = tree.current_id
        if node_id is None or node_id not in self.view.tree:
            return
        if self.diff_base is not None and self.diff_base.id == node_id:
            self.diff_base = None
            self.notify("Diff against each node's parent again.", timeout=4)
        else:
            self.diff_base = self.view.tree.get(node_id)
            self.notify(f"Diff now compares against {node_id}: move to another node (m on {node_id} unmarks).",
                        timeout=6)
        self._show(node_id)

    def action_diff_run(self) -> None:
        """Choose another stored run: Diff compares each node against that run's best.py."""
        from .overlays import RunPickerScreen

        def chosen(path: Path | None) -> None:
            if path is None:
                return
            code = (path / "best.py").read_text(encoding="utf-8")
            self.diff_base = Node(id=f"{path.name}/best", parent=None, kind="root", code=code, status=Status.ok)
            current = self.query_one(CandidateTree).current_id
            if current in self.view.tree:
                self._show(current)
            self.query_one(NodeDetail).active = "tab-diff"
            self.notify(f"Diff now compares against the best of {path.name} (m twice: back to parents).", timeout=6)
        here = getattr(self.optimizer, "path", None) or self._replay_path
        self.app.push_screen(RunPickerScreen(Path(self.app.config.runs_dir), exclude=here), chosen)

    def action_history(self) -> None:
        """Back to the History screen below this one, else a new one on top (a live run keeps going)."""
        self.app.back_to_history()

    def action_back(self) -> None:
        """esc: clear and hide the tree's filter when it is open, else back."""
        box = self.query_one("#tree-filter", Input)
        if box.display:
            box.value, box.display, box.can_focus = "", False, False
            self.query_one(CandidateTree).filter_text = ""
            self._tree_changed()
            self.query_one(CandidateTree).focus()
            return
        if self.kernel_panel_close():
            return
        self.dismiss()

    def kernel_target(self):
        """G / X act on the node shown in the tabs, of the stored run read again from its directory."""
        from kernelskill.runs import load_run
        if self.shown_id is None:
            self.notify("No node is shown: pick one in the tree (enter).", severity="warning")
            return None
        return load_run(self._replay_path), self.shown_id

    def on_unmount(self) -> None:
        if self.optimizer is not None and self.view.active:
            self.optimizer.stop()               # never leave a run working with no one watching
