"""The MCP server: typed tools over ``Toolbox``, skills and examples as resources, one prompt.

Each tool is a thin async function: its docstring is the description an LLM reads, its
parameters (with their descriptions) the input schema, its return type the output schema. The
work runs in a worker thread (``anyio.to_thread``) so the event loop keeps serving; the
evaluator's phases come back as progress notifications; ``UserError`` becomes a tool error.
"""
from __future__ import annotations

import inspect
import logging
import threading
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Annotated, AsyncIterator, Callable, Literal, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.server.mcpserver.resources import FunctionResource
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, ToolAnnotations
from pydantic import Field

from kernelskill import __version__
from kernelskill.errors import UserError, one_line
from kernelskill.evaluate.launch.isolation import Cancelled
from kernelskill.skills import OUTCOMES, SkillBook
from kernelskill.vocab import Backend, Bottleneck, Status

from .exporting import ExportedKernel
from .jobs import JobInfo, JobKind
from .models import (Compilation, DistilledSkill, Evaluation, MachineInfo, Profile, RecordedAttempt, SkillList,
                     TaskInfo, TaskList)
from .prompt import INSTRUCTIONS, optimize_kernel
from .roots import example_dir, example_names
from .toolbox import Progress, ServerConfig, Toolbox, cancellable

if TYPE_CHECKING:
    from .http import HttpPolicy

log = logging.getLogger("kernelskill.mcp")
T = TypeVar("T")

TASK_HELP = ("The task: an example name (see list_tasks, e.g. 'softmax_rows'), a path to a KernelBench .py file "
             "or task directory inside the server's roots, the KernelBench source itself (class Model, get_inputs, "
             "get_init_inputs), or an 'inline:…' handle that get_task returned for such a source.")
TaskArg = Annotated[str, Field(description=TASK_HELP)]
SourceArg = Annotated[str, Field(description=(
    "The candidate: a complete Python module defining class ModelNew(nn.Module) with the same constructor "
    "arguments as Model, its kernels built with torch.utils.cpp_extension.load_inline or @triton.jit."))]
TimeoutArg = Annotated[float | None, Field(gt=0, allow_inf_nan=False, description=(
    "Seconds the candidate may run in each phase after its build (trials, timing, profiling) before the "
    "verdict is 'timeout'; at most the server's limit (kernelskill mcp --run-timeout, default 300). Lower it "
    "when you suspect a hang."))]
PresetArg = Annotated[str | None, Field(description=(
    "A size preset from the task's task.toml, e.g. 'small' (use it on a server without a GPU)."))]
ShapesArg = Annotated[str | None, Field(description=(
    "Also check the candidate at other shapes once it is correct: 'auto' (the task's presets, and each size "
    "constant halved, doubled and made a prime near it) or preset names ('small,large'). A wrong value at any "
    "shape fails the verdict; a clean refusal (your own size check) is reported in result.shapes as "
    "'specialised'. Each shape is another evaluation: seconds each."))]
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
# Builds and runs agent-written native code for minutes (in an isolated worker, writing only the
# build cache): never read-only, so a client that auto-approves read-only tools still asks.
RUNS_CODE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                            open_world_hint=False)
STARTS_JOB = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False,
                             open_world_hint=False)
STOPS_JOB = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
# Writes a package directory under the roots (never outside them; with force over files there) and runs the
# candidate in a child.
WRITES_PACKAGE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False,
                                 open_world_hint=False)
RECORDS = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)


def _reporter(ctx: Context, cancel: threading.Event) -> Progress:
    """Progress from the worker thread to the client, strictly increasing as the protocol asks. Once
    the call is cancelled (or its client gone) nothing is sent: the thread must not wait on the event
    loop to deliver a message no one reads while it still holds the device."""
    last = [0.0]

    def report(step: float, total: float, message: str) -> None:
        if cancel.is_set():
            return
        last[0] = step if step > last[0] else last[0] + 0.01
        try:
            anyio.from_thread.run(ctx.report_progress, last[0], total, message)
        except Exception as e:  # noqa: BLE001 - a client that went away must not stop the evaluation
            log.debug("progress not delivered: %s", e)
    return report


