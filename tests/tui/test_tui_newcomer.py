"""A newcomer's second hour (issue 46, item 5): q quits from Home after an example is picked, while the
path field still takes typing once the user moves to it; enter on a tree node shows it and never folds
the tree; a run started with no endpoint points at the form's own field; the keys overlay lists every key
of the screen (the Run screen's controls dimmed when they do not apply, Home's tab, arrows and enter);
History's footer fits 80 columns."""
from __future__ import annotations

import re

from rich.text import Text
from textual.widgets import Footer, Input, Label, OptionList, Static, TextArea
from textual.widgets._footer import FooterKey

from kernelskill.tui.app import KernelSkillApp
from kernelskill.tui.screens.home import HomeScreen
from kernelskill.tui.screens.overlays import HelpScreen
from kernelskill.tui.screens.run import RunScreen
from kernelskill.tui.widgets.candidate_tree import CandidateTree

from conftest import EXAMPLES, STORED_RUN, STORED_RUNS, labels, notes, run_async, until
from scenario import RELU_TASK

QUIT_S = 30           # q quits at once; a bound for a busy machine


def help_lines(app) -> dict[str, tuple[str, bool]]:
    """The keys overlay as {key: (what it does, dimmed)}; a wrapped description is joined again."""
    text: Text = app.screen.query_one("#help-keys", Static).content
    out, key, pad = {}, None, None
    for line in text.split("\n"):
        plain = line.plain
        if pad is not None and plain[:pad].strip() == "" and key is not None:
            out[key] = (out[key][0] + " " + plain.strip(), out[key][1])
            continue
        m = re.match(r"(\S.*?)(\s{2,})(\S.*)$", plain)
        if not m:
            continue
        key, pad = m.group(1), len(m.group(1)) + len(m.group(2))
        dim = any("dim" in str(span.style) for span in line.spans if span.start >= pad)
        out[key] = (m.group(3), dim)
    return out


async def open_help(pilot) -> dict[str, tuple[str, bool]]:
    below = pilot.app.screen
    await pilot.press("question_mark")
    await until(pilot, lambda: isinstance(pilot.app.screen, HelpScreen), what="the keys overlay")
    lines = help_lines(pilot.app)
    await pilot.press("escape")
    await until(pilot, lambda: pilot.app.screen is below, what="the overlay closed")
    return lines


# ---- a. q on Home -------------------------------------------------------------------------------
@run_async
async def test_q_quits_home_after_enter_picks_an_example(config_for):
    app = KernelSkillApp(config_for(None), examples_dir=EXAMPLES)
    async with app.run_test(size=(80, 24)) as pilot:
        home = app.screen
        examples = home.query_one("#examples", OptionList)
        await until(pilot, lambda: examples.has_focus, what="the example list focused")
        await pilot.press("down", "enter")
        picked = examples.get_option_at_index(examples.highlighted).id
        path = home.query_one("#task-path", Input)
        await until(pilot, lambda: path.value.endswith(picked), what="the example copied into path")
        await pilot.press("q")
        await until(pilot, lambda: app.return_code is not None, timeout=QUIT_S, what="q to quit")
        assert path.value.endswith(picked)                              # q was not typed into it


@run_async
async def test_path_field_takes_typing_once_moved_to_and_esc_leaves_it(config_for):
    app = KernelSkillApp(config_for(None), examples_dir=EXAMPLES)
    async with app.run_test(size=(80, 24)) as pilot:
        home = app.screen
        examples, path = home.query_one("#examples", OptionList), home.query_one("#task-path", Input)
        await until(pilot, lambda: examples.has_focus, what="the example list focused")
        footer = lambda: " ".join(f"{k.key_display} {k.description}" for k in home.query(FooterKey))  # noqa: E731
        assert "Leave the field" not in footer()
        await pilot.press("tab")                                         # the user moves to the field
        await until(pilot, lambda: path.has_focus, what="the path field focused")
        await until(pilot, lambda: "esc Leave the field" in footer(), what="the footer telling how to leave it")
        await pilot.press(*"qkv.py")                                    # q is typed here
        await until(pilot, lambda: path.value == "qkv.py", what="the typed path")
        assert app.return_code is None
        await pilot.press("escape")
        await until(pilot, lambda: examples.has_focus, what="esc back to the list")
        assert path.value == "qkv.py" and isinstance(app.screen, HomeScreen)
        await pilot.press("q")
        await until(pilot, lambda: app.return_code is not None, timeout=QUIT_S, what="q to quit")


# ---- b. enter on a tree node --------------------------------------------------------------------
def showing(run: RunScreen, node_id: str) -> bool:
    """Whether the tabs show ``node_id`` (its code in the Code tab)."""
    node = run.view.tree.get(node_id)
    return run.query_one("#code", TextArea).text == (node.code or f"# no code: {node.message}")


