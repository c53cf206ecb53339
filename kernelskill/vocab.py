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
