"""What an expert sees in a traced reference: task features beyond the op classes.

``features.trace`` records three views of one forward pass: the aten ops (with their arguments'
shapes and which earlier op produced each tensor), the torch functions called (``F.kl_div``,
``F.scaled_dot_product_attention``: names that aten decomposes away) and the ``nn.Module`` types run.
:func:`detect` turns them into feature names from :data:`kernelskill.vocab.TASK_FEATURES`
(``lstm``, ``conv-depthwise``, ``causal-mask``, ``gemv``, ``norm-rms``, ``diagonal``, …) and
:func:`structure` into facts with numbers (reduction axes and sizes, GEMM shapes, convolutions).
Nothing here reads the file's text.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

# Ops through which a tensor keeps its identity for the patterns below (views, copies, scalings).
_PASS = {"view", "_unsafe_view", "reshape", "expand", "t", "transpose", "permute", "unsqueeze",
         "squeeze", "slice", "select", "as_strided", "detach", "alias", "clone", "contiguous",
         "_to_copy", "expand_as", "view_as", "flatten", "_reshape_alias"}
_GEMM = {"mm", "bmm", "addmm", "baddbmm", "addbmm", "mv", "addmv", "dot", "matmul", "linear",
         "_addmm_activation"}
_REDUCE = {"sum", "mean", "amax", "amin", "max", "min", "prod", "var", "std", "var_mean",
           "std_mean", "linalg_vector_norm", "norm", "argmax", "argmin", "logsumexp"}
_SCAN = {"cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"}
_SOFTMAX = {"_softmax", "softmax", "_safe_softmax", "_log_softmax", "log_softmax"}
_MASK = {"masked_fill", "where"}

# Torch functions and modules whose names say what they compute (aten decomposes some of them).
_BY_FUNCTION = {
    "scaled_dot_product_attention": ("sdpa",), "multi_head_attention_forward": ("multi-head-attention",),
    "kl_div": ("loss-kl",), "cross_entropy": ("loss-cross-entropy",), "nll_loss": ("loss-cross-entropy",),
    "mse_loss": ("loss-mse",), "hinge_embedding_loss": ("loss-hinge",),
    "multi_margin_loss": ("loss-hinge",), "triplet_margin_loss": ("loss-triplet",),
    "instance_norm": ("norm-instance",), "group_norm": ("norm-group",), "layer_norm": ("norm-layer",),
    "rms_norm": ("norm-rms",), "batch_norm": ("norm-batch",),
    "adaptive_avg_pool1d": ("pool-avg",), "adaptive_avg_pool2d": ("pool-avg",),
    "adaptive_avg_pool3d": ("pool-avg",),
}
_BY_MODULE = {
    "LSTM": ("recurrent-layer", "lstm"), "GRU": ("recurrent-layer", "gru"), "RNN": ("recurrent-layer",),
    "LSTMCell": ("rnn-cell", "lstm"), "GRUCell": ("rnn-cell", "gru"), "RNNCell": ("rnn-cell",),
    "MultiheadAttention": ("multi-head-attention",), "TransformerEncoderLayer": ("multi-head-attention",),
    "InstanceNorm1d": ("norm-instance",), "InstanceNorm2d": ("norm-instance",),
    "InstanceNorm3d": ("norm-instance",), "GroupNorm": ("norm-group",), "LayerNorm": ("norm-layer",),
    "RMSNorm": ("norm-rms",), "MSELoss": ("loss-mse",), "KLDivLoss": ("loss-kl",),
    "CrossEntropyLoss": ("loss-cross-entropy",), "NLLLoss": ("loss-cross-entropy",),
    "HingeEmbeddingLoss": ("loss-hinge",), "MultiMarginLoss": ("loss-hinge",),
    "TripletMarginLoss": ("loss-triplet",),
}
# Features that make an op class visible to the gate (aten alone may not show it).
CLASS_OF_FEATURE = {
    "recurrent-layer": "recurrent", "rnn-cell": "recurrent", "rnn-step-loop": "recurrent",
    "sdpa": "attention", "multi-head-attention": "attention", "attention-chain": "attention",
    "norm-rms": "norm", "norm-instance": "norm", "loss-kl": "loss", "loss-mse": "loss",
    "loss-hinge": "loss", "loss-triplet": "loss", "loss-cross-entropy": "loss",
    "pool-global-avg": "pooling",
}


@dataclass
class Op:
    """One aten call: its name, the producers of its tensor arguments, their shapes, its output."""
    name: str
    args: tuple
    kwargs: dict
    producers: list[int]            # index of the op that made each tensor argument (-1: an input)
    shapes: list[tuple[int, ...]]   # shapes of the tensor arguments, in order
    out: tuple[int, ...] | None
    dtype: str | None


@dataclass
class Graph:
    """The recorded forward pass (filled by features.trace)."""
    ops: list[Op] = field(default_factory=list)
    functions: list[str] = field(default_factory=list)
    modules: list[Any] = field(default_factory=list)     # (type name, module) per forward call
    input_dtypes: list[str] = field(default_factory=list)
    output_numel: int = 0
    _made: dict[int, int] = field(default_factory=dict)  # id(tensor) -> index of the op that made it
    _keep: list = field(default_factory=list)            # keeps ids unique while tracing on meta
    _readers: dict[int, list[int]] = field(default_factory=dict)  # consumers(), indexed once per op count
    _readers_of: int = -1                                # len(ops) when _readers was built

    def add(self, func, args, kwargs, out, keep: bool) -> None:
        name = func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)
        tensors = [a for a in _flat(args) + _flat(list(kwargs.values())) if isinstance(a, torch.Tensor)]
        outs = [o for o in _flat([out]) if isinstance(o, torch.Tensor)]
        idx = len(self.ops)
        self.ops.append(Op(name.rstrip("_") if name.endswith("_") and not name.startswith("_") else name,
                           tuple(args), dict(kwargs), [self._made.get(id(t), -1) for t in tensors],
                           [tuple(t.shape) for t in tensors], tuple(outs[0].shape) if outs else None,
                           str(outs[0].dtype).replace("torch.", "") if outs else None))
        for o in outs:
            self._made[id(o)] = idx
        if keep:
            self._keep.extend(outs)

    def source(self, i: int, depth: int = 12) -> int:
        """The op that really made op ``i``'s first input: through views and copies."""
        while depth and 0 <= i < len(self.ops) and self.ops[i].name in _PASS and self.ops[i].producers:
            i, depth = self.ops[i].producers[0], depth - 1
        return i

    def inputs_of(self, i: int) -> list[int]:
        """Producers of op ``i``'s tensor arguments, seen through views and copies."""
        return [self.source(p) for p in self.ops[i].producers]

    def upstream(self, i: int, depth: int = 6) -> set[int]:
        """Ops within ``depth`` data-flow steps above op ``i`` (views not counted)."""
        seen, frontier = set(), {i}
        for _ in range(depth):
            frontier = {p for j in frontier for p in self.inputs_of(j) if p >= 0} - seen
            seen |= frontier
        return seen

    def consumers(self, i: int) -> list[int]:
        """Ops that read op ``i``'s output (through views and copies), in order. Indexed once: a
        recurrent network unrolls to tens of thousands of ops, and a scan per call was quadratic
        (figures: docs/bench.md, "Measurements behind the code")."""
        if self._readers_of != len(self.ops):
            readers: dict[int, list[int]] = {}
            for j in range(len(self.ops)):
                for p in dict.fromkeys(self.inputs_of(j)):
                    readers.setdefault(p, []).append(j)
            self._readers, self._readers_of = readers, len(self.ops)
        return list(self._readers.get(i, ()))


