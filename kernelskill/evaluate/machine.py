"""The machine a kernel runs on, as a kernel engineer wants it in front of them: what the agents'
prompts say about the hardware.

CPU (read in the parent; no CUDA): model, logical and physical cores and the cores this process
may use, the SIMD instruction sets that matter to a kernel, cache sizes, the C++ compiler
``load_inline`` calls and its version, torch's parallel backend and thread count. GPU (read in a
worker, so the parent never initialises CUDA): name, architecture, SMs, shared memory per block
(default and opt-in) and per SM, registers per SM and per block, L2 size, memory. Beside them, the
evaluator's measured ceilings (copy bandwidth, matmul rate per dtype, per-launch overhead).

Measured once per machine and cached as ``$KERNELSKILL_CACHE/machine/<key>.json`` (``api.machine``);
``kernelskill machine --refresh`` measures again.
"""
from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from pathlib import Path

MACHINE_VERSION = 1
# The instruction sets a CPU kernel's author chooses between, in the order they are usually tried.
CPU_ISA = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
           "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8",
           "asimd", "asimdhp", "sve", "sve2")
_SYS_CPU = Path("/sys/devices/system/cpu")


def _cpuinfo() -> list[dict[str, str]]:
    """/proc/cpuinfo as one dict per logical CPU ([] where there is none)."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return []
    cpus, cur = [], {}
    for line in text.splitlines():
        if not line.strip():
            if cur:
                cpus.append(cur)
            cur = {}
            continue
        key, _, value = line.partition(":")
        cur[key.strip()] = value.strip()
    if cur:
        cpus.append(cur)
    return cpus


def _caches(cpu_dir: Path = _SYS_CPU / "cpu0" / "cache") -> dict[str, str]:
    """{'L1d': '48 KiB', 'L2': '2 MiB', 'L3': '105 MiB shared by 56 CPUs'} from sysfs (empty where absent)."""
    out: dict[str, str] = {}
    for index in sorted(cpu_dir.glob("index*")):
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = (index / "size").read_text().strip()
        except OSError:
            continue
        name = f"L{level}" + {"Data": "d", "Instruction": "i"}.get(kind, "")
        try:
            shared = _count_cpus((index / "shared_cpu_list").read_text().strip())
        except OSError:
            shared = 0
        m = re.fullmatch(r"(\d+)([KMG]?)", size)
        if m:
            size = _bytes(int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2)])
        out[name] = size + (f" shared by {shared} CPUs" if shared > 2 else "")
    return out


def _count_cpus(cpu_list: str) -> int:
    """'0-3,8-11' → 8."""
    n = 0
    for part in cpu_list.split(","):
        a, _, b = part.partition("-")
        if a.strip().isdigit():
            n += (int(b) - int(a) + 1) if b.strip().isdigit() else 1
    return n


def compiler() -> str:
    """The C++ compiler torch's extensions build with (``$CXX``, else ``c++``) and its version line."""
    from .build.tools import cxx as _compiler
    cxx = _compiler()
    path = shutil.which(cxx)
    if path is None:
        return f"{cxx} (not found on PATH: C++ and CUDA candidates cannot build)"
    try:
        first = subprocess.run([path, "--version"], capture_output=True, text=True,
                               timeout=20).stdout.strip().splitlines()
    except (OSError, subprocess.SubprocessError):
        first = []
    return first[0] if first else cxx


def parallel_backend() -> str:
    """torch's ATen parallel backend ('OpenMP', 'native thread pool', …) from ``parallel_info``."""
    import torch
    m = re.search(r"ATen parallel backend:\s*(.+)", torch.__config__.parallel_info())
    return m.group(1).strip() if m else "unknown"


def cpu_facts() -> dict:
    """The host CPU (see the module docstring); read in the calling process, no CUDA."""
    import torch
    info = _cpuinfo()
    first = info[0] if info else {}
    flags = set((first.get("flags") or first.get("Features") or "").split())
    cores = {(c.get("physical id", "0"), c.get("core id")) for c in info if c.get("core id") is not None}
    from . import host
    usable = host.cores()
    return {"model": first.get("model name") or platform.processor() or platform.machine(),
            "arch": platform.machine(), "logical_cores": os.cpu_count(), "physical_cores": len(cores) or None,
            "usable_cores": usable, "cpu_quota": host.cpu_quota(), "isa": [f for f in CPU_ISA if f in flags],
            "caches": _caches(),
            "compiler": compiler(), "parallel_backend": parallel_backend(),
            "torch_threads": torch.get_num_threads(), "torch": torch.__version__}


