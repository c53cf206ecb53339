"""Task: a KernelBench-format reference (``Model``, ``get_inputs``, ``get_init_inputs``, size
constants), optionally in a directory with ``task.toml`` (name, level, dtype, tolerances, presets).
Without a level in ``task.toml``, a folder named ``level1``, ``level_2``, … above the file gives it
(KernelBench's layout: ``KernelBench/level1/19_ReLU.py``).

Presets and ``--set`` overrides rewrite the module's top-level constant assignments before the
module runs, so constants derived from them (``N = batch * dim``) follow.
"""
from __future__ import annotations

import ast
import hashlib
import re
import sys
import tomllib
import traceback
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import TaskError
from .candidate import parse_python

TASK_FILE_NAMES = ("reference.py", "task.py", "model.py")
TOML_KEYS = {"name", "level", "description", "dtype", "tolerance", "presets", "reference", "allow_tf32", "flags"}
# task.toml's [flags] keys → PyTorch backend flags (kernelskill/evaluate/flags.py applies them).
FLAG_KEYS = {"matmul_tf32": "cuda.matmul.allow_tf32", "cudnn_tf32": "cudnn.allow_tf32",
             "cudnn_benchmark": "cudnn.benchmark", "cudnn_deterministic": "cudnn.deterministic",
             "float32_matmul_precision": "float32_matmul_precision"}
DEFAULT_TOLERANCE = {"float32": 1e-4, "float64": 1e-7, "float16": 1e-2, "bfloat16": 1e-2}
_LEVEL_DIR = re.compile(r"level[_-]?(\d+)$", re.I)


