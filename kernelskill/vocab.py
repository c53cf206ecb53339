"""Shared vocabularies: op classes (task features), bottleneck classes, backends, statuses.

Every list, mark, style and schema of a status, backend or bottleneck class is derived from the
enums here, so adding one is one edit here plus the tables ``covering`` checks.
"""
from enum import StrEnum

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


class Status(StrEnum):
    """An evaluation's verdict. The values are the strings JSON, event files and stored runs carry."""
    ok = "ok"
    compile_error = "compile_error"
    runtime_error = "runtime_error"
    timeout = "timeout"
    crashed = "crashed"
    incorrect = "incorrect"
    flagged = "flagged"
    # The task's problem, not the candidate's: the reference differs from itself on the same inputs
    # under the same seed, so nothing can be verified against it.
    stochastic = "stochastic"


# The candidate never produced outputs to compare: it did not build, raised, ran out of time or died.
# Of the reference itself, any of these stops the optimizer before it starts.
DID_NOT_RUN = (Status.compile_error, Status.runtime_error, Status.timeout, Status.crashed)
# It built but its run failed: the end of the worker's output (log_tail) says why.
RUN_FAILURES = (Status.runtime_error, Status.timeout, Status.crashed)
# The candidate's failures, which the debugger repairs. Not "stochastic": that is the task's problem,
# and the optimizer stops on it (StochasticTask) before any node is made.
FAILURES = (*DID_NOT_RUN, Status.incorrect, Status.flagged)


class WorkerStatus(StrEnum):
    """The evaluation worker's reply to its parent, before the parent turns it into a Status."""
    ok = "ok"                          # the mode's work is done (not yet a verdict)
    compile_error = "compile_error"
    runtime_error = "runtime_error"
    task_error = "task_error"          # the reference failed (its file and line in the error): a TaskError
    compile_only = "compile_only"      # built, but this machine cannot load it (CUDA without a GPU)
    stopped = "stopped"                # the parent's verdict said not to profile (the candidate failed its checks)


class ProfileMode(StrEnum):
    """Where a run worker's candidate is profiled (the request's ``profile``)."""
    off = "off"                    # not profiled (compile, verify, a timing without a profile)
    here = "here"                  # in the timing worker, after its timed rounds (a CPU)
    apart = "apart"                # in a profiling worker of its own, set up while the run worker times (a GPU)


class NodeStatus(StrEnum):
    """A search node's own states beside its evaluation's Status (``Node.status`` is one or the other)."""
    pending = "pending"            # not evaluated yet
    invalid = "invalid"            # the agents produced no usable candidate (malformed, blocked)


class RaceStatus(StrEnum):
    """Whether a head-to-head re-time (``evaluate.race``) measured its candidates."""
    ok = "ok"
    failed = "failed"


class Outcome(StrEnum):
    """A skill's outcome on one attempt, as its statistics count it (and MCP's record_attempt takes)."""
    success = "success"            # correct and faster
    failure = "failure"            # not correct
    no_gain = "no_gain"            # correct, not faster


class RowStatus(StrEnum):
    """A bench row's status where no evaluation's verdict stands for it (a row that has one carries
    that Status)."""
    task_error = "task_error"      # the task did not load (a missing import, too little GPU memory, …)
    error = "error"                # the job raised (the LLM endpoint went away): not finished, runs again
    no_correct = "no_correct"      # --optimize: the run found no correct candidate
    no_solution = "no_solution"    # the task has no solution for this device's backends
    pending = "pending"            # not run yet


# A --reference bench row with a verdict of its own: the reference verified against itself, or is stochastic.
EVALUATED = (Status.ok, Status.stochastic)


# The worker's phase once the timed calls' outputs are written (or shared on the GPU) when it does
# not profile: the parent re-checks them then, as it does at "profile" otherwise.
RECHECK_PHASE = "recheck"

# What each phase of an evaluation does, for a person (the CLI's progress lines, MCP progress). The
# worker's own words stay in the JSON, the phases file and result.phases.
PHASE_TEXT = {
    "setup": "starting the isolated worker",
    "build": "building the candidate's extensions",
    "run": "running the correctness trials",
    "await": "comparing the outputs with the reference",
    "time": "timing the candidate against eager",
    "timed": "judging the timing round",
    "profile": "profiling the candidate's kernels",
    "process": "timing it again in a second worker process",
    "shapes": "checking the candidate at other shapes",
    RECHECK_PHASE: "re-checking the timed calls' outputs",
    "ncu": "reading Nsight Compute's metrics",
    "serve": "serving reference outputs",
    "done": "finished",
}


def phase_text(phase: str, round_no: int = 0) -> str:
    """``phase``'s text; a timing round after the first says which, and why it is timed again."""
    text = PHASE_TEXT.get(phase, phase)
    if phase == "time" and round_no > 0:
        text += f" (round {round_no + 1}, on fresh allocations of the inputs)"
    return text


class Backend(StrEnum):
    """The language a candidate's kernels are written in."""
    cuda = "cuda"
    triton = "triton"
    cpp = "cpp"


class Bottleneck(StrEnum):
    """What limits a kernel's speed, read from its roofline position and profile."""
    memory_bound = "memory-bound"
    compute_bound = "compute-bound"
    launch_bound = "launch-bound"
    latency_bound = "latency-bound"


# Plain strings, not members, for argparse choices and skill-file validation: their messages show
# repr(), and repr(Backend.cuda) is "<Backend.cuda: 'cuda'>".
BACKENDS = tuple(b.value for b in Backend)
BOTTLENECKS = tuple(b.value for b in Bottleneck)


def covering(kind: type[StrEnum], table: dict, name: str, *, but: tuple = ()) -> dict:
    """``table``, checked at import to have an entry for every member of ``kind`` (those in ``but`` aside).

    A table keyed by a vocabulary (a mark per status, advice per status) fails loudly when the
    vocabulary grows and the table does not."""
    missing = [m.value for m in kind if m not in table and m not in but]
    if missing:
        raise TypeError(f"{name} has no entry for {kind.__name__} {', '.join(missing)}")
    return table


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
    "gemm-epilogue", "gemm-reduction", "gemm-chain", "library-op-tail",
    # structure and data
    "diagonal", "triangular", "flip", "broadcast", "elementwise-chain", "affine-chain", "transcendental",
    "large-output", "layer-chain",
    "many-small-ops", "dtype-float32", "dtype-float16", "dtype-bfloat16", "dtype-float64",
    "low-precision-ok", "fp32-strict",
)
