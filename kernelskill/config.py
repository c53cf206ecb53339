"""Optimizer configuration: defaults < user config < project ``kernelskill.toml`` < env < flags.

The user config is ``$KERNELSKILL_HOME/config.toml``; the project one is ``kernelskill.toml`` in
the working directory. Every layer is validated against ``DEFAULTS``: an unknown key or a value of
the wrong type is a ``UserError`` that names the file and the key. The merged layers are then
built once into typed sections (``config.budget.attempts``, ``config.search.policy``: the
dataclasses below, whose defaults are the defaults), and ``Config.sources`` remembers where each
setting came from, so errors can say which one to fix.
"""
from __future__ import annotations

import copy
import os
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .errors import UserError
from .paths import user_home
from .vocab import BACKENDS

ROLES = ("planner", "coder", "debugger")
ROLE_DEFAULTS = {"planner": 0.8, "coder": 0.1, "debugger": 0.1}
PROJECT_FILE = "kernelskill.toml"
ENV_VARS = {"KERNELSKILL_BASE_URL": "llm.base_url", "KERNELSKILL_MODEL": "llm.model",
            "KERNELSKILL_API_KEY_ENV": "llm.api_key_env"}

# ---- the sections: each table of the config as a dataclass; their defaults are the defaults ------
@dataclass
class LLMSettings:
    """The ``[llm]`` table: the endpoint, its timeouts and retries, and per-role overrides."""
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    timeout_s: float = 300.0
    first_token_timeout_s: float = 120.0
    call_timeout_s: float = 900.0
    max_retries: int = 4
    retry_base_s: float = 1.0
    retry_max_s: float = 30.0
    stream: bool = True
    stream_usage: bool = True
    max_tokens: int | None = None
    roles: dict = field(default_factory=dict)      # role → {model, temperature, max_tokens, prompt_tokens}


@dataclass
class Budget:
    """The ``[budget]`` table as an object: limits on attempts, LLM tokens, USD and wall minutes
    (None: no limit). ``kernelskill.optimize(task, budget=Budget(attempts=10, usd=2.0))``."""
    attempts: int | None = 30
    tokens: int | None = None
    usd: float | None = None
    minutes: float | None = None


@dataclass
class SearchSettings:
    """The ``[search]`` table: the selection policy and its knobs."""
    policy: str = "stark"
    epsilon: float = 0.3
    root_children: int = 5
    close_after: int = 3
    max_repairs: int = 3
    seed: int | None = None
    line_ratio: float = 1.3
    line_gain: float = 0.3
    context_nodes: int = 5
    finalists: int = 3
    stop_at_roof: float | None = None
    # Every candidate is also checked at derived shapes (evaluate.shapes, "auto"): one that is wrong
    # or crashes at another shape fails and goes to the debugger with the shape named.
    require_generalize: bool = False


@dataclass
class EvalSettings:
    """The ``[eval]`` table: the evaluator's device, trials and timing."""
    device: str = "auto"
    trials: int = 5
    time_cap_s: float = 10.0
    warmup: int = 3
    min_reps: int = 30
    max_reps: int = 200
    build_timeout_s: float = 900.0
    run_timeout_s: float = 300.0
    retimes: int = 2
    backoff_s: float = 1.0
    rounds: int = 0             # timing rounds on fresh allocations a good measurement needs; 0: 2 on a GPU, 1 on a CPU
    processes: int = 0          # worker processes a good measurement is timed in; 0: 1
    flags: str = "default"      # PyTorch backend flags timed under: default (the user's) | strict (TF32 off)
    build: str = "direct"       # candidates' extensions: direct (the split build) | torch (load_inline for all)
    cuda_arch: str = ""         # a compile-only CUDA check's target (sm_80, ...); empty: the GPU present, else sm_90


@dataclass
class AgentSettings:
    """The ``[agents]`` table."""
    backend: str = "auto"
    skills_limit: int = 6
    prompts_dir: str | None = None
    prompt_tokens: int = 12000


# The tables in the order run.toml stores them; ``prices`` is {model: {input, output}} and
# ``runs_dir`` a plain string.
SECTIONS: dict[str, type] = {"llm": LLMSettings, "budget": Budget, "search": SearchSettings,
                             "eval": EvalSettings, "agents": AgentSettings}
# The defaults as nested tables (what every layer is validated against). None means "no value"
# (any of the types listed in _TYPES is accepted).
DEFAULTS: dict[str, Any] = {"llm": asdict(LLMSettings()), "prices": {}, "budget": asdict(Budget()),
                            "search": asdict(SearchSettings()), "eval": asdict(EvalSettings()),
                            "agents": asdict(AgentSettings()), "runs_dir": "runs"}
_TYPES: dict[str, tuple] = {
    "llm.base_url": (str,), "llm.model": (str,), "llm.api_key_env": (str,), "llm.max_tokens": (int,),
    "budget.tokens": (int,), "budget.usd": (int, float), "budget.minutes": (int, float),
    "search.seed": (int,), "agents.prompts_dir": (str,), "search.stop_at_roof": (int, float),
}
_ROLE_KEYS = {"model": (str,), "temperature": (int, float), "max_tokens": (int,), "prompt_tokens": (int,)}
_CHOICES = {"search.policy": ("stark", "line"), "agents.backend": ("auto", *BACKENDS)}