def gpu_facts(device: str = "cuda") -> dict:
    """The GPU of ``device`` (call in a worker: it initialises CUDA)."""
    import torch
    props = torch.cuda.get_device_properties(torch.device(device))
    get = lambda name: getattr(props, name, None)  # noqa: E731 — fields differ between torch versions
    return {"name": props.name, "capability": f"{props.major}.{props.minor}",
            "arch": f"sm_{props.major}{props.minor}", "sms": props.multi_processor_count,
            "smem_per_block": get("shared_memory_per_block"),
            "smem_per_block_optin": get("shared_memory_per_block_optin"),
            "smem_per_sm": get("shared_memory_per_multiprocessor"),
            "regs_per_sm": get("regs_per_multiprocessor"), "regs_per_block": get("regs_per_block"),
            "max_threads_per_sm": get("max_threads_per_multi_processor"), "warp_size": get("warp_size"),
            "l2_bytes": get("L2_cache_size"), "memory_bytes": props.total_memory,
            "cuda": torch.version.cuda}


# ---- hardware limits beside the measured library rates ------------------------------------------
# FP32 add/multiply/FMA results per clock per SM, by compute capability: the CUDA C++ Programming
# Guide's table "Throughput of Native Arithmetic Instructions" (32-bit floating-point add, multiply,
# multiply-add). sm_80 has 64, sm_86/89/90/100/120 128
# (figures: docs/evaluator.md, "Measurements behind the code").
FP32_LANES_PER_SM = {(5, 0): 128, (5, 2): 128, (5, 3): 128, (6, 0): 64, (6, 1): 128, (6, 2): 128,
                     (7, 0): 64, (7, 2): 64, (7, 5): 64, (8, 0): 64, (8, 6): 128, (8, 7): 128, (8, 9): 128,
                     (9, 0): 128, (10, 0): 128, (10, 3): 128, (12, 0): 128}
# Dense tensor-core FLOP per SM per clock (2 per FMA), from NVIDIA's architecture whitepapers (one
# per architecture; each value reproduces the paper's peak from SMs × this × clock). sm_86/89 as the
# professional parts run them; GeForce parts run fp32 accumulation at half. Architectures not
# listed: unknown (figures: docs/evaluator.md, "Measurements behind the code").
TENSOR_FLOP_PER_SM_CLK = {
    (7, 0): {"float16": 1024}, (7, 2): {"float16": 1024}, (7, 5): {"float16": 1024},
    (8, 0): {"tf32": 1024, "float16": 2048, "bfloat16": 2048},
    (8, 6): {"tf32": 512, "float16": 1024, "bfloat16": 1024},
    (8, 9): {"tf32": 512, "float16": 1024, "bfloat16": 1024},
    (9, 0): {"tf32": 2048, "float16": 4096, "bfloat16": 4096},
}


def gpu_limits(major: int, minor: int, sms: int, clock_mhz: float | None, clock_source: str = "") -> dict:
    """The GPU's hardware arithmetic limits at its maximum SM clock: fp32 FMA peak = SMs × FP32 lanes
    per SM × 2 FLOP × clock, and the dense tensor-core peak per dtype where the architecture's
    per-SM rate is known ("tf32x3": the fp32-equivalent rate of a 3xTF32 split-precision path, a
    third of TF32's). Upper bounds: sustained clocks under tensor-core load are lower."""
    cc = (int(major), int(minor))
    out: dict = {"sm_clock_mhz": clock_mhz, "sms": sms, "unknown": []}
    lanes = FP32_LANES_PER_SM.get(cc)
    src = [f"sm_{cc[0]}{cc[1]}: {sms} SMs at the max SM clock {clock_mhz:g} MHz ({clock_source or 'device'})"
           if clock_mhz else f"sm_{cc[0]}{cc[1]}: {sms} SMs, max SM clock unknown"]
    if lanes and clock_mhz:
        out["fp32_lanes_per_sm"] = lanes
        out["fp32_fma_tflops"] = round(sms * lanes * 2 * clock_mhz * 1e6 / 1e12, 2)
        src.append(f"fp32 FMA: {lanes} lanes per SM (CUDA C++ Programming Guide, arithmetic throughput)")
    else:
        out["fp32_fma_tflops"] = None
        out["unknown"].append("fp32 FMA peak: " + ("FP32 lanes per SM not known for this architecture" if not lanes
                                                   else "max SM clock not readable"))
    tensor = TENSOR_FLOP_PER_SM_CLK.get(cc)
    if tensor and clock_mhz:
        out["tensor"] = {k: round(sms * v * clock_mhz * 1e6 / 1e12, 1) for k, v in tensor.items()}
        if "tf32" in out["tensor"]:
            out["tensor"]["tf32x3"] = round(out["tensor"]["tf32"] / 3, 1)
        src.append("tensor cores: dense FLOP per SM per clock from NVIDIA's architecture whitepapers"
                   + (" (professional parts; GeForce halves fp32 accumulation)" if cc in ((8, 6), (8, 9)) else ""))
    else:
        out["tensor"] = {}
        out["unknown"].append("tensor-core peaks: " + ("this architecture's per-SM rates are not in the table"
                                                       if not tensor else "max SM clock not readable"))
    out["source"] = "; ".join(src)
    return out


