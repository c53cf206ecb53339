"""Prompts as data: ``agents/prompts/<role>.toml``, one table per backend (plus ``[common]``).

A backend's table inherits the keys of ``[common]``. Templates use ``{{name}}`` placeholders, so
C++ braces need no escaping. Loading validates every file: a missing or unknown key, a missing
backend table or an unknown placeholder is a ``UserError`` naming the file and the key.
"""
from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError
from ..vocab import BACKENDS

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
_COMMON_FIELDS = {"backend", "backend_notes"}

# Per role: the keys each table must end up with, and the placeholders each key may use.
SCHEMA: dict[str, dict[str, set[str]]] = {
    "planner": {"system": set(), "user": {"task", "reference", "node", "code", "skills", "context", "tried",
                                                 "machine"},
                "corrective": {"problem"}, "backend_notes": set()},
    "coder": {"system": set(), "user": {"task", "reference", "plan", "skill", "anchored_code", "context",
                                        "relatives", "machine"},
              "corrective": {"problem"}, "backend_notes": set()},
    "debugger": {"system": set(), "user": {"task", "reference", "plan", "base", "code", "failure", "chain",
                                           "context", "machine"},
                 "corrective": {"problem"}, "backend_notes": set()},
}


@dataclass
class Prompt:
    """The templates of one role for one backend."""
    role: str
    backend: str
    templates: dict[str, str]
    source: str

    def render(self, key: str, **values: str) -> str:
        """Fill ``key``'s template; the backend fields are always available."""
        values = {"backend": self.backend, "backend_notes": self.templates.get("backend_notes", ""), **values}
        missing = [m for m in _PLACEHOLDER.findall(self.templates[key]) if m not in values]
        if missing:
            raise KeyError(f"{self.source}: {self.backend}.{key} needs {', '.join(missing)}")
        return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), self.templates[key])


def _check_table(path: str, role: str, name: str, table: dict) -> None:
    schema = SCHEMA[role]
    for key, text in table.items():
        if key not in schema:
            raise UserError(f"{path}: unknown key '{name}.{key}' (allowed: {', '.join(schema)})")
        if not isinstance(text, str):
            raise UserError(f"{path}: key '{name}.{key}': expected a string")
        for ph in _PLACEHOLDER.findall(text):
            if ph not in schema[key] | _COMMON_FIELDS:
                known = ", ".join(sorted(schema[key] | _COMMON_FIELDS))
                raise UserError(f"{path}: key '{name}.{key}': unknown placeholder {{{{{ph}}}}} (known: {known})")


def load_role(role: str, directory: Path | None = None) -> dict[str, Prompt]:
    """The validated prompts of one role, by backend."""
    if role not in SCHEMA:
        raise UserError(f"unknown agent role {role!r} (roles: {', '.join(SCHEMA)})")
    path = Path(directory or PROMPTS_DIR) / f"{role}.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path}: missing prompt file for the {role}") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise UserError(f"{path}: cannot read prompts: {e}") from None
    where = str(path)
    unknown = set(data) - set(BACKENDS) - {"common"}
    if unknown:
        raise UserError(f"{where}: unknown table '{sorted(unknown)[0]}' (tables: common, {', '.join(BACKENDS)})")
    common = data.get("common", {})
    if not isinstance(common, dict):
        raise UserError(f"{where}: key 'common': expected a table")
    _check_table(where, role, "common", common)
    out = {}
    for backend in BACKENDS:
        table = data.get(backend)
        if not isinstance(table, dict):
            raise UserError(f"{where}: missing table [{backend}]")
        _check_table(where, role, backend, table)
        merged = {**common, **table}
        for key in SCHEMA[role]:
            if not merged.get(key, "").strip():
                raise UserError(f"{where}: missing key '{backend}.{key}' (nor in [common])")
        out[backend] = Prompt(role, backend, merged, where)
    return out


def load_prompts(directory: Path | str | None = None) -> dict[str, dict[str, Prompt]]:
    """All roles' prompts: {role: {backend: Prompt}}; validates every file."""
    d = Path(directory) if directory else None
    return {role: load_role(role, d) for role in SCHEMA}
