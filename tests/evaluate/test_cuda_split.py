"""The split CUDA build (evaluate/build/cuda_split.py): the kernels in a unit nvcc compiles with CUDA's
headers only, the host functions in a unit the C++ compiler compiles against torch's, one launcher
per launch site between them — compiled and linked for real where nvcc is installed — what is built
whole instead, and which errors of a split unit are the candidate's."""
from __future__ import annotations

import re
import runpy
import shutil
import subprocess
from pathlib import Path

import pytest

from kernelskill.evaluate.build import cuda_split, direct as toolchain, tools
from kernelskill.evaluate.build.extensions import STUB_DIR, cuda_include_dir
from kernelskill.evaluate.build.cuda_split import CannotSplit, candidates_error, split

ROOT = Path(__file__).resolve().parents[2]

SOURCE = r'''
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_fp16.h>
#define BLOCK 256
constexpr int UNROLL = 4;
struct Affine { float a, b; };   // a brace in a comment: {
static const char* kName = "scale{";

__device__ __forceinline__ float apply(Affine t, float v) { return t.a * v + t.b; }

__global__ void __launch_bounds__(BLOCK) affine_kernel(const float* __restrict__ x, float* __restrict__ y,
                                                     Affine t, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = apply(t, x[i]);
}

template <typename T, int U>
__global__ void copy_kernel(const T* x, T* y, int64_t n) {
    int64_t i = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) * U;
    for (int k = 0; k < U; ++k) if (i + k < n) y[i + k] = x[i + k];
}

torch::Tensor affine(torch::Tensor x, double a, double b) {
    TORCH_CHECK(x.is_cuda(), kName);
    auto y = torch::empty_like(x);
    int64_t n = x.numel();
    auto stream = at::cuda::getCurrentCUDAStream();
    affine_kernel<<<(n + BLOCK - 1) / BLOCK, BLOCK, 0, stream>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), Affine{(float)a, (float)b}, n);
    return y;
}

torch::Tensor copy(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int64_t n = x.numel();
    int64_t blocks = (n + BLOCK * UNROLL - 1) / (BLOCK * UNROLL);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "copy", ([&] {
        copy_kernel<scalar_t, UNROLL><<<blocks, BLOCK>>>(x.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), n);
    }));
    copy_kernel<float, 1><<<dim3(blocks), dim3(BLOCK), 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), 0);
    return y;
}
'''


def test_kernels_go_to_the_device_unit_and_launches_become_launcher_calls():
    sp = split([SOURCE], offset=3)
    assert sp.kernels == ["affine_kernel", "copy_kernel"] and sp.launches == 3
    dev, host = sp.device, sp.host
    # the device unit: CUDA's headers, the kernels and what they use, nothing of torch's
    assert not re.search(r"torch|ATen|at::|TORCH_", dev), dev
    assert "__global__ void __launch_bounds__(BLOCK) affine_kernel" in dev and "apply(Affine t" in dev
    assert "#define BLOCK 256" in dev and "struct Affine" in dev and "constexpr int UNROLL" in dev
    assert "affine_kernel<<<ks_grid, ks_block, ks_smem, ks_stream>>>(x, y, t, n)" in dev
    # scalar_t of AT_DISPATCH_FLOATING_TYPES: float and double; the explicit ones as written
    assert "template void __ks_launch_1<float, UNROLL>(" in dev and "template void __ks_launch_1<double, UNROLL>(" in dev
    assert "template void __ks_launch_2<float, 1>(dim3, dim3, size_t, cudaStream_t, const float* x, float* y" in dev
    # the host unit: no kernel, no <<<, each launch a call with the configuration first
    assert "__global__" not in host and "<<<" not in host and "threadIdx" not in host
    assert "__ks_launch_0(dim3((n + BLOCK - 1) / BLOCK), dim3(BLOCK), (size_t)(0), (cudaStream_t)(stream)," in host
    assert "__ks_launch_1<scalar_t, UNROLL>(dim3(blocks), dim3(BLOCK), (size_t)0, (cudaStream_t)0, x.data_ptr" in host
    assert host.index("void __ks_launch_0(") < host.index("torch::Tensor affine(")    # declared before its use
    # every line where it was: the kernel's first line is line 12 of the joined source, 15 with the
    # build's three lines of header
    first = SOURCE.split("\n").index(next(ln for ln in SOURCE.split("\n") if "affine_kernel(const" in ln)) + 1
    assert f'#line {first + 3} "cuda.cu"\n__global__ void __launch_bounds__' in dev