def gpu_max_clock_mhz(props=None, uuid: str | None = None) -> tuple[float | None, str]:
    """The GPU's maximum SM clock in MHz and where it was read: torch's device properties
    (``clock_rate``, kHz) where this torch has it, else nvidia-smi's ``clocks.max.sm``."""
    khz = getattr(props, "clock_rate", None) if props is not None else None
    if khz:
        return float(khz) / 1e3, "torch.cuda.get_device_properties().clock_rate"
    from .host import _smi
    q = _smi(["--query-gpu=uuid,clocks.max.sm", "--format=csv,noheader,nounits"])
    want = f"GPU-{uuid}" if uuid and not str(uuid).startswith("GPU-") else uuid
    for line in (q or "").strip().splitlines():
        f = [x.strip() for x in line.split(",")]
        if len(f) == 2 and (want is None or f[0] == want):
            try:
                return float(f[1]), "nvidia-smi clocks.max.sm"
            except ValueError:
                break
    return None, ""


def _cpu_max_mhz(first: dict) -> tuple[float | None, str]:
    """The CPU's maximum clock (MHz) and where it was read: cpufreq's maximum, lscpu's "CPU max MHz",
    the frequency in the model name (nominal), else /proc/cpuinfo's current "cpu MHz" (a lower bound
    under turbo)."""
    try:
        return int((_SYS_CPU / "cpu0" / "cpufreq" / "cpuinfo_max_freq").read_text()) / 1e3, "cpufreq cpuinfo_max_freq"
    except (OSError, ValueError):
        pass
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        m = re.search(r"CPU max MHz:\s*([\d.]+)", text)
        if m and float(m.group(1)) > 0:
            return float(m.group(1)), "lscpu CPU max MHz"
    except (OSError, subprocess.SubprocessError):
        pass
    m = re.search(r"@\s*([\d.]+)\s*GHz", first.get("model name", ""))
    if m:
        return float(m.group(1)) * 1e3, "the model name's nominal clock (turbo may be higher)"
    try:
        return float(first["cpu MHz"]), "/proc/cpuinfo cpu MHz (the clock now; no maximum readable, turbo may be higher)"
    except (KeyError, ValueError):
        return None, ""


def _fma_units(vendor: str, family: int, model: int, avx512: bool) -> tuple[int, int, str]:
    """(FMA units per core, fp32 lanes each, why): the count is in no file; these are the
    microarchitectures' published figures. AMD Zen 4 runs 512-bit FMAs as two 256-bit halves (one
    512-bit-equivalent unit); Zen 1 as two 128-bit halves."""
    if vendor == "AuthenticAMD":
        if avx512:
            return (2, 16, "AMD Zen 5: 2 × 512-bit FMA") if family >= 0x1A else                 (1, 16, "AMD Zen 4: 512-bit FMA as 2 × 256-bit")
        if family == 0x17 and model < 0x30:
            return 1, 8, "AMD Zen 1: 256-bit FMA as 2 × 128-bit"
        return 2, 8, "AMD Zen 2/3: 2 × 256-bit FMA"
    if avx512:
        return 2, 16, "Intel with AVX-512: 2 × 512-bit FMA assumed (Xeon Gold/Platinum and later; some parts have 1)"
    return 2, 8, "Intel since Haswell: 2 × 256-bit FMA"