@run_async
async def test_enter_on_a_tree_node_shows_it_and_never_folds(config_for):
    app = KernelSkillApp(config_for(None), open_run=STORED_RUN)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, RunScreen), what="the stored run")
        run = app.screen
        tree = run.query_one(CandidateTree)
        await until(pilot, lambda: len(labels(tree)) == 5 and tree.current_id == "n2", what="the tree, on n2")
        lines = lambda: len(tree._tree_lines)  # noqa: E731 (the lines the tree shows)
        assert lines() == 5
        # enter, then down: the cursor reaches the next line only if enter left the node's children shown
        # (keys are handled in order, so down comes after whatever enter did).
        for node, below in (("n0", "n1"), ("n1", "n2"), ("n3", "n4")):   # the root and two parents
            tree.select_id(node)
            await until(pilot, lambda: tree.current_id == node and showing(run, node), what=f"{node} shown")
            await pilot.press("enter", "down")
            await until(pilot, lambda: tree.current_id == below, what=f"enter on {node}, then down to {below}")
            await until(pilot, lambda: showing(run, below), what=f"{below} shown")
            assert lines() == 5
        tree.select_id("n1")
        await until(pilot, lambda: tree.current_id == "n1", what="n1 highlighted")
        await pilot.press("space")                                       # folding is space's job
        await until(pilot, lambda: lines() == 4, what="n1's child folded away")
        await pilot.press("space")
        await until(pilot, lambda: lines() == 5, what="n1's children unfolded")
        tree.select_id("n0")
        await until(pilot, lambda: tree.current_id == "n0", what="the root highlighted")
        await pilot.press("space")                                       # the root stays open
        await pilot.press("down")
        await until(pilot, lambda: tree.current_id == "n1", what="the cursor moved below the root")
        assert lines() == 5
        keys = await open_help(pilot)
        assert "show the node" in keys["enter"][0] and "fold" in keys["space"][0]


# ---- c. no endpoint -----------------------------------------------------------------------------
@run_async
async def test_no_endpoint_points_at_the_forms_base_url_field(config_for, tmp_path):
    app = KernelSkillApp(config_for(None), task=str(RELU_TASK))
    async with app.run_test(size=(80, 24)) as pilot:
        home = app.screen
        label = str(home.query_one("#base-url", Input).parent.query_one(Label).content)
        assert label == "base URL"
        await pilot.press("ctrl+r")
        await until(pilot, lambda: any("no LLM endpoint" in n for n in notes(app)), what="the no-endpoint notice")
        note = next(n for n in notes(app) if "no LLM endpoint" in n)
        assert f"“{label}” field" in note
        for cli in ("--base-url", "KERNELSKILL_BASE_URL", "kernelskill.toml"):
            assert cli not in note
        assert isinstance(app.screen, HomeScreen) and not (tmp_path / "runs").exists()


# ---- g. the Run screen's keys, dimmed when they do not apply ------------------------------------
@run_async
async def test_run_help_lists_every_control_dimmed_when_it_does_not_apply(config_for):
    app = KernelSkillApp(config_for(None), open_run=STORED_RUN)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, RunScreen), what="the stored run")
        run = app.screen
        await until(pilot, lambda: run.query_one(CandidateTree).current_id == "n2", what="the best node shown")
        keys = await open_help(pilot)
        first = {k.split(",")[0].strip(): v for k, v in keys.items()}
        for key, what in (("v", "Next plot"), ("p", "Pause"), ("r", "Resume"), ("+", "Faster"), ("-", "Slower"),
                          ("e", "To end"), ("s", "Stop")):
            assert key in first, f"{key} missing from the keys overlay"
            text, dim = first[key]
            assert text.startswith(what) and "not now" in text and dim, (key, text, dim)
        assert first["t"] == ("Next tab", False)                          # what applies is not dimmed


# ---- h. Home's keys -----------------------------------------------------------------------------
@run_async
async def test_home_help_lists_tab_arrows_and_enter(config_for):
    app = KernelSkillApp(config_for(None), examples_dir=EXAMPLES)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.screen.query_one("#examples").has_focus, what="Home")
        keys = await open_help(pilot)
        assert "field" in keys["tab, shift+tab"][0]
        assert "browse the examples" in keys["↑↓"][0]
        assert "pick the highlighted example" in keys["enter"][0]
        assert not any(dim for k, (_, dim) in keys.items() if k in ("tab, shift+tab", "↑↓", "enter"))


# ---- f. History's footer at 80 columns ----------------------------------------------------------
def footer_fits(app) -> tuple[list[str], list[str]] | None:
    """(the footer's labels, those whose key or label the screen's edge cuts), once every key shown is laid
    out (None before: the footer is built again whenever the bindings change)."""
    width = app.size.width
    keys = list(app.screen.query_one(Footer).query(FooterKey))
    if not keys or not all(k.region.width for k in keys):
        return None
    bottom = app.screen._compositor.render_strips()[-1].text
    wrong = [f"{k.key_display} {k.description}" for k in keys
             if k.region.right > width or f"{k.key_display} {k.description}" not in bottom]
    return [k.description for k in keys], wrong


@run_async
async def test_history_footer_fits_80_columns(config_for):
    app = KernelSkillApp(config_for(None, runs_dir=str(STORED_RUNS)), history=True)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        await until(pilot, lambda: screen.query_one("#runs").row_count == 1, what="the runs")
        expected = {"Open", "Replay", "Resume", "Filter", "New run", "Back", "Quit", "Keys"}
        seen = {}

        def laid_out() -> bool:
            seen["footer"] = footer_fits(app)
            return seen["footer"] is not None and expected <= set(seen["footer"][0])
        await until(pilot, laid_out, what="the footer laid out with History's main keys")
        shown, wrong = seen["footer"]
        assert wrong == [], shown
