"""Where a compile error's seconds go: the failing unit's compiler alone, beside `import torch`s, and
the whole `compile()` with a cold worker and a worker ahead — each timed with the host's pressure
around it.

On the H100 host (session 20) a typo in a CUDA candidate's host function came back in 3.7 s of
build with a cold worker but 6.7 s with workers ahead (5.5 s when the next worker started after the
build). This probe told the candidate causes apart in one run (docs/evaluator.md, "The quiet H100
run"): none of them — the compiler is CPU-bound and alone, and the 6.7 s was the profiling worker's
build ahead of the run worker's in ``evaluate()``, fixed since. Its rows:

- ``bare``: the failing unit's own command (its ``.cmd`` in the build folder), run from here;
- ``bare + N imports``: the same beside N fresh ``import torch`` processes (what a replacement
  spare does while the taken worker builds);
- ``bare, spares ready``: the same while idle workers started ahead wait (imported, ready);
- ``bare, context in the PCH``: a CUDA host unit against a precompiled header that also holds
  ``ATen/cuda/CUDAContext.h`` (the light one lacks it, so a host unit built against it parses that
  and cuBLAS's, cuSPARSE's, cuSOLVER's headers). Builds use such a header by default now, so the
  ``bare`` rows match this one;
- ``compile cold | ahead``: ``kernelskill.evaluate.compile`` of a new typo source. (The "ahead-late"
  mode, the next worker started after the build, was an experiment and is gone with its switch.)

The bare rows also give the compiler's CPU seconds (well below its wall time: it waited). Each row
carries, over its own seconds: the CPU and memory pressure stall (``/proc/pressure``: the
share of the time some task waited for a CPU, or for memory), the cgroup's throttled seconds, the
machine's busy cores. JSON after every row (a run cut off keeps what it measured).

    python benchmarks/probe_typo_latency.py [--device cpu|cuda] [--repeat 3] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import torch  # noqa: E402

from build_cost import CPP_FLAGS, source, stop_on_sigterm  # noqa: E402
from kernelskill import Candidate  # noqa: E402
from kernelskill.evaluate import compile
from kernelskill.evaluate.launch import isolation
from kernelskill.evaluate.build import direct as toolchain  # noqa: E402
from kernelskill.evaluate import host as hostinfo  # noqa: E402
from kernelskill.evaluate.build.extensions import build_root  # noqa: E402


def pressure() -> dict[str, float]:
    """Cumulative stall seconds from /proc/pressure (``some``: at least one task waited), per resource."""
    out = {}
    for res in ("cpu", "memory", "io"):
        try:
            line = Path(f"/proc/pressure/{res}").read_text().splitlines()[0]
        except (OSError, IndexError):
            continue
        out[res] = int(dict(kv.split("=") for kv in line.split()[1:])["total"]) / 1e6
    return out


class Around:
    """The host over one measurement: pressure stalls as a share of its seconds, throttling, busy cores."""

    def __enter__(self):
        self.t, self.p, self.th, self.b = time.monotonic(), pressure(), hostinfo.cpu_throttled_s(), hostinfo._cpu_busy_s()
        return self

    def __exit__(self, *exc):
        dt = max(1e-6, time.monotonic() - self.t)
        p1, th1, b1 = pressure(), hostinfo.cpu_throttled_s(), hostinfo._cpu_busy_s()
        self.host = {f"{k}_stall": round((p1[k] - self.p[k]) / dt, 3) for k in p1 if k in self.p}
        if th1 is not None and self.th is not None:
            self.host["throttled_s"] = round(th1 - self.th, 3)
        if b1 is not None and self.b is not None:
            self.host["busy_cores"] = round((b1 - self.b) / dt, 2)
        return False


def failing_unit(res) -> tuple[Path, str]:
    """The build folder and the name of the unit whose failure ended ``res``'s build."""
    name = next(text.split(" failed after")[0] for _, text in reversed(res.steps) if " failed after" in text)
    return build_root() / res.extensions[0], name


def run_timed(cmd: list[str], cwd: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one compiler run: CPU well below wall is time spent waiting."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, capture_output=True)
    wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def bare(folder: Path, unit: str, imports: int, device: str) -> tuple[float, float]:
    """The unit's compiler run again by hand, beside ``imports`` fresh `import torch` processes:
    (wall, CPU) seconds of the compiler."""
    cmd = shlex.split((folder / (unit.rsplit(".", 1)[0] + ".cmd")).read_text())
    code = "import torch" + ("; torch.cuda.init()" if device.startswith("cuda") else "")
    others = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(imports)]
    out = run_timed(cmd, folder)
    for p in others:
        p.wait()
    return out


