"""What the link check of a compile-only build costs (evaluate/build/linkcheck.py; issue 44, item 5).

On a machine without a CUDA torch, a CUDA candidate is compiled only; the link check then resolves
its objects' undefined symbols against torch's libraries, the C/C++ runtimes, Python and nvcc's
libcudart.so. This script measures, on this machine:

- ``fresh``: ``--repeat`` never-built variants of a typical candidate (the relu×2 CUDA candidate of
  tests/evaluate/test_build.py: one kernel, the current stream) through ``kernelskill.evaluate.compile``: the
  whole build and the check's own seconds, as the build reports them (its ``link check`` step);
- ``examples``: each shipped CUDA solution compiled (cached where it was), then the check of its
  objects timed in a new process with torch imported, as in the worker: the libraries' exports
  read from their cache (``_exports/``), the objects' symbols, the verdict;
- ``cold exports``: the libraries' exports read with ``nm`` into an empty cache (once per machine
  and torch).

    python benchmarks/link_check_cost.py [--repeat N] [--json OUT]
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "evaluate"))

TIMED = r"""
import sys, time, json
from pathlib import Path
import torch  # noqa: F401 — the worker has it imported: its libraries are mapped
from kernelskill.evaluate.build import linkcheck
from kernelskill.evaluate.build.extensions import build_root
t0 = time.perf_counter()
objs = [Path(p) for p in sys.argv[1:]]
prov = linkcheck.providers(build_root())
t1 = time.perf_counter()
diags = linkcheck.check(objs, [], "", build_root())
t2 = time.perf_counter()
print(json.dumps({"providers": t1 - t0, "check": t2 - t1, "total": t2 - t0, "errors": len(diags)}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()
    from kernelskill import Candidate
    from kernelskill.evaluate import compile
    from kernelskill.evaluate.build.extensions import build_root
    from kernelskill.evaluate.build import linkcheck
    from test_build import CUDA

    out: dict = {"machine": f"{platform.node()} {os.cpu_count()} cores", "fresh": [], "examples": {}}
    for _ in range(args.repeat):
        res = compile(Candidate.from_source(CUDA.replace("BROKEN", f"  // {uuid.uuid4().hex}")))
        step = next((t for _, t in res.steps if t.startswith("link check")), "")
        secs = float(step.rsplit(", ", 1)[-1].split()[0]) if step else None
        out["fresh"].append({"ok": res.ok, "build_s": res.seconds, "check_s": secs})
        print(f"fresh: ok={res.ok} build {res.seconds:.2f} s, link check {secs} s", flush=True)
    for f in sorted(glob.glob(str(ROOT / "examples/*/solutions/cuda*.py"))):
        res = compile(Candidate.from_file(f))
        d = build_root() / res.extensions[0]
        objs = [str(o) for o in (d / "cuda.o", d / "cuda_host.o") if o.exists()]
        if (d / "cuda.cu").exists() and not (d / "cuda_host.cpp").exists():
            objs = [str(d / "cuda.o")]
        got = json.loads(subprocess.run([sys.executable, "-c", TIMED, *objs], capture_output=True, text=True,
                                        cwd=ROOT, check=True).stdout.strip().splitlines()[-1])
        name = Path(f).parent.parent.name
        out["examples"][name] = {"ok": res.ok, **got}
        print(f"{name}: ok={res.ok} check {got['total']:.3f} s (exports {got['providers']:.3f}, symbols "
              f"{got['check']:.3f}), errors {got['errors']}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        linkcheck._PROVIDERS.clear()
        t = time.perf_counter()
        linkcheck.providers(Path(tmp))
        out["cold_exports_s"] = time.perf_counter() - t
    print(f"cold exports (nm -D of every library, once per machine and torch): {out['cold_exports_s']:.2f} s")
    fresh = [r["check_s"] for r in out["fresh"] if r["check_s"] is not None]
    ex = [r["total"] for r in out["examples"].values()]
    if fresh:
        print(f"fresh: check median {statistics.median(fresh):.2f} s, max {max(fresh):.2f} s; "
              f"build median {statistics.median(r['build_s'] for r in out['fresh']):.2f} s")
    print(f"examples ({len(ex)}): check median {statistics.median(ex):.3f} s, max {max(ex):.3f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