def _objects(tmp_path: Path, sp) -> tuple[Path, Path, dict]:
    nvcc = shutil.which("nvcc")
    cuda_inc = cuda_include_dir(nvcc)
    (tmp_path / "cuda.cu").write_text(sp.device)
    (tmp_path / "cuda_host.cpp").write_text(sp.host)
    light = tmp_path / "light" / "torch"
    light.mkdir(parents=True)
    (light / "extension.h").write_text(toolchain.LIGHT_HEADER)
    cxx = toolchain._torch_flags(False)[0]
    procs = {
        "cuda.cu": subprocess.Popen([nvcc, "-c", "-std=c++17", "-arch=sm_90", "-Xcompiler", "-fPIC",
                                     str(tmp_path / "cuda.cu"), "-o", str(tmp_path / "dev.o")],
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True),
        "cuda_host.cpp": subprocess.Popen([tools.cxx(), "-c", f"-I{light.parent}", *cxx, "-isystem", str(cuda_inc),
                                           f"-I{STUB_DIR}", str(tmp_path / "cuda_host.cpp"), "-o",
                                           str(tmp_path / "host.o")],
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)}
    outs = {name: (p.communicate()[0], p.returncode) for name, p in procs.items()}
    return tmp_path / "dev.o", tmp_path / "host.o", outs


def _symbols(obj: Path, flag: str) -> set[str]:
    out = subprocess.run(["nm", flag, str(obj)], capture_output=True, text=True, check=True).stdout
    return {ln.split()[-1] for ln in out.splitlines() if "__ks_launch" in ln}


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_both_units_compile_and_every_launcher_the_host_calls_is_defined(tmp_path):
    dev, host, outs = _objects(tmp_path, split([SOURCE], offset=3))
    for name, (text, code) in outs.items():
        assert code == 0, f"{name}:\n{text[-3000:]}"
    called, defined = _symbols(host, "-u"), _symbols(dev, "--defined-only")
    # affine's launcher, copy's for float and double, and the explicit <float, 1>: four symbols
    assert len(called) == 4 and called <= defined, (called, defined)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_a_launcher_the_device_unit_lacks_is_found_before_the_module_is_loaded(tmp_path):
    """An instantiation the split did not foresee would make a module that fails to load; the
    objects are compared first (nm), and the whole build decides instead."""
    sp = split([SOURCE], offset=3)
    sp.device = "\n".join(ln for ln in sp.device.split("\n") if "__ks_launch_1<double" not in ln)
    dev, host, outs = _objects(tmp_path, sp)
    assert all(code == 0 for _, code in outs.values()), outs
    missing = cuda_split.missing_launchers(host, dev)
    assert len(missing) == 1 and "__ks_launch_1" in next(iter(missing))
    assert candidates_error(f"launchers not instantiated: {sorted(missing)}", "cuda_host.cpp", sp, _in_torch) is False