def _flat(xs) -> list:
    out = []
    for x in xs:
        if isinstance(x, (list, tuple)):
            out.extend(_flat(x))
        else:
            out.append(x)
    return out


def _gemm_mnk(op: Op) -> tuple[int, int, int, int] | None:
    """(batch, M, N, K) of a contraction from its operand shapes."""
    shapes = op.shapes[1:] if op.name in ("addmm", "baddbmm", "addbmm", "addmv", "_addmm_activation") else op.shapes
    if len(shapes) < 2:
        return None
    a, b = shapes[0], shapes[1]
    if op.name in ("mv", "addmv"):
        return 1, a[0], 1, a[1]
    if op.name == "dot":
        return 1, 1, 1, a[0]
    if len(a) < 2 or len(b) < 1:
        return None
    batch = math.prod(a[:-2]) if len(a) > 2 else 1
    n = b[-1] if len(b) >= 2 else 1
    return batch, a[-2], n, a[-1]


def _dims(op: Op, rank: int) -> list[int] | None:
    """Reduced dims of a reduction op (None: all of them)."""
    dim = op.kwargs.get("dim", op.args[1] if len(op.args) > 1 else None)
    if isinstance(dim, bool) or dim is None or (isinstance(dim, (list, tuple)) and not dim):
        return None
    if not isinstance(dim, (list, tuple)):
        dim = [dim]
    if not all(isinstance(d, int) for d in dim):
        return None
    return sorted(d % rank for d in dim) if rank else None


