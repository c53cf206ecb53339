"""What the tools return: typed results whose JSON schemas become the tools' output schemas.

The evaluator's own dataclasses (CompileResult, EvalResult, TimingStats) are embedded as they are,
so an MCP client sees the same contract as ``kernelskill eval --json``; each tool adds a one-line
``summary`` and a ``next_step`` written for the agent that reads it.
"""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from kernelskill.results import CompileResult, EvalResult, TimingStats
from kernelskill.skills.book import arch_key
from kernelskill.skills.stats import SkillStats
from kernelskill.skills import Skill
from kernelskill.vocab import OP_CLASSES, Backend, Bottleneck, Status


class Compilation(BaseModel):
    """Whether the candidate's extensions built, with the compiler's messages mapped to its lines."""
    ok: bool
    backend: str = Field(description=f"{' | '.join(Backend)} | none, detected from the source")
    summary: str
    next_step: str
    result: CompileResult


class Evaluation(BaseModel):
    """One evaluation: compile → verify (seeded trials) → time against the eager reference."""
    status: Status = Field(description="the verdict; stochastic: the task's reference differs from itself under "
                           "one seed")
    correct: bool | None = Field(description="all correctness trials passed (and, with shapes, at every other "
                                             "shape it ran at); null when it never ran")
    speedup: float | None = Field(description="reference median time / candidate median time (>1 is "
                                  "faster); null when not timed or withheld")
    summary: str
    next_step: str
    result: EvalResult
    uri: str | None = Field(default=None, description="result://<task>/<candidate>: read this resource later for "
                            "the same result (kept while the server runs)")


class Profile(Evaluation):
    """An evaluation with timing, optionally next to an earlier candidate timed back to back."""
    vs_baseline: float | None = Field(default=None, description="baseline candidate median / this "
                                      "candidate median (>1: this one is faster); null without a baseline")
    baseline_result: EvalResult | None = None


class ValueSpec(BaseModel):
    """A tensor (shape, dtype) or a plain value, as the task produces it."""
    name: str | None = None
    shape: list[int] | None = None
    dtype: str | None = None
    value: Any = None


class TaskInfo(BaseModel):
    """A task as an optimizer needs to see it."""
    task: str = Field(description="pass this back as `task` to the other tools")
    name: str
    kind: str = Field(description="example | path | inline")
    level: int | None = None
    description: str = ""
    dtype: str
    preset: str | None = None
    presets: dict[str, dict[str, Any]] = Field(default_factory=dict,
                                               description="size presets from task.toml (pass one as `preset`)")
    constants: dict[str, Any] = Field(default_factory=dict, description="the module's size constants as they are "
                                      "in force: the file's, with the preset applied and derived ones recomputed")
    source: str = Field(description="the reference module (class Model, get_inputs, get_init_inputs)")
    task_toml: str | None = None
    inputs: list[ValueSpec]
    outputs: list[ValueSpec]
    parameters: list[ValueSpec] = Field(description="learned weights (nn.Parameter), by name")
    buffers: list[ValueSpec] = Field(default_factory=list, description="registered buffers (register_buffer: "
                                     "running statistics, masks, constants), by name; not parameters")
    op_classes: list[str] = Field(description="what the reference computes; lookup_skills gates on these")
    aten_ops: list[str] = Field(default_factory=list)
    flops: int = Field(description="FLOPs of one forward, counted by torch's FLOP counter: matmul, conv and attention "
                       "only; elementwise ops and reductions are not counted (0 for a softmax)")
    bytes: int = Field(description="compulsory bytes: inputs + outputs + parameters")
    tolerance: dict[str, float]
    baseline: TimingStats | None = Field(default=None, description="eager reference time measured by an "
                                         "earlier profile/evaluate call on this server; null until then")
    baseline_device: str | None = None
    next_step: str = ""


