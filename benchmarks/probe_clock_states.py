"""How an H100's clock states move a compute-bound kernel's time: 3072³ fp32 matmul called back
to back for ~20 s, each call timed with CUDA events; nvidia-smi samples SM clock and power.

    python3 benchmarks/probe_clock_states.py [--seconds 20] [--json OUT]
"""
import argparse, json, subprocess, time
import numpy as np, torch
ap = argparse.ArgumentParser(); ap.add_argument("--seconds", type=float, default=20); ap.add_argument("--json")
args = ap.parse_args()
torch.backends.cuda.matmul.allow_tf32 = False
a, b = torch.randn(3072, 3072, device="cuda"), torch.randn(3072, 3072, device="cuda")
smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active",
                        "--format=csv,noheader,nounits", "-lms", "100"], stdout=subprocess.PIPE, text=True)
CYCLES = 200_000   # torch.cuda._sleep spins this many SM cycles: its time gives the effective clock
t0 = time.perf_counter(); ts, ms, mhz = [], [], []
while time.perf_counter() - t0 < args.seconds:
    s, e, s2, e2 = (torch.cuda.Event(enable_timing=True) for _ in range(4))
    s.record(); a @ b; e.record(); s2.record(); torch.cuda._sleep(CYCLES); e2.record(); e2.synchronize()
    ts.append(time.perf_counter() - t0); ms.append(s.elapsed_time(e)); mhz.append(CYCLES / s2.elapsed_time(e2) / 1e3)
smi.terminate(); samples = smi.communicate()[0].strip().splitlines()
ts, ms, mhz = np.array(ts), np.array(ms), np.array(mhz)
win = []
for w0 in np.arange(0, args.seconds, 0.25):
    m = (ts >= w0) & (ts < w0 + 0.25)
    if m.any(): win.append((round(float(np.median(ms[m])), 4), round(float(np.median(mhz[m])))))
print("per-0.25 s window medians (ms, effective SM MHz):", win)
print("correlation of call time and effective clock:", float(np.corrcoef(ms, mhz)[0, 1]))
print("overall median", float(np.median(ms)), "p10", float(np.percentile(ms, 10)), "p90", float(np.percentile(ms, 90)))
print("nvidia-smi samples (every 10th):"); print("\n".join(samples[::10]))
if args.json:
    json.dump({"windows": win, "samples": samples, "ms": ms.tolist(), "mhz": mhz.tolist(), "t": ts.tolist()}, open(args.json, "w"))
