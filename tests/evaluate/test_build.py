"""Builds: structured diagnostics mapped to candidate lines, the content-hash cache, the
compile-only nvcc check for CUDA sources on a machine without a CUDA torch."""
from __future__ import annotations

import json

import shutil
import time

import pytest

from kernelskill import Candidate
from kernelskill.evaluate import compile, evaluate
from kernelskill.evaluate.build.extensions import locate, parse_diagnostics

from helpers import RELU_TASK, toolkit_candidate

BROKEN_CPP = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = """
#include <torch/extension.h>
torch::Tensor f(torch::Tensor x) {
    auto y = x * 2
    return y;
}
"""
ext = load_inline(name="ks_broken", cpp_sources=SRC, functions=["f"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.f(x)
'''

CUDA = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = "torch::Tensor relu2(torch::Tensor x);"
CUDA_SRC = r"""
#include <ATen/cuda/CUDAContext.h>
__global__ void relu2_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? 2.f * x[i] : 0.f;
}
torch::Tensor relu2(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int64_t n = x.numel();
    relu2_kernel<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);BROKEN
    return y;
}
"""
ext = load_inline(name="ks_cuda_relu2", cpp_sources=CPP, cuda_sources=CUDA_SRC, functions=["relu2"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu2(x)
'''


def test_cpp_compile_error_points_at_candidate_line(fast):
    r = evaluate(RELU_TASK, Candidate.from_source(BROKEN_CPP), opts=fast)
    assert r.status == "compile_error" and not r.compile.ok
    errors = [d for d in r.compile.diagnostics if d.severity == "error"]
    assert errors, r.compile
    d = errors[0]
    # `auto y = x * 2` on line 8 lacks its ';': gcc reports it at the next token, line 9 column 5.
    assert (d.file, d.line, d.column) == ("candidate", 9, 5), d
    assert "expected" in d.message and d.origin == "cpp"
    assert d.source_line.strip() == "return y;"
    assert r.compile.log_tail


def test_python_syntax_error_is_compile_error_with_line(fast):
    src = toolkit_candidate("return ext.relu2(x)") + "\ndef broken(:\n    pass\n"
    r = evaluate(RELU_TASK, Candidate.from_source(src), opts=fast)
    assert r.status == "compile_error"
    d = r.compile.diagnostics[0]
    assert d.origin == "python" and d.line == src.count("\n") - 1


def test_missing_modelnew_is_compile_error(fast):
    r = compile(Candidate.from_source("import torch\nclass Model(torch.nn.Module):\n    pass\n"))
    assert not r.ok and "ModelNew" in r.diagnostics[0].message


def test_identical_source_is_a_cache_hit_under_a_second():
    cand = Candidate.from_source(toolkit_candidate("return ext.relu2(x)"))
    compile(cand)                                   # built (or already cached)
    started = time.perf_counter()
    res = compile(cand)
    assert res.ok and res.cache_hit
    assert res.seconds < 1.0, res.seconds          # the build step itself
    assert time.perf_counter() - started < 15      # worker start-up included


def test_locate_and_parse_gcc_and_nvcc_messages():
    cand = "x = 1\nSRC = '''\nint f() {\n  return 1\n}\n'''\n"
    piece = "\nint f() {\n  return 1\n}\n"
    assert locate(piece, cand) == 1
    log = ("/tmp/b/main.cpp:4:11: error: expected ';' before '}' token\n"
           "/tmp/b/cuda.cu(5): error: identifier \"foo\" is undefined\n")
    diags = parse_diagnostics(log, {"main.cpp": ([piece], 1), "cuda.cu": ([piece], 3)}, cand)
    assert [(d.origin, d.file, d.line) for d in diags] == [("cpp", "candidate", 4), ("cuda", "candidate", 3)]
    assert diags[0].source_line == "  return 1"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def _compile_only_machine():
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine runs CUDA; the compile-only path is for machines that cannot")


def _fresh_cuda() -> str:
    import uuid
    return CUDA.replace("BROKEN", f"  // {uuid.uuid4().hex}")      # never built: no cached check


def test_cuda_compile_only_check_without_cuda_torch():
    """The check stands in for the GPU's direct build: the kernels through nvcc with CUDA's headers
    only, the host function through the C++ compiler against the precompiled light header, side by
    side (29 s -> 9 s with the light nvcc header -> ~3 s split, this candidate on a 2-core machine),
    and a typo in the host function reported from that first attempt with its line, with no second
    build."""
    _compile_only_machine()
    good = Candidate.from_source(_fresh_cuda())
    assert good.backend == "cuda"
    res = compile(good)
    assert res.ok and res.compile_only, res.diagnostics
    assert set(res.units) == {"cuda.cu", "cuda_host.cpp"}, res.units
    bad = Candidate.from_source(CUDA)
    res = compile(bad)
    assert not res.ok and "cuda_host.cpp" in res.units and not any("light" in u for u in res.units), res.units
    d = next(d for d in res.diagnostics if d.severity == "error")
    assert d.origin == "cuda" and d.file == "candidate"
    assert d.line == CUDA.splitlines().index(next(l for l in CUDA.splitlines() if "BROKEN" in l)) + 1
    assert "BROKEN" in d.source_line or "BROKEN" in d.message


def test_a_split_failure_not_surely_the_candidates_is_checked_on_the_whole_source():
    """The host function names its kernel (a name only the device unit has): the split cannot
    judge, and the whole source decides — the whole source, not the split's device unit left in
    its place (which compiles): the candidate's real error is still found."""
    _compile_only_machine()
    src = _fresh_cuda().replace("int64_t n = x.numel();", "int64_t n = x.numel(); "
                                "cudaFuncSetAttribute(relu2_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 0); "
                                "struct Q {} q = x;")
    res = compile(Candidate.from_source(src))
    assert "cuda_host.cpp (split)" in res.units and "cuda.cu (light header)" in res.units, res.units
    assert not res.ok and any(d.severity == "error" and d.file == "candidate" for d in res.diagnostics), res.diagnostics


@pytest.mark.slow
def test_the_compile_only_check_falls_back_to_torchs_header_like_the_gpu_build(monkeypatch):
    """A name torch/types.h holds and the light header does not (at::indexing, from
    ATen/TensorIndexing.h): the check goes again with torch's header (~30 s here), as the build does."""
    _compile_only_machine()
    needs_more = _fresh_cuda().replace("int64_t n = x.numel();",
                                       "auto sl = at::indexing::Slice(0, 1); (void)sl; int64_t n = x.numel();")
    # A kernel with an unnamed parameter: the split cannot name it, so the source is built whole.
    needs_more = needs_more.replace("__global__", "__global__ void ks_unnamed(int) {}\n__global__", 1)
    res = compile(Candidate.from_source(needs_more))
    assert res.ok and res.compile_only, res.diagnostics
    assert set(res.units) == {"cuda.cu (light header)", "cuda.cu"}, res.units


def test_precompiled_header_is_made_by_one_build_at_a_time(tmp_path, monkeypatch):
    """Parallel builds of one flag set (a pool or bench) never make the same header twice: while
    one holds the flag set's lock, the others build without the header and do not wait. The
    PCH_AFTER-th cold build makes it through the one maker (pch.make_pch), with the command saved."""
    import fcntl

    from kernelskill.evaluate.build import pch
    made = []
    monkeypatch.setattr(pch, "make_pch", lambda d: made.append(d) or True)
    assert pch.precompiled_header(tmp_path, ["-O2"], []) is None          # first cold build: counted
    (d,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert (d / "seen").read_text() == "1"
    with open(d / "count.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert pch.precompiled_header(tmp_path, ["-O2"], []) is None      # busy: skipped, not counted
        assert (d / "seen").read_text() == "1"
    assert pch.precompiled_header(tmp_path, ["-O2"], []) is None
    assert (d / "seen").read_text() == "2" and made == []
    assert pch.precompiled_header(tmp_path, ["-O2"], []) == d == made[0]   # the third: made
    cmd = json.loads((d / "cmd.json").read_text())
    assert cmd[0] == pch.cxx() and "-O2" in cmd and (d / "torch" / "extension.h").exists()


def test_a_build_killed_midway_does_not_block_later_builds():
    """A worker killed while building (its build timeout, a cancelled run) left torch's lock file in
    the extension's build directory, and every later build of that source waited on it until its own
    build timeout (seen on the H100: a candidate 'stuck' in the build phase for 200 s)."""
    from kernelskill.evaluate.api import Options
    from kernelskill.evaluate.build.extensions import build_root
    cand = Candidate.from_source(toolkit_candidate("return ext.relu2(x)"))
    first = compile(cand)
    assert first.ok                                                # built (or already cached)
    # This source's own folder (other tests build variants of the toolkit under the same name)
    dirs = [build_root() / e for e in first.extensions]
    assert dirs and all(any(d.glob("*.so")) for d in dirs)
    for d in dirs:
        (d / "lock").write_text("")                                  # what a killed build leaves
    started = time.perf_counter()
    res = compile(cand, opts=Options(build_timeout=60))
    assert res.ok, res.to_dict()
    assert time.perf_counter() - started < 45
    assert not any((d / "lock").exists() for d in dirs)
