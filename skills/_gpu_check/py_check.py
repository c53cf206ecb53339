import tomllib, pathlib, torch, traceback
import torch.nn.functional as F
root = pathlib.Path(__file__).resolve().parent.parent
import importlib.util, tempfile
tmp = pathlib.Path(tempfile.mkdtemp())
def load(sid):
    d = tomllib.loads((root / f"{sid}.toml").read_text())
    if d["example_lang"] == "triton":
        f = tmp / (sid.replace("-", "_") + ".py"); f.write_text(d["example"])
        spec = importlib.util.spec_from_file_location(f.stem, f); mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod); return vars(mod)
    ns = {"__name__": "__main__"}
    exec(compile(d["example"], sid, "exec"), ns)
    return ns
dev = "cuda"
torch.manual_seed(0)
def report(name, ok, info=""):
    print(("PASS " if ok else "FAIL ") + name, info)
def run(name, fn):
    try: fn()
    except Exception: report(name, False, traceback.format_exc()[-1500:])

def t_autotune():
    ns = load("triton-autotune-block-sizes")
    for n in (1000, 100003):
        x, g = torch.randn(n, device=dev), torch.randn(n, device=dev)
        y = ns["silu_mul"](x, g); ref = F.silu(x) * g
        report("triton autotune silu_mul", torch.allclose(y, ref, atol=1e-5, rtol=1e-5), (y - ref).abs().max().item())
def t_rms():
    ns = load("triton-num-warps-stages")
    for cols in (100, 3000, 10000):
        x, w = torch.randn(7, cols, device=dev), torch.randn(cols, device=dev)
        y = ns["rmsnorm"](x, w); ref = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w
        report(f"triton rmsnorm {cols}", torch.allclose(y, ref, atol=1e-4, rtol=1e-4), (y - ref).abs().max().item())
def t_mm():
    ns = load("triton-matmul-grouped")
    for M, N, K in ((100, 70, 50), (512, 256, 300)):
        x, w, b = torch.randn(M, K, device=dev), torch.randn(N, K, device=dev), torch.randn(N, device=dev)
        y = ns["linear_relu"](x, w, b); ref = torch.relu(F.linear(x.double(), w.double(), b.double())).float()
        report(f"triton linear_relu {M}x{N}x{K}", torch.allclose(y, ref, atol=1e-3, rtol=1e-3), (y - ref).abs().max().item())
def t_softmax():
    ns = load("triton-row-softmax")
    x = torch.randn(4, 5, 1000, device=dev)
    y = ns["scaled_softmax"](x, 0.3); ref = torch.softmax(x * 0.3, -1)
    report("triton scaled softmax", torch.allclose(y, ref, atol=1e-6, rtol=1e-4), (y - ref).abs().max().item())
    xt = torch.randn(1000, 6, device=dev).t()
    y = ns["scaled_softmax"](xt, 1.0); ref = torch.softmax(xt, -1)
    report("triton scaled softmax noncontig", torch.allclose(y, ref, atol=1e-6, rtol=1e-4))
def t_masks():
    ns = load("triton-masks-and-offsets")
    x, b = torch.randn(33, 2500, device=dev), torch.randn(2500, device=dev)
    y = ns["add_bias_rows"](x, b); report("triton add_bias_rows", torch.equal(y, x + b))
def t_cublas():
    ns = load("cublas-fused-epilogue")
    m = ns["ModelNew"](64, 48).to(dev); x = torch.randn(3, 5, 64, device=dev)
    with torch.no_grad():
        y = m(x); ref_t = F.gelu(m.linear(x), approximate="tanh"); ref_e = F.gelu(m.linear(x))
    report("cublas epilogue vs tanh gelu", torch.allclose(y, ref_t, atol=1e-5, rtol=1e-4), f"tanh err {(y-ref_t).abs().max().item():.3g} erf err {(y-ref_e).abs().max().item():.3g}")
def t_hostsync():
    ns = load("avoid-host-sync-and-allocation")
    m = ns["ModelNew"](64, 32, 0.5).to(dev); x = torch.randn(8, 64, device=dev)
    with torch.no_grad(): report("host-sync example", torch.allclose(m(x), torch.relu(m.linear(x)) * 0.5, atol=1e-5))
def t_main_examples():
    for sid in ("algebraic-simplification", "fold-batchnorm-into-conv", "rnn-hoist-input-projection", "conv-aten-fused-ops"):
        load(sid); report(sid + " self-check", True)
for f in (t_autotune, t_rms, t_mm, t_softmax, t_masks, t_cublas, t_hostsync, t_main_examples):
    run(f.__name__, f)
