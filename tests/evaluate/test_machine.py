"""The machine profile the agents are told (issue 21 item 1): real facts of this machine, read once
and cached, rendered as the prompt's lines."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from kernelskill.evaluate import api
from kernelskill.evaluate import machine as mach
from kernelskill.evaluate.api import Options


def test_cpu_facts_are_this_machines():
    facts = mach.cpu_facts()
    assert facts["logical_cores"] == os.cpu_count()
    assert facts["usable_cores"] == len(os.sched_getaffinity(0))
    assert 1 <= (facts["physical_cores"] or 1) <= facts["logical_cores"]
    flags = set(re.search(r"^flags\s*:(.*)$", open("/proc/cpuinfo").read(), re.M).group(1).split())
    assert facts["isa"] and set(facts["isa"]) <= flags and ("avx2" in flags) == ("avx2" in facts["isa"])
    assert "L1d" in facts["caches"] and re.fullmatch(r"\d+ (KiB|MiB)( .*)?", facts["caches"]["L1d"])
    version = subprocess.run(["c++", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    assert facts["compiler"] == version
    import torch
    assert facts["parallel_backend"] in torch.__config__.parallel_info() and facts["torch"] == torch.__version__


def test_the_profile_is_read_once_per_machine_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELSKILL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(api, "ceilings", lambda device, env, opts, refresh=False: {"bandwidth": 5e10,
                                                                                   "peak_flops": {"float32": 2e11},
                                                                                   "launch_us": 2.5})
    first = api.machine("cpu", Options(device="cpu"))
    stored = list((tmp_path / "cache" / "machine").glob("*.json"))
    assert len(stored) == 1 and json.loads(stored[0].read_text())["cpu"] == first["cpu"]
    monkeypatch.setattr(mach, "cpu_facts", lambda: pytest.fail("measured again although cached"))
    again = api.machine("cpu", Options(device="cpu"))
    assert again["cpu"] == first["cpu"] and again["ceilings"]["bandwidth"] == 5e10
    monkeypatch.setattr(mach, "cpu_facts", lambda: {**first["cpu"], "model": "re-measured"})
    assert api.machine("cpu", Options(device="cpu"), refresh=True)["cpu"]["model"] == "re-measured"
    text = mach.render(again, "cpp")
    assert f"{os.cpu_count()} logical" in text and "SIMD: " in text and first["cpu"]["compiler"] in text
    assert "copy bandwidth 50.0 GB/s" in text and "float32 matmul 0.2 TFLOP/s" in text and "2.5 µs" in text


def test_a_gpu_profile_renders_the_numbers_a_cuda_author_needs():
    profile = {"cpu": {"model": "Xeon", "usable_cores": 16, "compiler": "c++ 12"},
               "gpu": {"name": "NVIDIA H100 80GB HBM3", "arch": "sm_90", "capability": "9.0", "sms": 132,
                       "smem_per_block": 48 << 10, "smem_per_block_optin": 227 << 10, "smem_per_sm": 228 << 10,
                       "regs_per_sm": 65536, "regs_per_block": 65536, "max_threads_per_sm": 2048, "warp_size": 32,
                       "l2_bytes": 50 << 20, "memory_bytes": 80 << 30, "cuda": "13.0"},
               "ceilings": {"bandwidth": 3.0e12, "peak_flops": {"float32": 5.1e13, "bfloat16": 7.0e14}}}
    text = mach.render(profile, "cuda")
    for part in ("NVIDIA H100 80GB HBM3, sm_90", "132 SMs", "L2 50 MiB", "shared memory 48 KiB",
                 "227 KiB with cudaFuncAttributeMaxDynamicSharedMemorySize", "65536 registers", "2048 threads",
                 "copy bandwidth 3.00 TB/s", "bfloat16 matmul 700 TFLOP/s"):
        assert part in text, (part, text)
    assert "SIMD" not in text                    # a GPU prompt names the host in one line
    del profile["gpu"]["regs_per_block"]         # a field this torch does not report is left out, not '?'
    assert "?" not in mach.render(profile, "cuda")
    assert "SIMD" in mach.render(profile, "cpp")


def test_the_machine_command_prints_and_refreshes(tmp_path):
    env = {**os.environ, "KERNELSKILL_CACHE": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-m", "kernelskill", "machine", "--device", "cpu", "--json"],
                         capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["cpu"]["logical_cores"] == os.cpu_count() and data["ceilings"]["bandwidth"] > 0
    text = subprocess.run([sys.executable, "-m", "kernelskill", "machine", "--device", "cpu"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert text.returncode == 0 and "cores usable" in text.stdout and "measured ceilings" in text.stdout
