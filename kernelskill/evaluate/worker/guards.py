"""Runtime guards used inside the worker: backend flags, weight alignment, memory poisoning,
output checks, degenerate and random references, kernel breakdown and custom share.

Static (AST) checks live in ``static.py``; both report flags as ``"code: one-line explanation"``.
"""
from __future__ import annotations

import re
import traceback

import torch


def backend_flags() -> dict:
    """Global switches a candidate could flip to change numerics or speed behind our back."""
    b = torch.backends
    flags = {"cuda.matmul.allow_tf32": b.cuda.matmul.allow_tf32, "cudnn.allow_tf32": b.cudnn.allow_tf32,
             "cudnn.benchmark": b.cudnn.benchmark, "cudnn.deterministic": b.cudnn.deterministic,
             "cudnn.enabled": b.cudnn.enabled, "float32_matmul_precision": torch.get_float32_matmul_precision(),
             "num_threads": torch.get_num_threads(), "grad_enabled": torch.is_grad_enabled(),
             "default_dtype": str(torch.get_default_dtype())}
    for name in ("allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"):
        flags[f"cuda.matmul.{name}"] = getattr(b.cuda.matmul, name, None)
    return flags


def flag_changes(before: dict, after: dict) -> list[str]:
    return [f"backend-flag: the candidate changed {k} from {before[k]!r} to {after.get(k)!r}"
            for k in before if after.get(k) != before[k]]


def align_weights(model: torch.nn.Module, state: dict) -> str:
    """Give the candidate the reference's weights where names and shapes match."""
    own = model.state_dict()
    common = {k: v for k, v in state.items() if k in own and own[k].shape == v.shape}
    if not common:
        return "none"
    model.load_state_dict(common, strict=False)
    return "all" if len(common) == len(own) == len(state) else "partial"


POISON_COPIES = 2          # blocks of each output's size poisoned before every trial call
POISON_ONE_COPY_BYTES = 1 << 30


