"""Settings as options, not environment switches (issue 45, item 4): every `KERNELSKILL_*` variable
the code reads is in docs/evaluator.md's settings table, the retired build experiments are read
nowhere, and the two build settings that stayed (`build`, `cuda_arch`) work from Options and from
`[eval]` in the config."""
from __future__ import annotations

import re
import shutil
import uuid
from pathlib import Path

import pytest

from kernelskill import Candidate
from kernelskill.errors import UserError
from kernelskill.evaluate import compile
from kernelskill.evaluate.options import Options
from kernelskill.evaluate.build.extensions import build_root, compile_arch

from helpers import toolkit_candidate

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "evaluator.md"
RETIRED = ("KERNELSKILL_TORCH_BUILD", "KERNELSKILL_CUDA_WHOLE", "KERNELSKILL_NVCC_SERIAL",
           "KERNELSKILL_NVCC_FULL_HEADER", "KERNELSKILL_HOST_PCH", "KERNELSKILL_NO_PCH", "KERNELSKILL_PCH_AFTER",
           "KERNELSKILL_SPARE_AFTER_BUILD", "KERNELSKILL_COMPILE_ARCH")


def _read_in_code() -> set[str]:
    names = set()
    for pkg in ("kernelskill", "mcp_server", "tui", "tests"):
        for f in (ROOT / pkg).rglob("*.py"):
            if f.name == Path(__file__).name:
                continue
            names |= set(re.findall(r"KERNELSKILL_[A-Z][A-Z0-9_]*", f.read_text(encoding="utf-8")))
    return names


def test_every_variable_the_code_reads_is_in_the_settings_table():
    text = DOC.read_text(encoding="utf-8")
    table = text.split("### Settings: build options and environment variables", 1)[1].split("\nRetired on", 1)[0]
    documented = set(re.findall(r"KERNELSKILL_[A-Z][A-Z0-9_]*", table))
    used = _read_in_code()
    # KERNELSKILL_API is the prefix the workers' environment filter drops (keys), not a variable.
    used.discard("KERNELSKILL_API")
    assert used - documented == set(), f"read by the code, missing from the table in {DOC.name}"
    assert documented - used == set(), "in the table, read by no code"
    assert not used & set(RETIRED), "a retired switch is read again"


def test_build_settings_are_checked_with_the_fix_named():
    with pytest.raises(UserError, match=r"build = 'fast': choose one of direct, torch"):
        Options(build="fast")
    with pytest.raises(UserError, match=r"cuda_arch = '90': name a CUDA target like sm_90"):
        Options(cuda_arch="90")
    assert Options(cuda_arch="sm_90a").cuda_arch == "sm_90a"
    from kernelskill.config import load_config
    from kernelskill.optimizer import eval_options
    opts = eval_options(load_config({"eval.build": "torch", "eval.cuda_arch": "sm_80"}), "cpu")
    assert (opts.build, opts.cuda_arch) == ("torch", "sm_80")
    assert eval_options(load_config({}), "cpu").cuda_arch is None
    with pytest.raises(UserError, match="build = 'ninja'"):
        eval_options(load_config({"eval.build": "ninja"}), "cpu")


@pytest.mark.slow       # torch's own build of the whole extension: 37 s on 2 cores; the default path runs everywhere
def test_torchs_build_when_asked_and_the_direct_one_by_default():
    """A C++ candidate never built: `build = "torch"` takes load_inline's own build for it (the
    result says so), the default the split build."""
    token = uuid.uuid4().hex[:10]
    src = toolkit_candidate("return ext.relu2(x)", extra=f"# {token}\n")
    torch_built = compile(Candidate.from_source(src), device="cpu", opts=Options(build="torch"))
    assert torch_built.ok and torch_built.path == "torch", torch_built.to_dict()
    assert "Options.build" in torch_built.fallback
    direct = compile(Candidate.from_source(src.replace(token, token + "d")), device="cpu")
    assert direct.ok and direct.path != "torch", direct.to_dict()


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_the_compile_only_check_targets_the_named_arch_else_the_gpu_present():
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine runs CUDA: its build targets the GPU present")
    assert compile_arch() == "sm_90"            # no GPU here: the Hopper default
    from test_build import _fresh_cuda
    res = compile(Candidate.from_source(_fresh_cuda()), device="cpu", opts=Options(cuda_arch="sm_80"))
    assert res.ok and res.compile_only, res.to_dict()
    cmds = [p.read_text() for p in (build_root() / res.extensions[0]).glob("*.cmd")]
    nvcc = [c for c in cmds if "nvcc" in c]
    assert nvcc and all("-arch=sm_80" in c for c in nvcc), cmds