def reductions(g: Graph) -> list[dict[str, Any]]:
    """Each reduction and scan: op, input shape, reduced dims, how many values each output reduces."""
    out = []
    for op in g.ops:
        if (op.name not in _REDUCE and op.name not in _SCAN) or not op.shapes:
            continue
        shape = op.shapes[0]
        dims = _dims(op, len(shape))
        dims = list(range(len(shape))) if dims is None else dims
        out.append({"op": op.name, "shape": list(shape), "dims": dims,
                    "size": math.prod(shape[d] for d in dims) if shape else 1,
                    "last_axis": bool(shape) and dims == [len(shape) - 1],
                    "all": len(dims) == len(shape)})
    return out


def gemms(g: Graph) -> list[dict[str, Any]]:
    """Each contraction: op, batch, M, N, K."""
    out = []
    for op in g.ops:
        if op.name in _GEMM and (mnk := _gemm_mnk(op)):
            out.append(dict(zip(("op", "batch", "m", "n", "k"), (op.name, *mnk))))
    return out


def convolutions(g: Graph) -> list[dict[str, Any]]:
    """Each convolution: spatial dims, kernel, stride, dilation, groups, channels, transposed."""
    out = []
    for op in g.ops:
        if op.name not in ("convolution", "_convolution") or len(op.shapes) < 2:
            continue
        x, w = op.shapes[0], op.shapes[1]
        a = op.args
        transposed = bool(a[6]) if len(a) > 6 else False
        groups = int(a[8]) if len(a) > 8 else 1
        cin = x[1]
        out.append({"dims": len(w) - 2, "kernel": list(w[2:]), "stride": list(a[3]) if len(a) > 3 else [1],
                    "dilation": list(a[5]) if len(a) > 5 else [1], "groups": groups, "in_channels": cin,
                    "out_channels": w[1] * groups if transposed else w[0], "transposed": transposed})
    return out


def detect(g: Graph, tolerance: tuple[float, float] | None = None) -> list[str]:
    """Feature names (sorted) of a recorded forward pass."""
    f: set[str] = set()
    for name in g.functions:
        f.update(_BY_FUNCTION.get(name, ()))
    calls: dict[int, int] = {}
    for kind, mod in g.modules:
        f.update(_BY_MODULE.get(kind, ()))
        calls[id(mod)] = calls.get(id(mod), 0) + 1
    names = [op.name for op in g.ops]
    # A module run again and again in one forward, doing contractions: a recurrence written as a loop.
    looped = [m for k, m in g.modules if k == "Linear" and calls[id(m)] >= 4]
    if looped and any(n in ("tanh", "sigmoid") for n in names):
        f.add("rnn-step-loop")
    _gemm_features(g, f)
    _conv_features(g, f)
    _norm_features(g, f)
    _attention_features(g, f)
    _reduction_features(g, f)
    _pool_features(g, f)
    _structure_features(g, f)
    dtypes = {d for d in [op.dtype for op in g.ops] + g.input_dtypes if d in ("float32", "float16", "bfloat16", "float64")}
    f.update(f"dtype-{d}" for d in dtypes)
    if dtypes & {"float16", "bfloat16"} or (tolerance and min(tolerance) >= 1e-3):
        f.add("low-precision-ok")
    elif "float32" in dtypes and tolerance and min(tolerance) < 1e-3:
        # TF32 rounds each product's operands to a 10-bit mantissa (~1e-3 relative): outside this
        # tolerance, so fp32 contractions stay fp32 (or split precision, 3xTF32).
        f.add("fp32-strict")
    _library_op_features(g, f)
    return sorted(f)