@pytest.mark.parametrize("change, reason", [
    (lambda s: "#ifdef FAST\n#define BLOCK 128\n#endif\n" + s, "preprocessor conditionals"),
    (lambda s: s.replace("__device__ __forceinline__ float apply", "namespace k { __device__ float apply2(float v) "
                         "{ return v; } }\n__device__ __forceinline__ float apply"), "namespace"),
    (lambda s: s.replace("const float* __restrict__ x, float* __restrict__ y,\n",
                         "torch::PackedTensorAccessor32<float, 1> x, float* __restrict__ y,\n"), "names torch"),
    (lambda s: s.replace("copy_kernel<float, 1><<<", "copy_kernel<<<"), "deduced template arguments"),
    (lambda s: s.replace("AT_DISPATCH_FLOATING_TYPES(", "AT_DISPATCH_ALL_TYPES("), "AT_DISPATCH_ALL_TYPES"),
    (lambda s: s.replace("copy_kernel<float, 1><<<", "copy_kernel<float, U2><<<"), "`U2`"),
    (lambda s: s.replace("affine_kernel<<<", "other_kernel<<<"), "not a kernel of this source"),
])
def test_what_the_split_does_not_take_is_built_whole_and_says_why(change, reason):
    with pytest.raises(CannotSplit, match=re.escape(reason)):
        split([change(SOURCE)], offset=3)


HOST_TEMPLATE = r'''
#include <torch/extension.h>
enum { ACT_NONE = 0, ACT_RELU = 1 };
template <int ACT, bool BIAS>
__global__ void act_kernel(float* y, const float* b, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) { float v = y[i] + (BIAS ? b[0] : 0.f); y[i] = ACT == ACT_RELU ? fmaxf(v, 0.f) : v; }
}
template <int ACT, bool BIAS>
static void act_inplace(torch::Tensor y, const float* b) {
    int64_t n = y.numel();
    act_kernel<ACT, BIAS><<<(n + 255) / 256, 256>>>(y.data_ptr<float>(), b, n);
}
torch::Tensor relu_bias(torch::Tensor y, torch::Tensor b) { act_inplace<ACT_RELU, true>(y, b.data_ptr<float>()); return y; }
torch::Tensor plain(torch::Tensor y) { act_inplace<ACT_NONE, false>(y, nullptr); return y; }
'''


