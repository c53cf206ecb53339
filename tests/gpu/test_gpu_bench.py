"""`kernelskill bench` on a real GPU with the pool executor: builds in parallel, one timing worker
on the GPU, every verdict as expected, and a rerun that resumes everything.

Run on the GPU machine: python3 -m pytest -m gpu -q
"""
from __future__ import annotations

import contextlib
import io
import json

import pytest

from kernelskill.cli import main

pytestmark = pytest.mark.gpu


def bench(*argv: str) -> tuple[int, dict, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["bench", *argv])
    return code, json.loads(out.getvalue().strip().splitlines()[-1]), err.getvalue()


def test_pool_on_the_gpu_gets_every_verdict_and_resumes(tmp_path):
    # rmsnorm: a CUDA and a Triton solution, and a wrong CUDA one that must be `incorrect`.
    args = ("rmsnorm", "--device", "cuda", "--executor", "pool", "--include-wrong", "--time-cap", "1",
            "--out", str(tmp_path / "out"), "--json")
    code, doc, err = bench(*args)
    assert code == 0, err
    (task,) = doc["tasks"]
    assert task["status"] == "ok" and task["speedup"] > 0
    sols = {s["solution"]: s for s in task["solutions"]}
    assert sols["solutions/wrong/cuda_warp0_only.py"]["status"] == "incorrect"
    assert all(s["as_expected"] for s in sols.values()) and len(sols) == 3
    assert doc["machine"]["executor"] == "pool" and all(s.startswith("cuda:") for s in doc["machine"]["slots"])
    assert "built 3 candidates" in err
    code, again, err = bench(*args)
    assert code == 0 and "reused 3 of 3" in err
    assert again["summary"] == doc["summary"]
