"""Can CUPTI's set-up happen at a worker's start without slowing the timing that follows?
One fresh process per variant: CUDA init; then ``early`` runs a profiler session on a tiny op
before anything else, ``late`` after the timed kernels ran once, ``none`` never; then a
launch-bound model (20 small relus) and a 256 MB relu are timed with the evaluator's time_pair.

    python3 benchmarks/probe_profiler_early.py none|early|late
"""
import statistics, sys, time
import torch
from torch.profiler import ProfilerActivity, profile
from kernelskill.evaluate.worker.timing import TimingConfig, time_pair
v = sys.argv[1]
torch.zeros(1, device="cuda"); torch.cuda.synchronize()
def session():
    t = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
        torch.zeros(8, device="cuda").add_(1); torch.cuda.synchronize()
    p.events()
    return round(time.perf_counter() - t, 2)
cost = session() if v == "early" else None
small = torch.randn(1024, device="cuda"); big = torch.randn(1 << 26, device="cuda")
class M(torch.nn.Module):
    def __init__(s, n): super().__init__(); s.n = n
    def forward(s, x):
        for _ in range(s.n): x = torch.relu(x)
        return x
with torch.no_grad():
    M(20)(small); M(1)(big); torch.cuda.synchronize()
    if v == "late":
        cost = session()
    out = []
    for _ in range(3):
        r = time_pair({"launch": M(20), "big": M(1)}, [[small]], "cuda", TimingConfig())
        rb = time_pair({"big": M(1)}, [[big]], "cuda", TimingConfig())
        out.append((round(statistics.median(r["times"]["launch"]["ms"]) * 1e3, 2),
                    round(statistics.median(rb["times"]["big"]["ms"]) * 1e3, 2)))
print(f"{v}: session cost {cost} s; (launch-bound µs, 256 MB relu µs) ×3: {out}", flush=True)