class MachineInfo(BaseModel):
    """The hardware this server's evaluations run on, as the built-in agents are told it."""
    device: str = Field(description="cpu or cuda[:N]: where evaluate, verify and profile run")
    text: str = Field(description="the profile in a few lines, as the built-in agents' prompts carry it")
    cpu: dict = Field(description="model, cores (usable, physical, logical), SIMD sets (isa), caches, compiler, "
                                  "torch's parallel backend and threads")
    gpu: dict | None = Field(default=None, description="name, arch (sm_90…), sms, smem_per_block(_optin), smem_per_sm, "
                                                       "regs_per_sm, max_threads_per_sm, l2_bytes, memory_bytes")
    ceilings: dict = Field(description="measured: bandwidth (bytes/s, read + write), peak_flops per dtype "
                                       "(FLOP/s), launch_us per eager op; the roofline's roofs")


class TaskEntry(BaseModel):
    task: str = Field(description="pass this as `task` to the other tools")
    name: str
    level: int | None = None
    description: str = ""
    presets: list[str] = Field(default_factory=list)
    uri: str | None = Field(default=None, description="resource with reference.py and task.toml (examples)")


class TaskList(BaseModel):
    tasks: list[TaskEntry]
    note: str = ""


class SkillStatsInfo(BaseModel):
    """Outcomes recorded for this skill on tasks of these op classes, on this backend (and GPU arch)."""
    tried: int = 0
    succeeded: int = 0
    failed: int = 0
    no_gain: int = 0
    success_rate: float | None = Field(default=None, description="succeeded / tried in this context; null when "
                                       "the skill was never tried here (no rate, not a guess)")
    mean_speedup: float | None = Field(default=None, description="geometric mean of recorded speedups")
    unranked: dict[str, int] = Field(default_factory=dict, description="outcomes kept but not ranked, by "
                                     "label: noisy, contended (timing quality), unmeasured (not timed here)")

    @classmethod
    def of(cls, st: SkillStats, features: list[str] = (), backend: str | None = None,
           arch: str | None = None) -> "SkillStatsInfo":
        ops = [f for f in features if f in OP_CLASSES] or None
        c = st.counts(ops, backend, arch_key(arch))
        return cls(tried=c.tried, succeeded=c.succeeded, failed=c.failed, no_gain=c.no_gain,
                   success_rate=None if c.rate is None else round(c.rate, 4), mean_speedup=c.mean_speedup(),
                   unranked=dict(st.unranked))


class SkillInfo(BaseModel):
    """One optimization skill: when it applies, what to do, what goes wrong, an example."""
    id: str
    title: str
    category: str
    backends: list[str]
    applies_to: list[str]
    bottlenecks: list[str]
    arch: list[str] = Field(default_factory=list)
    when: str
    summary: str
    guidance: str
    steps: list[str]
    pitfalls: list[str]
    expected_gain: str
    example: str
    example_lang: str
    uri: str
    stats: SkillStatsInfo

    @classmethod
    def of(cls, skill: Skill, stats: SkillStats, features: list[str] = (), backend: str | None = None,
           arch: str | None = None) -> "SkillInfo":
        data = {k: v for k, v in skill.to_dict().items() if k in cls.model_fields}
        return cls(**data, uri=f"skill://{skill.id}", stats=SkillStatsInfo.of(stats, features, backend, arch))


class SkillList(BaseModel):
    skills: list[SkillInfo]
    op_classes: list[str] = Field(default_factory=list, description="the task's op classes the gate used")
    backend: Backend
    bottleneck: Bottleneck | None = None
    note: str = ""


class DistilledSkill(BaseModel):
    """A draft skill distilled from a run's node that beat its parent with confidence."""
    path: str = Field(description="the draft's file in the user's skill directory: review it")
    node: str = Field(description="the node it was distilled from")
    base: str = Field(description="the node it beat (its nearest correct ancestor)")
    gain: float = Field(description="the node's speedup over its base's")
    gain_low: float = Field(description="the gain at the unfavourable ends of both intervals (> 1)")
    skill: SkillInfo


class RecordedAttempt(BaseModel):
    skill_id: str
    outcome: str
    op_class: str | None
    speedup: float | None
    candidate_hash: str
    measured_by_server: bool = Field(description="true when status and speedup come from this server's "
                                     "own evaluation of this source")
    ranked: bool = Field(True, description="false when the outcome is kept but does not rank the skill: not "
                         "timed by this server, or timed with a quality that was not good (see quality)")
    quality: str = Field("good", description="the measurement behind the outcome: good, noisy, contended, or "
                         "unmeasured (this server did not time this source)")
    stats: SkillStatsInfo
