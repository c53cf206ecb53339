"""What the first torch.profiler session's cost depends on, in a fresh process per variant.

    python3 benchmarks/probe_cupti_cost.py VARIANT      # a GPU machine; VARIANT as below
  early    profile a tiny op right after CUDA init (few kernels loaded yet)
  late     profile after a softmax, a matmul and the evaluator's timing loop ran (as the worker does)
  prepare  time torch.profiler's prepare step (CUPTI set-up) separately from the trace
"""
import sys, time
t0 = time.perf_counter()
import torch
from torch.profiler import ProfilerActivity, profile
t1 = time.perf_counter()
torch.zeros(1, device="cuda"); torch.cuda.synchronize()
t2 = time.perf_counter()
v = sys.argv[1]
x = torch.randn(4096, 16384, device="cuda")
def work():
    torch.softmax(x, -1); x[:, :4096] @ x[:4096, :4096]; torch.relu(x) * 2
if v != "early":
    for _ in range(3): work()
    torch.cuda.synchronize()
res = []
for i in range(2):
    a = time.perf_counter()
    p = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    if v == "prepare":
        p._prepare_trace() if hasattr(p, "_prepare_trace") else p.prepare_trace()
        b0 = time.perf_counter()
        p._start_trace() if hasattr(p, "_start_trace") else p.start_trace()
    else:
        p.start(); b0 = time.perf_counter()
    work(); torch.cuda.synchronize()
    p.stop()
    b = time.perf_counter()
    n = sum(1 for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    res.append(dict(setup=round(b0 - a, 3), total=round(b - a, 3), events_s=round(time.perf_counter() - b, 3), n=n))
print(f"{v}: import torch {t1-t0:.2f}s, cuda init {t2-t1:.2f}s, sessions {res}", flush=True)
