"""G and X on a stored node, for the History and Run screens: the shape check and the package export
(``tui.kernel_work``) in a thread worker, the progress and then the result in the screen's ``#kernel-work``
panel."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual import work
from textual.message import Message
from textual.widgets import Static
from textual.worker import Worker, WorkerState

from kernelskill.errors import UserError

from .. import kernel_work


class KernelWork:
    """G and X on a stored node (``kernel_work``): a thread worker each, its progress and then its result in
    the screen's ``#kernel-work`` panel (and a notification). One at a time; leaving the screen stops it."""

    kernel_worker: Worker | None = None
    kernel_cancel: threading.Event | None = None

    @dataclass
    class KernelNote(Message):
        text: Text
        done: bool = False
        severity: str = "information"
        title: str = ""
        note: str = ""

    def kernel_target(self):             # the screen's node: (RunState, node id or None for the best)
        raise NotImplementedError

    def _kernel_busy(self) -> bool:
        if self.kernel_worker is not None and self.kernel_worker.state in (WorkerState.PENDING, WorkerState.RUNNING):
            self.notify("A shape check or export is running: wait for it (the panel shows its progress).",
                        severity="warning")
            return True
        return False

    def _kernel_start(self):
        if self._kernel_busy():
            return None
        if self.app.live_runs():
            self.notify("A run is working: a shape check or export now would disturb its timings. Stop it (s on "
                        "its screen) or wait for its end.", severity="warning", timeout=8)
            return None
        picked = self.kernel_target()
        if picked is None:
            return None
        try:
            return kernel_work.target(*picked)
        except UserError as e:
            self.notify(str(e), title="Cannot use this node", severity="warning", timeout=8)
            return None

    def _kernel_show(self, text: Text) -> None:
        panel = self.query_one("#kernel-work", Static)
        panel.update(text)
        panel.display = True

    def action_generalize(self) -> None:
        """The node at the task's other shapes (presets, each size halved, doubled, made a prime)."""
        t = self._kernel_start()
        if t is None:
            return
        self.kernel_cancel = threading.Event()
        self._kernel_show(Text(f"generalize {t.name}: deriving the shapes …", style="bold"))
        self.kernel_worker = self._generalize(t, self.kernel_cancel)

    def action_export_package(self) -> None:
        """The node as a package (kernelskill export) in <run>/export/<node>."""
        t = self._kernel_start()
        if t is None:
            return
        dest = kernel_work.default_export_dir(t)
        self.kernel_cancel = threading.Event()
        self._kernel_show(Text(f"export {t.name} → {dest} … (building the candidate, recording its shapes)",
                               style="bold"))
        self.kernel_worker = self._export(t, dest, self.kernel_cancel)

    @work(thread=True, exclusive=True, group="kernel", exit_on_error=False)
    def _generalize(self, t, cancel: threading.Event) -> None:
        started = time.monotonic()

        def on_shape(i: int, n: int, label: str) -> None:
            self.post_message(self.KernelNote(Text(f"generalize {t.name}: shape {i + 1} of {n}: {label} "
                                                   f"({kernel_work.elapsed(started)})", style="bold")))
        try:
            result = kernel_work.generalize(t, self.app.config, on_shape, cancel)
        except Exception as e:  # noqa: BLE001 - shown, never a crash of the TUI
            why = str(e) if isinstance(e, UserError) else f"{type(e).__name__}: {e}"
            self.post_message(self.KernelNote(kernel_work.failed_text("generalize", t, why), True, "error",
                                              "Shape check failed", why))
            return
        severity = {"yes": "information", "specialised": "warning"}.get(result.generalizes, "error")
        self.post_message(self.KernelNote(kernel_work.shapes_text(t, result), True, severity,
                                          f"{t.node_id} generalizes: {result.generalizes}", result.summary))

    @work(thread=True, exclusive=True, group="kernel", exit_on_error=False)
    def _export(self, t, dest: Path, cancel: threading.Event) -> None:
        try:
            res = kernel_work.export(t, dest, cancel)
        except Exception as e:  # noqa: BLE001 - shown, never a crash of the TUI
            why = str(e) if isinstance(e, UserError) else f"{type(e).__name__}: {e}"
            self.post_message(self.KernelNote(kernel_work.failed_text("export", t, why), True, "error",
                                              "Export failed", why))
            return
        self.post_message(self.KernelNote(kernel_work.export_text(t, res), True, "information",
                                          f"Exported {t.node_id}", f"{res['package']} → {res['out_dir']}"))

    def on_kernel_work_kernel_note(self, message: KernelNote) -> None:
        self._kernel_show(message.text)
        if message.done and message.title:
            self.notify(message.note, title=message.title, severity=message.severity, timeout=10)

    def on_unmount(self) -> None:
        if self.kernel_cancel is not None:
            self.kernel_cancel.set()

    def kernel_panel_close(self) -> bool:
        """esc: hide the finished panel (True when it was shown)."""
        panel = self.query_one("#kernel-work", Static)
        if not panel.display or self.kernel_worker is not None and self.kernel_worker.state in (
                WorkerState.PENDING, WorkerState.RUNNING):
            return False
        panel.display = False
        return True