def poison(device: str, nbytes: int, sizes: list[int] | tuple = ()) -> None:
    """Fill soon-to-be-free memory so an output the kernel never wrote fails.

    The caching allocator gives a new tensor the best-fitting free block, so first a few blocks of
    each reference output's exact byte size (``sizes``) are taken and filled with 0xFF bytes (NaN
    in every float format, -1 in integers): a stale block that size left by an earlier call — the
    one the candidate's output would get — is poisoned first. Then one block of ``nbytes`` (twice
    the outputs) covers outputs allocated after temporaries of other sizes."""
    for size in sizes:
        if size > 0:
            copies = 1 if size > POISON_ONE_COPY_BYTES else POISON_COPIES
            held = [torch.full((size,), 255, dtype=torch.uint8, device=device) for _ in range(copies)]
            del held
    if nbytes > 0:
        junk = torch.full((max(nbytes // 4, 1),), float("nan"), dtype=torch.float32, device=device)
        del junk


def output_checks(flat: list, structure: str, originals: list, clones: list, model, Tensor, equal, isnan) -> dict:
    """Checks done where the tensors are: exact type, aliasing, inputs left unchanged."""
    problems = []
    for i, o in enumerate(flat):
        if type(o) is not Tensor:
            problems.append(f"output {i} is a {type(o).__module__}.{type(o).__name__}, not exactly torch.Tensor")
    ptrs = {}
    for x in clones:
        if isinstance(x, torch.Tensor) and x.numel():
            ptrs[x.untyped_storage().data_ptr()] = "an input"
    for p in list(model.parameters()) + list(model.buffers()):
        if p.numel():
            ptrs[p.untyped_storage().data_ptr()] = "a parameter or buffer"
    for i, o in enumerate(flat):
        if isinstance(o, torch.Tensor) and o.numel() and o.untyped_storage().data_ptr() in ptrs:
            problems.append(f"output {i} aliases {ptrs[o.untyped_storage().data_ptr()]}")
    for i, (a, b) in enumerate(zip(originals, clones)):
        if isinstance(a, torch.Tensor) and not _same(a, b, equal, isnan):
            problems.append(f"input {i} was modified by the candidate")
    return {"structure": structure, "problems": problems}


def _same(a: torch.Tensor, b: torch.Tensor, equal, isnan) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if equal(a, b):
        return True
    if a.is_floating_point():
        return bool(((a == b) | (isnan(a) & isnan(b))).all())
    return False


def degenerate_reason(trials: list, outputs: list, dists: list) -> str:
    """Why the reference's output says nothing about its input, or "" when it is informative."""
    check = DegenerateCheck()
    for outs, d in zip(outputs, dists):
        if d == "task":
            check.add(outs)
    return check.reason()


class DegenerateCheck:
    """``degenerate_reason`` one trial at a time (a task's outputs need not all fit in memory):
    every task trial's outputs equal the first's, or every finite value is the same constant."""

    def __init__(self) -> None:
        self.first, self.count, self.all_equal = None, 0, True
        self.lo, self.hi, self.absmax, self.value = float("inf"), float("-inf"), 0.0, None

    def add(self, outs: list) -> None:
        self.count += 1
        if self.first is None:
            self.first = outs
        elif self.all_equal:
            self.all_equal = _all_equal(self.first, outs)
        for t in outs:
            if not (isinstance(t, torch.Tensor) and t.numel() > 1 and (t.is_floating_point() or t.dtype != torch.bool)):
                continue
            f = t.float()
            ok = torch.isfinite(f)
            finite = f if bool(ok.all()) else f[ok]      # no copy of a (gigabyte) output that is all finite
            del ok
            if finite.numel():
                lo, hi = (float(v) for v in torch.aminmax(finite))
                self.lo, self.hi = min(self.lo, lo), max(self.hi, hi)
                self.absmax = max(self.absmax, abs(lo), abs(hi))
                if self.value is None:
                    self.value = float(finite.flatten()[0])

    def reason(self) -> str:
        if self.count >= 2 and self.all_equal:
            return "the reference output is identical for every input (it ignores its input)"
        if self.value is not None and self.hi - self.lo <= 1e-6 * max(1.0, self.absmax):
            return f"the reference output is constant ({self.value:.6g} everywhere)"
        return ""


_RANDOM_MODULES = (torch.nn.Dropout, torch.nn.Dropout1d, torch.nn.Dropout2d, torch.nn.Dropout3d,
                   torch.nn.AlphaDropout, torch.nn.FeatureAlphaDropout)


def random_modules(model: torch.nn.Module) -> str:
    """The submodules that draw random numbers as the model stands (dropout with p > 0 and RReLU,
    in training mode: a KernelBench model is never put in eval()), named; "" when there are none."""
    found = []
    for name, m in model.named_modules():
        where = f"self.{name}" if name else "the model"
        if isinstance(m, _RANDOM_MODULES) and m.p > 0 and m.training:
            found.append(f"{where}: {type(m).__name__}(p={m.p:g})")
        elif isinstance(m, torch.nn.RReLU) and m.training:
            found.append(f"{where}: RReLU")
    if not found:
        return ""
    return f"{', '.join(found[:4])}{' and more' if len(found) > 4 else ''} in training mode"


def _all_equal(a: list, b: list) -> bool:
    return len(a) == len(b) and all(isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)
                                    and x.shape == y.shape and torch.equal(x, y) for x, y in zip(a, b))


def candidate_line(e: BaseException) -> tuple[int | None, str]:
    """The deepest traceback line inside the candidate's file."""
    line, text = None, ""
    for frame in traceback.extract_tb(e.__traceback__):
        if frame.filename.endswith("candidate_module.py"):
            line, text = frame.lineno, frame.line or ""
    return line, text


def is_task_error(e: BaseException) -> bool:
    from kernelskill.errors import TaskError
    return isinstance(e, TaskError)


def is_triton_compile_error(e: BaseException) -> bool:
    return type(e).__module__.startswith("triton") and "Compil" in type(e).__name__


# ---- which kernels ran ----------------------------------------------------------------------
_GLOBAL = re.compile(r"__global__")
_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\([^)]*\)")
_TRITON_DECORATORS = ("jit", "autotune", "heuristics")


def own_kernel_names(source: str) -> set[str]:
    """Names of the kernels the candidate defines: CUDA ``__global__`` functions in its strings,
    and Python functions decorated with ``triton.jit`` (through autotune/heuristics too)."""
    import ast
    names = set()
    for m in _GLOBAL.finditer(source):
        head = _LAUNCH_BOUNDS.sub(" ", source[m.end():m.end() + 400])
        found = re.search(r"(\w+)\s*\(", head)
        if found:
            names.add(found.group(1))
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return names
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for dec in node.decorator_list:
                target = dec.func if isinstance(dec, ast.Call) else dec
                label = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
                if label in _TRITON_DECORATORS:
                    names.add(node.name)
    return names


MODULE_SCOPE = "kernelskill::module::"
FORWARD_SCOPE = "(forward)"       # work of the model's own forward, outside every submodule


class _ModuleScopes:
    """While active, every submodule's forward runs inside a profiler range named after it
    (``kernelskill::module::stages.0.conv1``), so each kernel or op can be attributed to the
    innermost module that ran it."""

    def __init__(self, model):
        self.model, self.handles, self.stack = model, [], []
        self.types = {name: type(m).__name__ for name, m in model.named_modules() if name}

    def __enter__(self):
        for name, m in self.model.named_modules():
            if not name:
                continue
            self.handles.append(m.register_forward_pre_hook(self._enter(name)))
            self.handles.append(m.register_forward_hook(self._exit, always_call=True))
        return self

    def _enter(self, name: str):
        def pre(_module, _args):
            rf = torch.profiler.record_function(MODULE_SCOPE + name)
            rf.__enter__()
            self.stack.append(rf)
        return pre

    def _exit(self, _module, _args, _out):
        if self.stack:
            self.stack.pop().__exit__(None, None, None)

    def __exit__(self, *exc):
        for h in self.handles:
            h.remove()
        while self.stack:
            self.stack.pop().__exit__(None, None, None)


def kernel_breakdown(model, inputs: list, device: str, source: str, calls: int = 3) -> dict:
    """Profile a few calls: per-kernel device time (GPU) or per-function CPU time, the custom share,
    and the same time by the module that ran it (``modules``) with the launches a call makes."""
    from torch.profiler import ProfilerActivity, profile

    from ..build.extensions import PROFILING
    cuda = device.startswith("cuda")
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    own = own_kernel_names(source)
    scopes = _ModuleScopes(model)
    with torch.no_grad():
        model(*inputs)
        if cuda:
            torch.cuda.synchronize()
        PROFILING["on"] = True
        try:
            with scopes, profile(activities=acts) as prof:
                for _ in range(calls):
                    with torch.profiler.record_function("kernelskill::forward"):
                        model(*inputs)
                if cuda:
                    torch.cuda.synchronize()
        finally:
            PROFILING["on"] = False
    events = prof.events()
    out = _gpu_breakdown(events, own, calls) if cuda else _cpu_breakdown(events, calls)
    out["modules"], out["launches"] = _by_module(events, cuda, calls, scopes.types)
    return out


def _module_of(ev) -> str:
    """The innermost module whose range holds ``ev`` (FORWARD_SCOPE outside every submodule)."""
    p = ev.cpu_parent
    while p is not None:
        if p.name.startswith(MODULE_SCOPE):
            return p.name[len(MODULE_SCOPE):]
        p = p.cpu_parent
    return FORWARD_SCOPE


def _top_level(ev) -> bool:
    """A CPU op called by the forward or an extension function itself (module ranges between them
    do not count), not one nested in another op."""
    p = ev.cpu_parent
    while p is not None and p.name.startswith(MODULE_SCOPE):
        p = p.cpu_parent
    return p is not None and (p.name == "kernelskill::forward" or p.name.startswith("kernelskill::ext::"))


def _by_module(events, cuda: bool, calls: int, types: dict) -> tuple[list[dict], int]:
    """Time per module per call: on a GPU the device time of the kernels each module's ops launched
    (a kernel belongs to the op that launched it); on a CPU the top-level ops' and extension
    functions' CPU time as in ``_cpu_breakdown``. Also the kernel launches (GPU) or top-level ops
    (CPU) a call makes."""
    rows: dict[str, list] = {}
    launches = 0
    seen: set[int] = set()
    for ev in events:
        if ev.device_type != torch.autograd.DeviceType.CPU:
            continue
        if cuda:
            ks = [k for k in (getattr(ev, "kernels", None) or []) if not k.name.startswith("kernelskill::")]
            # The profiler can hand one launch's kernels to two CPU events with the same id: the op
            # and a Kineto-internal 'Activity Buffer Request' nested in it. Counting both put a conv's
            # kernel into its module twice (the rows summed to more than the kernels)
            # (figures: docs/evaluator.md, "Measurements behind the code").
            if not ks or ev.id in seen:
                continue
            seen.add(ev.id)
            own = ev.name[len(MODULE_SCOPE):] if ev.name.startswith(MODULE_SCOPE) else None
            r = rows.setdefault(own or _module_of(ev), [0, 0.0, {}])
            for k in ks:
                r[0] += 1
                r[1] += k.duration / 1e3
                r[2][k.name] = r[2].get(k.name, 0.0) + k.duration
        elif ev.name.startswith("kernelskill::ext::") or (ev.name.startswith("aten::") and _top_level(ev)):
            nested = sum(c.cpu_time_total for c in ev.cpu_children if c.name.startswith("aten::")) \
                if ev.name.startswith("kernelskill::ext::") else 0.0
            r = rows.setdefault(_module_of(ev), [0, 0.0, {}])
            r[0] += 1
            r[1] += (ev.cpu_time_total - nested) / 1e3
            name = ev.name.removeprefix("kernelskill::ext::")
            r[2][name] = r[2].get(name, 0.0) + ev.cpu_time_total - nested
        else:
            continue
        launches += len(ks) if cuda else 1
    total = sum(r[1] for r in rows.values()) or 0.0
    mods = [{"module": name, "type": types.get(name, ""), "time_ms": ms / calls,
             "share": ms / total if total else 0.0, "launches": n // calls or 1,
             "top": max(top, key=top.get) if top else ""}
            for name, (n, ms, top) in sorted(rows.items(), key=lambda kv: -kv[1][1])]
    return mods, launches // calls


def _gpu_breakdown(events, own: set[str], calls: int) -> dict:
    rows: dict[str, list] = {}
    for ev in events:
        # Device-side copies of our own record_function ranges (gpu_user_annotation) are not kernels.
        if ev.device_type == torch.autograd.DeviceType.CUDA and not ev.name.startswith("kernelskill::") \
                and not getattr(ev, "is_user_annotation", False):
            r = rows.setdefault(ev.name, [0, 0.0])
            r[0] += 1
            r[1] += ev.device_time_total / 1e3 if hasattr(ev, "device_time_total") else ev.cuda_time_total / 1e3
    total = sum(r[1] for r in rows.values()) or 0.0
    kernels = []
    for name, (n, ms) in sorted(rows.items(), key=lambda kv: -kv[1][1]):
        # Positive identification: a kernel is the candidate's own only if the candidate defines it.
        custom = any(re.search(rf"\b{re.escape(o)}\b", name) for o in own) and not name.startswith(("void at::", "at::"))
        kernels.append({"name": name, "calls": n // calls or 1, "time_ms": ms / calls,
                        "share": ms / total if total else 0.0, "custom": custom})
    share = sum(k["share"] for k in kernels if k["custom"]) if kernels else 0.0
    return {"kernels": kernels, "custom_share": share}


def _cpu_breakdown(events, calls: int) -> dict:
    """On the CPU: time inside the candidate's extension functions (less the aten ops they call)
    and in library ops called from Python. Shares are of that work, not of the forward's wall
    time, so Python and profiler overhead do not understate small kernels."""
    rows: dict[str, list] = {}
    for ev in events:
        parent = ev.cpu_parent
        if ev.name.startswith("kernelskill::ext::"):
            nested = sum(c.cpu_time_total for c in ev.cpu_children if c.name.startswith("aten::"))
            r = rows.setdefault(ev.name.removeprefix("kernelskill::ext::"), [0, 0.0, True])
            r[0] += 1
            r[1] += (ev.cpu_time_total - nested) / 1e3
        elif parent is not None and ev.name.startswith("aten::") and _top_level(ev):
            r = rows.setdefault(ev.name, [0, 0.0, False])
            r[0] += 1
            r[1] += ev.cpu_time_total / 1e3
    work = sum(r[1] for r in rows.values())
    kernels = [{"name": name, "calls": n // calls or 1, "time_ms": ms / calls,
                "share": ms / work if work else 0.0, "custom": custom}
               for name, (n, ms, custom) in sorted(rows.items(), key=lambda kv: -kv[1][1])]
    return {"kernels": kernels, "custom_share": sum(k["share"] for k in kernels if k["custom"])}
