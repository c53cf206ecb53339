"""The CUDA and Triton paths on a real GPU: builds, diagnostics, cache, verdicts, failure modes.

Run on the GPU machine: python3 -m pytest -m gpu -q
"""
from __future__ import annotations


import pytest

from kernelskill import Candidate
from kernelskill.evaluate import compile, evaluate
from kernelskill.evaluate.api import Options
from kernelskill.evaluate.worker.timing import TimingConfig

from helpers import RELU_TASK

pytestmark = pytest.mark.gpu

CUDA = r'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = "torch::Tensor relu2(torch::Tensor x);"
CUDA_SRC = r"""
#include <ATen/cuda/CUDAContext.h>
__global__ void relu2_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? 2.f * x[i] : 0.f;   // BODY
}
torch::Tensor relu2(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int64_t n = x.numel();
    relu2_kernel<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
ext = load_inline(name="ks_gpu_relu2", cpp_sources=CPP, cuda_sources=CUDA_SRC, functions=["relu2"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu2(x)
'''

TRITON = r'''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu2_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.where(x > 0, 2.0 * x, 0.0), mask=mask)   # BODY


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        relu2_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y
'''


@pytest.fixture
def gpu():
    return Options(device="cuda", timing=TimingConfig(warmup=2, min_reps=10, max_reps=50, time_cap_s=1.0),
                   build_timeout=600, run_timeout=120)


def cuda_with(body: str) -> Candidate:
    return Candidate.from_source(CUDA.replace("if (i < n) y[i] = x[i] > 0.f ? 2.f * x[i] : 0.f;   // BODY", body))


def test_cuda_candidate_ok_with_own_kernel(gpu):
    r = evaluate(RELU_TASK, Candidate.from_source(CUDA), opts=gpu, **{"threads": None})
    assert r.status == "ok", (r.message, r.log_tail)
    assert r.compile.backend == "cuda" and r.env.gpu
    assert r.profile.speedup is not None and r.profile.custom_share > 0.5
    assert any("relu2_kernel" in k.name and k.custom for k in r.profile.kernels)


def test_cuda_cached_rebuild_under_a_second():
    cand = Candidate.from_source(CUDA)
    compile(cand, device="cuda")
    res = compile(cand, device="cuda")
    assert res.ok and res.cache_hit and res.seconds < 1.0, res


def test_a_renamed_cuda_function_reuses_the_bindings_and_runs_its_own_kernel(gpu):
    """The bindings are keyed by the functions' types: a CUDA candidate whose function (and its
    parameter) has another name builds no bindings, and the module calls its own kernel: here a
    scaled one, which must come back `incorrect` against relu×2 (another module's code would pass)."""
    import uuid
    token = uuid.uuid4().hex[:8]
    first = Candidate.from_source(CUDA.replace("int64_t n = x.numel();", f"int64_t n = x.numel();  // {token}"))
    assert compile(first, device="cuda").ok
    steps: list[str] = []
    renamed = Candidate.from_source(CUDA.replace("relu2(", f"relu2_{token}(").replace('functions=["relu2"]', f'functions=["relu2_{token}"]')
                                    .replace("torch::Tensor x)", "torch::Tensor inp)").replace("empty_like(x)", "empty_like(inp)")
                                    .replace("x.numel()", "inp.numel()").replace("x.data_ptr", "inp.data_ptr")
                                    .replace("ext.relu2(x)", f"ext.relu2_{token}(x)").replace("2.f * x[i]", "3.f * x[i]"))
    res = compile(renamed, device="cuda", opts=Options(device="cuda", on_step=steps.append))
    assert res.ok and res.path == "direct", res.to_dict()
    assert "bind.cpp: cached object" in steps and "bind.cpp" not in res.units, (steps, res.units)
    r = evaluate(RELU_TASK, renamed, opts=gpu)
    assert r.status == "incorrect", r.message           # its own kernel (3x), not relu×2's


def test_cuda_compile_error_points_at_candidate_line(gpu):
    cand = cuda_with("if (i < n) y[i] = undefined_thing;")
    r = evaluate(RELU_TASK, cand, opts=gpu)
    assert r.status == "compile_error"
    d = next(d for d in r.compile.diagnostics if d.severity == "error")
    line = next(i for i, l in enumerate(cand.source.splitlines(), 1) if "undefined_thing" in l)
    assert (d.file, d.line, d.origin) == ("candidate", line, "cuda"), d


def test_cuda_wrong_kernel_is_incorrect(gpu):
    r = evaluate(RELU_TASK, cuda_with("if (i < n - 1) y[i] = x[i] > 0.f ? 2.f * x[i] : 0.f;"), opts=gpu)
    assert r.status == "incorrect", r.message


def test_illegal_address_is_a_result(gpu):
    r = evaluate(RELU_TASK, cuda_with("y[i + (1ll << 40)] = 1.f;"), opts=gpu)
    assert r.status in ("runtime_error", "crashed"), r.message
    assert "illegal" in (r.message + r.log_tail).lower() or "crashed" == r.status


def test_kernel_hang_is_timeout(gpu):
    r = evaluate(RELU_TASK, cuda_with("while (x[0] == x[0]) { y[i] = 0.f; }"), opts=gpu, run_timeout=20)
    assert r.status == "timeout", r.message


def test_gpu_oom_is_runtime_error(gpu):
    src = CUDA.replace("return ext.relu2(x)", "hog = [torch.empty(1 << 34, device='cuda') for _ in range(64)]\n"
                                              "        return ext.relu2(x)")
    r = evaluate(RELU_TASK, Candidate.from_source(src), opts=gpu)
    assert r.status == "runtime_error" and "out of memory" in r.message.lower(), r.message


def test_triton_candidate_ok(gpu):
    cand = Candidate.from_source(TRITON)
    assert cand.backend == "triton"
    r = evaluate(RELU_TASK, cand, opts=gpu)
    assert r.status == "ok", (r.message, r.log_tail)
    assert any("relu2_kernel" in k.name and k.custom for k in r.profile.kernels)


def test_triton_compile_error_is_compile_error(gpu):
    bad = TRITON.replace("tl.store(y_ptr + offs, tl.where(x > 0, 2.0 * x, 0.0), mask=mask)   # BODY",
                         "tl.store(y_ptr + offs, tl.no_such_function(x), mask=mask)")
    r = evaluate(RELU_TASK, Candidate.from_source(bad), opts=gpu)
    assert r.status == "compile_error", (r.status, r.message)
