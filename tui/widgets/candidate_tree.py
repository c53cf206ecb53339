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
        base = (profile_of(node).get("baseline") or {}).get("median_ms")
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
    """Tree of a run's nodes; the highlighted node is announced with ``NodeChosen``."""

    @dataclass
    class NodeChosen(Message):
        node_id: str

    def __init__(self, **kw) -> None:
        super().__init__("…", data=None, **kw)
        self.root.allow_expand = False
        self.show_root = True
        self.guide_depth = 2
        self._items: dict[str, TreeNode[str]] = {}
        self._view: RunView | None = None

    def sync(self, view: RunView) -> list[str]:
        """Add the nodes not shown yet and refresh every label; returns the ids added."""
        self._view = view
        best = view.best
        best_id = best.id if best else None
        width = self.size.width or 80
        added = []
        for node in view.tree:
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

    def select_id(self, node_id: str) -> None:
        """Move the cursor to a node (which announces it)."""
        item = self._items.get(node_id)
        if item is None:
            return
        # A label change drops the tree's line numbers until its lines are built again (on idle): build
        # them now, else the cursor would go to a stale line (-1: the root) on a busy machine.
        self._tree_lines                                             # noqa: B018 (builds the lines)
        if self.cursor_node is item:             # no highlight event when the cursor does not move
            self.post_message(self.NodeChosen(node_id))
        else:
            self.move_cursor(item)

    @property
    def current_id(self) -> str | None:
        node = self.cursor_node
        return node.data if node is not None else None

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted) -> None:
        event.stop()
        if event.node.data:
            self.post_message(self.NodeChosen(event.node.data))
