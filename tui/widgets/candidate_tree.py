"""The candidate tree: the reference at the root, one line per attempt with its status and speedup."""
from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.message import Message
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from kernelskill.trajectory import Node

from ..model import STATUS_STYLE, RunView, fmt_ms, fmt_speedup, profile_of


def node_label(node: Node, best_id: str | None, room: int = 80) -> Text:
    """``✓ n2 0.18× ★ · skill`` — mark, id, speedup (or status), then what made it if ``room`` allows."""
    mark, style = STATUS_STYLE.get(node.status, ("?", ""))
    text = Text(f"{mark} ", style=style)
    text.append(node.id, style="bold")
    if node.parent is None:
        prof = profile_of(node)
        base = prof.baseline.median_ms if prof is not None and prof.baseline else None
        text.append(f" reference {fmt_ms(base)}", style="dim")
        return text
    if node.duplicate_of:
        text.append(f" ={node.duplicate_of}", style="dim")
    elif node.ok:
        text.append(f" {fmt_speedup(node.speedup)}", style="green" if (node.speedup or 0) > 1 else "yellow")
        if node.quality not in ("good", None):
            text.append(" ~", style="bold yellow")     # timed noisy or contended: not a result to act on
    else:
        text.append(f" {node.status}", style=style)
    if node.id == best_id:
        text.append(" ★", style="bold yellow")
    detail = "repair" if node.kind == "repair" else (node.skill_id or "no skill")
    room -= len(text) + 3
    if room >= 6:
        text.append(" · " + (detail if len(detail) <= room else detail[:room - 1] + "…"), style="dim")
    return text


class CandidateTree(Tree[str]):
    """Tree of a run's nodes; the highlighted node is announced with ``NodeChosen``, and so is a node chosen
    with enter or a click (which never folds it: space folds and unfolds a node's children; the root, whose
    children are the whole run, stays open). ``filter_text`` keeps the nodes whose line or skill contains
    it (with their ancestors); ``hide_duplicates`` drops the ``=nX`` nodes (identical code, never evaluated
    again) that have no children."""

    @dataclass
    class NodeChosen(Message):
        node_id: str

    def __init__(self, **kw) -> None:
        super().__init__("…", data=None, **kw)
        self.root.allow_expand = False
        self.show_root = True
        self.auto_expand = False                 # enter (or a click) shows the node; it does not fold it
        self.guide_depth = 2
        self._items: dict[str, TreeNode[str]] = {}
        self._view: RunView | None = None
        self.filter_text = ""
        self.hide_duplicates = False

    def shown(self, view: RunView) -> set[str]:
        """The ids the tree shows under the filter and the duplicate setting (the root always)."""
        text = self.filter_text.lower()
        best = view.best.id if view.best else None
        keep = set()
        for node in view.tree:
            if node.parent is None:
                keep.add(node.id)
                continue
            if self.hide_duplicates and node.duplicate_of and not node.children:
                continue
            line = node_label(node, best).plain + " " + (node.skill_id or "") + " " + node.status
            if not text or text in line.lower():
                keep.update(n.id for n in view.tree.lineage(node.id))
        return keep

    @property
    def hidden(self) -> int:
        """How many nodes the filter and the duplicate setting hide now."""
        return len(self._view.tree) - len(self._items) if self._view is not None else 0

    def refilter(self) -> None:
        """Rebuild the lines after the filter or the duplicate setting changed; the cursor stays on its
        node when that is still shown."""
        if self._view is None:
            return
        current = self.current_id
        self.clear()
        self._items = {}
        self.sync(self._view)
        if current in self._items:
            self.select_id(current)
        else:                                    # the node looked at is hidden: the first one shown
            first = next((i for i in self._items if i != self.root.data), self.root.data)
            if first is not None:
                self.select_id(first)

    def sync(self, view: RunView) -> list[str]:
        """Add the nodes not shown yet and refresh every label; returns the ids added."""
        self._view = view
        best = view.best
        best_id = best.id if best else None
        width = self.size.width or 80
        shown = self.shown(view)
        added = []
        for node in view.tree:
            if node.id not in shown:
                continue
            item = self._items.get(node.id)
            if item is None:
                if node.parent is None:
                    item = self.root
                    item.data = node.id
                else:
                    parent = self._items[node.parent]
                    item = parent.add("", data=node.id, expand=True, allow_expand=False)
                    parent.allow_expand = True
                    parent.expand()
                self._items[node.id] = item
                added.append(node.id)
            # Labels must not be cut off: guides and the expand icon take 2 columns a level, and a
            # scrollbar may come and take 2 more.
            room = width - 2 * len(view.tree.lineage(node.id)) - 3
            item.set_label(node_label(node, best_id, room))
        return added

    def on_resize(self) -> None:
        if self._view is not None:
            self.sync(self._view)

    def select_id(self, node_id: str) -> bool:
        """Move the cursor to a node (which announces it); False when the node is not shown."""
        item = self._items.get(node_id)
        if item is None:
            return False
        # A label change drops the tree's line numbers until its lines are built again (on idle): build
        # them now, else the cursor would go to a stale line (-1: the root) on a busy machine.
        self._tree_lines                                             # noqa: B018 (builds the lines)
        if self.cursor_node is item:             # no highlight event when the cursor does not move
            self.post_message(self.NodeChosen(node_id))
        else:
            self.move_cursor(item)
        return True

    @property
    def current_id(self) -> str | None:
        node = self.cursor_node
        return node.data if node is not None else None

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted) -> None:
        event.stop()
        if event.node.data:
            self.post_message(self.NodeChosen(event.node.data))

    def on_tree_node_selected(self, event: Tree.NodeSelected) -> None:
        """enter (or a click) on a node: show it."""
        event.stop()
        if event.node.data:
            self.post_message(self.NodeChosen(event.node.data))

    def on_tree_node_collapsed(self, event: Tree.NodeCollapsed) -> None:
        """Folding the root would hide the whole run behind one line: it stays open."""
        event.stop()
        if event.node is self.root:
            self.root.expand()
