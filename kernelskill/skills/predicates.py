"""Preconditions as data: predicates a skill file states over the task's facts and a node's profile.

A skill's ``preconditions`` must all hold, none of its ``forbidden`` may hold, and its ``expect``
names the metrics it should move (``{launches = "down", roofline_fraction = "up"}``). A predicate is
one of::

    has FEATURE             a task feature (kernelskill.vocab.TASK_FEATURES) is present
    NAME OP VALUE           a fact compared with a number (or a word, for dtype and bottleneck);
                            OP is one of < <= > >= == !=

``FACTS`` lists every name, where it comes from and what it means. A fact that is not known (no
profile yet, no Nsight Compute run, a task traced without GEMMs) decides nothing: the gate says
"not measured" and goes on, so a skill is never kept out by a number nobody took.
"""
from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass
from typing import Any, Mapping

from ..errors import UserError
from ..results import Roofline
from ..vocab import BOTTLENECKS, TASK_FEATURES


@dataclass(frozen=True)
class Fact:
    source: str                      # "task" (traced reference), "profile" (a node's timing), "ncu"
    doc: str
    words: tuple[str, ...] = ()      # the values of a word fact; () for a number


DTYPES = ("float32", "float16", "bfloat16", "float64")
FACTS: dict[str, Fact] = {
    # the task (Task.summary(): traced on the meta device)
    "flops": Fact("task", "FLOPs of one forward (matmul, conv and attention only)"),
    "bytes": Fact("task", "compulsory bytes of one forward: inputs, outputs, parameters"),
    "intensity": Fact("task", "flops / bytes (FLOPs per compulsory byte)"),
    "output_numel": Fact("task", "elements the forward returns"),
    "ops": Fact("task", "aten ops one forward runs (a long chain is many launches in eager)"),
    "gemm_m": Fact("task", "M of the largest contraction (by M*N*K*batch)"),
    "gemm_n": Fact("task", "N of the largest contraction"),
    "gemm_k": Fact("task", "K of the largest contraction"),
    "gemm_batch": Fact("task", "batch count of the largest contraction (1 for a plain GEMM)"),
    "reduce_size": Fact("task", "values each output of the largest reduction or scan reduces"),
    "conv_groups": Fact("task", "groups of the first convolution"),
    "conv_kernel": Fact("task", "largest kernel extent of the first convolution"),
    "conv_taps": Fact("task", "kernel volume of the first convolution (9 for 3x3, 7 for a 1-D kernel of 7)"),
    "conv_stride": Fact("task", "largest stride of the first convolution"),
    "conv_dilation": Fact("task", "largest dilation of the first convolution"),
    "dtype": Fact("task", "the inputs' floating dtype", DTYPES),
    "atol": Fact("task", "the task's absolute tolerance (task.toml, else the dtype's default)"),
    "rtol": Fact("task", "the task's relative tolerance (TF32 needs about 1e-3, bf16 about 1e-2)"),
    # a node's profile (EvalResult.profile)
    "speedup": Fact("profile", "eager time / candidate time"),
    "roofline_fraction": Fact("profile", "the roofline floor / measured time (1 = at the roofline)"),
    "custom_share": Fact("profile", "share of GPU time in the candidate's own kernels (0-1)"),
    "launches": Fact("profile", "kernel launches per forward"),
    "bottleneck": Fact("profile", "the bottleneck class", BOTTLENECKS),
    # Nsight Compute, when the node was profiled with --ncu (duration-weighted over the kernels)
    "sm_pct": Fact("ncu", "SM throughput, % of peak"),
    "memory_pct": Fact("ncu", "memory throughput (any level), % of peak"),
    "dram_pct": Fact("ncu", "DRAM throughput, % of peak"),
    "achieved_occupancy_pct": Fact("ncu", "achieved occupancy, % of the SM's warps"),
    "theoretical_occupancy_pct": Fact("ncu", "theoretical occupancy, % of the SM's warps"),
}
DIRECTIONS = ("up", "down")
_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
        "==": operator.eq, "!=": operator.ne}
_PRED = re.compile(r"^\s*([a-z_]+)\s*(<=|>=|==|!=|<|>)\s*(\S+)\s*$")
_HAS = re.compile(r"^\s*has\s+(\S+)\s*$")


@dataclass(frozen=True)
class Predicate:
    name: str                        # a fact, or "has" for a task feature
    op: str
    value: Any

    def __str__(self) -> str:
        return f"has {self.value}" if self.name == "has" else f"{self.name} {self.op} {self.value}"

    def check(self, facts: Mapping[str, Any], features: set[str] | None) -> bool | None:
        """True or False; None when the fact is not known (it decides nothing)."""
        if self.name == "has":
            return None if features is None else self.value in features
        have = facts.get(self.name)
        if have is None or (isinstance(have, float) and math.isnan(have)):
            return None
        return _OPS[self.op](have, self.value)