@dataclass
class Task:
    """A loaded task: its source, metadata and the overrides in force."""
    name: str
    path: Path                       # the reference .py file
    source: str
    level: int | None = None
    description: str = ""
    dtype: str = "float32"
    atol: float | None = None        # None: by dtype
    rtol: float | None = None
    allow_tf32: bool = False         # fp32 matmuls may use TF32 under the task's flags (the roofline's peak)
    # The backend flags the task runs under, beside PyTorch's defaults ({flag: value}); "strict": TF32
    # off everywhere for timing too. Empty: PyTorch's defaults, as a user's process has them.
    flags: dict[str, Any] = field(default_factory=dict)
    flags_mode: str | None = None
    presets: dict[str, dict[str, Any]] = field(default_factory=dict)
    preset: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)   # preset values, then --set values

    # ---- loading -------------------------------------------------------------------------
    @classmethod
    def load(cls, spec: str | Path, preset: str | None = None,
             overrides: dict[str, Any] | None = None) -> "Task":
        """Load a task file or directory; apply ``preset`` then ``overrides``; validate it."""
        path = Path(spec)
        if not path.exists():
            raise TaskError(f"{spec}: no such task file or directory")
        meta: dict[str, Any] = {}
        if path.is_dir():
            toml_path = path / "task.toml"
            if toml_path.exists():
                meta = _read_toml(toml_path)
            ref_name = meta.get("reference")
            candidates = [path / ref_name] if ref_name else [path / n for n in TASK_FILE_NAMES]
            found = [p for p in candidates if p.exists()]
            if not found:
                raise TaskError(f"{path}: no reference file (expected one of "
                                f"{', '.join(p.name for p in candidates)})")
            file = found[0]
        else:
            file = path
            if (path.parent / "task.toml").exists() and path.name in TASK_FILE_NAMES:
                meta = _read_toml(path.parent / "task.toml")
        source = file.read_text()
        tol = meta.get("tolerance", {})
        flags, flags_mode = _task_flags(meta)
        task = cls(name=meta.get("name") or (file.parent.name if file.name in TASK_FILE_NAMES else file.stem),
                   path=file.resolve(), source=source, level=meta.get("level", folder_level(file)),
                   description=meta.get("description", ""), dtype=meta.get("dtype", "float32"),
                   atol=tol.get("atol"), rtol=tol.get("rtol"),
                   allow_tf32=bool(flags.get("cuda.matmul.allow_tf32", False)),
                   flags=flags, flags_mode=flags_mode,
                   presets=meta.get("presets", {}))
        merged: dict[str, Any] = {}
        if preset:
            if preset not in task.presets:
                known = ", ".join(sorted(task.presets)) or "none defined"
                raise TaskError(f"{file}: unknown preset '{preset}' (presets: {known})")
            merged.update(task.presets[preset])
            task.preset = preset
        merged.update(overrides or {})
        task.overrides = merged
        task.validate_overrides()
        return task

    @property
    def tolerance(self) -> tuple[float, float]:
        """(atol, rtol): the task's own, else the default for its dtype."""
        default = DEFAULT_TOLERANCE.get(self.dtype, 1e-4)
        return (self.atol if self.atol is not None else default,
                self.rtol if self.rtol is not None else default)

    @property
    def constants(self) -> dict[str, Any]:
        """Top-level constants as written in the file (before overrides), by name."""
        out = {}
        for node in _tree(self.source, self.path).body:
            for name in _assigned_names(node):
                try:
                    out[name] = ast.literal_eval(node.value)
                except (ValueError, SyntaxError):
                    out[name] = ast.unparse(node.value)
        return out

    def validate_overrides(self) -> None:
        names = set(self.constants)
        unknown = [k for k in self.overrides if k not in names]
        if unknown:
            raise TaskError(f"{self.path}: no top-level constant named {', '.join(map(repr, unknown))} to "
                            f"override (constants: {', '.join(sorted(names)) or 'none'})")

    @property
    def hash(self) -> str:
        """Content hash of the source plus overrides: what makes two runs of a task comparable."""
        text = self.source + repr(sorted(self.overrides.items())) + self.dtype
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    # ---- running (trusted: the task is the user's own code) -------------------------------
    def module(self) -> types.ModuleType:
        """A fresh module of the reference with the overrides applied."""
        tree = _tree(self.source, self.path)
        if self.overrides:
            tree = _apply_overrides(tree, self.overrides, self.path)
        mod = types.ModuleType(f"kernelskill_task_{self.hash}")
        mod.__file__ = str(self.path)
        # Registered so pickling, dataclasses and inspect can find the module by name.
        sys.modules[mod.__name__] = mod
        with self.error_context("running the module"):
            exec(compile(tree, str(self.path), "exec"), mod.__dict__)
        for name, kind in (("Model", "class Model(nn.Module)"), ("get_inputs", "def get_inputs()"),
                           ("get_init_inputs", "def get_init_inputs()")):
            if not callable(getattr(mod, name, None)):
                raise TaskError(f"{self.path}: no `{name}` defined (expected `{kind}` at the top level)")
        return mod

    def init_inputs(self, mod: types.ModuleType, passing: tuple[type[BaseException], ...] = ()) -> list:
        with self.error_context("get_init_inputs()", passing=passing):
            args = mod.get_init_inputs()
        if not isinstance(args, (list, tuple)):
            raise TaskError(f"{self.path}:{_def_line(mod.get_init_inputs)}: get_init_inputs() must return a "
                            f"list of constructor arguments, got {type(args).__name__}")
        return list(args)

    def inputs(self, mod: types.ModuleType, passing: tuple[type[BaseException], ...] = ()) -> list:
        """``get_inputs()``, checked: a list of tensors (or plain numbers); exceptions of the ``passing``
        types go through as they are."""
        import torch
        with self.error_context("get_inputs()", passing=passing):
            inputs = mod.get_inputs()
        line = _def_line(mod.get_inputs)
        if not isinstance(inputs, (list, tuple)):
            raise TaskError(f"{self.path}:{line}: get_inputs() must return a list of tensors, "
                            f"got {type(inputs).__name__}")
        for i, x in enumerate(inputs):
            if not isinstance(x, (torch.Tensor, int, float, bool)):
                raise TaskError(f"{self.path}:{line}: get_inputs() item {i} is a {type(x).__name__}; "
                                f"each input must be a torch.Tensor (or a plain number)")
        return list(inputs)

    def build_model(self, mod: types.ModuleType, cls_name: str = "Model", init: list | None = None,
                    passing: tuple[type[BaseException], ...] = ()):
        """``cls_name(*init)``; its failure a TaskError naming the task's line, except exceptions of the
        ``passing`` types (the meta-device trace retries those on the CPU)."""
        init = self.init_inputs(mod, passing) if init is None else init
        cls = getattr(mod, cls_name)
        try:
            return cls(*init)
        except passing:
            raise
        except TypeError as e:
            if _raised_in_call(e):
                raise TaskError(f"{self.path}:{_def_line(cls)}: {cls_name}({_short(init)}) does not fit its "
                                f"constructor: {e}. get_init_inputs() must return the arguments in order") from None
            raise TaskError(f"{self.path}:{_tb_line(e, self.path)}: {cls_name}.__init__ raised "
                            f"{type(e).__name__}: {e}") from None
        except Exception as e:
            raise TaskError(f"{self.path}:{_tb_line(e, self.path)}: {cls_name}.__init__ raised "
                            f"{type(e).__name__}: {e}") from None

    def error_context(self, what: str, passing: tuple[type[BaseException], ...] = ()):
        """Turn an exception of the task's code into a TaskError naming ``what`` and the task's line;
        exceptions of the ``passing`` types go through as they are."""
        return _ErrorContext(self.path, what, passing)

    def summary(self) -> dict[str, Any]:
        """Shapes, dtypes, parameters and op classes: what ``kernelskill task show`` prints."""
        from .features import describe
        return describe(self)


