"""Fixtures of the TUI tests: a config pointed at a local chat-completions server (or nowhere), the
stored run the snapshot tests open, and a helper that waits on the app without sleeping blindly."""
from __future__ import annotations

import asyncio
import functools
import importlib.util
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "optimizer"))

from scenario import EVAL_FLAGS  # noqa: E402

# The TUI is an extra (pip install 'kernelskill[tui]'); its tests need it, and the live ones the openai client.
collect_ignore_glob = [] if importlib.util.find_spec("textual") else ["test_*.py"]
if not importlib.util.find_spec("openai"):
    collect_ignore_glob.append("test_tui_live.py")
if not importlib.util.find_spec("pytest_textual_snapshot"):
    collect_ignore_glob.append("test_tui_snapshots.py")

DATA = HERE / "data"
STORED_RUNS = DATA / "stored_runs"
STORED_RUN = STORED_RUNS / "20250101-120000-relu_task-0001"
EXAMPLES = DATA / "examples"


def demo_view():
    """The shipped demo run, every event applied, as the Run screen holds it."""
    from kernelskill.runs import load_run
    from kernelskill.tui.demo import DEMO_RUN
    from kernelskill.tui.model import RunView
    state = load_run(DEMO_RUN)
    view = RunView.stored(state)
    for ev in state.events:
        view.apply(ev)
    view.settle()
    return view


def tui_config(tmp_path: Path, base_url: str | None, **flags):
    """Settings as a project would write them: per-role models (the test server answers by model),
    fast evaluation, a fixed seed; nothing read from the working directory or the environment."""
    from kernelskill.config import load_config
    return load_config({**EVAL_FLAGS, "llm.base_url": base_url, "llm.model": "planner-model",
                        "llm.roles.coder.model": "coder-model", "llm.roles.debugger.model": "debugger-model",
                        "llm.retry_base_s": 0.01, "llm.max_retries": 1, "search.epsilon": 0.0, "search.seed": 0,
                        "runs_dir": str(tmp_path / "runs"), **flags}, cwd=tmp_path, env={})


@pytest.fixture
def config_for(tmp_path):
    return lambda base_url, **flags: tui_config(tmp_path, base_url, **flags)


async def until(pilot, condition, timeout: float = 120.0, what: str = "", seen: set | None = None) -> None:
    """Let the app run until ``condition()`` holds (the optimizer works in a thread meanwhile);
    ``seen`` collects every notification shown meanwhile (they expire after a few seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        if seen is not None:
            seen.update(notes(pilot.app))
        if condition():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what or condition}")
        await pilot.pause(0.1)


def notes(app) -> list[str]:
    """The notifications the app has shown (title and message)."""
    return [f"{n.title}: {n.message}" for n in app._notifications]


def labels(tree) -> list[str]:
    """The candidate tree's lines, top to bottom."""
    out = []

    def walk(node):
        out.append(str(node.label))
        for child in node.children:
            walk(child)
    walk(tree.root)
    return out


def run_async(fn):
    """Run an async test body with asyncio (no async plugin needed)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return asyncio.run(fn(*args, **kwargs))
    return wrapper