@dataclass
class RoleConfig:
    model: str
    temperature: float
    max_tokens: int | None = None
    prompt_tokens: int | None = None     # the prompt's budget (agents.prompt_tokens unless set per role)


class Config:
    """The merged settings as typed sections (``config.budget.attempts``, ``config.search.policy``)
    and where each one came from (``sources``).

    ``Config(data)`` takes nested tables shaped like ``DEFAULTS`` (already validated: ``load_config``
    checks every layer and names the file and key of a bad value); ``data`` gives them back, for
    run.toml and the CLI's config display (``get``/``where``). Change a setting with ``set``.
    """

    def __init__(self, data: Mapping[str, Any] | None = None, sources: dict[str, str] | None = None):
        data = data or {}
        self.llm: LLMSettings = _section(LLMSettings, data.get("llm"))
        self.prices: dict[str, dict] = copy.deepcopy(dict(data.get("prices") or {}))
        self.budget: Budget = _section(Budget, data.get("budget"))
        self.search: SearchSettings = _section(SearchSettings, data.get("search"))
        self.eval: EvalSettings = _section(EvalSettings, data.get("eval"))
        self.agents: AgentSettings = _section(AgentSettings, data.get("agents"))
        self.runs_dir: str = data.get("runs_dir", DEFAULTS["runs_dir"])
        self.sources: dict[str, str] = dict(sources or {})

    @property
    def data(self) -> dict[str, Any]:
        """The settings as nested tables, in ``DEFAULTS``' order (a fresh copy: change them with ``set``)."""
        return {"llm": asdict(self.llm), "prices": copy.deepcopy(self.prices), "budget": asdict(self.budget),
                "search": asdict(self.search), "eval": asdict(self.eval), "agents": asdict(self.agents),
                "runs_dir": self.runs_dir}

    def get(self, dotted: str) -> Any:
        return _lookup(self.data, dotted)

    def where(self, dotted: str) -> str:
        return self.sources.get(dotted, "defaults")

    def set(self, dotted: str | tuple, value: Any, where: str | None = None) -> None:
        """Set one setting by its dotted key (``("prices", model)`` for a price: model names may
        contain dots); ``where`` is recorded as its source. The value is not validated here:
        ``flatten`` does that for whole layers."""
        parts = list(dotted) if isinstance(dotted, tuple) else dotted.split(".")
        head = getattr(self, parts[0])            # AttributeError: not a setting (a bug of the caller's)
        if len(parts) == 1:
            setattr(self, parts[0], value)         # runs_dir
        elif isinstance(head, dict):
            _set(head, tuple(parts[1:]), value)    # prices.<model>
        elif len(parts) == 2:
            getattr(head, parts[1])                # AttributeError for a key the section lacks (setattr would add it)
            setattr(head, parts[1], value)
        else:
            _set(getattr(head, parts[1]), tuple(parts[2:]), value)     # llm.roles.<role>.<key>
        if where is not None:
            self.sources[dotted if isinstance(dotted, str) else ".".join(dotted)] = where

    def copy(self) -> "Config":
        return Config(self.data, self.sources)

    def role(self, role: str) -> RoleConfig:
        """Model, temperature and token cap of one agent role."""
        table = self.llm.roles.get(role, {})
        return RoleConfig(model=table.get("model") or self.llm.model or "",
                          temperature=float(table.get("temperature", ROLE_DEFAULTS.get(role, 0.2))),
                          max_tokens=table.get("max_tokens", self.llm.max_tokens),
                          prompt_tokens=table.get("prompt_tokens", self.agents.prompt_tokens) or None)

    def price(self, model: str) -> tuple[float, float]:
        """(input, output) USD per 1M tokens for ``model``; (0, 0) when not in the table."""
        p = self.prices.get(model) or {}
        return float(p.get("input", 0.0)), float(p.get("output", 0.0))

    def to_dict(self) -> dict[str, Any]:
        """Plain data without empty values (what run.toml stores)."""
        return _drop_none(self.data)


def _section(cls: type, table: Mapping[str, Any] | None) -> Any:
    """One section from its table; keys the section does not have are a bug of ours, not the user's
    (every layer was validated against ``DEFAULTS``), so they raise."""
    return cls(**copy.deepcopy(dict(table or {})))


def _drop_none(d: Any) -> Any:
    if isinstance(d, dict):
        return {k: _drop_none(v) for k, v in d.items() if v is not None}
    return d


def _check(key: str, value: Any, where: str) -> Any:
    default = _lookup(DEFAULTS, key)
    kinds = _TYPES.get(key) or ((int, float) if isinstance(default, float) else (type(default),))
    if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
        names = " or ".join(k.__name__ for k in kinds)
        raise UserError(f"{where}: key '{key}': expected {names}, got {value!r}")
    if key in _CHOICES and value not in _CHOICES[key]:
        raise UserError(f"{where}: key '{key}': {value!r} is not one of {', '.join(_CHOICES[key])}")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
        raise UserError(f"{where}: key '{key}': must not be negative")
    return float(value) if isinstance(default, float) and isinstance(value, int) else value