class _ErrorContext:
    def __init__(self, path: Path, what: str, passing: tuple[type[BaseException], ...] = ()):
        self.path, self.what, self.passing = path, what, passing

    def __enter__(self):
        return self

    def __exit__(self, et, e, tb):
        if e is None or isinstance(e, (TaskError, *self.passing)) or not isinstance(e, Exception):
            return False
        hint = ""
        if isinstance(e, ModuleNotFoundError) and e.name:
            # KernelBench's Mamba2 problems import einops: the task needs a package this Python lacks.
            hint = (f"; the task imports `{e.name.split('.')[0]}`, which this Python does not have: "
                    f"`pip install {e.name.split('.')[0]}` in the environment that runs kernelskill (and its workers)")
        raise TaskError(f"{self.path}:{_tb_line(e, self.path)}: {self.what} raised "
                        f"{type(e).__name__}: {e}{hint}") from None


def level_of(name: str) -> int | None:
    """The level a folder's name gives (``level1``, ``level_2``, ``Level-3``), else None."""
    m = _LEVEL_DIR.search(name)
    return int(m.group(1)) if m else None


def folder_level(file: Path) -> int | None:
    """The level of a task file from the folder it sits in (or, for a task directory's reference,
    the folder that directory sits in): ``KernelBench/level2/7_Matmul.py`` is level 2."""
    parent = file.resolve().parent
    for folder in (parent, parent.parent) if file.name in TASK_FILE_NAMES else (parent,):
        if (level := level_of(folder.name)) is not None:
            return level
    return None


def _task_flags(meta: dict) -> tuple[dict, str | None]:
    """The backend flags task.toml asks for: ({flag: value}, "strict" or None). ``allow_tf32 = b``
    (the older key) sets both TF32 switches."""
    flags: dict[str, Any] = {}
    if "allow_tf32" in meta:
        flags["cuda.matmul.allow_tf32"] = flags["cudnn.allow_tf32"] = bool(meta["allow_tf32"])
    given = meta.get("flags")
    if given == "strict":
        return {}, "strict"
    for key, value in (given or {}).items():
        flags[FLAG_KEYS[key]] = value
    return flags, None


