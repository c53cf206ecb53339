"""A reference that draws random numbers on the GPU: dropout in training mode (KernelBench level2
66_Matmul_Dropout_Softmax). The reference and candidate calls are seeded alike on the device
(torch.manual_seed and torch.cuda.manual_seed), so the reference verifies against itself and the
timed calls re-check against it; a candidate without the dropout is incorrect.

Run on the GPU machine: python3 -m pytest -m gpu tests/gpu/test_gpu_stochastic.py -q
"""
from __future__ import annotations

import pytest

from kernelskill import Candidate
from kernelskill.evaluate import evaluate
from kernelskill.evaluate.api import Options
from kernelskill.evaluate.worker.timing import TimingConfig

from helpers import DROPOUT_TASK

pytestmark = pytest.mark.gpu

# The reference itself as the candidate: the same nn.Dropout, the same CUDA generator stream.
ITSELF = DROPOUT_TASK.read_text() + "\n\nModelNew = Model\n"
# The same computation without the dropout: deterministic, so it cannot match a random reference.
NO_DROPOUT = DROPOUT_TASK.read_text() + '''

class ModelNew(Model):
    def forward(self, x):
        return torch.softmax(self.matmul(x), dim=1)
'''


@pytest.fixture
def gpu():
    return Options(device="cuda", timing=TimingConfig(warmup=2, min_reps=10, max_reps=50, time_cap_s=1.0),
                   build_timeout=600, run_timeout=120)


def test_dropout_reference_on_cuda_verifies_against_itself(gpu):
    r = evaluate(DROPOUT_TASK, Candidate.from_source(ITSELF), opts=gpu)
    assert r.status == "ok", (r.status, r.message, r.flags, r.log_tail)
    assert r.env.gpu and r.verify.correct and r.profile is not None
    assert not [f for f in r.flags if f.startswith("replay")], r.flags      # timed calls seeded too
    notes = [f for f in r.flags if f.startswith("random-reference:")]
    assert len(notes) == 1 and "self.dropout: Dropout(p=0.5) in training mode" in notes[0], r.flags


def test_candidate_without_the_dropout_is_incorrect_on_cuda(gpu):
    r = evaluate(DROPOUT_TASK, Candidate.from_source(NO_DROPOUT), opts=gpu, timing=None)
    assert r.status == "incorrect", (r.status, r.message)
    assert any(f.startswith("random-reference:") for f in r.flags), r.flags