def _gemm_features(g: Graph, f: set[str]) -> None:
    for i, op in enumerate(g.ops):
        if op.name not in _GEMM or not (mnk := _gemm_mnk(op)):
            continue
        batch, m, n, k = mnk
        if batch > 1 or op.name in ("bmm", "baddbmm"):
            f.add("gemm-batched")
        if min(m, n) == 1:
            f.add("gemv")
        elif max(m, n) >= 16 * min(m, n) or (k <= 64 and min(m, n) >= 16 * k):
            f.add("gemm-tall-skinny")
        if k >= 16 * max(m, n) and k >= 4096:
            f.add("gemm-long-k")
        if k <= 64 and m * n >= 1 << 20:
            f.add("gemm-short-k")
        scaling = any(p >= 0 and g.ops[p].name in ("diag", "diag_embed", "eye") for p in g.inputs_of(i))
        if min(m, n, k) >= 256 and batch == 1 and not scaling:
            f.add("gemm-large")
        after = [g.ops[j].name for j in g.consumers(i)]
        if op.name in ("addmm", "_addmm_activation", "baddbmm", "addmv") or any(_pointwise(g.ops[j]) for j in g.consumers(i)):
            f.add("gemm-epilogue")
        if any(n in _REDUCE for n in after):
            f.add("gemm-reduction")
        if any(g.ops[p].name in _GEMM for p in g.upstream(i, 4)) and "sdpa" not in f:
            f.add("gemm-chain")


def _conv_features(g: Graph, f: set[str]) -> None:
    for i, (op, c) in enumerate(((op, c) for op, c in zip(
            [o for o in g.ops if o.name in ("convolution", "_convolution") and len(o.shapes) >= 2],
            convolutions(g)))):
        f.add(f"conv-{c['dims']}d")
        if c["transposed"]:
            f.add("conv-transposed")
        if c["groups"] > 1 and c["groups"] == c["in_channels"]:
            f.add("conv-depthwise")
        elif c["groups"] > 1:
            f.add("conv-grouped")
        if all(k == 1 for k in c["kernel"]):
            f.add("conv-pointwise")
    for i, op in enumerate(g.ops):
        if op.name not in ("convolution", "_convolution"):
            continue
        for j in g.consumers(i):
            if _pointwise(g.ops[j]):
                f.add("conv-epilogue")
            if g.ops[j].name in ("_native_batch_norm_legit_no_training", "native_batch_norm", "batch_norm") \
                    and not _bn_training(g.ops[j]):
                f.add("conv-bn-eval")


def _bn_training(op: Op) -> bool:
    if op.name == "_native_batch_norm_legit_no_training":
        return False
    for a in op.args[3:]:
        if isinstance(a, bool):
            return a
    return True


def _norm_features(g: Graph, f: set[str]) -> None:
    for i, op in enumerate(g.ops):
        if op.name in ("native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training"):
            if "norm-instance" not in f:
                f.add("norm-batch")
                if _bn_training(op):
                    f.add("norm-batch-train")
        elif op.name in ("native_group_norm", "group_norm"):
            f.add("norm-group")
        elif op.name in ("native_layer_norm", "layer_norm"):
            f.add("norm-layer")
        elif op.name in ("rms_norm", "_fused_rms_norm"):
            f.add("norm-rms")
        elif op.name in ("rsqrt", "sqrt", "reciprocal") and _is_rms(g, i):
            f.add("norm-rms")
        else:
            continue
        # A residual add right before the norm: the pair is one kernel.
        src = g.inputs_of(i)[:1] if op.name not in ("rsqrt", "sqrt", "reciprocal") else \
            [p for p in g.upstream(i, 4) if g.ops[p].name in ("pow", "mul")][:1]
        for p in src:
            q = g.source(p)
            base = g.inputs_of(q)[0] if op.name in ("rsqrt", "sqrt", "reciprocal") and g.ops[q].producers else q
            if 0 <= base < len(g.ops) and g.ops[base].name == "add" and len(g.ops[base].shapes) == 2 \
                    and g.ops[base].shapes[0] == g.ops[base].shapes[1]:
                f.add("residual-norm")


