"""What a recorded call of a kernel function looks like (its arguments, its outputs) and the op
return schema the calls show: shared by the load_inline and the Triton export."""
from __future__ import annotations

from .errors import ExportError


def describe(a) -> dict:
    import torch
    if isinstance(a, torch.Tensor):
        return {"shape": list(a.shape), "dtype": str(a.dtype).replace("torch.", ""), "device": a.device.type}
    # None stays JSON's null: the package's own tests pass a recorded value back to its op as it is.
    return {"value": a if a is None or isinstance(a, (int, float, bool)) else repr(a)}


def describe_out(out):
    import torch
    if isinstance(out, torch.Tensor):
        d = describe(out)
        d["contiguous"] = out.is_contiguous()
        return d
    if isinstance(out, (list, tuple)):
        return {"items": [describe_out(o) for o in out], "kind": type(out).__name__}
    return {"value": repr(out)}


def record_call(values: list, run):
    """Run ``run()`` (a kernel function called with ``values``): its output and the call's record:
    each argument described, the output described, and which tensor arguments it wrote into (their
    values compared with copies taken before; an op must declare what it mutates)."""
    import torch
    before = [v.clone() if isinstance(v, torch.Tensor) else None for v in values]
    out = run()
    mutated = [i for i, (v, b) in enumerate(zip(values, before))
               if b is not None and not (v.shape == b.shape and torch.equal(v, b))]
    return out, {"args": [describe(v) for v in values], "out": describe_out(out), "mutated": mutated}


def return_schema(fn: str, samples: list[dict]) -> str:
    """Tensor, Tensor[] or (Tensor, ...) from what every recorded call returned."""
    kinds = set()
    for s in samples:
        o = s["out"]
        if "shape" in o:
            kinds.add("Tensor")
        elif o.get("kind") in ("list", "tuple") and all("shape" in i for i in o["items"]):
            kinds.add("Tensor[]" if o["kind"] == "list" else "(" + ", ".join("Tensor" for _ in o["items"]) + ")")
        else:
            raise ExportError(f"{fn}: returned {o.get('value', o.get('kind', '?'))}, not tensors")
    if len(kinds) != 1:
        raise ExportError(f"{fn}: returns {sorted(kinds)} in different calls; an op's schema needs one")
    return kinds.pop()
