"""Prompts as data: ``agents/prompts/<role>.toml``, one table per backend (plus ``[common]``).

A backend's table inherits the keys of ``[common]``. Templates use ``{{name}}`` placeholders, so
C++ braces need no escaping. Loading validates every file: a missing or unknown key, a missing
backend table or an unknown placeholder is a ``UserError`` naming the file and the key.

``shared.toml`` holds what several roles must say alike, once: the ``ModelNew`` rule
(``{{model_new}}``), what may be cached (``{{caching}}``) and, per backend, the build the coder must
use (``{{build}}``, the one place the build flags are written). Every key of every role may quote
them. A directory of one's own prompts without a ``shared.toml`` uses the shipped one.

A role's *fragments* are keys that other keys quote by name (the planner's ``{{reply}}``, the
coder's ``{{step}}``); each has a ``root_`` twin used when the node is the root — the reference,
with no kernel to mark with IMPROVE spans.
"""
from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UserError
from ..vocab import BACKENDS
from .parsing import plan_schema_text

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"
SHARED_FILE = "shared.toml"
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
SHARED_KEYS = ("model_new", "caching", "build", "timing")
_COMMON_FIELDS = {"backend", "backend_notes", *SHARED_KEYS}

# Per role: the keys each table must end up with, and the placeholders each key may use.
SCHEMA: dict[str, dict[str, set[str]]] = {
    "planner": {"system": {"reply"}, "user": {"task", "reference", "node", "code", "skills", "context", "tried",
                                              "machine"},
                "corrective": {"problem", "again"}, "backend_notes": set(),
                "reply": {"plan_schema"}, "root_reply": {"plan_schema"}, "again": set(), "root_again": set()},
    "coder": {"system": {"step"}, "user": {"task", "reference", "plan", "skill", "code_part", "context",
                                           "relatives", "machine"},
              "corrective": {"problem"}, "backend_notes": set(),
              "step": set(), "root_step": set(), "code_part": {"anchored_code"}, "root_code_part": set()},
    "debugger": {"system": set(), "user": {"task", "reference", "plan", "base", "code", "failure", "chain",
                                           "context", "machine"},
                 "corrective": {"problem"}, "backend_notes": set()},
}
# Per role: the keys quoted by other keys (each with its root_ twin, in SCHEMA too).
FRAGMENTS: dict[str, tuple[str, ...]] = {"planner": ("reply", "again"), "coder": ("step", "code_part"),
                                         "debugger": ()}


@dataclass
class Prompt:
    """The templates of one role for one backend; ``shared``: that backend's shared.toml texts."""
    role: str
    backend: str
    templates: dict[str, str]
    source: str
    shared: dict[str, str] = field(default_factory=dict)

    def render(self, key: str, root: bool = False, **values: str) -> str:
        """Fill ``key``'s template; the backend fields, the shared texts and the role's fragments
        (their ``root_`` twins when ``root``) are always available."""
        base = {"backend": self.backend, "backend_notes": self.templates.get("backend_notes", ""),
                "plan_schema": plan_schema_text(), **self.shared, **values}
        text = self.templates[key]
        for name in FRAGMENTS.get(self.role, ()):
            if "{{" + name + "}}" in text and name not in values:
                base[name] = self._fill(("root_" if root else "") + name, base).strip("\n")
        return self._fill(key, base, text)

    def _fill(self, key: str, values: dict[str, str], text: str | None = None) -> str:
        text = self.templates[key] if text is None else text
        missing = [m for m in _PLACEHOLDER.findall(text) if m not in values]
        if missing:
            raise KeyError(f"{self.source}: {self.backend}.{key} needs {', '.join(missing)}")
        return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), text)


def _read(path: Path, what: str) -> dict:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path}: missing prompt file for the {what}") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise UserError(f"{path}: cannot read prompts: {e}") from None


