"""The machine profile on a real GPU: the facts a CUDA author needs, read in a worker, cached.

Run on the GPU machine: python3 -m pytest -m gpu -q
"""
from __future__ import annotations

import pytest

from kernelskill.evaluate import api
from kernelskill.evaluate.machine import render

pytestmark = pytest.mark.gpu


def test_gpu_profile_has_the_hardware_and_the_ceilings(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    monkeypatch.setenv("KERNELSKILL_CACHE", str(tmp_path))
    profile = api.machine("cuda", api.Options(device="cuda"))
    gpu = profile["gpu"]
    props = torch.cuda.get_device_properties(0)
    assert gpu["name"] == props.name and gpu["sms"] == props.multi_processor_count > 0
    assert gpu["arch"] == f"sm_{props.major}{props.minor}"
    assert gpu["l2_bytes"] == props.L2_cache_size > 0
    assert gpu["smem_per_block"] > 0 and gpu["smem_per_block_optin"] >= gpu["smem_per_block"]
    assert gpu["regs_per_sm"] > 0 and gpu["memory_bytes"] == props.total_memory
    assert profile["ceilings"]["bandwidth"] > 1e11 and profile["ceilings"]["peak_flops"]["bfloat16"] > 1e13
    text = render(profile, "cuda")
    assert f"{gpu['sms']} SMs" in text and gpu["arch"] in text and "TB/s" in text, text
    print(text)
    # cached: a second call runs no worker
    monkeypatch.setattr(api, "run_worker", lambda *a, **k: pytest.fail("ran a worker although cached"))
    assert api.machine("cuda", api.Options(device="cuda"))["gpu"] == gpu