def _is_rms(g: Graph, i: int) -> bool:
    """x * rsqrt(mean(x²) + eps) (or / sqrt(…)): a mean of squares over some dims, under a root."""
    for p in g.upstream(i, 3):
        op = g.ops[p]
        if op.name not in ("mean", "sum") or not op.shapes or _dims(op, len(op.shapes[0])) is None:
            continue
        sq = g.source(op.producers[0]) if op.producers else -1
        if sq >= 0 and (g.ops[sq].name == "pow" and 2 in g.ops[sq].args[1:2]
                        or g.ops[sq].name == "mul" and len(set(g.ops[sq].producers)) == 1
                        and len(g.ops[sq].producers) == 2):
            return True
    return False


def _attention_features(g: Graph, f: set[str]) -> None:
    for i, op in enumerate(g.ops):
        if op.name not in _SOFTMAX:
            continue
        up = g.upstream(i, 5)
        scores = any(g.ops[p].name in _GEMM for p in up)
        values = any(g.ops[j].name in _GEMM for j in g.consumers(i))
        if scores and values:
            f.add("attention-chain")
            for p in up:
                if g.ops[p].name in _MASK and _square_mask(g.ops[p]):
                    f.add("causal-mask")
        if scores and not values and any(g.ops[j].name in ("nll_loss_forward", "nll_loss") for j in g.consumers(i)):
            f.add("loss-cross-entropy")
    for op in g.ops:
        if op.name.startswith("_scaled_dot_product") or op.name == "scaled_dot_product_attention":
            if op.kwargs.get("is_causal") or (len(op.args) > 4 and op.args[4] is True):
                f.add("causal-mask")
    if {"tril", "triu"} & {op.name for op in g.ops} and f & {"attention-chain", "sdpa"}:
        f.add("causal-mask")


def _square_mask(op: Op) -> bool:
    """A boolean [L, L] mask broadcast over the scores: the shape a causal mask has."""
    for shape in op.shapes:
        if len(shape) >= 2 and shape[-1] == shape[-2] and math.prod(shape[:-2]) == 1 and len(op.shapes) >= 2:
            return True
    return False


def _reduction_features(g: Graph, f: set[str]) -> None:
    for i, op in enumerate(g.ops):
        if op.name in _SOFTMAX and op.shapes:
            shape, dim = op.shapes[0], op.args[1] if len(op.args) > 1 and isinstance(op.args[1], int) else -1
            f.add("softmax-rows")
            if shape and shape[dim] >= 8192:
                f.add("reduction-long")
            if shape and math.prod(shape) // shape[dim] >= 1024:
                f.add("reduction-many-rows")
        if op.name in _SCAN and op.shapes and op.shapes[0]:
            dim = op.args[1] if len(op.args) > 1 and isinstance(op.args[1], int) else -1
            if op.shapes[0][dim] >= 8192:
                f.add("reduction-long")
            ups = [g.ops[p].name for p in g.inputs_of(i) if p >= 0]
            if any(n == "flip" for n in ups) or any(g.ops[j].name == "flip" for j in g.consumers(i)):
                f.add("scan-reverse")
            if any(_pointwise(g.ops[p]) for p in g.inputs_of(i) if p >= 0):
                f.add("scan-producer")
        if op.name not in _REDUCE or not op.shapes:
            continue
        shape = op.shapes[0]
        dims = _dims(op, len(shape))
        if dims is None or len(dims) == len(shape):
            f.add("reduction-global")
            size = math.prod(shape)
        else:
            f.add("reduction-last-axis" if dims == [len(shape) - 1] else "reduction-strided")
            size = math.prod(shape[d] for d in dims)
            if math.prod(shape) // max(size, 1) >= 1024:
                f.add("reduction-many-rows")
        if size >= 8192:
            f.add("reduction-long")
        if any(_pointwise(g.ops[p]) for p in g.inputs_of(i) if p >= 0):
            f.add("reduction-producer")
        if (dims is None or len(dims) == len(shape)) and _hinge_or_mse(g, i, f):
            pass