def context_pch(folder: Path, unit: str, where: Path) -> tuple[list[str], float] | None:
    """The unit's command against a precompiled header that also holds CUDA's runtime and
    ATen/cuda/CUDAContext.h (which a CUDA host unit includes and the light header lacks), and the
    seconds making that header took; None for a unit that does not include CUDAContext.h."""
    if "ATen/cuda/CUDAContext.h" not in (folder / unit).read_text():
        return None
    cmd = shlex.split((folder / (unit.rsplit(".", 1)[0] + ".cmd")).read_text())
    light = next(Path(c[2:]) for c in cmd if c.startswith("-I") and Path(c[2:], "cmd.json").exists())
    header = where / "torch" / "extension.h"
    header.parent.mkdir(parents=True, exist_ok=True)
    header.write_text(toolchain.CUDA_HOST_HEADER)
    t = time.perf_counter()
    made = subprocess.run([*json.loads((light / "cmd.json").read_text()), "-x", "c++-header", str(header), "-o",
                           str(header.with_name("extension.h.gch"))], capture_output=True, text=True)
    if made.returncode != 0:
        print("  the CUDA-context header did not precompile: " + made.stderr[-400:], flush=True)
        return None
    return [f"-I{where}" if c == f"-I{light}" else c for c in cmd], time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", help="rewritten after every row")
    args = ap.parse_args()
    stop_on_sigterm()
    backend = "cuda" if args.device.startswith("cuda") else "cpp"
    toolchain.warm(build_root(), [CPP_FLAGS], say=lambda t: print("  " + t, flush=True))
    compile(Candidate.from_source(source(backend, "warm-" + uuid.uuid4().hex[:6])), device=args.device)
    rows: list[dict] = []

    def record(label: str, seconds: float, call: float | None, host: dict, steps=None,
               cpu: float | None = None) -> None:
        rows.append({"row": label, "build_s": round(seconds, 3), "call_s": None if call is None else round(call, 3),
                     "compiler_cpu_s": None if cpu is None else round(cpu, 3), "host": host, "steps": steps})
        print(f"  {label:<26} build {seconds:6.2f} s" + (f"  call {call:6.2f} s" if call is not None else "")
              + (f"  compiler CPU {cpu:5.2f} s" if cpu is not None else "")
              + "  " + " ".join(f"{k} {v}" for k, v in host.items()), flush=True)
        if args.json:
            tmp = Path(args.json).with_suffix(".tmp")
            tmp.write_text(json.dumps({"device": args.device, "backend": backend, "cpu_quota": hostinfo.cpu_quota(),
                                       "cores": os.cpu_count(), "rows": rows}, indent=2))
            os.replace(tmp, args.json)

    try:
        first = compile(Candidate.from_source(source(backend, uuid.uuid4().hex[:10], change="typo")),
                        device=args.device)
        folder, unit = failing_unit(first)
        print(f"the typo fails in {unit} ({folder})", flush=True)
        for imports in (0, 1, 3):
            for _ in range(args.repeat):
                with Around() as a:
                    s, cpu = bare(folder, unit, imports, args.device)
                record(f"bare + {imports} imports" if imports else "bare", s, None, a.host, cpu=cpu)
        with isolation.prestarting(True):          # idle workers started ahead, ready: do they cost the compiler?
            compile(Candidate.from_source(source(backend, "warm1-" + uuid.uuid4().hex[:6])), device=args.device)
            isolation.wait_for_spares()
            for _ in range(args.repeat):
                with Around() as a:
                    s, cpu = bare(folder, unit, 0, args.device)
                record("bare, spares ready", s, None, a.host, cpu=cpu)
        ctx = context_pch(folder, unit, build_root() / f"probe-context-{uuid.uuid4().hex[:6]}")
        if ctx is not None:
            cmd, made_s = ctx
            print(f"  the CUDA-context header precompiled in {made_s:.1f} s", flush=True)
            for _ in range(args.repeat):
                with Around() as a:
                    s, cpu = run_timed(cmd, folder)
                record("bare, context in the PCH", s, None, a.host, cpu=cpu)
        for workers in ("cold", "ahead"):
            with isolation.prestarting(workers != "cold"):
                if workers != "cold":       # a first call starts the spares the timed calls take
                    compile(Candidate.from_source(source(backend, "warm2-" + uuid.uuid4().hex[:6])), device=args.device)
                for _ in range(args.repeat):
                    isolation.wait_for_spares()
                    src = source(backend, uuid.uuid4().hex[:10], change="typo")
                    with Around() as a:
                        t = time.perf_counter()
                        res = compile(Candidate.from_source(src), device=args.device)
                        call = time.perf_counter() - t
                    assert not res.ok, res.to_dict()
                    record(f"compile {workers}", res.seconds, call, a.host, res.steps)
    except KeyboardInterrupt:
        print("  interrupted: the rows so far follow", flush=True)
    isolation.stop_spares()
    print(f"\n{hostinfo.host_line(hostinfo.host_busy_cores(), 'after the run')}\n")
    print("| row | n | build (s), median | call (s), median | compiler CPU (s) | cpu stall | memory stall | "
          "io stall |")
    print("|---|---|---|---|---|---|---|---|")
    for label in dict.fromkeys(r["row"] for r in rows):
        rs = [r for r in rows if r["row"] == label]
        med = lambda key: statistics.median(r[key] for r in rs)  # noqa: E731
        around = lambda key: f"{statistics.median(r['host'].get(key, 0.0) for r in rs):.2f}"  # noqa: E731
        call = f"{med('call_s'):.2f}" if rs[0]["call_s"] is not None else "-"
        cpu = f"{med('compiler_cpu_s'):.2f}" if rs[0]["compiler_cpu_s"] is not None else "-"
        print(f"| {label} | {len(rs)} | {med('build_s'):.2f} | {call} | {cpu} | {around('cpu_stall')} | "
              f"{around('memory_stall')} | {around('io_stall')} |")


if __name__ == "__main__":
    main()