def test_a_launch_inside_a_host_template_is_instantiated_for_each_of_its_calls(tmp_path):
    sp = split([HOST_TEMPLATE], offset=3)
    assert "template void __ks_launch_0<ACT_RELU, true>(" in sp.device
    assert "template void __ks_launch_0<ACT_NONE, false>(" in sp.device
    assert "__ks_launch_0<ACT, BIAS>(dim3(" in sp.host
    with pytest.raises(CannotSplit, match="never called with explicit template arguments"):
        split([HOST_TEMPLATE.replace("act_inplace<ACT_RELU, true>(", "act_inplace(").replace(
            "act_inplace<ACT_NONE, false>(", "act_inplace(")])
    with pytest.raises(CannotSplit, match="cannot follow"):
        split([HOST_TEMPLATE.replace("act_inplace<ACT_NONE, false>", "act_inplace<MODE, false>")])
    if shutil.which("nvcc"):
        dev, host, outs = _objects(tmp_path, sp)
        for name, (text, code) in outs.items():
            assert code == 0, f"{name}:\n{text[-3000:]}"
        assert len(_symbols(host, "-u")) == 2 and _symbols(host, "-u") <= _symbols(dev, "--defined-only")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_a_half_dispatch_instantiates_c10_half_with_its_small_header(tmp_path):
    """AT_DISPATCH_FLOATING_TYPES_AND_HALF (common in LLM-written kernels): float, double and
    c10::Half (at::Half), the device unit including c10's Half header only."""
    sp = split([SOURCE.replace("AT_DISPATCH_FLOATING_TYPES(", "AT_DISPATCH_FLOATING_TYPES_AND_HALF(")], offset=3)
    assert "template void __ks_launch_1<c10::Half, UNROLL>(dim3, dim3, size_t, cudaStream_t, const c10::Half* x" \
        in sp.device
    assert "#include <c10/util/Half.h>" in sp.device and "ATen" not in sp.device
    import torch.utils.cpp_extension as ext
    nvcc = shutil.which("nvcc")
    (tmp_path / "cuda.cu").write_text(sp.device)
    r = subprocess.run([nvcc, "-c", "-std=c++17", "-arch=sm_90", "-Xcompiler", "-fPIC",
                        *[f for inc in ext.include_paths() for f in ("-isystem", inc)], str(tmp_path / "cuda.cu"),
                        "-o", str(tmp_path / "dev.o")], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert len(_symbols(tmp_path / "dev.o", "--defined-only")) == 5     # affine, copy ×3, copy<float, 1>


MACRO = r'''
#include <torch/extension.h>
template <int E, bool VEC>
__global__ void rows_kernel(float* y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] *= (float)E * (VEC ? 2.f : 1.f);
}
torch::Tensor rows(torch::Tensor y, int epl, bool vec) {
    int64_t n = y.numel();
    #define LAUNCH(E) do { if (vec) rows_kernel<E, true><<<(n + 255) / 256, 256>>>(y.data_ptr<float>(), n); \
                           else rows_kernel<E, false><<<(n + 255) / 256, 256>>>(y.data_ptr<float>(), n); } while (0)
    switch (epl) { case 1: LAUNCH(1); break; case 2: LAUNCH(2); break; default: LAUNCH(4); }
    #undef LAUNCH
    return y;
}
'''


def test_a_launch_in_a_macro_of_the_host_function_is_instantiated_for_each_use(tmp_path):
    sp = split([MACRO], offset=3)
    for e in ("1", "2", "4"):
        assert f"template void __ks_launch_0<{e}, true>(" in sp.device
        assert f"template void __ks_launch_1<{e}, false>(" in sp.device
    assert "rows_kernel" not in sp.host and "__ks_launch_0<E, true>(dim3(" in sp.host
    with pytest.raises(CannotSplit, match="cannot follow"):
        split([MACRO.replace("LAUNCH(4)", "LAUNCH(epl)")])
    with pytest.raises(CannotSplit, match="a launch in a top-level macro"):
        split(["#define GO(k) k<<<1, 1>>>()\n" + MACRO])
    if shutil.which("nvcc"):
        dev, host, outs = _objects(tmp_path, sp)
        for name, (text, code) in outs.items():
            assert code == 0, f"{name}:\n{text[-3000:]}"
        assert len(_symbols(host, "-u")) == 6 and _symbols(host, "-u") <= _symbols(dev, "--defined-only")


def test_a_source_with_no_launch_is_built_whole():
    with pytest.raises(CannotSplit, match="no kernel launch"):
        split(["torch::Tensor f(torch::Tensor x) { return x; }"])


def _in_torch(name: str) -> bool:
    return name in {"acc_type", "getCurrentCUDAStream"}


@pytest.mark.parametrize("output, unit, theirs", [
    # a typo in the host function: gcc's words, in the candidate's lines
    ("cuda.cu:30:5: error: \u2018flot\u2019 was not declared in this scope\n", "cuda_host.cpp", True),
    ("cuda.cu:30:5: error: expected \u2018;\u2019 before \u2018return\u2019\n", "cuda_host.cpp", True),
    # a typo in a kernel: nvcc's words
    ('/b/cuda.cu(17): error: identifier "flot" is undefined\n1 error detected in the compilation of "x".\n',
     "cuda.cu", True),
    # nvcc's follow-on error of the same typo (an operand of <error-type>) does not hide it; alone it decides nothing
    ('/b/cuda.cu(17): error: identifier "flot" is undefined\n/b/cuda.cu(17): error: ambiguous "?" operation: second '
     'operand of type "<error-type>" can be converted to third operand type "c10::Half"\n', "cuda.cu", True),
    ('/b/cuda.cu(17): error: ambiguous "?" operation: second operand of type "<error-type>"\n', "cuda.cu", False),
    # a name torch's headers hold: the whole build decides
    ('/b/cuda.cu(17): error: namespace "at" has no member "acc_type"\n', "cuda.cu", False),
    # a name only the other unit has (the kernel's helper, seen from the host)
    ("cuda.cu:30:5: error: \u2018apply\u2019 was not declared in this scope\n", "cuda_host.cpp", False),
    # CUDA's own names, which the host compiler does not know
    ("cuda.cu:9:5: error: \u2018__syncthreads\u2019 was not declared in this scope\n", "cuda_host.cpp", False),
    ("cuda.cu:9:5: error: \u2018threadIdx\u2019 was not declared in this scope\n", "cuda_host.cpp", False),
    # the generated launchers, a type error, an error line of another shape
    ('ks_launchers.cu(2): error: identifier "E" is undefined\n', "cuda.cu", False),
    ("cuda.cu:30:5: error: no match for \u2018operator+\u2019 (operand types are \u2018__half\u2019)\n",
     "cuda_host.cpp", False),
    ("nvcc fatal   : Unknown option '--bogus'\n", "cuda.cu", False),
])
def test_a_split_units_error_is_reported_only_when_it_is_the_candidates(output, unit, theirs):
    sp = split([SOURCE], offset=3)
    assert candidates_error(output, unit, sp, _in_torch) is theirs


def _shipped_cuda_sources() -> dict[str, list[str]]:
    """Each shipped CUDA solution's cuda_sources, as its load_inline call passes them."""
    import torch.utils.cpp_extension as ext

    class Called(Exception):
        pass

    def capture(*args, **kwargs):
        raise Called(kwargs)
    found = {}
    real = ext.load_inline
    ext.load_inline = capture
    try:
        for f in sorted(ROOT.glob("examples/*/solutions/**/cuda_*.py")):
            try:
                runpy.run_path(str(f), run_name="candidate")
            except Called as c:
                cu = c.args[0].get("cuda_sources")
                found[str(f.relative_to(ROOT))] = [cu] if isinstance(cu, str) else list(cu or [])
    finally:
        ext.load_inline = real
    return found


def test_every_shipped_cuda_solution_splits():
    """The split takes the shapes the shipped solutions use (launches in host templates, in a
    host function's macro, under dispatch macros)."""
    sources = _shipped_cuda_sources()
    assert len(sources) >= 25
    why = {}
    for name, cuda in sources.items():
        try:
            split(cuda, offset=3)
        except CannotSplit as e:
            why[name] = str(e)
    assert not why, why


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_every_shipped_cuda_solution_that_splits_compiles_and_links(tmp_path):
    for i, (name, cuda) in enumerate(_shipped_cuda_sources().items()):
        try:
            sp = split(cuda, offset=3)
        except CannotSplit:
            continue
        d = tmp_path / str(i)
        d.mkdir()
        dev, host, outs = _objects(d, sp)
        for unit, (text, code) in outs.items():
            assert code == 0, f"{name} {unit}:\n{text[-3000:]}"
        assert _symbols(host, "-u") <= _symbols(dev, "--defined-only"), name


def test_masking_keeps_offsets_and_blanks_strings_and_comments():
    text = 'a = "x{y"; // }\n/* { */ b = \'{\'; c = 1\'000;'
    m = cuda_split.mask(text)
    assert len(m) == len(text) and m.count("\n") == 1
    assert "{" not in m and "}" not in m and "c = 1'000;" in m


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_a_host_unit_including_the_cuda_context_builds_against_its_header_once_it_is_made():
    """A split host unit that includes ATen/cuda/CUDAContext.h up front builds against the light
    header while the one that precompiles CUDA's context is being made (a detached maker, started
    by that build), then against it (its .cmd names the "cudahost" folder); a typo in it still
    comes back on the candidate's line, and a correct source still builds (compile-only here)."""
    import fcntl
    import sys
    import uuid

    from kernelskill import Candidate
    from kernelskill.evaluate import compile
    from kernelskill.evaluate.build import pch
    from kernelskill.evaluate.build.extensions import build_root
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from build_cost import source

    def host_cmd(res) -> str:
        return (build_root() / res.extensions[0] / "cuda_host.cmd").read_text()

    first = compile(Candidate.from_source(source("cuda", uuid.uuid4().hex[:10])), device="cpu")
    assert first.ok, first.to_dict()
    made = sorted((build_root() / "_pch").glob("cudahost-*"))
    assert made, "the build started no maker of the CUDA host header"
    if "/cudahost-" not in host_cmd(first):          # not made before: the light header served meanwhile
        assert "/light-" in host_cmd(first)
    for d in made:                                   # made here if its maker is gone; else wait for it
        with open(d / "lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
        assert pch.make_pch(d) and (d / "torch" / "extension.h.gch").exists()
    token = uuid.uuid4().hex[:10]
    typo = source("cuda", token, change="typo")
    res = compile(Candidate.from_source(typo), device="cpu")
    assert not res.ok and "/cudahost-" in host_cmd(res), res.to_dict()
    d = next(d for d in res.diagnostics if d.severity == "error")
    assert "flot" in d.message and d.line == typo.splitlines().index(
        next(ln for ln in typo.splitlines() if "flot q;" in ln)) + 1, d
    ok = compile(Candidate.from_source(source("cuda", token)), device="cpu")
    assert ok.ok and ok.compile_only and "/cudahost-" in host_cmd(ok), ok.to_dict()


def test_only_a_header_included_up_front_counts():
    ctx = "ATen/cuda/CUDAContext.h"
    assert cuda_split.includes_up_front(f'#include <torch/extension.h>\n#line 5 "cuda.cu"\n\n// the stream\n'
                                        f'#include <{ctx}>\nint x;\n', ctx)
    assert not cuda_split.includes_up_front(f"#include <a.h>\nint y;\n#include <{ctx}>\n", ctx)   # after code
    assert not cuda_split.includes_up_front(f"#define N 4\n#include <{ctx}>\n", ctx)   # a macro first may change it
    assert not cuda_split.includes_up_front("#include <cuda_runtime.h>\nint z;\n", ctx)


WMMA = r'''
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_fp16.h>
#include <mma.h>
#include <cooperative_groups.h>
using namespace nvcuda;
namespace cg = cooperative_groups;
constexpr int TILE = 16;

__global__ void tile_mma(const half* a, const half* b, float* c) {
    cg::thread_block block = cg::this_thread_block();
    wmma::fragment<wmma::matrix_a, TILE, TILE, TILE, half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, TILE, TILE, TILE, half, wmma::row_major> fb;
    wmma::fragment<wmma::accumulator, TILE, TILE, TILE, float> acc;
    wmma::fill_fragment(acc, 0.f);
    wmma::load_matrix_sync(fa, a, TILE);
    wmma::load_matrix_sync(fb, b, TILE);
    wmma::mma_sync(acc, fa, fb, acc);
    block.sync();
    wmma::store_matrix_sync(c, acc, TILE, wmma::mem_row_major);
}

torch::Tensor mm16(torch::Tensor a, torch::Tensor b) {
    auto c = torch::empty({TILE, TILE}, a.options().dtype(torch::kFloat32));
    tile_mma<<<1, 32, 0, at::cuda::getCurrentCUDAStream()>>>(reinterpret_cast<const half*>(a.data_ptr<at::Half>()),
        reinterpret_cast<const half*>(b.data_ptr<at::Half>()), c.data_ptr<float>());
    return c;
}
'''


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_wmma_and_cooperative_groups_stay_in_the_device_unit(tmp_path):
    # mma.h and cooperative_groups.h declare nothing to a C++ compiler: in the host unit,
    # `using namespace nvcuda;` failed and the source was built whole (20 s more on this CPU).
    sp = split([WMMA], offset=3)
    assert sp.kernels == ["tile_mma"] and sp.launches == 1
    for text in ("#include <mma.h>", "#include <cooperative_groups.h>", "using namespace nvcuda;",
                 "namespace cg = cooperative_groups;"):
        assert text in sp.device and text not in sp.host, text
    assert "constexpr int TILE = 16;" in sp.device and "constexpr int TILE = 16;" in sp.host    # both use it
    dev, host, outs = _objects(tmp_path, sp)
    for name, (text, code) in outs.items():
        assert code == 0, f"{name}:\n{text[-3000:]}"
    assert _symbols(host, "-u") <= _symbols(dev, "--defined-only")