def _hinge_or_mse(g: Graph, i: int, f: set[str]) -> bool:
    """A mean over everything of a squared difference (MSE) or of max(0, 1 - x·y) (hinge)."""
    if g.ops[i].name not in ("mean", "sum") or not g.ops[i].producers:
        return False
    p = g.source(g.ops[i].producers[0])
    if p < 0:
        return False
    op = g.ops[p]
    if op.name == "pow" and 2 in op.args[1:2] and any(g.ops[q].name == "sub" for q in g.inputs_of(p) if q >= 0):
        f.add("loss-mse")
        return True
    if op.name in ("clamp", "clamp_min", "relu") and any(g.ops[q].name in ("rsub", "sub") for q in g.inputs_of(p) if q >= 0):
        f.add("loss-hinge")
        return True
    return False


def _pool_features(g: Graph, f: set[str]) -> None:
    for op in g.ops:
        if op.name.startswith("max_pool") or op.name.startswith("adaptive_max_pool"):
            f.add("pool-max")
        elif op.name.startswith("avg_pool") or op.name.startswith("_adaptive_avg_pool") \
                or op.name.startswith("adaptive_avg_pool"):
            f.add("pool-avg")
            if op.out and len(op.out) >= 3 and math.prod(op.out[2:]) == 1:
                f.add("pool-global-avg")
        elif op.name == "mean" and op.shapes and len(op.shapes[0]) >= 4:
            dims = _dims(op, len(op.shapes[0]))
            if dims and dims == list(range(2, len(op.shapes[0]))):
                f.add("pool-global-avg")
    if "pool-avg" in f and any(op.name == "mean" and op.shapes and len(op.shapes[0]) >= 4
                               and _dims(op, 4) == [2, 3] for op in g.ops):
        f.add("pool-global-avg")


def _structure_features(g: Graph, f: set[str]) -> None:
    names = {op.name for op in g.ops}
    gemm_inputs = {p for i, op in enumerate(g.ops) if op.name in _GEMM for p in g.inputs_of(i)}
    if "diag" in names or "diag_embed" in names or "eye" in names:
        if any(g.ops[p].name in ("diag", "diag_embed", "eye") for p in gemm_inputs if p >= 0):
            f.add("diagonal")
    if any(g.ops[p].name in ("tril", "triu") for p in gemm_inputs if p >= 0):
        f.add("triangular")
    if "flip" in names:
        f.add("flip")
    pointwise = [i for i, op in enumerate(g.ops) if _pointwise(op)]
    if any(len(set(op.shapes)) > 1 and len(op.shapes) >= 2 and all(len(s) >= 1 for s in op.shapes)
           for op in (g.ops[i] for i in pointwise)):
        f.add("broadcast")
    # Chains: a pointwise op fed by another pointwise op.
    chained = [i for i in pointwise if any(p >= 0 and _pointwise(g.ops[p]) for p in g.inputs_of(i))]
    if len(chained) >= 2:
        f.add("elementwise-chain")
    # Affine chain: (x * a + b) * c + d with per-channel parameters folds into one FMA.
    affine = [i for i in pointwise if g.ops[i].name in ("mul", "add", "sub", "div")
              and any(p >= 0 and g.ops[p].name in ("mul", "add") for p in g.inputs_of(i))
              and len(g.ops[i].shapes) == 2 and g.ops[i].shapes[0] != g.ops[i].shapes[1]]
    if len(affine) >= 3:
        f.add("affine-chain")
    if names & _TRANSCENDENTAL or names & _SOFTMAX:
        f.add("transcendental")
    if g.output_numel >= 1024:
        f.add("large-output")
    if sum(op.name in _GEMM or op.name in ("convolution", "_convolution") for op in g.ops) >= 3:
        f.add("layer-chain")
    real = [op for op in g.ops if op.name not in _PASS]
    if len(real) >= 60:
        f.add("many-small-ops")


# Features under which the contraction is not what cuDNN/cuBLAS do best, or a rewrite removes it.
_NOT_A_LIBRARY_OP = {"gemv", "diagonal", "triangular", "conv-depthwise", "gemm-reduction", "attention-chain",
                     "sdpa", "multi-head-attention", "recurrent-layer", "rnn-cell", "rnn-step-loop"}
