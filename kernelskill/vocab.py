"""Shared vocabularies: op classes (task features), bottleneck classes, backends, statuses."""

# Op classes a task's reference can run; Task.features() returns a subset.
OP_CLASSES = (
    "matmul",       # mm, bmm, addmm, linear, matmul, einsum contractions
    "conv",         # convolutions and transposed convolutions
    "reduction",    # sum, mean, max, min, argmax, prod, var/std over dims
    "elementwise",  # pointwise arithmetic and activations
    "norm",         # layer/batch/group/instance/RMS norm
    "softmax",      # softmax / log_softmax
    "pooling",      # max/avg/adaptive pooling
    "scan",         # cumsum, cumprod, cummax
    "attention",    # scaled dot-product attention
    "loss",         # losses (cross entropy, mse, kl, …)
    "recurrent",    # rnn/gru/lstm cells
    "memory",       # copies, transposes, concatenation, indexing, padding
)

BOTTLENECKS = ("memory-bound", "compute-bound", "launch-bound", "latency-bound")

BACKENDS = ("cuda", "triton", "cpp")

# An evaluation's verdict. "stochastic" is the task's problem, not the candidate's: the reference
# differs from itself on the same inputs under the same seed, so nothing can be verified against it.
STATUSES = ("ok", "compile_error", "runtime_error", "timeout", "crashed", "incorrect", "flagged", "stochastic")

# Task features: what an expert sees in a traced reference beyond its op classes (kernelskill/patterns.py
# detects them; a skill's `requires` and `features` name them).
TASK_FEATURES = (
    # recurrent
    "recurrent-layer", "rnn-cell", "rnn-step-loop", "lstm", "gru",
    # attention
    "sdpa", "multi-head-attention", "attention-chain", "causal-mask",
    # convolution
    "conv-1d", "conv-2d", "conv-3d", "conv-transposed", "conv-depthwise", "conv-grouped",
    "conv-pointwise", "conv-epilogue", "conv-bn-eval",
    # pooling
    "pool-max", "pool-avg", "pool-global-avg",
    # normalization
    "norm-batch", "norm-batch-train", "norm-group", "norm-instance", "norm-layer", "norm-rms",
    "residual-norm",
    # scans and reductions
    "scan-reverse", "scan-producer", "reduction-producer", "reduction-global", "reduction-last-axis",
    "reduction-strided", "reduction-long", "reduction-many-rows", "softmax-rows",
    # losses
    "loss-mse", "loss-kl", "loss-hinge", "loss-triplet", "loss-cross-entropy",
    # contractions
    "gemm-batched", "gemv", "gemm-tall-skinny", "gemm-long-k", "gemm-short-k", "gemm-large",
    "gemm-epilogue", "gemm-reduction", "gemm-chain",
    # structure and data
    "diagonal", "triangular", "flip", "broadcast", "elementwise-chain", "affine-chain", "transcendental",
    "large-output", "layer-chain",
    "many-small-ops", "dtype-float32", "dtype-float16", "dtype-bfloat16", "dtype-float64",
    "low-precision-ok",
)
