"""Outputs shared on the GPU (evaluate/worker/handoff.py): the description a candidate's worker writes is
untrusted JSON, so every field is checked before anything is opened. The sharing itself needs a
GPU (tests/adversarial: test_cuda_with_nothing_stored, tests/gpu/test_gpu_memory.py); what can be
checked without one is here."""
from __future__ import annotations

import pytest
import torch

from kernelskill.evaluate.worker import handoff


def good(**over) -> dict:
    d = {"dtype": "float32", "size": [4, 4], "stride": [4, 1], "offset": 0, "device": 0, "handle": "00" * 64,
         "size_bytes": 64, "offset_bytes": 0, "ref_handle": "2f74", "ref_offset": 0, "event": "00" * 64,
         "event_sync": True}
    return {**d, **over}


def test_what_is_not_a_plain_tensor_on_the_workers_device_is_not_shared():
    class Sub(torch.Tensor):
        pass
    assert handoff.describe([torch.zeros(3)], device="cuda") is None          # on the CPU, for a GPU worker
    assert handoff.describe([torch.zeros(3).as_subclass(Sub)], device="cpu") is None
    assert handoff.describe([1.0], device="cpu") is None
    assert handoff.describe([], device="cpu") == []


def test_a_cpu_output_opens_in_another_process_as_the_same_memory(tmp_path):
    # The reference worker is another process: share in a child, open here, see its numbers.
    import json
    import subprocess
    import sys
    script = tmp_path / "share.py"
    script.write_text(
        "import json, sys, torch\n"
        "from kernelskill.evaluate.worker import handoff\n"
        "x = torch.arange(24, dtype=torch.float32).reshape(4, 6)\n"
        "outs = [x.t(), torch.tensor([7, 8], dtype=torch.int64), torch.empty(0, 3)]\n"
        "print(json.dumps(handoff.describe(outs, device='cpu')), flush=True)\n"
        "sys.stdin.readline()          # held until the other side has read it, as the worker does\n")
    child = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        desc = json.loads(child.stdout.readline())
        assert desc[0]["device"] == "cpu" and desc[0]["stride"] == [1, 6]         # a transposed view, as it was
        got = handoff.open_outputs(desc, "cpu")
        assert torch.equal(got[0], torch.arange(24, dtype=torch.float32).reshape(4, 6).t())
        assert torch.equal(got[1], torch.tensor([7, 8])) and got[2].shape == (0, 3)
        # A view past the end of the shared memory is refused, not read.
        with pytest.raises(handoff.Unreadable):
            handoff.open_outputs([{**desc[1], "size": [1000]}], "cpu")
        with pytest.raises(handoff.Unreadable, match="not torch's shared memory"):
            handoff.open_outputs([{**desc[1], "name": "/etc/passwd"}], "cpu")
        with pytest.raises(handoff.Unreadable, match="opened on cuda"):
            handoff.open_outputs([desc[1]], "cuda:0")
        del got
    finally:
        child.communicate("done\n", timeout=60)


@pytest.mark.parametrize("bad, why", [
    ("not a list", "not a list"),
    ([good(dtype="object")], "no known dtype"),
    ([good(dtype=None)], "no known dtype"),
    ([good(size="4x4")], "size is not a list of integers"),
    ([good(size=[4, True])], "size is not a list of integers"),
    ([good(stride=[4.0, 1])], "stride is not a list of integers"),
    ([good(offset=-1)], "non-negative integers"),
    ([good(size_bytes="64")], "non-negative integers"),
    ([good(device=3)], "on cuda:3"),
    ([good(handle="zz")], "handle"),
    ([good(handle=12)], "handle is not a hex string"),
    ([good(event=[1])], "event is not a hex string"),
    ([{"empty": True, "dtype": "float32", "size": [4, 4]}], "must hold a 0"),
])
def test_a_description_that_is_not_plain_data_is_refused_before_anything_opens(bad, why, monkeypatch):
    opened = []
    monkeypatch.setattr(torch.UntypedStorage, "_new_shared_cuda", lambda *a: opened.append(a), raising=False)
    with pytest.raises(handoff.Unreadable, match=why):
        handoff.open_outputs(bad, "cuda:0")
    assert opened == []


def test_an_empty_output_needs_no_handle():
    t, = handoff.open_outputs([{"empty": True, "dtype": "int64", "size": [0, 3]}], "cpu")
    assert t.shape == (0, 3) and t.dtype == torch.int64


def test_cpu_outputs_too_large_for_dev_shm_go_through_a_file(monkeypatch):
    # A tmpfs past its size kills the process that touches the page (SIGBUS): a container's /dev/shm
    # of 64 MB must never be filled with a candidate's outputs; they take the file instead.
    import os
    from types import SimpleNamespace
    monkeypatch.setattr(os, "statvfs", lambda path: SimpleNamespace(f_bavail=16, f_frsize=4096))   # 64 KB free
    assert handoff.describe([torch.zeros(1 << 14)], device="cpu") is None                   # 64 KB, twice over: no
    assert handoff.describe([torch.zeros(1 << 10)], device="cpu") is not None               # 4 KB: yes
