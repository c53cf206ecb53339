"""Does a finished torch.profiler session slow later CUDA-event timings? A launch-bound model and a
1 ms kernel, timed with the evaluator's time_pair before and after one session.

    python3 benchmarks/probe_profiler_after.py      # a GPU machine
"""
import statistics, time, torch
from kernelskill.evaluate.worker.timing import TimingConfig, time_pair
from torch.profiler import ProfilerActivity, profile
small = torch.randn(1024, device="cuda")
big = torch.randn(8192, 8192, device="cuda")
class M(torch.nn.Module):
    def __init__(s, n): super().__init__(); s.n = n
    def forward(s, x):
        for _ in range(s.n): x = torch.relu(x)
        return x
def med(x, n):
    r = time_pair({"a": M(n), "b": M(n)}, [[x]], "cuda", TimingConfig())
    return round(statistics.median(r["times"]["a"]["ms"]), 4), round(statistics.median(r["times"]["b"]["ms"]), 4)
with torch.no_grad():
    for label in ("before", "before2"):
        print(label, "launch-bound 20 relus", med(small, 20), "big relu", med(big, 1))
    t = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
        M(3)(big); torch.cuda.synchronize()
    print("profile", round(time.perf_counter() - t, 2), "s")
    for label in ("after", "after2"):
        print(label, "launch-bound 20 relus", med(small, 20), "big relu", med(big, 1))