def parse(text: Any, where: str) -> Predicate:
    """One predicate; a UserError naming ``where`` (file and key) and what is allowed."""
    if not isinstance(text, str):
        raise UserError(f"{where}: {text!r} is not a predicate string like 'gemm_k >= 4096' or 'has gemv'")
    if m := _HAS.match(text):
        feature = m.group(1)
        if feature not in TASK_FEATURES:
            raise UserError(f"{where}: {text!r}: {feature!r} is not a task feature (kernelskill.vocab.TASK_FEATURES)")
        return Predicate("has", "has", feature)
    m = _PRED.match(text)
    if not m:
        raise UserError(f"{where}: {text!r} is not a predicate: write 'NAME OP VALUE' (OP one of "
                        f"{' '.join(_OPS)}) or 'has FEATURE'")
    name, op, raw = m.groups()
    fact = FACTS.get(name)
    if fact is None:
        raise UserError(f"{where}: {text!r}: unknown fact {name!r}; facts: {', '.join(FACTS)}")
    if fact.words:
        if op not in ("==", "!="):
            raise UserError(f"{where}: {text!r}: {name} is a word; compare it with == or !=")
        if raw not in fact.words:
            raise UserError(f"{where}: {text!r}: {raw!r} is not one of {', '.join(fact.words)}")
        return Predicate(name, op, raw)
    try:
        value = float(raw.replace("_", ""))
    except ValueError:
        raise UserError(f"{where}: {text!r}: {raw!r} is not a number") from None
    if not math.isfinite(value):
        raise UserError(f"{where}: {text!r}: the value must be finite")
    return Predicate(name, op, int(value) if value.is_integer() else value)


def parse_list(value: Any, where: str) -> list[Predicate]:
    if not isinstance(value, list):
        raise UserError(f"{where}: expected a list of predicate strings")
    return [parse(v, where) for v in value]


def parse_expect(value: Any, where: str) -> dict[str, str]:
    """``{metric = "up" | "down"}`` over numeric profile or ncu facts."""
    if not isinstance(value, dict):
        raise UserError(f"{where}: expected a table like {{ launches = \"down\", roofline_fraction = \"up\" }}")
    measurable = [n for n, f in FACTS.items() if f.source in ("profile", "ncu") and not f.words]
    for metric, direction in value.items():
        if metric not in measurable:
            raise UserError(f"{where}: {metric!r} is not a measured metric; one of {', '.join(measurable)}")
        if direction not in DIRECTIONS:
            raise UserError(f"{where}: {metric} = {direction!r}: say \"up\" or \"down\"")
    return dict(value)


def gate_features(summary: Mapping[str, Any]) -> list[str]:
    """What the gate reads of a ``Task.summary()``: its op classes, then its task features."""
    return list(summary.get("op_classes", [])) + list(summary.get("features", []))


def task_facts(summary: Mapping[str, Any] | None) -> dict[str, Any]:
    """The task facts of a ``Task.summary()`` (what ``kernelskill task show --json`` prints)."""
    if not summary:
        return {}
    out: dict[str, Any] = {}
    flops, nbytes = summary.get("flops"), summary.get("bytes")
    if flops is not None:
        out["flops"] = flops
    if nbytes:
        out["bytes"] = nbytes
        if flops is not None:
            out["intensity"] = flops / nbytes
    outputs = summary.get("outputs") or []
    if outputs:
        out["output_numel"] = sum(math.prod(o.get("shape", [])) for o in outputs if "shape" in o)
    if summary.get("op_count") is not None:
        out["ops"] = summary["op_count"]
    structure = summary.get("structure") or {}
    gemms = structure.get("gemms") or []
    if gemms:
        g = max(gemms, key=lambda g: g["batch"] * g["m"] * g["n"] * g["k"])
        out.update(gemm_m=g["m"], gemm_n=g["n"], gemm_k=g["k"], gemm_batch=g["batch"])
    reds = structure.get("reductions") or []
    if reds:
        out["reduce_size"] = max(r["size"] for r in reds)
    convs = structure.get("convolutions") or []
    if convs:
        c = convs[0]
        out["conv_groups"], out["conv_kernel"] = c["groups"], max(c["kernel"] or [1])
        out["conv_taps"] = math.prod(c["kernel"] or [1])
        out["conv_stride"] = max(c.get("stride") or [1])
        if c.get("dilation"):
            out["conv_dilation"] = max(c["dilation"])
    dtypes = [i.get("dtype") for i in summary.get("inputs") or [] if i.get("dtype") in DTYPES]
    if dtypes:
        out["dtype"] = dtypes[0]
    for key, value in (summary.get("tolerance") or {}).items():
        if key in ("atol", "rtol") and value is not None:
            out[key] = value
    return out


def profile_facts(profile: Any) -> dict[str, Any]:
    """The profile facts of a node: a ProfileResult, its dict, a bare bottleneck or None."""
    if profile is None:
        return {}
    if isinstance(profile, str):
        return {"bottleneck": profile}
    get = profile.get if isinstance(profile, Mapping) else (lambda k, d=None: getattr(profile, k, d))
    out: dict[str, Any] = {}
    for key in ("speedup", "custom_share", "bottleneck"):
        if get(key) is not None:
            out[key] = get(key)
    roof = get("roofline")
    if isinstance(roof, Mapping):           # the profile's JSON: its roofline record as written
        roof = Roofline.from_dict(roof)
    if roof is not None and roof.fraction is not None:
        out["roofline_fraction"] = roof.fraction
    kernels = get("kernels") or []
    if kernels:
        calls = [k.get("calls") if isinstance(k, Mapping) else getattr(k, "calls", None) for k in kernels]
        if all(c is not None for c in calls):
            out["launches"] = sum(calls)
    ncu = get("ncu") or {}
    for key in ("sm_pct", "memory_pct", "dram_pct", "achieved_occupancy_pct", "theoretical_occupancy_pct"):
        if ncu.get(key) is not None:
            out[key] = ncu[key]
    if "launches" not in out and ncu.get("launches") is not None:
        out["launches"] = ncu["launches"]
    return out