def _tables(where: str, data: dict) -> dict:
    unknown = set(data) - set(BACKENDS) - {"common"}
    if unknown:
        raise UserError(f"{where}: unknown table '{sorted(unknown)[0]}' (tables: common, {', '.join(BACKENDS)})")
    common = data.get("common", {})
    if not isinstance(common, dict):
        raise UserError(f"{where}: key 'common': expected a table")
    return common


def _check_table(path: str, schema: dict[str, set[str]], name: str, table: dict, fields: set[str]) -> None:
    for key, text in table.items():
        if key not in schema:
            raise UserError(f"{path}: unknown key '{name}.{key}' (allowed: {', '.join(schema)})")
        if not isinstance(text, str):
            raise UserError(f"{path}: key '{name}.{key}': expected a string")
        for ph in _PLACEHOLDER.findall(text):
            if ph not in schema[key] | fields:
                known = ", ".join(sorted(schema[key] | fields))
                raise UserError(f"{path}: key '{name}.{key}': unknown placeholder {{{{{ph}}}}} (known: {known})")


def _merged(where: str, data: dict, schema: dict[str, set[str]], fields: set[str]) -> dict[str, dict[str, str]]:
    """Each backend's table over [common], validated against ``schema``: {backend: {key: text}}."""
    common = _tables(where, data)
    _check_table(where, schema, "common", common, fields)
    out = {}
    for backend in BACKENDS:
        table = data.get(backend)
        if not isinstance(table, dict):
            raise UserError(f"{where}: missing table [{backend}]")
        _check_table(where, schema, backend, table, fields)
        merged = {**common, **table}
        for key in schema:
            if not merged.get(key, "").strip():
                raise UserError(f"{where}: missing key '{backend}.{key}' (nor in [common])")
        out[backend] = merged
    return out


def load_shared(directory: Path | None = None) -> dict[str, dict[str, str]]:
    """The shared texts by backend: {backend: {model_new, caching, build}} (shared.toml of
    ``directory``, else the shipped one)."""
    path = Path(directory or PROMPTS_DIR) / SHARED_FILE
    if not path.exists():
        path = PROMPTS_DIR / SHARED_FILE
    merged = _merged(str(path), _read(path, "shared rules"), {k: set() for k in SHARED_KEYS}, {"backend"})
    return {b: {k: v.replace("{{backend}}", b).strip("\n") for k, v in texts.items()} for b, texts in merged.items()}


def load_role(role: str, directory: Path | None = None,
              shared: dict[str, dict[str, str]] | None = None) -> dict[str, Prompt]:
    """The validated prompts of one role, by backend."""
    if role not in SCHEMA:
        raise UserError(f"unknown agent role {role!r} (roles: {', '.join(SCHEMA)})")
    path = Path(directory or PROMPTS_DIR) / f"{role}.toml"
    merged = _merged(str(path), _read(path, role), SCHEMA[role], _COMMON_FIELDS)
    shared = shared if shared is not None else load_shared(directory)
    return {backend: Prompt(role, backend, texts, str(path), dict(shared[backend]))
            for backend, texts in merged.items()}


def load_prompts(directory: Path | str | None = None) -> dict[str, dict[str, Prompt]]:
    """All roles' prompts: {role: {backend: Prompt}}; validates every file."""
    d = Path(directory) if directory else None
    shared = load_shared(d)
    return {role: load_role(role, d, shared) for role in SCHEMA}


def build_flags(backend: str, directory: Path | str | None = None) -> dict[str, list[str]]:
    """The flags the shared build text gives the coder, by load_inline argument
    (``{"extra_cflags": [...], "extra_ldflags": [...]}`` for cpp; {} for triton)."""
    text = load_shared(Path(directory) if directory else None)[backend]["build"]
    return {m.group(1): re.findall(r'"([^"]+)"', m.group(2))
            for m in re.finditer(r"(extra_\w*flags)=\[([^\]]*)\]", text)}
