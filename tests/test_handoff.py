"""Outputs shared on the GPU (evaluate/handoff.py): the description a candidate's worker writes is
untrusted JSON, so every field is checked before anything is opened. The sharing itself needs a
GPU (tests/adversarial: test_cuda_with_nothing_stored, tests/gpu/test_gpu_memory.py); what can be
checked without one is here."""
from __future__ import annotations

import pytest
import torch

from kernelskill.evaluate import handoff


def good(**over) -> dict:
    d = {"dtype": "float32", "size": [4, 4], "stride": [4, 1], "offset": 0, "device": 0, "handle": "00" * 64,
         "size_bytes": 64, "offset_bytes": 0, "ref_handle": "2f74", "ref_offset": 0, "event": "00" * 64,
         "event_sync": True}
    return {**d, **over}


def test_cpu_tensors_and_subclasses_are_not_shared():
    class Sub(torch.Tensor):
        pass
    assert handoff.describe([torch.zeros(3)]) is None
    assert handoff.describe([torch.zeros(3).as_subclass(Sub)]) is None
    assert handoff.describe([1.0]) is None
    assert handoff.describe([]) == []


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
