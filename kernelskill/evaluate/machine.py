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
    cxx = os.environ.get("CXX") or "c++"
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
    from . import quality
    usable = quality.cores()
    return {"model": first.get("model name") or platform.processor() or platform.machine(),
            "arch": platform.machine(), "logical_cores": os.cpu_count(), "physical_cores": len(cores) or None,
            "usable_cores": usable, "cpu_quota": quality.cpu_quota(), "isa": [f for f in CPU_ISA if f in flags],
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
    return "measured ceilings: " + ", ".join(parts) + quality


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