_CONV = {"convolution", "_convolution"}
_NORM_OPS = {"native_group_norm", "group_norm", "native_layer_norm", "layer_norm", "native_batch_norm",
             "_native_batch_norm_legit", "_native_batch_norm_legit_no_training", "batch_norm", "rms_norm",
             "_fused_rms_norm"}
# Ops that make a tensor without reading one (BatchNorm's empty save buffers, a zero initial state).
_CREATE = {"empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like", "full_like",
           "scalar_tensor", "lift_fresh", "lift_fresh_copy", "arange"}
# Products each output of a library contraction must sum for the contraction to carry the task's
# arithmetic (a 1x1 conv over 8 channels or a K = 16 GEMM is a memory pass like the tail's).
LIBRARY_OP_MIN_K = 32


def _tail(op: Op) -> bool:
    """An op a tail kernel does in one pass over the contraction's output: pointwise, a reduction,
    a softmax, a normalization or a pooling."""
    return (_pointwise(op) or op.name in _REDUCE or op.name in _SOFTMAX or op.name in _NORM_OPS
            or op.name.startswith(("max_pool", "avg_pool", "adaptive_", "_adaptive_avg_pool")))


def contraction_k(op: Op) -> int | None:
    """Products each output of a GEMM or convolution sums: K of a GEMM; input channels per group times
    the kernel volume of a convolution (of a transposed one, divided by the stride volume: the taps
    that reach one output)."""
    if op.name in _GEMM:
        mnk = _gemm_mnk(op)
        return mnk[3] if mnk else None
    if op.name not in _CONV or len(op.shapes) < 2 or len(op.shapes[1]) < 3:
        return None
    w, a = op.shapes[1], op.args
    taps = math.prod(w[2:])
    if len(a) > 6 and a[6]:                       # transposed: weight [C_in, C_out / groups, k...]
        groups = int(a[8]) if len(a) > 8 else 1
        stride = math.prod(a[3]) if len(a) > 3 and isinstance(a[3], (list, tuple)) else 1
        return max(1, w[0] // max(groups, 1) * taps // max(stride, 1))
    return w[1] * taps                           # weight [C_out, C_in / groups, k...]


def _library_op_features(g: Graph, f: set[str]) -> None:
    """``library-op-tail``: the task's arithmetic is in convolutions or GEMMs that cuDNN/cuBLAS run at
    full speed, and every other op is a tail on their outputs (pointwise, normalization, reduction,
    pooling). What wins there is the library op kept as it is and the tail fused into one pass, not a
    hand-written contraction (at fp32 the library's kernels are hard to beat; issue 44)."""
    if f & _NOT_A_LIBRARY_OP:
        return
    heavy = [i for i, op in enumerate(g.ops) if op.name in _GEMM or op.name in _CONV]
    if not heavy or max((contraction_k(g.ops[i]) or 0) for i in heavy) < LIBRARY_OP_MIN_K:
        return
    made_by_heavy = set(heavy)
    rest = [op for i, op in enumerate(g.ops) if i not in made_by_heavy and op.name not in _PASS
            and op.name not in _CREATE]
    if rest and all(_tail(op) for op in rest) and \
            any(_tail(g.ops[j]) for i in heavy for j in g.consumers(i)):
        f.add("library-op-tail")


def _pointwise(op: Op) -> bool:
    return op.name not in _PASS and op.name not in ("masked_fill",) and \
        op.name in _POINTWISE_NAMES


_TRANSCENDENTAL = {"exp", "log", "tanh", "sigmoid", "gelu", "silu", "softplus", "mish", "erf", "xlogy",
                   "log1p", "expm1", "_addmm_activation", "elu"}
_POINTWISE_NAMES = {
    "add", "sub", "rsub", "mul", "div", "neg", "relu", "relu6", "gelu", "silu", "sigmoid", "tanh",
    "exp", "log", "pow", "sqrt", "rsqrt", "clamp", "clamp_min", "clamp_max", "hardtanh", "leaky_relu",
    "softplus", "mish", "abs", "where", "maximum", "minimum", "hardswish", "hardsigmoid", "elu",
    "erf", "xlogy", "reciprocal", "square", "log1p", "expm1", "sign", "threshold",
}
