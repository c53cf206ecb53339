"""The memory plan: trials held by what fits (inputs from seeds, outputs recomputed), nothing
written that is not needed, the plan reported, and a task that cannot fit refused with why."""
from __future__ import annotations

import torch

import pytest

from kernelskill import Candidate
from kernelskill.evaluate import evaluate
from kernelskill.evaluate.api import Options, reference
from kernelskill.evaluate.worker.timing import TimingConfig
from kernelskill.evaluate.worker.trials import GB, describe, make_plan
from kernelskill.task import Task

from helpers import RELU_TASK, toolkit_candidate

GOOD = toolkit_candidate("return ext.relu2(x)")


def test_a_shipped_level1_size_is_not_stored_and_rotates_what_fits(tmp_path):
    # level1/19_ReLU as shipped: 4096 × 393216 fp32, 6.4 GB in and out, on an 80 GB GPU.
    six = 4096 * 393216 * 4
    plan = make_plan(input_bytes=six, output_bytes=six, param_bytes=0, peak_bytes=six, trials=6, device="cpu",
                     out_dir=tmp_path)
    assert (plan["inputs"], plan["outputs"], plan["stored_bytes"]) == ("seeds", "recompute", 0)
    assert plan["needs_bytes"] == (2 * six + 2 * six) + (six + 3 * six) + 2 * GB   # candidate side + reference worker + margin
    text = describe(plan)
    assert "6.44 GB per trial, regenerated from seeds" in text and "recomputed by a reference worker" in text
    small = make_plan(input_bytes=256_000, output_bytes=256_000, param_bytes=0, peak_bytes=0, trials=6,
                      device="cpu", out_dir=tmp_path)
    assert (small["inputs"], small["outputs"], small["rotate"]) == ("stored", "stored", 3)
    assert small["stored_bytes"] == 2 * 6 * 256_000


def test_nothing_is_written_when_the_plan_stores_nothing_and_the_plan_is_reported():
    opts = Options(device="cpu", store_limit=0, timing=TimingConfig(warmup=1, min_reps=5, max_reps=20,
                                                                   time_cap_s=0.3, retimes=0))
    ref_dir = reference(Task.load(RELU_TASK), "cpu", opts)
    assert sorted(p.name for p in ref_dir.iterdir()) == ["meta.json", "state.pt"]
    r = evaluate(RELU_TASK, Candidate.from_source(GOOD), opts=opts)
    assert r.ok, r.message
    plan = r.verify.memory_plan
    assert (plan["inputs"], plan["outputs"], plan["trials"]) == ("seeds", "recompute", 6)
    assert "regenerated from seeds" in plan["summary"]
    # Where the reference worker's seconds went, step by step.
    assert set(plan["cost_s"]) == {"load", "model", "first_call", "plan", "trials", "randomness", "accuracy",
                                   "state_and_work"}
    assert all(v >= 0 for v in plan["cost_s"].values())
    # The same candidate against stored trials: the same verdict on the same trials.
    stored = evaluate(RELU_TASK, Candidate.from_source(GOOD), opts=Options(device="cpu", timing=None, profile=False))
    assert stored.ok and [t.seed for t in stored.verify.trials] == [t.seed for t in r.verify.trials]
    assert stored.verify.memory_plan["inputs"] == "stored"


def test_a_task_that_cannot_fit_the_gpu_says_how_much_it_needs(tmp_path):
    # No GPU here: the rule itself, as the reference worker applies it with the GPU's free memory.
    plan = make_plan(input_bytes=40 * GB, output_bytes=40 * GB, param_bytes=0, peak_bytes=40 * GB, trials=6,
                     device="cpu", out_dir=tmp_path)
    assert plan["fits"] is True and plan["needs_bytes"] > 200 * GB       # a CPU has no GPU limit
    with pytest.raises(Exception):
        make_plan(input_bytes=1, output_bytes=1, param_bytes=0, peak_bytes=0, trials=6, device="cuda",
                  out_dir=tmp_path)                                     # torch without CUDA: no GPU to plan for