def cpu_limits(threads: int | None = None) -> dict:
    """The CPU's fp32 FMA peak = cores × FMA units × SIMD fp32 lanes × 2 FLOP × max clock, counting
    the cores ``threads`` can use (hyper-threads share a core's units), from /proc/cpuinfo's flags;
    what cannot be read is said under "unknown"."""
    from . import host
    info = _cpuinfo()
    first = info[0] if info else {}
    flags = set((first.get("flags") or first.get("Features") or "").split())
    physical = len({(c.get("physical id", "0"), c.get("core id")) for c in info if c.get("core id") is not None})
    cores = min(x for x in (threads or host.cores(), host.cores(), physical or host.cores()) if x)
    out: dict = {"cores": cores, "unknown": []}
    mhz, clock_src = _cpu_max_mhz(first)
    out["clock_mhz"] = mhz
    if "fma" not in flags and "avx512f" not in flags:
        out["fp32_fma_tflops"] = None
        isa = "NEON/SVE" if flags & {"asimd", "sve"} else "no FMA instructions in /proc/cpuinfo"
        out["unknown"].append(f"fp32 FMA peak: FMA units per core not known for this CPU ({isa})")
        out["source"] = f"{cores} cores; flags without x86 FMA"
        return out
    try:
        family, model = int(first.get("cpu family", "0")), int(first.get("model", "0"))
    except ValueError:
        family, model = 0, 0
    units, lanes, why = _fma_units(first.get("vendor_id", ""), family, model, "avx512f" in flags)
    isa = "avx512f" if "avx512f" in flags else "avx2+fma" if "avx2" in flags else "fma"
    out.update(fma_units=units, fp32_lanes=lanes, isa=isa)
    if not mhz:
        out["fp32_fma_tflops"] = None
        out["unknown"].append("fp32 FMA peak: the CPU's clock is not readable")
    else:
        out["fp32_fma_tflops"] = round(cores * units * lanes * 2 * mhz * 1e6 / 1e12, 4)
    out["source"] = (f"{cores} cores × {units} FMA units × {lanes} fp32 lanes ({isa}) × 2 FLOP × "
                     f"{mhz or '?'} MHz ({clock_src or 'clock unknown'}); {why}; AVX-512 clocks may run lower")
    return out


def reconcile_limits(limits: dict, peaks: dict) -> dict:
    """A hardware limit is never below what a library reached on the device: a limit the measured
    matmul rate (``peaks``, FLOP/s) beats was computed from a clock below the one it ran at (a CPU
    whose /proc/cpuinfo shows its nominal clock under turbo). Such a limit is withdrawn to
    "unknown", with the clock the measured rate implies; the others stay."""
    out = {**limits, "unknown": list(limits.get("unknown") or []), "tensor": dict(limits.get("tensor") or {})}
    fma, rate = out.get("fp32_fma_tflops"), (peaks or {}).get("float32")
    if fma and rate and rate / 1e12 > fma:
        clock = out.get("clock_mhz") or out.get("sm_clock_mhz")
        implied = f"; ≥ {clock * rate / 1e12 / fma:.0f} MHz implied" if clock else ""
        out["fp32_fma_tflops_at_clock_read"], out["fp32_fma_tflops"] = fma, None
        out["unknown"].append(f"fp32 FMA peak: the measured fp32 matmul ({rate / 1e12:.4g} TFLOP/s) beats the "
                              f"{fma:.4g} TFLOP/s computed at the clock read ({clock} MHz): it runs faster than that "
                              f"clock{implied}, and the max clock is not readable")
    for k, v in list(out["tensor"].items()):
        got = (peaks or {}).get({"tf32x3": ""}.get(k, k))
        if got and got / 1e12 > v:
            del out["tensor"][k]
            out["unknown"].append(f"{k} tensor-core peak: the measured matmul ({got / 1e12:.4g} TFLOP/s) beats the "
                                  f"{v:.4g} TFLOP/s computed")
    return out


def llc_bytes(cpu_dir: Path = _SYS_CPU / "cpu0" / "cache") -> int | None:
    """The size of the CPU's last-level cache (the highest level sysfs lists) in bytes, None where unreadable."""
    best: tuple[int, int] | None = None
    for index in cpu_dir.glob("index*"):
        try:
            if (index / "type").read_text().strip() == "Instruction":
                continue
            level = int((index / "level").read_text())
            m = re.fullmatch(r"(\d+)([KMG]?)", (index / "size").read_text().strip())
        except (OSError, ValueError):
            continue
        if m:
            size = int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2)]
            if best is None or level > best[0]:
                best = (level, size)
    return best[1] if best else None


def cache_key(device: str) -> str:
    """One file per (CPU, device kind, visible GPUs, torch): what the facts depend on."""
    import torch
    cpu = (_cpuinfo() or [{}])[0].get("model name") or platform.processor() or platform.machine()
    kind = device.split(":")[0]
    if kind == "cuda":
        kind += f"-{device.split(':')[1] if ':' in device else '0'}-vis{os.environ.get('CUDA_VISIBLE_DEVICES', 'all')}"
    return re.sub(r"[^A-Za-z0-9]+", "-", f"{cpu}-{kind}-torch{torch.__version__}").strip("-")[:120]


