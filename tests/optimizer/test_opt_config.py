"""Config precedence (user < project < env < flags), validation, roles and prices."""
from __future__ import annotations

import pytest

from kernelskill.config import load_config
from kernelskill.errors import UserError
from kernelskill.llm import OpenAIChat


@pytest.fixture
def home(tmp_path, monkeypatch):
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("KERNELSKILL_HOME", str(h))
    return h


def test_precedence_user_project_env_flags(home, tmp_path):
    (home / "config.toml").write_text('[llm]\nbase_url = "http://user/v1"\nmodel = "user-model"\n'
                                      'api_key_env = "USER_KEY"\n[budget]\nattempts = 7\ntokens = 100\n')
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "kernelskill.toml").write_text('[llm]\nbase_url = "http://project/v1"\nmodel = "project-model"\n'
                                           '[budget]\nattempts = 9\n')
    env = {"KERNELSKILL_MODEL": "env-model"}
    cfg = load_config({"budget.attempts": 11, "budget.usd": None}, cwd=proj, env=env)
    assert cfg.get("llm.base_url") == "http://project/v1"
    assert cfg.get("llm.model") == "env-model"
    assert cfg.get("llm.api_key_env") == "USER_KEY"
    assert cfg.get("budget.attempts") == 11 and cfg.get("budget.tokens") == 100 and cfg.get("budget.usd") is None
    assert cfg.where("llm.base_url").endswith("kernelskill.toml") and cfg.where("llm.model") == "env KERNELSKILL_MODEL"
    assert cfg.where("budget.attempts") == "flags" and cfg.where("budget.tokens").endswith("config.toml")
    env["KERNELSKILL_BASE_URL"] = "http://env/v1"
    assert load_config(cwd=proj, env=env).get("llm.base_url") == "http://env/v1"
    assert load_config({"llm.base_url": "http://flag/v1"}, cwd=proj, env=env).get("llm.base_url") == "http://flag/v1"


def test_stored_run_config_sits_between_files_and_env(home, tmp_path):
    (tmp_path / "kernelskill.toml").write_text('[search]\nepsilon = 0.5\npolicy = "line"\n')
    cfg = load_config({"budget.attempts": 3}, cwd=tmp_path, env={}, base={"search": {"epsilon": 0.1},
                                                                       "budget": {"attempts": 2}})
    assert cfg.get("search.epsilon") == 0.1 and cfg.get("search.policy") == "line" and cfg.get("budget.attempts") == 3


@pytest.mark.parametrize("text, words", [
    ("[llm]\nbase_ur = 'x'\n", "unknown key 'llm.base_ur'"),
    ("[budget]\nattempts = 'many'\n", "key 'budget.attempts': expected int"),
    ("[search]\npolicy = 'random'\n", "key 'search.policy': 'random' is not one of stark, line"),
    ("[llm.roles.reviewer]\nmodel = 'x'\n", "unknown key 'llm.roles.reviewer'"),
    ("[prices.gpt]\ninput = -1\n", "key 'prices.gpt.input'"),
    ("colour = 1\n", "unknown key 'colour'"),
    ("[llm\n", "cannot read the config"),
])
def test_invalid_config_names_the_file_and_key(home, tmp_path, text, words):
    (tmp_path / "kernelskill.toml").write_text(text)
    with pytest.raises(UserError, match="kernelskill.toml") as err:
        load_config(cwd=tmp_path, env={})
    assert words in str(err.value)


def test_roles_temperatures_and_prices(home, tmp_path):
    (tmp_path / "kernelskill.toml").write_text(
        '[llm]\nmodel = "m"\n[llm.roles.coder]\nmodel = "big-1.5"\ntemperature = 0.0\n'
        '[prices."big-1.5"]\ninput = 3.0\noutput = 15\n')
    cfg = load_config(cwd=tmp_path, env={})
    assert cfg.role("planner").temperature == 0.8 and cfg.role("planner").model == "m"
    assert cfg.role("debugger").temperature == 0.1
    assert (cfg.role("coder").model, cfg.role("coder").temperature) == ("big-1.5", 0.0)
    assert cfg.price("big-1.5") == (3.0, 15.0) and cfg.price("m") == (0.0, 0.0)      # dots in model names
    assert cfg.to_dict()["prices"] == {"big-1.5": {"input": 3.0, "output": 15}}


