"""A worked MCP session: an agent improving softmax_rows through the tools, played for real.

    KERNELSKILL_CACHE=.kernelskill-cache python benchmarks/mcp_transcript.py [--threads 1] [--preset small] [--json OUT]

The SDK's in-memory ``mcp.Client`` talks to the server object (``build_server``, configured as
``kernelskill mcp --root .`` is on a CPU-only machine: C++ candidates, 5 trials, the default
timing protocol) and plays the agent:

    list_tasks → get_task(softmax_rows) → lookup_skills(backend=cpp) → evaluate a naive C++ softmax
    → read its profile → evaluate the shipped OpenMP solution → record_attempt

It prints a markdown transcript: each call's arguments (sources abbreviated) and the key fields of
its structured result. docs/mcp.md ("A worked session") is this output. Skill statistics go to a
throwaway ``$KERNELSKILL_HOME`` (your own store is not touched) unless ``--keep-home`` is given.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent
TASK = "softmax_rows"
OPENMP = ROOT / "examples" / TASK / "solutions" / "cpp_softmax_openmp.py"

# The agent's first try: correct and simple, per row three plain passes (max, exp and sum, scale),
# one thread, the compiler's default flags.
NAIVE = r'''"""First try: row softmax in plain C++, three passes per row, one thread."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor softmax_naive(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32, "float32 CPU tensor expected");
    x = x.contiguous();
    auto y = torch::empty_like(x);
    const int64_t D = x.size(-1);
    const int64_t rows = D ? x.numel() / D : 0;
    const float* xp = x.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = xp + r * D;
        float* yr = yp + r * D;
        float m = -INFINITY;
        for (int64_t i = 0; i < D; ++i) m = std::max(m, xr[i]);
        float s = 0.0f;
        for (int64_t i = 0; i < D; ++i) { yr[i] = std::exp(xr[i] - m); s += yr[i]; }
        for (int64_t i = 0; i < D; ++i) yr[i] /= s;
    }
    return y;
}
"""

_ext = load_inline(name="softmax_rows_naive_transcript", cpp_sources=_SRC,
                   functions=["softmax_naive"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _ext.softmax_naive(x)
'''


def short(value, width: int = 60) -> str:
    """An argument as the transcript shows it: sources by their first line and length."""
    if isinstance(value, str) and "\n" in value:
        lines = value.strip().splitlines()
        return f"<source: {lines[0][:width]!s}… ({len(lines)} lines)>"
    return json.dumps(value)


def clip(text: str, n: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[:n - 1] + "…"


class Transcript:
    def __init__(self, client):
        self.client, self.lines, self.calls = client, [], []

    def out(self, *lines: str) -> None:
        self.lines.extend(lines)

    async def call(self, tool: str, args: dict, note: str = "") -> dict:
        shown = ", ".join(f"{k}={short(v)}" for k, v in args.items())
        t0 = time.perf_counter()
        res = await self.client.call_tool(tool, args)
        dt = time.perf_counter() - t0
        self.calls.append({"tool": tool, "seconds": round(dt, 2), "is_error": res.is_error})
        self.out("", f"**{len(self.calls)}. `{tool}({shown})`** — {dt:.1f} s" + (f" — {note}" if note else ""), "")
        if res.is_error:
            self.out(f"- tool error: {clip(res.content[0].text if res.content else '')}")
            raise SystemExit(f"{tool} failed: {res.content[0].text if res.content else ''}")
        return res.structured_content

    def evaluation(self, ev: dict) -> None:
        r = ev["result"]
        p = r.get("profile") or {}
        self.out(f"- status: `{ev['status']}`, correct: {ev['correct']}")
        v = r.get("verify") or {}
        if v:
            self.out(f"- verify: {len(v.get('trials', []))} trials, max abs err {v.get('max_abs_err'):.2e}, "
                     f"max rel err {v.get('max_rel_err'):.2e} (atol {v.get('atol')}, rtol {v.get('rtol')})")
        if v.get("mismatch"):
            self.out(f"- mismatch: {clip(v['mismatch'], 400)}")
        if p.get("candidate") and p.get("baseline"):
            ci = p.get("speedup_ci") or []
            ci_text = f" (95 % interval {ci[0]:.2f}–{ci[1]:.2f})" if len(ci) == 2 else ""
            sp = ev["speedup"]
            self.out(f"- speedup: **{sp:.2f}×**{ci_text}; candidate median {p['candidate']['median_ms']:.4g} ms "
                     f"(n={p['candidate']['n']}), eager {p['baseline']['median_ms']:.4g} ms "
                     f"(n={p['baseline']['n']}), threads: {p.get('threads')}")
        if p.get("custom_share") is not None:
            self.out(f"- custom share: {p['custom_share']:.0%}")
        self.out(f"- summary: {clip(ev['summary'])}", f"- next_step: {clip(ev['next_step'])}")

    def profile(self, ev: dict) -> None:
        p = ev["result"].get("profile") or {}
        self.out("", "*`result.profile`, as the agent reads it:*", "")
        kernels = p.get("kernels") or []
        if kernels:
            self.out("| kernel | calls | ms | share | custom |", "|---|---|---|---|---|")
            for k in kernels[:5]:
                self.out(f"| `{clip(k['name'], 60)}` | {k['calls']} | {k['time_ms']:.4g} | {k['share']:.0%} | "
                         f"{'yes' if k['custom'] else ''} |")
            self.out("")
        self.out(f"- bottleneck: {p.get('bottleneck')}; timer: {p.get('timer') or '—'}")
        if p.get("roofline"):
            self.out(f"- roofline: {clip(json.dumps(p['roofline']), 300)}")
        for n in p.get("notes") or []:
            self.out(f"- note: {clip(n)}")


async def session(server, preset: str, threads: int | None, started: float) -> Transcript:
    from mcp import Client
    async with Client(server) as client:
        t = Transcript(client)
        listed = await t.call("list_tasks", {})
        t.out(f"- {len(listed['tasks'])} tasks: " + ", ".join(
            f"`{e['task']}` ({'/'.join(e['presets']) or 'no presets'})" for e in listed["tasks"]))

        info = await t.call("get_task", {"task": TASK, "preset": preset})
        io = lambda specs: ", ".join(f"{s.get('shape')} {s.get('dtype')}" for s in specs)  # noqa: E731
        t.out(f"- inputs: {io(info['inputs'])}; outputs: {io(info['outputs'])}",
              f"- op classes: {info['op_classes']}; FLOPs {info['flops']:,}; compulsory bytes {info['bytes']:,}; "
              f"tolerance {info['tolerance']}",
              f"- next_step: {clip(info['next_step'])}")

        skills = await t.call("lookup_skills", {"task": TASK, "backend": "cpp", "preset": preset})
        t.out(f"- gate: op classes {skills['op_classes']}, backend `{skills['backend']}`")
        for s in skills["skills"]:
            t.out(f"- `{s['id']}` ({s['category']}): {clip(s['summary'], 160)}")
        ids = [s["id"] for s in skills["skills"]]
        # The shipped solution splits rows across OpenMP threads and vectorizes each row's sweeps; on one
        # thread only the second can pay off, so that is the skill the agent credits.
        wanted = "simd-vectorization" if threads == 1 else "openmp-parallel-for"
        applied = wanted if wanted in ids else ids[0]

        first = await t.call("evaluate", {"task": TASK, "source": NAIVE, "preset": preset},
                             "a naive first candidate")
        t.evaluation(first)
        t.profile(first)

        better_src = OPENMP.read_text()
        better = await t.call("evaluate", {"task": TASK, "source": better_src, "preset": preset},
                              f"rewritten with `{applied}`: "
                              f"`examples/{TASK}/solutions/{OPENMP.name}`")
        t.evaluation(better)
        t.profile(better)

        outcome = "success" if better["status"] == "ok" and (better["speedup"] or 0) > 1 else \
            ("no_gain" if better["status"] == "ok" else "failure")
        rec = await t.call("record_attempt", {"task": TASK, "source": better_src, "skill_id": applied,
                                              "outcome": outcome, "preset": preset})
        st = rec["stats"]
        r3 = lambda x: None if x is None else round(x, 3)  # noqa: E731
        t.out(f"- recorded `{rec['skill_id']}`: outcome `{rec['outcome']}`, op class {rec['op_class']}, speedup "
              f"{r3(rec['speedup'])}, measured_by_server: {rec['measured_by_server']}",
              f"- skill stats now: tried {st['tried']}, succeeded {st['succeeded']}, success rate "
              f"{st['success_rate']}, mean speedup {r3(st['mean_speedup'])}")
        t.out("", f"Whole session: {time.perf_counter() - started:.0f} s wall "
              f"({sum(c['seconds'] for c in t.calls):.0f} s in the {len(t.calls)} tool calls).")
        return t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="small", help="size preset of softmax_rows (default: small)")
    ap.add_argument("--threads", type=int, default=None, help="threads per evaluation worker (default: all "
                    "cores, as kernelskill mcp; 1 keeps timings steady on a busy shared machine)")
    ap.add_argument("--keep-home", action="store_true", help="record into your own $KERNELSKILL_HOME")
    ap.add_argument("--json", type=Path, help="also write the per-call timings here")
    args = ap.parse_args()
    started = time.perf_counter()
    home = None
    if not args.keep_home:
        home = tempfile.TemporaryDirectory(prefix="kernelskill-transcript-home-")
        os.environ["KERNELSKILL_HOME"] = home.name

    from kernelskill.evaluate.api import Options
    from kernelskill.mcp_server.server import build_server
    from kernelskill.mcp_server.toolbox import ServerConfig, Toolbox

    # = kernelskill mcp --root . on a machine without a GPU (threads: all cores unless --threads)
    config = ServerConfig(roots=[ROOT], options=Options(device="cpu", threads=args.threads))
    try:
        with Toolbox.open(config) as tb:
            t = anyio.run(session, build_server(toolbox=tb), args.preset, args.threads, started)
    finally:
        if home is not None:
            home.cleanup()
    import torch
    flags = f"--preset {args.preset}" + (f" --threads {args.threads}" if args.threads else "")
    head = [f"<!-- benchmarks/mcp_transcript.py {flags}; {time.strftime('%Y-%m-%d')}; "
            f"{platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
            f"Python {platform.python_version()} -->"]
    print("\n".join(head + t.lines))
    if args.json:
        args.json.write_text(json.dumps({"calls": t.calls, "seconds": round(time.perf_counter() - started, 1)},
                                        indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
