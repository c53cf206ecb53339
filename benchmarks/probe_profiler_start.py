"""The first torch.profiler session's cost in a fresh process, per activity set (CUPTI set-up).

    python3 benchmarks/probe_profiler_start.py cuda|both      # a GPU machine
"""
import sys, time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
torch.cuda.init(); torch.zeros(1, device="cuda"); torch.cuda.synchronize()
t2 = time.perf_counter()
from torch.profiler import ProfilerActivity, profile
variant = sys.argv[1]
x = torch.randn(16384, 4096, device="cuda")
f = lambda: torch.softmax(x, -1)
f(); torch.cuda.synchronize()
acts = [ProfilerActivity.CUDA] if variant == "cuda" else [ProfilerActivity.CPU, ProfilerActivity.CUDA]
res = []
for i in range(2):
    a = time.perf_counter()
    with profile(activities=acts) as prof:
        for _ in range(3):
            f()
        torch.cuda.synchronize()
    b = time.perf_counter()
    ev = prof.events()
    c = time.perf_counter()
    n = sum(1 for e in ev if e.device_type == torch.autograd.DeviceType.CUDA)
    res.append((round(b - a, 3), round(c - b, 3), n))
print(f"{variant}: import torch {t1-t0:.2f}s, cuda init {t2-t1:.2f}s, profile (run, events, n cuda events) {res}")
