"""Tolerant reading of model output: reasoning tags, JSON headers, code blocks, IMPROVE anchors.

Models wrap code in fences or not, add prose after JSON, think aloud in ``<think>`` tags; these
functions take what is there and say plainly what is missing (the corrective message the agent
sends back).
"""
from __future__ import annotations

import ast
import difflib
import json
import re
from dataclasses import dataclass

from ..mechanisms import normalize_mechanism  # noqa: F401 — re-exported for callers of this module
from kernelskill.candidate import parse_python

BEGIN, END = "<<<IMPROVE BEGIN>>>", "<<<IMPROVE END>>>"
_BEGIN_RE = re.compile(r"<<<\s*IMPROVE\s+BEGIN\s*>>>")
_END_RE = re.compile(r"<<<\s*IMPROVE\s+END\s*>>>")
_FENCE_RE = re.compile(r"^[ \t]*```[ \t]*([\w+.#-]*)[^\n]*\n(.*?)(?:^[ \t]*```[ \t]*$|\Z)", re.S | re.M)
_THINK_RE = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.S | re.I)
_CODE_START = re.compile(r"^(import |from \w|class \w|def \w|@\w|#)", re.M)
_PY_LANGS = {"", "python", "py", "python3"}


def strip_think(text: str) -> str:
    """Text without reasoning blocks (``<think>…</think>``; a lone closing tag ends the reasoning)."""
    text = _THINK_RE.sub("", text)
    for tag in ("</think>", "</thinking>", "</reasoning>"):
        if tag in text:
            text = text.rsplit(tag, 1)[1]
    return text.strip()


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of each fenced block; an unterminated last fence runs to the end."""
    return [(m.group(1).lower(), m.group(2)) for m in _FENCE_RE.finditer(text)]


def extract_json(text: str) -> dict | None:
    """The first JSON object in ``text`` (fenced or bare, prose before or after), else None."""
    for lang, body in fenced_blocks(text):
        if lang == "json":
            found = _first_object(body)
            if found is not None:
                return found
    return _first_object(_FENCE_RE.sub("", text))


def _first_object(text: str) -> dict | None:
    decoder = json.JSONDecoder()
    for m in re.finditer(r"\{", text):
        try:
            obj, _ = decoder.raw_decode(text, m.start())
        except ValueError:
            continue
        if isinstance(obj, dict):
            return obj
    return None


# The planner's JSON object: given in its prompt (``plan_schema_text``) and checked on every reply
# (``schema_problems``); a reply that does not match gets a corrective message naming each mismatch.
PLAN_SCHEMA: dict = {
    "type": "object",
    "required": ["skill", "mechanism", "plan"],
    "properties": {
        "skill": {"type": "string", "minLength": 1, "description": "an allowed skill's id, or \"none\""},
        "why_no_skill": {"type": "string", "description": "when skill is \"none\": why no allowed skill fits"},
        "mechanism": {"type": "string", "minLength": 1, "description": "one line: what changes and why it is faster"},
        "differs": {"type": "string", "description": "when this skill and mechanism were tried before: the concrete "
                    "change (a block size, a loop order, another span), named in your plan too; else empty"},
        "plan": {"type": "array", "minItems": 1, "maxItems": 8, "items": {"type": "string", "minLength": 1},
                 "description": "the steps for the coder, one short line each"},
        "secondary": {"type": "string", "description": "optional: a second allowed skill the plan applies"},
        "retime": {"type": "string", "description": "optional, alone instead of a plan: a timed node whose time "
                   "you doubt, re-timed against the best at no attempt's cost"},
    },
}
_JSON_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def plan_schema_text(schema: dict = PLAN_SCHEMA) -> str:
    """The schema as the planner reads it: the object's frame, then one property per line."""
    props = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}"
                       for k, v in schema["properties"].items())
    return (f'{{"type": "object", "required": {json.dumps(schema["required"])}, "properties": {{\n'
            f"{props}\n}}}}")


def _json_type(value) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return next((name for name, t in _JSON_TYPES.items() if isinstance(value, t)), type(value).__name__)


def schema_problems(value, schema: dict, where: str = "") -> list[str]:
    """What in ``value`` does not match ``schema`` (the subset PLAN_SCHEMA uses: type, required,
    properties, items, minItems, maxItems, minLength — a blank string counts as empty), one plain
    sentence each; [] when it matches. Properties the schema does not name are allowed."""
    name = where or "the JSON object"
    want = schema.get("type")
    if want and _json_type(value) != want:
        of = f" of {schema['items']['type']}s" if want == "array" and "items" in schema else ""
        return [f"{name} must be {'an' if want[0] in 'aeiou' else 'a'} {want}{of}, not {_json_type(value)} "
                f"{json.dumps(value, ensure_ascii=False)[:60]}"]
    out = []
    if want == "object":
        out += [f"{name} lacks {json.dumps(k)}" for k in schema.get("required", []) if k not in value]
        for key, sub in schema.get("properties", {}).items():
            if key in value:
                out += schema_problems(value[key], sub, json.dumps(key))
    elif want == "array":
        lo, hi = schema.get("minItems"), schema.get("maxItems")
        if lo is not None and len(value) < lo:
            out.append(f"{name} has {len(value)} items, at least {lo} needed")
        if hi is not None and len(value) > hi:
            out.append(f"{name} has {len(value)} items, at most {hi} allowed")
        if "items" in schema:
            for i, item in enumerate(value):
                out += schema_problems(item, schema["items"], f"{name}[{i}]")
    elif want == "string" and len(value.strip()) < schema.get("minLength", 0):
        out.append(f"{name} is empty")
    return out


