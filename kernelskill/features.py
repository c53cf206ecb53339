"""Op features of a task: which op classes its reference runs, and its FLOPs and bytes.

The reference is traced on the ``meta`` device under a dispatch mode, so even H100-sized tasks
are classified in milliseconds without computing anything; when an op has no meta kernel the
trace falls back to real tensors (use a small preset for big tasks).
"""
from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from . import patterns
from .patterns import Graph

_CLASS_BY_OP = {
    "matmul": ("mm", "bmm", "addmm", "addbmm", "baddbmm", "matmul", "linear", "addmv", "mv", "dot",
               "_addmm_activation", "einsum", "tensordot"),
    "conv": ("convolution", "_convolution", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
             "conv_transpose2d", "conv_transpose3d", "cudnn_convolution", "mkldnn_convolution"),
    "reduction": ("sum", "mean", "amax", "amin", "max", "min", "prod", "var", "std", "var_mean",
                  "std_mean", "norm", "linalg_vector_norm", "argmax", "argmin", "logsumexp", "all",
                  "any", "aminmax", "median", "mode", "topk", "sort"),
    "softmax": ("_softmax", "softmax", "_safe_softmax", "_log_softmax", "log_softmax"),
    "norm": ("native_layer_norm", "layer_norm", "native_batch_norm", "_native_batch_norm_legit",
             "_native_batch_norm_legit_no_training", "native_group_norm", "group_norm",
             "instance_norm", "rms_norm", "_fused_rms_norm", "batch_norm"),
    "pooling": ("max_pool1d", "max_pool2d", "max_pool3d", "max_pool2d_with_indices",
                "max_pool3d_with_indices", "avg_pool1d", "avg_pool2d", "avg_pool3d",
                "_adaptive_avg_pool2d", "_adaptive_avg_pool3d", "adaptive_max_pool2d",
                "adaptive_avg_pool1d", "adaptive_max_pool1d"),
    "scan": ("cumsum", "cumprod", "cummax", "cummin", "logcumsumexp", "_cummax_helper", "_cummin_helper"),
    "attention": ("_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
                  "_scaled_dot_product_attention_math", "scaled_dot_product_attention",
                  "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_cudnn_attention"),
    "loss": ("nll_loss_forward", "nll_loss", "nll_loss2d_forward", "mse_loss", "l1_loss",
             "smooth_l1_loss", "huber_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits",
             "kl_div", "cross_entropy_loss", "hinge_embedding_loss", "margin_ranking_loss",
             "soft_margin_loss", "triplet_margin_loss", "cosine_embedding_loss"),
    "recurrent": ("gru_cell", "lstm_cell", "rnn_tanh_cell", "rnn_relu_cell", "_thnn_fused_gru_cell",
                  "_thnn_fused_lstm_cell", "gru", "lstm", "rnn_tanh", "rnn_relu"),
    "memory": ("cat", "stack", "index", "index_select", "gather", "scatter", "constant_pad_nd",
               "copy_", "clone", "_to_copy", "flip", "roll", "repeat", "index_put_", "masked_select",
               "where", "pad", "tril", "triu", "diag", "diag_embed", "contiguous"),
}
OP_CLASS = {op: cls for cls, ops in _CLASS_BY_OP.items() for op in ops}
# Views and bookkeeping: no data moves, no class.
_IGNORED = {"view", "_unsafe_view", "reshape", "expand", "t", "transpose", "permute", "unsqueeze",
            "squeeze", "slice", "select", "as_strided", "detach", "alias", "lift_fresh", "empty",
            "empty_like", "zeros", "ones", "full", "zeros_like", "ones_like", "full_like",
            "arange", "empty_strided", "_reshape_alias", "split", "split_with_sizes", "chunk",
            "unbind", "new_empty", "new_zeros", "new_ones", "scalar_tensor", "item",
            "_local_scalar_dense", "unfold", "narrow", "expand_as", "view_as", "numpy_T", "movedim"}


class _OpRecorder(TorchDispatchMode):
    """Records every aten call, and into ``graph`` its arguments' shapes and producers."""

    def __init__(self, graph: Graph, keep: bool):
        super().__init__()
        self.ops: list[str] = []
        self.graph, self.keep = graph, keep

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func)
        out = func(*args, **(kwargs or {}))
        self.graph.add(func, args, kwargs or {}, out, self.keep)
        return out


class _FunctionRecorder(TorchFunctionMode):
    """Records the torch functions called (``F.kl_div`` before aten decomposes it)."""

    def __init__(self, graph: Graph):
        super().__init__()
        self.graph = graph

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.graph.functions.append(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def _module_recorder(graph: Graph):
    """Records the type of every nn.Module whose forward runs."""
    hook = lambda mod, args: graph.modules.append((type(mod).__name__, mod))  # noqa: E731
    handle = torch.nn.modules.module.register_module_forward_pre_hook(hook)
    try:
        yield
    finally:
        handle.remove()


def classify(funcs) -> list[str]:
    """Op classes (sorted) for a sequence of aten overloads."""
    classes: set[str] = set()
    counts = {"matmul": 0}
    for func in funcs:
        name = func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)
        name = name.rstrip("_") if name not in OP_CLASS else name
        if name in _IGNORED:
            continue
        cls = OP_CLASS.get(name)
        if cls is None and torch.Tag.pointwise in getattr(func, "tags", ()):
            cls = "elementwise"
        if cls:
            classes.add(cls)
            counts["matmul"] += cls == "matmul"
    # Attention written out by hand: two contractions around a softmax.
    if "softmax" in classes and counts["matmul"] >= 2:
        classes.add("attention")
    return sorted(classes)