async def _call(ctx: Context, work: Callable[[Toolbox, Progress], T]) -> T:
    """Run ``work`` in a worker thread with the lifespan's toolbox; user mistakes become tool errors."""
    toolbox: Toolbox = ctx.request_context.lifespan_context
    cancel = threading.Event()

    def run(progress: Progress) -> T:
        with cancellable(cancel):
            return work(toolbox, progress)
    try:
        # A cancel or a disconnect cancels this task; the thread is told through `cancel` and kills
        # its workers within one poll (50 ms), which releases the device for the next call.
        return await anyio.to_thread.run_sync(run, _reporter(ctx, cancel), abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        cancel.set()
        raise
    except Cancelled:
        raise ToolError("cancelled") from None
    except UserError as e:
        raise ToolError(str(e)) from None
    except Exception as e:  # noqa: BLE001 - one bounded line for the log and the client, no traceback
        # (the SDK would log the whole traceback, arguments included: megabytes for a huge argument)
        line = one_line(f"{type(e).__name__}: {e}")
        log.error("tool failed: %s", line)
        raise ToolError(f"the server failed on this call ({line}); it is still running. If the "
                        f"arguments are right, report this line") from None



def build_server(config: ServerConfig | None = None, toolbox: Toolbox | None = None) -> MCPServer:
    """The KernelSkill MCP server. With ``toolbox`` every session shares it (tests, benchmarks)."""
    config = toolbox.config if toolbox is not None else (config or ServerConfig())
    book = toolbox.book if toolbox is not None else SkillBook.load(config.skill_dirs, config.stats_path)

    @asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[Toolbox]:
        if toolbox is not None:
            yield toolbox
            return
        with Toolbox.open(config, book) as owned:
            yield owned

    server = MCPServer("kernelskill", title="KernelSkill", version=__version__, instructions=INSTRUCTIONS,
                       lifespan=lifespan, log_level=config.log_level)
    _add_tools(server)
    _add_resources(server, book)

    async def read_job(job_id: str, ctx: Context) -> str:
        """A job's state and, once done, its result, as JSON (what get_job returns)."""
        tb: Toolbox = ctx.request_context.lifespan_context
        try:
            return tb.jobs.get(job_id).model_dump_json(indent=1)
        except UserError as e:
            raise ResourceNotFoundError(str(e)) from None
    async def read_result(task_hash: str, candidate_hash: str, ctx: Context) -> str:
        """An evaluation result this server returned, by the uri it carried."""
        tb: Toolbox = ctx.request_context.lifespan_context
        try:
            return tb.past_result(f"result://{task_hash}/{candidate_hash}")
        except UserError as e:
            raise ResourceNotFoundError(str(e)) from None
    server.resource("result://{task_hash}/{candidate_hash}", name="result", title="An evaluation result",
                    description="The last verify, evaluate or profile result of a candidate on a task (its uri field)",
                    mime_type="application/json")(read_result)
    server.resource("job://{job_id}", name="job", title="An evaluation job",
                    description="A job started with start_evaluation: status, progress and, once done, its result",
                    mime_type="application/json")(read_job)

    async def optimize_kernel_prompt(task: Annotated[str, Field(description=TASK_HELP)], ctx: Context) -> str:
        """The optimization loop (skills → write → evaluate → read the profile → iterate) and the candidate
        contract, for one task."""
        tb: Toolbox = ctx.request_context.lifespan_context
        try:
            return optimize_kernel(await anyio.to_thread.run_sync(tb.resolve, task))
        except UserError as e:           # the SDK hides other errors' text from prompt clients
            raise MCPError(code=INVALID_PARAMS, message=str(e)) from None
    server.prompt(name="optimize_kernel", title="Optimize a PyTorch module into fast, verified kernels",
                  description=_describe(optimize_kernel_prompt))(optimize_kernel_prompt)

    return server


def _describe(fn: Callable) -> str:
    """A docstring as one paragraph: the description an LLM reads, without source indentation.

    ``{statuses}`` in it becomes the verdicts from the Status enum, so the text never lags the schema
    (a replace, not str.format: other docstrings hold braces of their own)."""
    text = " ".join(inspect.cleandoc(fn.__doc__ or "").split())
    return text.replace("{statuses}", " | ".join(Status))


def _add_tools(server: MCPServer) -> None:  # noqa: C901 - one short function per tool
    def tool(annotations: ToolAnnotations):
        # Named after the function: argument errors then read "… for evaluateArguments".
        def register(fn):
            server.add_tool(fn, name=fn.__name__, description=_describe(fn), annotations=annotations)
            return fn
        return register

    @tool(annotations=RUNS_CODE)
    async def compile(source: SourceArg, ctx: Context,
                      backend: Annotated[Backend | None, Field(description=(
                          "Assert the backend; it is detected from the source (cuda: load_inline with "
                          "cuda_sources; triton: @triton.jit; cpp: load_inline with cpp_sources only)."))] = None,
                      ) -> Compilation:
        """Build a candidate's custom kernels without running it: the quickest check after an edit. Returns ok,
        the detected backend, and compiler diagnostics mapped to lines of your source
        (result.diagnostics). Builds are cached by content, so an unchanged kernel rebuilds instantly. On a
        server without a GPU, CUDA sources get a compile-only check with nvcc."""
        return await _call(ctx, lambda tb, progress: tb.compile(source, backend, progress))

    @tool(annotations=RUNS_CODE)
    async def verify(task: TaskArg, source: SourceArg, ctx: Context,
                     trials: Annotated[int, Field(ge=1, le=50, description=(
                         "Seeded correctness trials (a second input distribution is added)."))] = 5,
                     preset: PresetArg = None, run_timeout_s: TimeoutArg = None,
                     shapes: ShapesArg = None) -> Evaluation:
        """Check a candidate against the task's reference on seeded trials, without timing it. Returns status
        (one of {statuses}; stochastic: the task's reference differs from itself), a summary and a
        next_step; when incorrect, result.verify.mismatch shows the worst elements (expected vs got). The
        candidate runs in an isolated worker process; expect seconds to minutes (progress is reported)."""
        return await _call(ctx, lambda tb, progress: tb.verify(task, source, trials, preset, progress, run_timeout_s,
                                                               shapes))

    @tool(annotations=RUNS_CODE)
    async def evaluate(task: TaskArg, source: SourceArg, ctx: Context, preset: PresetArg = None,
                       run_timeout_s: TimeoutArg = None, shapes: ShapesArg = None) -> Evaluation:
        """The full, trusted evaluation: compile → verify on seeded trials → time against the eager PyTorch
        reference → kernel breakdown. Returns status, correct, speedup (>1 is faster), summary, next_step
        and the complete result: result.profile has medians, IQR, the speedup with a 95% interval,
        kernels[] (share of time per kernel; custom = yours) and custom_share. Only status 'ok' counts. One
        evaluation per device runs at a time, so timings are not disturbed; progress is reported."""
        return await _call(ctx, lambda tb, progress: tb.evaluate(task, source, preset, progress, run_timeout_s,
                                                                 shapes))

    @tool(annotations=RUNS_CODE)
    async def profile(task: TaskArg, ctx: Context,
                      source: Annotated[str | None, Field(description=(
                          "The candidate to profile; leave out to profile the reference itself (its "
                          "eager time and kernels)."))] = None,
                      baseline: Annotated[str | None, Field(description=(
                          "The source of an earlier candidate (e.g. your current best) to time back to "
                          "back with this one; vs_baseline > 1 means the new source is faster."))] = None,
                      preset: PresetArg = None, run_timeout_s: TimeoutArg = None) -> Profile:
        """Time a candidate and show where its time goes (result.profile.kernels, custom_share, speedup vs
        eager). Without source it profiles the reference module itself: the baseline to beat and which
        PyTorch kernels dominate it. With baseline, both candidates are evaluated back to back and
        vs_baseline compares them directly."""
        return await _call(ctx, lambda tb, progress: tb.profile(task, source, baseline, preset, progress,
                                                                run_timeout_s))

    @tool(annotations=STARTS_JOB)
    async def start_evaluation(
            kind: Annotated[JobKind, Field(description="verify, evaluate or profile: what the job runs")],
            task: TaskArg, ctx: Context,
            source: Annotated[str | None, Field(description=(
                "The candidate (required for verify and evaluate; profile without it profiles the "
                "reference)."))] = None,
            preset: PresetArg = None,
            trials: Annotated[int | None, Field(ge=1, le=50, description="verify: seeded trials")] = None,
            run_timeout_s: TimeoutArg = None) -> JobInfo:
        """Start verify, evaluate or profile as a job and return its id at once: for an evaluation that may
        outlast your client's request timeout (a cold CUDA build, a large task). Poll get_job(job) for status
        and progress; the result is in get_job's result (and the resource job://<id>) once status is done;
        cancel_job(job) stops it and frees the device at once."""
        return await _call(ctx, lambda tb, _: tb.start_evaluation(kind, task, source, preset, trials, run_timeout_s))

    @tool(annotations=READ_ONLY)
    async def get_job(job: Annotated[str, Field(description="The id start_evaluation returned.")],
                      ctx: Context) -> JobInfo:
        """A job's status (running | done | failed | cancelled), its last progress message, the seconds it has
        run and, once done, its result (what verify, evaluate or profile return)."""
        return await _call(ctx, lambda tb, _: tb.jobs.get(job))

    @tool(annotations=STOPS_JOB)
    async def cancel_job(job: Annotated[str, Field(description="The id start_evaluation returned.")],
                         ctx: Context) -> JobInfo:
        """Stop a running job: its worker is killed and the device released within a fraction of a second.
        Returns the job's state (status becomes cancelled once the worker is gone)."""
        return await _call(ctx, lambda tb, _: tb.jobs.cancel(job))

    @tool(annotations=WRITES_PACKAGE)
    async def export_kernel(
            to: Annotated[str, Field(description=(
                "The package's directory, inside the server's roots (created; it must not exist or be empty "
                "unless force)."))],
            ctx: Context,
            source: Annotated[str | None, Field(description=(
                "The candidate to export: the module that defines ModelNew with load_inline kernels (cpp or "
                "cuda), verified on `task`. Pass this or run."))] = None,
            run: Annotated[str | None, Field(description=(
                "Instead of source: a run directory inside the roots (kernelskill optimize writes runs/<id>/), "
                "optionally RUN/NODE; without a node its best.py. The run gives the task and preset."))] = None,
            node: Annotated[str | None, Field(description=(
                "With run: the node to export (e.g. 'n3'); it must be verified (status ok)."))] = None,
            task: Annotated[str | None, Field(description=TASK_HELP + " Required with source; default with run: "
                                              "the run's task.")] = None,
            preset: PresetArg = None,
            build: Annotated[bool, Field(description=(
                "Also build the package in place (setup.py build_ext --inplace; about a minute for a C++ "
                "kernel) and import it, comparing its ModelNew with the reference on the task's inputs."))] = False,
            package: Annotated[str | None, Field(description="The Python package's name (default ks_<task>); "
                                                 "also the ops' namespace.")] = None,
            force: Annotated[bool, Field(description="Write into a non-empty `to`.")] = False,
            ) -> ExportedKernel:
        """Export a verified candidate as a Python package you can ship: its kernels as source files built ahead
        of time by setup.py, one torch.library op per load_inline function (with a fake implementation, so
        torch.compile(fullgraph=True) traces through it), ModelNew calling the ops, and a test file. Returns
        the package's path, the files written, the ops and, with build, whether it built and imported. The
        candidate runs in a child process (to record its output shapes); expect seconds, about a minute more
        with build (progress is reported). cpp, cuda and triton candidates (a triton one: its launchers as
        torch.library.triton_op ops, nothing to build; on a GPU)."""
        return await _call(ctx, lambda tb, progress: tb.export_kernel(to, source, run, node, task, preset, build,
                                                                      package, force, progress))

    @tool(annotations=READ_ONLY)
    async def lookup_skills(
            ctx: Context,
            task: Annotated[str | None, Field(description="Gate the skills by this task's op classes.")] = None,
            bottleneck: Annotated[Bottleneck | None, Field(description=(
                "The bottleneck read from a profile; keeps the skills that address it."))] = None,
            query: Annotated[str | None, Field(description="Keywords, e.g. 'shared memory tiling'.")] = None,
            backend: Annotated[Backend | None, Field(description=(
                "Backend of the kernels you will write; default: cuda on a GPU server, else cpp."))] = None,
            limit: Annotated[int, Field(ge=1, le=50, description="How many skills to return.")] = 5,
            preset: PresetArg = None) -> SkillList:
        """Find expert optimization skills. A deterministic gate keeps the skills whose op classes match the
        task, whose backend and GPU architecture fit and (optionally) which address the bottleneck; a query
        narrows them by keywords. Returns {skills: [...]} best first (by recorded success rate, then mean
        speedup), each with when to use it, guidance, steps, pitfalls, expected gain and an example. Read
        skill://{id} for one skill in full."""
        return await _call(ctx, lambda tb, _: tb.lookup_skills(task, bottleneck, query, backend, limit, preset))

    @tool(annotations=READ_ONLY)
    async def list_tasks(ctx: Context, path: Annotated[str | None, Field(description=(
            "A directory inside the server's roots to search for KernelBench tasks; leave out for the "
            "shipped examples."))] = None) -> TaskList:
        """List tasks to optimize: without path, the shipped example tasks (pass a name as `task`; use preset
        'small' on a server without a GPU); with path, the KernelBench tasks found under that directory."""
        return await _call(ctx, lambda tb, _: tb.list_tasks(path))

    @tool(annotations=READ_ONLY)
    async def get_task(task: TaskArg, ctx: Context, preset: PresetArg = None) -> TaskInfo:
        """Everything about one task before writing code: the reference source and task.toml, input and output
        shapes and dtypes, parameters, op classes, FLOPs and compulsory bytes, tolerances, presets, and the
        eager baseline time once this server has measured it. For a task sent as source, the returned `task`
        is a short handle to use in later calls."""
        return await _call(ctx, lambda tb, _: tb.get_task(task, preset))

    @tool(annotations=READ_ONLY)
    async def describe_machine(ctx: Context) -> MachineInfo:
        """The hardware your kernel will run on: the CPU (cores, SIMD instruction sets such as AVX2/AVX-512,
        cache sizes, the C++ compiler and torch's parallel backend) and, on a GPU server, the GPU (architecture,
        SM count, shared memory per block with the opt-in maximum, registers and threads per SM, L2 size),
        with the measured ceilings the roofline uses (copy bandwidth, matmul FLOP rate per dtype, launch
        overhead). Call it once before choosing tile sizes, vector widths or thread counts."""
        return await _call(ctx, lambda tb, _: tb.describe_machine())

    @tool(annotations=RECORDS)
    async def distill_skill(
            ctx: Context,
            run: Annotated[str, Field(description="A run directory (kernelskill optimize writes runs/<id>/) inside "
                                      "the server's roots.")],
            node: Annotated[str | None, Field(description=(
                "The node to distill; default: the one whose speedup beat its parent's by the widest "
                "confident margin."))] = None,
            skill_id: Annotated[str | None, Field(description="The draft's id; default learned-<task>-<mechanism>.",
                                                  pattern=r"^[a-z0-9][a-z0-9-]*$")] = None) -> DistilledSkill:
        """Turn a verified node that beat its parent with confidence (its speedup's interval above the parent's)
        into a draft skill: the task's op classes, features and size bounds as preconditions, the measured
        metric changes as its expected effect, the plan as guidance, the node's code as its example. It is
        validated and written to the user's skill directory for a person to review; lookup_skills offers it
        from then on."""
        return await _call(ctx, lambda tb, _: tb.distill_skill(run, node, skill_id))

    @tool(annotations=RECORDS)
    async def record_attempt(
            task: TaskArg, source: SourceArg, ctx: Context,
            skill_id: Annotated[str, Field(description="The id of the skill you applied (from lookup_skills).")],
            outcome: Annotated[Literal[OUTCOMES], Field(description=(
                "success: correct and faster; no_gain: correct but not faster; failure: not correct."))],
            speedup: Annotated[float | None, Field(gt=0, allow_inf_nan=False, description=(
                "Measured speedup; ignored when this server evaluated the same source (it uses its own)."))] = None,
            preset: PresetArg = None) -> RecordedAttempt:
        """Record how applying a skill went, so the skill library learns which skills work (statistics persist
        in the user's skill store and rank future lookups). If this server evaluated the same source on this
        task, its own verdict and measured speedup are used, and a candidate that failed cannot be recorded
        as a success."""
        return await _call(ctx, lambda tb, _: tb.record_attempt(task, source, skill_id, outcome, speedup, preset))


def _add_resources(server: MCPServer, book: SkillBook) -> None:
    for skill in book:
        def read_skill(skill=skill) -> str:
            stats = book.stats.get(skill.id)
            return (skill.as_prompt(full=True) + f"\n\nApplies to: {', '.join(skill.applies_to)}; bottlenecks: "
                    f"{', '.join(skill.bottlenecks)}; arch: {', '.join(skill.arch) or 'any'}.\nRecorded: "
                    + (", ".join(f"{op} on {b} ({a}): {c.succeeded}/{c.tried}" for (op, b, a), c
                                 in sorted(stats.contexts.items())) or "never tried") + ".\n")
        server.add_resource(FunctionResource.from_function(
            read_skill, uri=f"skill://{skill.id}", name=skill.id, title=skill.title, description=skill.summary,
            mime_type="text/markdown"))
    for name in example_names():
        def read_example(name=name) -> str:
            d = example_dir(name)
            toml = d / "task.toml"
            ref = (d / "reference.py").read_text().rstrip()
            text = f"# Example task {name}\n\n## reference.py\n```python\n{ref}\n```\n"
            if toml.is_file():
                text += f"\n## task.toml\n```toml\n{toml.read_text().rstrip()}\n```\n"
            return text
        server.add_resource(FunctionResource.from_function(
            read_example, uri=f"task://{name}", name=f"task-{name}", title=f"Example task {name}",
            description=f"reference.py and task.toml of the example task {name}", mime_type="text/markdown"))


def serve(config: ServerConfig, transport: str = "stdio", http: HttpPolicy | None = None, sock=None) -> None:
    """Run the server until it is stopped (stdio, or HTTP with the policy in ``http``, on ``sock``
    when the caller bound it already)."""
    from kernelskill.evaluate.launch.isolation import prestarting
    server = build_server(config)
    with prestarting():     # an agent calls verify/evaluate again and again: the next worker waits ready
        if transport == "stdio":
            server.run("stdio")
            return
        from .http import HttpPolicy, run_http
        anyio.run(run_http, server, http or HttpPolicy(), sock)

