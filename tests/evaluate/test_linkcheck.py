"""The link check where CUDA cannot run (issue 44, item 5): a compile-only build's objects have
their undefined symbols resolved against the libraries the module would be loaded with, so a
candidate that compiles but could not load (``x.data_ptr<long long>()``: libtorch exports
``data_ptr<long>``) fails here, at its line, instead of on a GPU machine. Real nvcc, real nm."""
from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest
import torch

from kernelskill import Candidate
from kernelskill.evaluate import compile, evaluate
from kernelskill.evaluate.build import linkcheck
from kernelskill.evaluate.build.extensions import build_root

from helpers import RELU_TASK

HERE = Path(__file__).resolve().parents[1]
ROOT = HERE.parent


def _compile_only_machine():
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed: no compile-only check to test")
    if torch.cuda.is_available():
        pytest.skip("this machine runs CUDA: the module is linked and loaded for real, no compile-only check")


# A CUDA candidate whose host code asks libtorch for `data_ptr<TYPE>`; its kernel keeps the split
# (the fast check: kernels through nvcc, host code through the C++ compiler).
CUDA_TWICE = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = "torch::Tensor twice(torch::Tensor x);"
CUDA_SRC = r"""
#include <ATen/cuda/CUDAContext.h>
// UNIQUE
__global__ void twice_kernel(const int64_t* __restrict__ x, int64_t* __restrict__ y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2 * x[i];
}
torch::Tensor twice(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int64_t n = x.numel();
    const auto* xp = reinterpret_cast<const int64_t*>(x.data_ptr<TYPE>());
    twice_kernel<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(xp, y.data_ptr<int64_t>(), n);
    return y;
}
"""
ext = load_inline(name="ks_link_twice", cpp_sources=CPP, cuda_sources=CUDA_SRC, functions=["twice"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.twice(x)
'''


def _twice(type_: str) -> str:
    # a fresh source each run: no earlier check's marker answers for it, the check itself runs
    return CUDA_TWICE.replace("TYPE", type_).replace("UNIQUE", uuid.uuid4().hex)


def _line_of(src: str, needle: str) -> int:
    return next(i for i, line in enumerate(src.splitlines(), 1) if needle in line)


def _link_steps(res) -> list[str]:
    return [text for _, text in res.steps if text.startswith("link check")]


def test_data_ptr_long_long_compiles_but_fails_the_link_check_at_its_line():
    _compile_only_machine()
    src = _twice("long long")
    res = compile(Candidate.from_source(src))
    assert res.compile_only and not res.ok, res
    errors = [d for d in res.diagnostics if d.severity == "error"]
    assert len(errors) == 1, errors
    d = errors[0]
    assert d.origin == "link" and d.file == "candidate", d
    assert d.line == _line_of(src, "data_ptr<long long>"), d
    assert "data_ptr<long long>" in d.source_line
    assert "data_ptr<long long>() const" in d.message                # demangled
    assert "libtorch" in d.message and "use data_ptr<int64_t>()" in d.message and "(long)" in d.message, d.message
    assert set(res.units) == {"cuda.cu", "cuda_host.cpp"}, res.units   # the split compiled: only the link failed


def test_the_same_candidate_with_int64_t_passes_the_link_check():
    _compile_only_machine()
    res = compile(Candidate.from_source(_twice("int64_t")))
    assert res.ok and res.compile_only, res.diagnostics
    steps = _link_steps(res)                                         # the check ran, and found nothing
    assert len(steps) == 1 and steps[0].startswith("link check: 0 unresolved"), res.steps


def test_the_verdict_on_a_cpu_machine_is_compile_error_at_that_line(fast):
    _compile_only_machine()
    src = _twice("long long")
    r = evaluate(RELU_TASK, Candidate.from_source(src), opts=fast)
    assert r.status == "compile_error" and not r.compile.ok and r.compile.compile_only, r.status
    d = next(d for d in r.compile.diagnostics if d.severity == "error")
    assert d.line == _line_of(src, "data_ptr<long long>") and "data_ptr<int64_t>" in d.message, d
    # The verdict's message is that diagnostic's first line, its line number in it: what to fix, where.
    assert r.message == str(d).splitlines()[0] and f":{d.line}" in r.message and "data_ptr<int64_t>" in r.message


OWN = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = "torch::Tensor twice(torch::Tensor x);"
CUDA_SRC = r"""
#include <ATen/cuda/CUDAContext.h>
// UNIQUE
__global__ void copy_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}
void scale_in_place(float* y, int64_t n, float by, cudaStream_t stream);
torch::Tensor twice(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int64_t n = x.numel();
    auto stream = at::cuda::getCurrentCUDAStream();
    copy_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    scale_in_place(y.data_ptr<float>(), n, 2.0f, stream);
    return y;
}
"""
ext = load_inline(name="ks_link_own", cpp_sources=CPP, cuda_sources=CUDA_SRC, functions=["twice"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.twice(x)
'''


def test_a_function_of_its_own_declared_and_never_defined_fails():
    _compile_only_machine()
    src = OWN.replace("UNIQUE", uuid.uuid4().hex)
    res = compile(Candidate.from_source(src))
    assert res.compile_only and not res.ok, res
    d = next(d for d in res.diagnostics if d.severity == "error")
    assert d.origin == "link" and d.line == _line_of(src, "void scale_in_place("), d
    assert "scale_in_place(float*, long, float, CUstream_st*)" in d.message
    assert "declared but defined nowhere" in d.message, d.message


CPP_DEFINES = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
// UNIQUE
void launch_twice(const int64_t* x, int64_t* y, int64_t n);
torch::Tensor twice(torch::Tensor x) {
    auto y = torch::empty_like(x);
    launch_twice(reinterpret_cast<const int64_t*>(x.data_ptr<TYPE>()), y.data_ptr<int64_t>(), x.numel());
    return y;
}
"""
CUDA_SRC = r"""
__global__ void twice_kernel(const int64_t* x, int64_t* y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2 * x[i];
}
void launch_twice(const int64_t* x, int64_t* y, int64_t n) {
    twice_kernel<<<(n + 255) / 256, 256>>>(x, y, n);
}
"""
ext = load_inline(name="ks_link_cpp_defs", cpp_sources=CPP, cuda_sources=CUDA_SRC, functions=["twice"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.twice(x)
'''


def test_cpp_sources_that_define_the_bound_function_are_compiled_and_checked():
    """The C++ sources hold the bound function (calling a launcher the CUDA source defines): the check
    compiles them as the GPU's build does, resolves the launcher between the units, and passes; the
    same sources asking for data_ptr<long long> fail at that line of the C++ string."""
    _compile_only_machine()
    src = CPP_DEFINES.replace("UNIQUE", uuid.uuid4().hex)
    good = compile(Candidate.from_source(src.replace("TYPE", "int64_t")))
    assert good.ok and good.compile_only, good.diagnostics
    assert "kernel.cpp" in good.units and _link_steps(good), (good.units, good.steps)
    bad_src = src.replace("TYPE", "long long")
    bad = compile(Candidate.from_source(bad_src))
    assert not bad.ok, bad
    d = next(d for d in bad.diagnostics if d.severity == "error")
    assert d.line == _line_of(bad_src, "data_ptr<long long>") and "use data_ptr<int64_t>()" in d.message, d


def test_a_shipped_cuda_solution_passes_and_its_library_symbols_are_resolved_or_cudas():
    """A shipped solution (CUDA's current stream and a device guard: c10::cuda:: names, which a CPU
    torch does not hold) passes the compile-only check; its objects, checked again here, have
    undefined symbols that libtorch resolves (at::_ops, data_ptr<float>), ones only libc10_cuda
    would and the CUDA runtime's, and the check reports none of them."""
    _compile_only_machine()
    path = ROOT / "examples" / "argmax_dim" / "solutions" / "cuda_argmax_warp.py"
    res = compile(Candidate.from_file(path))
    assert res.ok and res.compile_only, res.diagnostics
    d = build_root() / res.extensions[0]
    objects = [o for o in (d / "cuda.o", d / "cuda_host.o") if o.exists()]
    assert objects
    need, have = linkcheck.undefined_and_defined(objects)
    prov = linkcheck.providers(build_root())
    assert prov is not None
    unresolved = sorted(need - have - prov.names)
    assert any(s in prov.names for s in need if s.startswith("_ZN2at")), "no libtorch symbol resolved"
    assert any(s.startswith(("_ZN3c104cuda", "_ZNK3c104cuda")) for s in unresolved), unresolved
    runtime = [s for s in unresolved if s.startswith("__cuda")]      # __cudaRegisterFatBinary, __cudaLaunchKernel, …
    assert runtime and (prov.cudart is None or set(runtime) <= prov.cudart), runtime
    assert linkcheck.check(objects, [path.read_text()], path.read_text(), build_root(),
                           functions=["argmax_forward"]) == []


def test_which_symbols_a_cpu_torch_leaves_to_cuda_and_which_it_reports():
    """The rule, on mangled names: CUDA's namespaces in torch and CUDA's libraries are left to a GPU
    machine; libtorch's other names, the candidate's own and the CUDA runtime's (checked against
    nvcc's libcudart.so) are judged here."""
    _compile_only_machine()
    prov = linkcheck.providers(build_root())
    assert prov is not None and not prov.cuda_torch

    def judged(mangled: str) -> bool:
        sym = linkcheck.describe(mangled, linkcheck.demangle([mangled])[mangled])
        return not linkcheck.provided_elsewhere(sym, prov)
    assert not judged("_ZN3c104cuda20getCurrentCUDAStreamEa")          # c10::cuda:: (libc10_cuda)
    assert not judged("_ZN2at4cuda26getCurrentCUDABlasHandleEv")       # at::cuda:: (libtorch_cuda)
    assert not judged("_ZN2at6detail10empty_cudaEv")                   # at::detail::empty_cuda()
    assert not judged("cublasSgemm_v2") and not judged("cuGetProcAddress")
    assert judged("_ZNK2at10TensorBase8data_ptrIxEEPT_v")               # data_ptr<long long>
    assert judged("_Z12launch_twicePKfPflP11CUstream_st")               # the candidate's own
    assert judged("_ZN2my4cuda6launchEv")                               # its own namespace, CUDA's word or not
    assert "_ZNK2at10TensorBase8data_ptrIlEEPT_v" in prov.names        # data_ptr<long>: libtorch's
    if prov.cudart is not None:                                        # nvcc's runtime beside it
        assert judged("cudaNoSuchFunction") and "cudaLaunchKernel" in prov.cudart
    assert linkcheck.root_of("_ZNK2at10TensorBase8data_ptrIxEEPT_v") == "at"
    assert linkcheck.root_of("_ZNKSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEE4sizeEv") == "std"
    assert linkcheck.root_of("_ZTVN3c1021AutogradMetaInterfaceE") == "c10"
    assert linkcheck.root_of("_Z5relu2N2at6TensorE") == "" and linkcheck.root_of("cudaMalloc") is None


CPP_LONG_LONG = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = """
#include <torch/extension.h>
// UNIQUE
torch::Tensor f(torch::Tensor x) {
    auto y = torch::empty_like(x);
    const long long* p = x.data_ptr<long long>();
    int64_t* q = y.data_ptr<int64_t>();
    for (int64_t i = 0; i < x.numel(); ++i) q[i] = 2 * p[i];
    return y;
}
"""
ext = load_inline(name="ks_link_cpp", cpp_sources=SRC, functions=["f"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.f(x)
'''


def test_a_cpp_candidate_whose_module_does_not_load_gets_the_line_at_once():
    """The C++ backend builds and loads here: the loader names the mangled symbol, and the same
    check says which line and what to do, at once — not after torch's build fails the same way
    (30 s more on this 2-core machine, and a mangled name with no line)."""
    if shutil.which("nm") is None:
        pytest.skip("binutils' nm is not installed")
    src = CPP_LONG_LONG.replace("UNIQUE", uuid.uuid4().hex)
    res = compile(Candidate.from_source(src))
    assert not res.ok and res.path == "direct" and not res.fallback, (res.path, res.fallback)
    d = next(d for d in res.diagnostics if d.severity == "error")
    assert d.line == _line_of(src, "data_ptr<long long>") and "use data_ptr<int64_t>()" in d.message, d