def _read_toml(path: Path) -> dict:
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise TaskError(f"{path}: invalid TOML: {e}") from None
    unknown = set(data) - TOML_KEYS
    if unknown:
        raise TaskError(f"{path}: unknown key(s) {', '.join(sorted(unknown))} "
                        f"(allowed: {', '.join(sorted(TOML_KEYS))})")
    for key, kind in (("presets", dict), ("tolerance", dict), ("level", int), ("name", str), ("dtype", str)):
        if key in data and not isinstance(data[key], kind):
            raise TaskError(f"{path}: key '{key}' must be a {kind.__name__}")
    for key in data.get("tolerance", {}):
        if key not in ("atol", "rtol"):
            raise TaskError(f"{path}: key 'tolerance.{key}' is unknown (allowed: atol, rtol)")
    flags = data.get("flags")
    if flags is not None and flags not in ("default", "strict") and not isinstance(flags, dict):
        raise TaskError(f"{path}: key 'flags' must be \"default\", \"strict\" or a table of "
                        f"{', '.join(sorted(FLAG_KEYS))}")
    for key, value in (flags if isinstance(flags, dict) else {}).items():
        if key not in FLAG_KEYS:
            raise TaskError(f"{path}: key 'flags.{key}' is unknown (allowed: {', '.join(sorted(FLAG_KEYS))})")
        if key == "float32_matmul_precision":
            if value not in ("highest", "high", "medium"):
                raise TaskError(f"{path}: flags.float32_matmul_precision = {value!r}: expected "
                                f"\"highest\", \"high\" or \"medium\"")
        elif not isinstance(value, bool):
            raise TaskError(f"{path}: flags.{key} = {value!r}: expected true or false")
    if flags == "default":
        data.pop("flags")
    for name, values in data.get("presets", {}).items():
        if not isinstance(values, dict):
            raise TaskError(f"{path}: preset '{name}' must be a table of constant = value")
    return data


def _tree(source: str, path: Path) -> ast.Module:
    try:
        return parse_python(source, filename=str(path))
    except SyntaxError as e:
        raise TaskError(f"{path}:{e.lineno}:{e.offset or 0}: syntax error: {e.msg}"
                        + (f"\n    {e.text.rstrip()}" if e.text else "")) from None


def parse_value(text: str) -> Any:
    """A --set value: a Python literal when it parses as one, else the expression text."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return _Expr(text)


class _Expr(str):
    """An override that is an expression (``torch.float16``), evaluated in the module."""


def _assigned_names(node: ast.stmt) -> list[str]:
    """The names a top-level ``name = value`` or chained ``a = b = value`` statement sets."""
    if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
        return [t.id for t in node.targets]
    return []


def _apply_overrides(tree: ast.Module, overrides: dict[str, Any], path: Path) -> ast.Module:
    body = []
    for node in tree.body:
        names = _assigned_names(node)
        hit = [n for n in names if n in overrides]
        if not hit:
            body.append(node)
            continue
        # A chain (KernelBench's ``height = width = 128``) splits: the names kept share the file's
        # value, evaluated once as before; each overridden name gets its own statement, same line.
        kept = [t for t in node.targets if t.id not in overrides]
        if kept:
            body.append(ast.copy_location(ast.Assign(targets=kept, value=node.value), node))
        for name in hit:
            value = overrides[name]
            text = str(value) if isinstance(value, _Expr) else repr(value)
            try:
                value_node = parse_python(text, mode="eval").body
            except SyntaxError:
                raise TaskError(f"{path}: override {name}={text!r} is not a Python value") from None
            for sub in ast.walk(value_node):        # errors of the new value point at the constant's line
                ast.copy_location(sub, node.value)
            body.append(ast.copy_location(ast.Assign(targets=[ast.copy_location(ast.Name(name, ast.Store()), node)],
                                                     value=value_node), node))
    tree.body = body
    return ast.fix_missing_locations(tree)


def _def_line(obj) -> int:
    code = getattr(obj, "__code__", None) or getattr(getattr(obj, "__init__", None), "__code__", None)
    return code.co_firstlineno if code else 0


def _tb_line(e: BaseException, path: Path) -> int:
    line = 0
    for frame in traceback.extract_tb(e.__traceback__):
        if Path(frame.filename) == path:
            line = frame.lineno or 0
    return line


def _raised_in_call(e: TypeError) -> bool:
    """True when the TypeError is the call's signature mismatch, not one raised inside __init__."""
    tb = traceback.extract_tb(e.__traceback__)
    return len(tb) <= 1 and ("argument" in str(e))


def _short(values: list) -> str:
    text = ", ".join(repr(v) for v in values)
    return text if len(text) < 60 else text[:57] + "..."
