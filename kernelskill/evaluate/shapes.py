"""Does a candidate verified at the task's sizes work at others? (issue 47, item 1)

Kernels written for a benchmark are often specialised to its sizes: a check on an exact dimension,
a tile count that assumes a divisible length. ``generalize`` evaluates the candidate again (its
correctness; timing on request) at derived shapes:

- the task's presets other than the one in use;
- each size constant (a top-level integer of 8 or more: ``batch_size``, ``dim``, ``in_channels``…;
  smaller ones, a kernel size or a stride, are taken as structural) halved, doubled and moved to a
  prime near it (odd lengths catch tiles that assume divisibility). Chained constants
  (``height = width = 128``) are varied one name at a time.

A shape where the *reference* itself fails (a constant that must divide another, a size too large
for the machine) is skipped and said so: the task fixes that size. The candidate at each shape:

| verdict | when |
|---|---|
| ok | correct there |
| refused | it raised an error of its own (a ``TORCH_CHECK`` on a size): a clean refusal, a label |
| incorrect | a wrong value there: a failure of the candidate, whatever it does at the task's size |
| crashed | a crash, an illegal memory access, a timeout, a flag: a failure too |

``generalizes`` is ``yes`` (ok everywhere it ran), ``specialised`` (refusals only) or ``no`` (a
wrong value or a crash somewhere).
"""
from __future__ import annotations

import dataclasses

from ..errors import TaskError, UserError
from ..results import ShapeCheck, ShapesResult
from ..task import Task
from ..vocab import Status

SIZE_MIN = 8                 # integer constants below this are structural (kernel sizes, strides, groups)
MAX_SHAPES = 12              # derived shapes checked at most (presets first, then primes, halves, doubles)
# Runtime errors that are a crash in the kernel, not a refusal the candidate chose to make.
CRASH_WORDS = ("illegal memory access", "CUDA error", "out of bounds", "misaligned address", "segmentation",
               "unspecified launch failure", "device-side assert")


def prime_near(n: int) -> int:
    """The largest prime below ``n`` (an odd length for a size ``n`` ≥ 4), else the next above."""
    def prime(k: int) -> bool:
        return k > 1 and all(k % d for d in range(2, int(k ** 0.5) + 1))
    k = n - 1
    while k > 2 and not prime(k):
        k -= 1
    if k > 2:
        return k
    k = n + 1
    while not prime(k):
        k += 1
    return k


def derive_shapes(task: Task, spec: str = "auto") -> list[tuple[str, dict]]:
    """(label, overrides) of each shape to check. ``spec``: ``auto``, or preset names separated by
    commas (``small,large``), or ``auto`` plus them."""
    current = {**task.constants, **task.overrides}
    out: list[tuple[str, dict]] = []
    names = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [n for n in names if n != "auto" and n not in task.presets]
    if unknown:
        known = ", ".join(sorted(task.presets)) or "none defined"
        raise UserError(f"--shapes {spec}: no preset named {', '.join(unknown)} in {task.path} (presets: {known}; "
                        f"or 'auto': the presets, and each size constant halved, doubled and made a prime)")
    auto = "auto" in names
    for name in (sorted(task.presets) if auto else [n for n in names if n != "auto"]):
        if name != task.preset:
            out.append((f"preset {name}", {**task.overrides, **task.presets[name]}))
    if auto:
        sizes = {k: v for k, v in current.items()
                 if isinstance(v, int) and not isinstance(v, bool) and v >= SIZE_MIN}
        primes, halves, doubles = [], [], []
        for k, v in sizes.items():
            primes.append((f"{k}={prime_near(v)} (a prime near {v})", {**task.overrides, k: prime_near(v)}))
            halves.append((f"{k}={v // 2} (half)", {**task.overrides, k: v // 2}))
            doubles.append((f"{k}={2 * v} (double)", {**task.overrides, k: 2 * v}))
        out += primes + halves + doubles
    seen, unique = set(), []
    for label, sets in out:
        key = tuple(sorted(sets.items()))
        if key not in seen and sets != task.overrides:
            seen.add(key)
            unique.append((label, sets))
    return unique[:MAX_SHAPES]


def _verdict(r) -> tuple[str, str]:
    """(verdict, why) of the candidate's evaluation at one shape."""
    if r.status == Status.ok:
        return "ok", ""
    msg = (r.message or "").splitlines()[0] if r.message else str(r.status)
    if r.status == Status.incorrect:
        return "incorrect", msg
    if r.status == Status.runtime_error and not any(w.lower() in msg.lower() for w in CRASH_WORDS):
        return "refused", msg
    return "crashed", f"{r.status}: {msg}"


def generalize(task: Task, cand, opts, evaluate, spec: str = "auto", timed: bool = False,
               on_shape=None) -> ShapesResult:
    """The candidate evaluated (``evaluate``: api.evaluate, passed in by it) at each derived shape,
    correctness only unless ``timed``. ``on_shape(i, n, label)`` hears each shape as it starts."""
    shapes = derive_shapes(task, spec)
    checks: list[ShapeCheck] = []
    run_opts = opts if timed else dataclasses.replace(opts, timing=None, profile=False)
    run_opts = dataclasses.replace(run_opts, trials=min(opts.trials, 3))
    for i, (label, sets) in enumerate(shapes):
        if on_shape:
            on_shape(i, len(shapes), label)
        try:
            variant = Task.load(task.path, preset=None, overrides=sets)
        except TaskError as e:
            checks.append(ShapeCheck(label=label, sets=sets, verdict="skipped", message=str(e)[:300]))
            continue
        try:
            r = evaluate(variant, cand, opts=run_opts)
        except TaskError as e:            # the reference itself fails here: the task fixes this size
            first = str(e).strip().splitlines()[0] if str(e).strip() else "failed"
            checks.append(ShapeCheck(label=label, sets=sets, verdict="skipped",
                                     message=f"the reference does not run at this shape: {first}"[:300]))
            continue
        verdict, why = _verdict(r)
        sp = r.profile.speedup if timed and r.profile is not None else None
        checks.append(ShapeCheck(label=label, sets=sets, verdict=verdict, message=why[:300], speedup=sp))
    ran = [c for c in checks if c.verdict != "skipped"]
    bad = [c for c in ran if c.verdict in ("incorrect", "crashed")]
    refused = [c for c in ran if c.verdict == "refused"]
    overall = "no" if bad else "specialised" if refused else "yes"
    if bad:
        c = bad[0]
        summary = f"{c.verdict} at shape {c.label}: {c.message}"
    elif refused:
        summary = f"specialised: refuses {', '.join(c.label for c in refused)}"
    else:
        summary = f"generalizes: correct at {len(ran)} other shape{'s' * (len(ran) != 1)}"
    skipped = len(checks) - len(ran)
    if skipped:
        summary += f" ({skipped} skipped: the reference does not run there)"
    return ShapesResult(generalizes=overall, summary=summary, shapes=checks)