def test_the_signed_trial_is_drawn_in_place_and_can_consume_its_source():
    # level1/45_Average_Pooling_2D's input is 16 GiB: drawing its signed variant with temporaries
    # (rand * 2 - 1) took four copies and ran the run worker out of memory on an H100.
    from kernelskill.evaluate.worker.trials import signed_variant
    x = [torch.rand(50, 7), torch.randn(9), torch.arange(4), 3.0]
    # The formula it always had, temporaries and all: a uniform draw for every float input, then a
    # normal one for inputs that were signed already.
    g = torch.Generator().manual_seed(11)
    want = [torch.rand(50, 7, generator=g) * 2 - 1]
    torch.rand(9, generator=g)
    want.append(torch.randn(9, generator=g) * 2.0)
    kept = signed_variant(list(x), 11)
    assert torch.equal(kept[0], want[0]) and torch.equal(kept[1], want[1])      # the same numbers as ever
    assert torch.equal(kept[2], x[2]) and kept[3] == 3.0
    source = list(x)
    drawn = signed_variant(source, 11, consume=True)
    assert source[:2] == [None, None] and torch.equal(drawn[0], want[0]) and torch.equal(drawn[1], want[1])


def test_on_a_gpu_large_trials_stay_on_the_device(tmp_path, monkeypatch):
    # No GPU here: the rule, with an 80 GB GPU's free memory. Above 64 MB per trial a GPU draws
    # inputs from seeds and compares outputs on the device; a CPU stores what fits its budget.
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (80 * GB, 80 * GB))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 0)
    mb = 1 << 20
    big = dict(input_bytes=128 * mb, output_bytes=128 * mb, param_bytes=0, peak_bytes=128 * mb, trials=6,
               out_dir=tmp_path)
    gpu, cpu = make_plan(device="cuda", **big), make_plan(device="cpu", **big)
    assert (gpu["inputs"], gpu["outputs"], gpu["generated_on"], gpu["stored_bytes"]) == ("seeds", "recompute", "cuda", 0)
    assert (cpu["inputs"], cpu["outputs"]) == ("stored", "stored")
    small = make_plan(device="cuda", **{**big, "input_bytes": 32 * mb, "output_bytes": 32 * mb})
    assert (small["inputs"], small["outputs"], small["generated_on"]) == ("stored", "stored", None)


def test_inputs_drawn_again_from_seeds_must_come_out_the_same(tmp_path):
    # Trials regenerated by every worker are only the same trials if get_inputs() draws from torch's
    # seeded generator: one drawing from numpy's is refused with what to do, not judged.
    from kernelskill.errors import TaskError
    src = RELU_TASK.read_text().replace("return [torch.randn(batch_size, dim)]",
                                        "import numpy as np\n    return [torch.from_numpy(np.random.rand(batch_size, dim)).float()]")
    assert src != RELU_TASK.read_text()
    path = tmp_path / "numpy_inputs.py"
    path.write_text(src)
    opts = Options(device="cpu", store_limit=0, timing=None, profile=False)
    with pytest.raises(TaskError, match="different tensors under the same torch seed"):
        reference(Task.load(path), "cpu", opts)
    # Stored, the same task is fine: every worker reads the very tensors the reference drew.
    assert (reference(Task.load(path), "cpu", Options(device="cpu", timing=None, profile=False)) / "inputs_0.pt").exists()


SUBCLASS_ONCE = '''
import torch
import torch.nn as nn


class Sub(torch.Tensor):
    pass


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        y = torch.relu(x) * 2.0
        return y.as_subclass(Sub) if self.calls == 1 else y
'''


def test_a_worker_holding_shared_outputs_is_let_go_once_the_verdict_is_known():
    # Trial 0's output is a tensor subclass (written to a file, unreadable: flagged); trials 1… are
    # plain and shared in memory, each held until the parent acknowledges it. The parent compares
    # nothing more once the verdict is known, but must still let the worker go: before, it waited
    # for an acknowledgement that never came until its timeout.
    opts = Options(device="cpu", store_limit=0, timing=None, profile=False, run_timeout=120)
    r = evaluate(RELU_TASK, Candidate.from_source(SUBCLASS_ONCE), opts=opts)
    assert r.status == "flagged", (r.status, r.message)
    assert any(f.startswith("output-type") for f in r.flags), r.flags
    assert r.phases.get("run", 0) < 60, r.phases
