"""Prompts are data: every role has a table per backend; errors name the file and the key."""
from __future__ import annotations

import shutil

import pytest

from kernelskill.agents.templates import PROMPTS_DIR, SCHEMA, load_prompts
from kernelskill.errors import UserError
from kernelskill.vocab import BACKENDS


def test_shipped_prompts_cover_every_role_and_backend():
    prompts = load_prompts()
    assert set(prompts) == set(SCHEMA)
    for role, tables in prompts.items():
        assert set(tables) == set(BACKENDS)
        for backend, p in tables.items():
            system = p.render("system")
            assert backend in system and "{{" not in system
    text = prompts["planner"]["cpp"].render("user", task="T", reference="R", node="N", code="void f() { }", skills="S",
                                            context="C", tried="-", machine="M")
    assert "void f() { }" in text and "{{" not in text
    assert "<<<IMPROVE BEGIN>>>" in prompts["planner"]["cuda"].render("system")


@pytest.fixture
def prompt_dir(tmp_path):
    d = tmp_path / "prompts"
    shutil.copytree(PROMPTS_DIR, d)
    return d


@pytest.mark.parametrize("edit, words", [
    (lambda s: s.replace("[triton]", "[tritn]"), "unknown table 'tritn'"),
    (lambda s: s + "\n[cpp.extra]\n", "key 'cpp.extra'"),
    (lambda s: s.replace("{{failure}}", "{{failures}}"), "key 'common.user': unknown placeholder {{failures}}"),
    (lambda s: s.replace("corrective = ", "correctiv = "), "unknown key 'common.correctiv'"),
    (lambda s: s.replace("[cuda]", "[cuda]\nsystem = 3"), "key 'cuda.system': expected a string"),
    (lambda s: s + "\n[[broken", "cannot read prompts"),
])
def test_invalid_prompt_files_name_file_and_key(prompt_dir, edit, words):
    path = prompt_dir / "debugger.toml"
    path.write_text(edit(path.read_text()))
    with pytest.raises(UserError, match="debugger.toml") as err:
        load_prompts(prompt_dir)
    assert words in str(err.value)


def test_missing_key_and_missing_file(prompt_dir):
    path = prompt_dir / "coder.toml"
    text = path.read_text()
    start = text.index("corrective = ")
    end = text.index('"""', text.index('"""', start) + 3) + 3
    path.write_text(text[:start] + text[end:])
    with pytest.raises(UserError, match="coder.toml: missing key 'cuda.corrective'"):
        load_prompts(prompt_dir)
    (prompt_dir / "coder.toml").unlink()
    with pytest.raises(UserError, match="coder.toml: missing prompt file"):
        load_prompts(prompt_dir)
