"""The worker request is typed on both sides: built by options.request with the fields its mode
reads, written as JSON without the unset ones, read back in the worker as the same dataclass."""
from __future__ import annotations

import json

import pytest

from kernelskill import Candidate
from kernelskill.evaluate.launch.request import TaskRef, WorkerRequest
from kernelskill.evaluate.options import Options, request
from kernelskill.task import Task
from kernelskill.vocab import ProfileMode

from helpers import RELU_TASK, toolkit_candidate


def test_a_run_request_round_trips_through_json(tmp_path):
    task = Task.load(RELU_TASK)
    req = request("run", task, Candidate.from_source(toolkit_candidate("return ext.relu2(x)")), "cpu",
                  Options(device="cpu"), tmp_path, ref_dir="/r", timing={"warmup": 1}, profile=ProfileMode.here)
    assert isinstance(req.task, TaskRef) and req.task.path == str(task.path)
    assert req.candidate_path == str(tmp_path / "candidate.py") and (tmp_path / "candidate.py").exists()
    wire = json.loads(json.dumps(req.to_dict()))
    assert wire["profile"] == "here" and wire["task"]["path"] == str(task.path)
    assert "serve_dir" not in wire and "out_dir" not in wire           # unset fields are not written
    back = WorkerRequest.parse(wire)
    assert back == req and back.profile is ProfileMode.here
    assert back.replace(out_dir="/o").out_dir == "/o" and req.out_dir is None   # a copy; the original unchanged


def test_the_worker_refuses_a_request_it_does_not_know():
    with pytest.raises(ValueError, match="unknown keys \\['profil'\\]"):
        WorkerRequest.parse({"mode": "run", "device": "cpu", "profil": "here"})
    with pytest.raises(ValueError):
        WorkerRequest.parse({"mode": "run", "device": "cpu", "profile": True})   # the old boolean
