"""The same candidate evaluated N times, optionally while busy threads compete: speedups, their
intervals and the measurement-quality verdicts (docs/evaluator.md, "Measurement quality").

    python benchmarks/measurement_quality.py --runs 10                       # a quiet machine
    python benchmarks/measurement_quality.py --runs 5 --busy 2               # two competing busy threads
    python benchmarks/measurement_quality.py --device cuda --runs 3 --gpu-hog  # another process on the GPU

Busy threads hash a buffer in a loop (hashlib releases the GIL: each thread is a full core).
``--gpu-hog`` starts a second process that launches matmuls on the same GPU while the evaluations run.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelskill.evaluate.api import Options, evaluate  # noqa: E402
from kernelskill.evaluate.worker.timing import TimingConfig  # noqa: E402
from kernelskill.task import Task  # noqa: E402

HOG = """
import sys, torch
x = torch.randn(8192, 8192, device="cuda")
print("ready", flush=True)
while True:
    for _ in range(20):
        y = x @ x
    torch.cuda.synchronize()
"""


def busy(stop: threading.Event) -> None:
    data = b"x" * (1 << 20)
    while not stop.is_set():
        hashlib.sha256(data).digest()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", default=str(ROOT / "examples/softmax_rows"))
    ap.add_argument("--candidate", default=None, help="default: the task's C++ (cpu) or CUDA (cuda) solution")
    ap.add_argument("--preset", default=None, help="default: small on the CPU, the task's size on a GPU")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--busy", type=int, default=0, help="competing busy threads during the evaluations")
    ap.add_argument("--gpu-hog", action="store_true", help="a second process launching kernels on the GPU")
    ap.add_argument("--retimes", type=int, default=2)
    ap.add_argument("--json", default=None, help="write the rows here too")
    args = ap.parse_args()
    cuda = args.device.startswith("cuda")
    sol = args.candidate or str(Path(args.task) / "solutions" / ("cuda_softmax_regcache.py" if cuda
                                                                  else "cpp_softmax_openmp.py"))
    task = Task.load(args.task, preset=args.preset or (None if cuda else "small"))
    opts = Options(device=args.device, timing=TimingConfig(retimes=args.retimes))
    evaluate(task, Path(sol), opts=opts, timing=None, profile=False)     # build and reference: not timed here
    stop, threads, hog = threading.Event(), [], None
    for _ in range(args.busy):
        t = threading.Thread(target=busy, args=(stop,), daemon=True)
        t.start()
        threads.append(t)
    if args.gpu_hog:
        hog = subprocess.Popen([sys.executable, "-c", HOG], stdout=subprocess.PIPE, text=True)
        hog.stdout.readline()
    rows = []
    try:
        for i in range(args.runs):
            t0 = time.perf_counter()
            r = evaluate(task, Path(sol), opts=opts)
            p = r.profile
            q = p.quality if p else None
            rows.append({"run": i + 1, "status": r.status, "speedup": p.speedup if p else None,
                         "ci": p.speedup_ci if p else None, "verdict": q.verdict if q else None,
                         "rounds": q.rounds if q else None, "reasons": q.reasons if q else [],
                         "history": [h["verdict"] for h in q.history] if q else [],
                         "eager_ms": p.baseline.median_ms if p else None, "seconds": round(time.perf_counter() - t0, 1),
                         "others_cores": (q.metrics.get("host_others_cores") if q else None)})
            row = rows[-1]
            ci = f"[{row['ci'][0]:.2f}–{row['ci'][1]:.2f}]" if row["ci"] else ""
            print(f"{row['run']:>3}  {row['status']:<9} {row['speedup'] or 0:6.2f}× {ci:<13} {row['verdict'] or '-':<10} "
                  f"rounds {'/'.join(row['history']) or '-':<28} eager {row['eager_ms'] or 0:8.4f} ms  "
                  f"others {row['others_cores']}  {row['seconds']} s  {(row['reasons'] or [''])[0][:90]}", flush=True)
    finally:
        stop.set()
        if hog is not None:
            hog.kill()
    sp = [r["speedup"] for r in rows if r["speedup"]]
    if sp:
        print(f"speedups {min(sp):.2f}–{max(sp):.2f}× (median {statistics.median(sp):.2f}); verdicts "
              + ", ".join(f"{v}: {sum(r['verdict'] == v for r in rows)}" for v in ("good", "noisy", "contended")))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
