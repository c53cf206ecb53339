"""Print the text of the demo replay's screens, as docs/tui.md shows them (the app's own compositor,
through Pilot: what a terminal of that size would show, without colors).

    python tests/tui/data/capture_panes.py            # every pane, one after the other
"""
from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path


def screen_text(app) -> str:
    return "\n".join(strip.text.rstrip() for strip in app.screen._compositor.render_strips())


async def capture(size: tuple[int, int], steps) -> str:
    from kernelskill.config import load_config
    from kernelskill.tui.app import KernelSkillApp
    from kernelskill.tui.demo import DEMO_RUN
    with tempfile.TemporaryDirectory() as tmp:
        config = load_config({"runs_dir": str(Path(tmp) / "runs")}, cwd=Path(tmp), env={})
        app = KernelSkillApp(config, replay=DEMO_RUN, speed=2)
        async with app.run_test(size=size) as pilot:
            while getattr(app.screen, "view", None) is None:
                await pilot.pause(0.05)
            await steps(pilot, app.screen)
            for _ in range(5):
                await pilot.pause(0.05)
            return screen_text(app)


async def until(pilot, condition) -> None:
    for _ in range(2000):
        if condition():
            return
        await pilot.pause(0.05)
    raise AssertionError("the app did not get there")


async def clear_notices(pilot) -> None:
    """Notifications arrive as messages: let those sent so far land, then clear them."""
    for _ in range(10):
        await pilot.pause(0.02)
    pilot.app.clear_notifications()


def mid_replay(events: int):
    async def steps(pilot, run) -> None:
        await until(pilot, lambda: run.played >= events)
        await pilot.press("p")
        await clear_notices(pilot)
    return steps


def at_end(node: str, tab: str, *keys: str):
    async def steps(pilot, run) -> None:
        from kernelskill.tui.widgets.candidate_tree import CandidateTree
        from kernelskill.tui.widgets.node_detail import NodeDetail
        await pilot.press("e")                      # the rest at once (no notifications for skipped events)
        await until(pilot, lambda: run.view.phase == "finished")
        tree = run.query_one(CandidateTree)
        tree.select_id(node)
        await until(pilot, lambda: tree.current_id == node)
        run.query_one(NodeDetail).active = tab
        await pilot.press(*keys)
        await clear_notices(pilot)
    return steps


PANES = {
    "80x24, a replay paused with p": ((80, 24), mid_replay(20)),
    "80x24, the end: n1's Profile (the mismatch report)": ((80, 24), at_end("n1", "tab-profile")),
    "80x24, the end: Plots (v: the next chart)": ((80, 24), at_end("n2", "tab-plots")),
    "200x50, the end: Plots, all four charts": ((200, 50), at_end("n2", "tab-plots")),
}


def main() -> None:
    wanted = sys.argv[1:]
    for title, (size, steps) in PANES.items():
        if wanted and not any(w in title for w in wanted):
            continue
        print(f"==== {title}")
        print(asyncio.run(capture(size, steps)))


if __name__ == "__main__":
    main()