def test_missing_endpoint_model_or_key_is_a_clear_error(home, tmp_path, monkeypatch):
    with pytest.raises(UserError, match="no LLM endpoint: set base_url in kernelskill.toml \\[llm\\] or "
                                        "KERNELSKILL_BASE_URL"):
        OpenAIChat(load_config(cwd=tmp_path, env={}))
    with pytest.raises(UserError, match="no LLM model"):
        OpenAIChat(load_config({"llm.base_url": "http://127.0.0.1:1/v1"}, cwd=tmp_path, env={}))
    monkeypatch.delenv("KS_TEST_KEY", raising=False)
    cfg = load_config({"llm.base_url": "http://x/v1", "llm.model": "m", "llm.api_key_env": "KS_TEST_KEY"},
                      cwd=tmp_path, env={})
    with pytest.raises(UserError, match="KS_TEST_KEY is not set"):
        OpenAIChat(cfg)


def test_sections_are_typed_and_their_errors_name_the_file_and_key(home, tmp_path):
    """Each table becomes a dataclass section built once from the merged layers; a bad value in
    any layer is reported with that layer's file and the dotted key, before a section is built."""
    (home / "config.toml").write_text("[eval]\ntrials = 9\ntime_cap_s = 2\n[agents]\nbackend = 'cpp'\n")
    (tmp_path / "kernelskill.toml").write_text("[search]\npolicy = 'line'\nfinalists = 1\n")
    cfg = load_config({"budget.minutes": 5}, cwd=tmp_path, env={"KERNELSKILL_MODEL": "m"})
    assert (cfg.eval.trials, cfg.eval.time_cap_s, type(cfg.eval.time_cap_s)) == (9, 2.0, float)
    assert (cfg.agents.backend, cfg.search.policy, cfg.search.finalists) == ("cpp", "line", 1)
    assert (cfg.llm.model, cfg.budget.minutes, cfg.budget.attempts) == ("m", 5, 30)
    # the CLI's display reads the same values by dotted key, with where each came from
    assert cfg.get("eval.trials") == 9 and cfg.where("eval.trials") == str(home / "config.toml")
    assert cfg.get("search.finalists") == 1 and cfg.where("search.finalists") == str(tmp_path / "kernelskill.toml")
    (home / "config.toml").write_text("[eval]\ntrials = 'five'\n")
    with pytest.raises(UserError) as err:
        load_config(cwd=tmp_path, env={})
    assert str(err.value).startswith(f"{home / 'config.toml'}: key 'eval.trials': expected int")
    (home / "config.toml").unlink()
    with pytest.raises(UserError, match="flags: key 'budget.usd': must not be negative"):
        load_config({"budget.usd": -1}, cwd=tmp_path, env={})


def test_set_changes_one_setting_and_a_copy_leaves_the_original(home, tmp_path):
    cfg = load_config(cwd=tmp_path, env={})
    other = cfg.copy()
    other.set("search.epsilon", 0.9, "test")
    other.set(("prices", "org/model-1.5"), {"input": 2.0, "output": 4.0})
    assert other.search.epsilon == 0.9 and other.where("search.epsilon") == "test"
    assert other.price("org/model-1.5") == (2.0, 4.0)
    assert cfg.search.epsilon == 0.3 and cfg.price("org/model-1.5") == (0.0, 0.0)
    assert list(other.to_dict()) == ["llm", "prices", "budget", "search", "eval", "agents", "runs_dir"]