def extract_code(text: str, prefer: str = "class ModelNew") -> str | None:
    """The Python source in a reply: the fenced block that has ``prefer`` (else the longest Python
    block), or bare code when there are no fences."""
    blocks = [body for lang, body in fenced_blocks(text) if lang in _PY_LANGS]
    if blocks:
        with_pref = [b for b in blocks if prefer in b]
        return (max(with_pref or blocks, key=len)).strip("\n") + "\n"
    if "```" in text:
        return None
    bare = _strip_json_prefix(text)
    m = _CODE_START.search(bare)
    if m is None or ("class " not in bare and "def " not in bare):
        return None
    return bare[m.start():].strip("\n") + "\n"


def _strip_json_prefix(text: str) -> str:
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            _, end = json.JSONDecoder().raw_decode(stripped)
            return stripped[end:]
        except ValueError:
            pass
    return text


def defines_model_new(code: str) -> bool:
    """Whether the source defines ``class ModelNew`` (by AST, or by text when it does not parse)."""
    try:
        return any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in ast.walk(parse_python(code)))
    except SyntaxError:
        return re.search(r"^class\s+ModelNew\b", code, re.M) is not None


@dataclass
class Anchor:
    """One span to change: 1-based lines of its BEGIN and END markers and the advice inside."""
    begin: int
    end: int
    advice: str

    def to_dict(self) -> dict:
        return {"begin": self.begin, "end": self.end, "advice": self.advice}


class AnchorError(ValueError):
    """The anchors are missing or do not pair up; the message goes back to the model."""


def parse_anchors(code: str) -> list[Anchor]:
    """The ``<<<IMPROVE BEGIN>>>`` … ``<<<IMPROVE END>>>`` spans of ``code`` (``//`` or ``#`` comments)."""
    anchors, open_at = [], None
    lines = code.splitlines()
    for i, line in enumerate(lines, 1):
        if _BEGIN_RE.search(line):
            if open_at is not None:
                raise AnchorError(f"line {i}: {BEGIN} inside the span opened at line {open_at}; close each "
                                  f"span with {END} before opening the next")
            open_at = i
        elif _END_RE.search(line):
            if open_at is None:
                raise AnchorError(f"line {i}: {END} without a matching {BEGIN}")
            advice = "\n".join(lines[open_at:i - 1]).strip()
            anchors.append(Anchor(open_at, i, advice))
            open_at = None
    if open_at is not None:
        raise AnchorError(f"line {open_at}: {BEGIN} is never closed with {END}")
    if not anchors:
        raise AnchorError(f"no anchors: mark each span to change with `// {BEGIN}` … `// {END}` "
                          f"(`# …` in Python) and put your advice inside")
    return anchors


def check_echo(base: str, anchored: str) -> list[int]:
    """The planner's copy of the code must be the node's code with anchors and advice added, nothing
    else: a model that abbreviates ("# ... unchanged") or edits outside a span would silently corrupt
    the base the coder builds on. Blank lines and trailing spaces do not count. AnchorError says
    which line of the current code is missing or which added line lies outside every span.

    Returns the lines of ``base`` (1-based) that lie inside the spans: the code the plan changes,
    what ``mechanisms.spans_overlap`` compares between plans."""
    spans = [(a.begin, a.end) for a in parse_anchors(anchored)]
    inside = lambda line: any(b <= line <= e for b, e in spans)  # noqa: E731
    mine = [(i, line.rstrip()) for i, line in enumerate(anchored.splitlines(), 1) if line.strip()]
    theirs = [(i, line.rstrip()) for i, line in enumerate(base.splitlines(), 1) if line.strip()]
    sm = difflib.SequenceMatcher(a=[t for _, t in theirs], b=[t for _, t in mine], autojunk=False)
    changed = []
    for op, a0, a1, b0, b1 in sm.get_opcodes():
        if op in ("delete", "replace"):
            line, text = theirs[a0]
            more = f" (and {a1 - a0 - 1} more)" if a1 - a0 > 1 else ""
            raise AnchorError(f"line {line} of the current code, `{text.strip()[:80]}`{more}, is missing from your "
                              f"copy: echo the current code complete and unchanged (no \"...\" or \"unchanged\" "
                              f"abbreviations), adding only the anchors and your advice inside them")
        if op == "insert":
            for j in range(b0, b1):
                line, text = mine[j]
                if not inside(line):
                    raise AnchorError(f"line {line} of your copy, `{text.strip()[:80]}`, is not in the current code "
                                      f"and lies outside every IMPROVE span: change nothing outside the spans "
                                      f"(the coder writes the new code)")
        if op == "equal":
            changed += [theirs[a0 + k][0] for k in range(a1 - a0) if inside(mine[b0 + k][0])]
    return changed


def strip_anchors(code: str) -> str:
    """The code without the marker lines (the coder's output must run as it is)."""
    return "".join(line for line in code.splitlines(keepends=True)
                   if not (_BEGIN_RE.search(line) or _END_RE.search(line)))