def trace(task, meta: bool = True, fallback: bool = True) -> dict[str, Any]:
    """Run the reference once (on meta tensors when possible) and record ops, FLOPs and bytes.

    ``fallback``: when an op has no meta kernel, run it for real on the CPU (small sizes only)."""
    from torch.utils.flop_counter import FlopCounterMode
    mod = task.module()
    device = torch.device("meta") if meta else torch.device("cpu")
    # On meta tensors a reference can fail before its forward too: `.item()` in __init__ (a shape
    # read from a tensor, level3/29_SwinMLP) or in get_inputs(). Those are retried on the CPU, and
    # the facts say where they came from (``traced_on``, ``meta_failure``).
    passing = (NotImplementedError, RuntimeError) if meta else ()
    torch.manual_seed(0)
    try:
        with device:
            init = task.init_inputs(mod, passing)
            model = task.build_model(mod, init=init, passing=passing)
            inputs = task.inputs(mod, passing)
    except passing as e:
        if fallback:
            return _on_cpu(task, e, "building the model or its inputs")
        raise
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]
    model = model.to(device)
    graph = Graph(input_dtypes=[str(x.dtype).replace("torch.", "") for x in inputs if isinstance(x, torch.Tensor)])
    recorder = _OpRecorder(graph, keep=meta)
    counter = FlopCounterMode(display=False)
    # On meta tensors an op without a meta kernel (or a shape that depends on the data) raises
    # NotImplementedError or RuntimeError: tried again on the CPU (or raised as it is, without the
    # fallback). Any other failure of the reference's forward is the task's, a TaskError that names
    # its file and line.
    try:
        with task.error_context("Model.forward", passing=passing), torch.no_grad(), \
                _module_recorder(graph), _FunctionRecorder(graph), counter, recorder:
            out = model(*inputs)
    except passing as e:
        if fallback:
            return _on_cpu(task, e, "the forward")
        raise
    outs = out if isinstance(out, (list, tuple)) else [out]
    graph.output_numel = sum(t.numel() for t in outs if isinstance(t, torch.Tensor))
    params = list(model.parameters()) + list(model.buffers())
    nbytes = lambda ts: sum(t.numel() * t.element_size() for t in ts if isinstance(t, torch.Tensor))
    # The constants in force: the file's, with the preset and overrides applied and derived ones recomputed.
    constants = {name: _plain(getattr(mod, name)) for name in task.constants if hasattr(mod, name)}
    features = patterns.detect(graph, task.tolerance)
    classes = sorted(set(classify(recorder.ops)) | {patterns.CLASS_OF_FEATURE[f] for f in features
                                                    if f in patterns.CLASS_OF_FEATURE})
    graph._keep.clear()
    return {"ops": recorder.ops, "op_classes": classes, "features": features,
            "structure": {"reductions": patterns.reductions(graph), "gemms": patterns.gemms(graph),
                          "convolutions": patterns.convolutions(graph)},
            "modules": sorted({kind for kind, _ in graph.modules}), "flops": int(counter.get_total_flops()),
            "bytes": nbytes(inputs) + nbytes(outs) + nbytes(params), "inputs": inputs, "outputs": outs,
            "model": model, "constants": constants, "traced_on": "meta" if meta else "cpu"}


def _on_cpu(task, error: BaseException, where: str) -> dict[str, Any]:
    """The trace again on real CPU tensors, saying why the meta device could not serve it."""
    t = trace(task, meta=False)
    first = str(error).strip().splitlines()[0][:300] if str(error).strip() else type(error).__name__
    t["meta_failure"] = f"{where} failed on the meta device ({type(error).__name__}: {first})"
    return t


# What torch's FlopCounterMode (torch.utils.flop_counter) counts: a summary's FLOPs are these ops' only.
FLOPS_COUNTED = "matmul, conv and attention only; elementwise ops and reductions are not counted"


def _plain(value: Any) -> Any:
    """A JSON value as it is (numbers, strings, lists of them); anything else (torch.float16) as its text."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)) and all(v is None or isinstance(v, (bool, int, float, str)) for v in value):
        return list(value)
    return str(value)


def describe(task) -> dict[str, Any]:
    """Shapes, dtypes, parameters and buffers (apart), op classes, FLOPs and compulsory bytes of a task."""
    t = trace(task)
    spec = lambda x: ({"shape": list(x.shape), "dtype": str(x.dtype).replace("torch.", "")}
                      if isinstance(x, torch.Tensor) else {"value": x})
    model = t["model"]
    names = sorted({f.overloadpacket.__name__ for f in t["ops"] if hasattr(f, "overloadpacket")})
    return {
        "name": task.name, "file": str(task.path), "level": task.level, "description": task.description,
        "preset": task.preset, "overrides": {k: _plain(v) for k, v in task.overrides.items()},
        "constants": t["constants"],
        "inputs": [spec(x) for x in t["inputs"]], "outputs": [spec(x) for x in t["outputs"]],
        "parameters": [{"name": n, **spec(p)} for n, p in model.named_parameters()],
        "buffers": [{"name": n, **spec(b)} for n, b in model.named_buffers()],
        "op_classes": t["op_classes"], "features": t["features"], "structure": t["structure"],
        "modules": t["modules"], "aten_ops": names, "op_count": len(t["ops"]),
        "flops": t["flops"], "flops_counted": FLOPS_COUNTED, "bytes": t["bytes"],
        "tolerance": dict(zip(("atol", "rtol"), task.tolerance)),
        # Where the facts come from: the meta device (nothing computed), or real CPU tensors at the
        # task's sizes when the meta device could not run the reference (and why not).
        "traced_on": t["traced_on"], **({"meta_failure": t["meta_failure"]} if t.get("meta_failure") else {}),
    }
