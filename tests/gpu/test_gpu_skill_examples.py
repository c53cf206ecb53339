"""Every shipped CUDA skill example runs on the GPU against a CPU reference, and every Triton/Python
example against PyTorch (skills/_gpu_check/run.sh): one PASS line per check, no FAIL, and a harness
for every CUDA example.

Run on the GPU machine: python3 -m pytest -m gpu -q tests/gpu/test_gpu_skill_examples.py
"""
from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

SKILLS = Path(__file__).resolve().parents[2] / "skills"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_every_skill_example_passes_on_the_gpu(tmp_path):
    r = subprocess.run(["bash", str(SKILLS / "_gpu_check" / "run.sh"), str(tmp_path / "build")],
                       capture_output=True, text=True, timeout=540)
    out = r.stdout + r.stderr
    fails = [line for line in out.splitlines() if line.startswith("FAIL")]
    assert r.returncode == 0 and not fails, "\n".join(fails) or out[-3000:]
    cuda = [p.stem for p in SKILLS.glob("*.toml") if tomllib.loads(p.read_text())["example_lang"] == "cuda"]
    built = {p.name.removeprefix("h_").removesuffix(".cu") for p in (tmp_path / "build").glob("h_*.cu")}
    assert set(cuda) <= built
    assert out.count("PASS") >= len(cuda)