# ---- as text ---------------------------------------------------------------------------------
def _bytes(n: int | None) -> str:
    if not n:
        return "?"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            v = n / size
            return f"{v:.0f} {unit}" if v >= 10 or v == int(v) else f"{v:.1f} {unit}"
    return f"{n} B"


def _ceilings_line(ceil: dict) -> str:
    if not ceil:
        return "measured ceilings: none yet"
    parts = []
    if ceil.get("bandwidth"):
        bw = ceil["bandwidth"] / 1e9
        parts.append(f"copy bandwidth {bw / 1e3:.2f} TB/s" if bw >= 1000 else f"copy bandwidth {bw:.1f} GB/s")
    for dt, rate in (ceil.get("peak_flops") or {}).items():
        parts.append(f"{dt} matmul {rate / 1e12:.3g} TFLOP/s")
    if ceil.get("launch_us"):
        parts.append(f"{ceil['launch_us']:.1f} µs per eager op launch")
    quality = "" if ceil.get("quality", "good") == "good" else f" (measured under load: {ceil['quality']})"
    return "measured ceilings: " + ", ".join(parts) + quality + _limits_text(ceil.get("limits") or {})


def _limits_text(lim: dict) -> str:
    """The hardware limits beside the measured library rates, as one clause."""
    if not lim:
        return ""
    parts = []
    if lim.get("fp32_fma_tflops"):
        parts.append(f"fp32 FMA peak {lim['fp32_fma_tflops']:.3g} TFLOP/s")
    tensor = lim.get("tensor") or {}
    if tensor:
        parts.append("tensor cores " + ", ".join(f"{k} {v:.4g}" for k, v in tensor.items()) + " TFLOP/s")
    parts += list(lim.get("unknown") or [])[:2]
    return ("; hardware limits (computed, not measured): " + "; ".join(parts)) if parts else ""


def render(profile: dict, backend: str) -> str:
    """The profile as the few lines a prompt carries: the GPU first for GPU backends."""
    cpu, gpu = profile.get("cpu") or {}, profile.get("gpu") or {}
    caches = ", ".join(f"{k} {v}" for k, v in (cpu.get("caches") or {}).items()) or "unknown"
    cores = f"{cpu.get('usable_cores')} cores usable"
    if cpu.get("physical_cores") or cpu.get("logical_cores"):
        cores += f" ({cpu.get('physical_cores') or '?'} physical, {cpu.get('logical_cores') or '?'} logical)"
    cpu_lines = [f"CPU: {cpu.get('model', '?')} ({cpu.get('arch', '?')}), {cores}",
                 f"SIMD: {' '.join(cpu.get('isa') or []) or 'none detected'}; caches: {caches}",
                 f"compiler: {cpu.get('compiler', '?')}; torch {cpu.get('torch', '?')} with the "
                 f"{cpu.get('parallel_backend', '?')} parallel backend, {cpu.get('torch_threads', '?')} threads"]
    if backend == "cpp" or not gpu:
        return "\n".join(cpu_lines + [_ceilings_line(profile.get("ceilings") or {})])
    optin = gpu.get("smem_per_block_optin")
    lines = [f"GPU: {gpu.get('name', '?')}, {gpu.get('arch', '?')} (compute capability {gpu.get('capability', '?')}), "
             f"{gpu.get('sms', '?')} SMs, {_bytes(gpu.get('memory_bytes'))} memory, L2 {_bytes(gpu.get('l2_bytes'))}",
             f"per block: shared memory {_bytes(gpu.get('smem_per_block'))}"
             + (f" ({_bytes(optin)} with cudaFuncAttributeMaxDynamicSharedMemorySize)" if optin else "")
             + (f", {gpu['regs_per_block']} registers" if gpu.get("regs_per_block") else "") + "; per SM: shared memory "
             + f"{_bytes(gpu.get('smem_per_sm'))}, {gpu.get('regs_per_sm') or '?'} registers, "
             f"{gpu.get('max_threads_per_sm') or '?'} threads; warp {gpu.get('warp_size') or 32}; CUDA {gpu.get('cuda', '?')}",
             _ceilings_line(profile.get("ceilings") or {}),
             f"host: {cpu.get('model', '?')}, {cpu.get('usable_cores', '?')} cores; compiler {cpu.get('compiler', '?')}"]
    return "\n".join(lines)