def _lookup(d: Mapping, dotted: str) -> Any:
    for part in dotted.split("."):
        d = d[part]
    return d


def _known(dotted: str) -> bool:
    try:
        _lookup(DEFAULTS, dotted)
        return True
    except (KeyError, TypeError):
        return False


def flatten(layer: Mapping[str, Any], where: str) -> dict[Any, Any]:
    """Validate one layer (a nested table) and return it as {dotted key: value}
    (``("prices", model)`` tuples for prices)."""
    out: dict[str, Any] = {}
    for key, value in layer.items():
        if key == "prices":
            if not isinstance(value, dict):
                raise UserError(f"{where}: key 'prices': expected a table of model = {{input, output}}")
            for model, p in value.items():
                if not isinstance(p, dict) or set(p) - {"input", "output"}:
                    raise UserError(f"{where}: key 'prices.{model}': expected {{input = USD/1M, output = USD/1M}}")
                for k, v in p.items():
                    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                        raise UserError(f"{where}: key 'prices.{model}.{k}': expected a number ≥ 0")
                out[("prices", model)] = dict(p)      # a tuple: model names may contain dots
            continue
        if key not in DEFAULTS:
            raise UserError(f"{where}: unknown key '{key}' (allowed: {', '.join(DEFAULTS)})")
        if not isinstance(DEFAULTS[key], dict):
            out[key] = _check(key, value, where)
            continue
        if not isinstance(value, dict):
            raise UserError(f"{where}: key '{key}': expected a table [{key}]")
        for sub, v in value.items():
            dotted = f"{key}.{sub}"
            if dotted == "llm.roles":
                out.update(_roles(v, where))
            elif not _known(dotted):
                raise UserError(f"{where}: unknown key '{dotted}' (allowed: "
                                f"{', '.join(f'{key}.{k}' for k in DEFAULTS[key])})")
            else:
                out[dotted] = _check(dotted, v, where)
    return out


def _roles(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise UserError(f"{where}: key 'llm.roles': expected tables [llm.roles.planner] …")
    out = {}
    for role, table in value.items():
        if role not in ROLES:
            raise UserError(f"{where}: unknown key 'llm.roles.{role}' (roles: {', '.join(ROLES)})")
        for k, v in (table or {}).items():
            if k not in _ROLE_KEYS:
                raise UserError(f"{where}: unknown key 'llm.roles.{role}.{k}' (allowed: {', '.join(_ROLE_KEYS)})")
            if isinstance(v, bool) or not isinstance(v, _ROLE_KEYS[k]):
                raise UserError(f"{where}: key 'llm.roles.{role}.{k}': expected "
                                f"{' or '.join(t.__name__ for t in _ROLE_KEYS[k])}")
            out[f"llm.roles.{role}.{k}"] = v
    return out


def read_toml(path: Path) -> dict[str, Any]:
    """A config file as {dotted key: value}; {} when it does not exist."""
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise UserError(f"{path}: cannot read the config: {e}") from None
    return flatten(data, str(path))


def _set(data: dict, dotted: str | tuple, value: Any) -> None:
    """The one dotted-key setter: ``a.b.c`` (or a tuple of parts) into nested tables."""
    parts = list(dotted) if isinstance(dotted, tuple) else dotted.split(".")
    node = data
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value


def load_config(flags: Mapping[str, Any] | None = None, *, cwd: Path | None = None,
                env: Mapping[str, str] | None = None, base: Mapping[str, Any] | None = None) -> Config:
    """Merge the layers; ``flags`` and ``base`` are {dotted key: value} (None values are skipped).

    ``base`` (a resumed run's stored config) sits above the files and below env and flags.
    """
    env = os.environ if env is None else env
    cwd = Path.cwd() if cwd is None else Path(cwd)
    layers: list[tuple[str, dict[str, Any]]] = []
    user = user_home() / "config.toml"
    layers.append((str(user), read_toml(user)))
    layers.append((str(cwd / PROJECT_FILE), read_toml(cwd / PROJECT_FILE)))
    if base:
        layers.append(("the run's run.toml", flatten(base, "run.toml")))
    for name, dotted in ENV_VARS.items():
        if env.get(name):
            layers.append((f"env {name}", flatten(nest({dotted: env[name]}), f"env {name}")))
    if flags:
        layers.append(("flags", flatten(nest({k: v for k, v in flags.items() if v is not None}), "flags")))
    data = copy.deepcopy(DEFAULTS)
    sources: dict[str, str] = {}
    for where, layer in layers:
        for key, value in layer.items():
            _set(data, key, value)
            sources[key if isinstance(key, str) else ".".join(key)] = where
    return Config(data, sources)


def nest(flat: Mapping[str, Any]) -> dict[str, Any]:
    """{dotted key: value} → nested tables."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        _set(out, ("prices", key[7:]) if isinstance(key, str) and key.startswith("prices.") else key, value)
    return out
