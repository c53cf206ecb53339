"""The ``optimize_kernel`` prompt: the optimization loop and the candidate contract, for an external agent."""
from __future__ import annotations

from kernelskill.agents.templates import load_shared

from .roots import ResolvedTask

INSTRUCTIONS = """KernelSkill turns PyTorch modules into faster custom kernels that are proven equivalent.
Tools: list_tasks/get_task (what to optimize), describe_machine (the CPU/GPU it runs on: SMs, shared
memory, SIMD, measured ceilings), lookup_skills (expert strategies that fit the task), compile/verify/evaluate/profile (the trusted evaluator: isolated workers, seeded correctness trials,
careful timing), record_attempt (teach the skill library what worked), export_kernel (a verified
candidate as a package with ahead-of-time built kernels as torch.library ops). A `task` is an example name,
a path inside the server's roots, or KernelBench source. Get the prompt optimize_kernel for the loop."""

CONTRACT = """\
## The candidate contract
- One Python module that defines `class ModelNew(nn.Module)`. Its constructor takes the same arguments
  as the reference `Model` (what `get_init_inputs()` returns) and `forward` takes what `get_inputs()`
  returns and returns outputs of the same shapes and dtypes.
- Keep the parameter and buffer names of `Model` (e.g. `self.linear = nn.Linear(...)` or the same
  `nn.Parameter` names): the evaluator copies the reference's weights into yours by name and shape.
- Custom kernels, one of (the build the optimizer's own agents are told, from the same place):
{builds}
- The hot computation must run in your kernels. Calling the reference's PyTorch ops for it is labelled
  (library-call); caching outputs between calls, threads, a second stream not joined back into the
  current one, L2 persistence windows, timers, reading the environment or sys.modules, file or network
  access, and patching torch are flagged and never count.
- Inputs must stay unchanged, outputs must be fresh tensors, and results must match within the task's
  tolerance on every trial (several seeds and a second input distribution)."""

_BUILDS = {"cuda": "CUDA", "triton": "Triton", "cpp": "CPU C++ (servers without a GPU; CPU tensors)"}
_SHARED = load_shared()
CONTRACT = CONTRACT.replace("{builds}", "\n".join(f"  - {name}: " + " ".join(_SHARED[b]["build"].split())
                                                  for b, name in _BUILDS.items()))

LOOP = """\
## The loop
1. `get_task(task)`: read the reference, shapes, dtypes, op classes, FLOPs/bytes and presets. On a
   server without a GPU, pass `preset="small"` (when the task has one) to every tool. Call
   `describe_machine()` once: SMs, shared memory and L2 (GPU) or cores and SIMD (CPU) size your tiles.
2. `lookup_skills(task=...)`: the skills allowed for this task's op classes and this server's
   backend, best first. Pick one and say why (or say why none fits). Read `skill://<id>` for details.
3. Write the full `ModelNew` module applying that skill. Start simple and correct.
4. `compile(source)` until it builds; fix diagnostics by the line numbers given.
5. `verify(task, source, trials=3)` until status is `ok`; on `incorrect`, read
   `result.verify.mismatch` (worst elements, expected vs got).
6. `evaluate(task, source)`: the verdict with timing. Read `speedup`, `result.profile.kernels`
   (share of time per kernel; yours are marked custom) and `custom_share`.
7. `record_attempt(task, source, skill_id, outcome)`: success (correct and faster), no_gain, or failure.
8. Iterate from the current best: find what dominates the profile, `lookup_skills(task=...,
   bottleneck=..., query=...)` for the next idea, change one thing at a time, evaluate again.
   `profile(task, source, baseline=<previous best source>)` compares two versions back to back.
Stop when the speedup stops improving over three attempts or the budget is spent; report the best
verified candidate (status `ok`), its speedup with its confidence interval, and what each attempt
taught you."""


def optimize_kernel(rt: ResolvedTask) -> str:
    """The prompt text for one task."""
    t = rt.task
    head = (f"Optimize the KernelBench task `{t.name}` (pass `task={rt.ref!r}` to the tools): write "
            f"`ModelNew`, a faster module built on custom kernels that computes the same function as "
            f"`Model`, and prove it with the KernelSkill evaluator.")
    presets = f"\nPresets: {', '.join(sorted(t.presets))}." if t.presets else ""
    return (f"{head}{presets}\n\n## The reference\n```python\n{t.source.rstrip()}\n```\n\n"
            f"{CONTRACT}\n\n{LOOP}\n")
