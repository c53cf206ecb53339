"""The direct build (evaluate/build/direct.py): declarations read from the sources, what goes to torch's
own build, a compile error from the candidate's unit alone, a one-line change rebuilding one unit,
the light header's misses caught, the precompiled headers' lock, the build steps reported."""
from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from kernelskill import Candidate
from kernelskill.evaluate import compile, evaluate
from kernelskill.evaluate.build import direct as toolchain, pch, tools
from kernelskill.evaluate.api import Options
from kernelskill.bench.executors import BuildEta

from helpers import RELU_TASK


def test_declarations_are_read_as_the_sources_write_them():
    src = toolchain._strip_comments('''
#include <torch/extension.h>
// torch::Tensor relu2(int fake);   a comment never declares
/* torch::Tensor scale(float also_fake); */
static float helper(float v) { return v; }
torch::Tensor relu2(torch::Tensor x) { return x; }
std::vector<torch::Tensor> split_two(const torch::Tensor& x,
                                     int64_t dim = 0,
                                     double eps = 1e-5);
void segfault() { volatile int* p = nullptr; *p = 1; }
''')
    assert toolchain.declaration("relu2", src) == "torch::Tensor relu2(torch::Tensor x);"
    assert toolchain.declaration("split_two", src) == (
        "std::vector<torch::Tensor> split_two(const torch::Tensor& x, int64_t dim = 0, double eps = 1e-5);")
    assert toolchain.declaration("segfault", src) == "void segfault();"
    with pytest.raises(toolchain.Unsupported, match="static"):
        toolchain.declaration("helper", src)          # internal linkage: the bindings' unit cannot call it
    with pytest.raises(toolchain.Unsupported, match="no declaration of `missing`"):
        toolchain.declaration("missing", src)


@pytest.mark.parametrize("snippet, token", [
    ("py::object f(py::object o) { return o; }", "py::"),
    ("#include <torch/torch.h>\ntorch::Tensor f(torch::Tensor x) { return x; }", "torch/torch.h"),
    ("torch::Tensor f(torch::Tensor x) { torch::nn::Linear l(2, 2); return x; }", "torch::nn"),
    ("torch::Tensor f(torch::Tensor x) { using namespace torch::indexing; return x.index({Slice()}); }",
     "torch::indexing"),
])
def test_sources_that_need_the_full_header_go_to_torchs_build(tmp_path, snippet, token):
    with pytest.raises(toolchain.Unsupported, match=token):
        toolchain.plan("f_0", tmp_path, [snippet], [], (), {"functions": ["f"]})


def test_calls_the_direct_build_does_not_handle_go_to_torchs_build(tmp_path):
    src = ["torch::Tensor f(torch::Tensor x) { return x; }"]
    with pytest.raises(toolchain.Unsupported, match="functions"):
        toolchain.plan("f_0", tmp_path, src, [], (), {})                           # bindings in the sources
    with pytest.raises(toolchain.Unsupported, match="positional"):
        toolchain.plan("f_0", tmp_path, src, [], (None, ["f"]), {})
    with pytest.raises(toolchain.Unsupported, match="does not handle"):
        toolchain.plan("f_0", tmp_path, src, [], (), {"functions": ["f"], "some_future_flag": 1})
    p = toolchain.plan("f_0", tmp_path, src, [], (), {"functions": {"f": "doubles"}, "extra_cflags": [" -O2 "]})
    assert p.cflags == ["-O2"] and p.declarations == ["torch::Tensor f(torch::Tensor x);"]
    # The bindings are named after what they bind: the same signatures share one object.
    q = toolchain.plan("g_1", tmp_path, ["torch::Tensor f(torch::Tensor x) { return x * 2; }"], [], (),
                       {"functions": {"f": "doubles"}})
    assert p.defs == q.defs and toolchain.bind_source(p) == toolchain.bind_source(q)
    assert f"PYBIND11_MODULE({p.defs}," in toolchain.bind_source(p)   # named per extension at the link


def test_two_extensions_sharing_their_bindings_are_two_modules_in_one_process(tmp_path):
    # Same signatures, so one bindings object serves both; each is renamed to its own module before
    # the link. Loaded side by side in one process, each must run its own code, not the first one's.
    import importlib.util
    import torch
    from kernelskill.evaluate.build.extensions import build_root
    token = uuid.uuid4().hex[:8]
    mods = []
    for k in (2, 3):
        src = [f"// {token}\ntorch::Tensor f(torch::Tensor x) {{ return x * {k}; }}"]
        p = toolchain.plan(f"twin{k}_{token}", tmp_path / f"b{k}", src, [], (), {"functions": ["f"]})
        (tmp_path / f"b{k}").mkdir()
        so = toolchain.build(p, build_root())
        syms = subprocess.run(["nm", "-D", "--defined-only", str(so)], capture_output=True, text=True).stdout
        assert f"PyInit_{p.unique}" in syms and f"PyInit_{p.defs}" not in syms, syms[-500:]
        spec = importlib.util.spec_from_file_location(p.unique, so)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        mods.append((k, p, mod))
    assert mods[0][1].defs == mods[1][1].defs                # the bindings were shared
    x = torch.arange(4.0)
    for k, p, mod in mods:
        assert torch.equal(mod.f(x), x * k), (p.unique, mod.f(x))


def test_parameter_names_are_dropped_only_where_certain():
    un = toolchain.unnamed
    assert un("torch::Tensor x, int64_t n") == "torch::Tensor, int64_t"
    assert un("const torch::Tensor& input, float* out, std::vector<int64_t> sizes") == \
        "const torch::Tensor&, float*, std::vector<int64_t>"
    assert un("at::Tensor const &x, c10::optional<at::Tensor> bias, double eps") == \
        "at::Tensor const &, c10::optional<at::Tensor>, double"
    assert un("std::map<int, float> m, const int k") == "std::map<int, float>, const int"
    # a type that ends in a word, or a word that might be a type: kept as written
    for kept in ("torch::Tensor", "unsigned int", "long long", "const Tensor", "struct Foo", "unsigned n",
                 "double", "", "float x[4]", "int n = 3", "torch::Tensor (*fn)(torch::Tensor)"):
        assert un(kept) == kept, kept


def test_the_bindings_depend_on_the_types_not_the_names(tmp_path):
    def plan(src, functions):
        return toolchain.plan("u_0", tmp_path, [src], [], (), {"functions": functions})
    a = plan("torch::Tensor relu2(torch::Tensor x, int64_t n) { return x; }", ["relu2"])
    b = plan("at::Tensor my_relu(at::Tensor input, int64_t count) { return input; }", {"my_relu": "doc"})
    c = plan("torch::Tensor relu2(torch::Tensor x, double n) { return x; }", ["relu2"])
    assert a.generic == ["torch::Tensor ks_fn_0(torch::Tensor, int64_t);"]
    assert a.declarations == ["torch::Tensor relu2(torch::Tensor x, int64_t n);"]
    # torch::Tensor and at::Tensor are one type but two spellings: two bindings objects, both right
    assert a.defs != b.defs
    b2 = plan("torch::Tensor other(torch::Tensor y, int64_t m) { return y; }", ["other"])
    assert toolchain.bind_source(a) == toolchain.bind_source(b2) and a.defs == b2.defs
    assert "relu2" not in toolchain.bind_source(a) and "relu2" in toolchain.names_source(a)
    assert a.defs != c.defs                                  # another type: other bindings


def _build_one(tmp_path, name: str, src: str, functions, steps=None):
    import importlib.util
    from kernelskill.evaluate.build.extensions import build_root
    d = tmp_path / name
    d.mkdir()
    p = toolchain.plan(name, d, [src], [], (), {"functions": functions})
    so = toolchain.build(p, build_root(), steps.append if steps is not None else None)
    spec = importlib.util.spec_from_file_location(p.unique, so)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return p, mod


def test_a_renamed_function_reuses_the_bindings_and_keeps_its_names(tmp_path):
    """Two candidates whose functions differ only in their names (and their parameters' names) share
    one bindings object; each module has its own Python names, docstring and error messages, and
    runs its own code in one process."""
    import torch
    token = uuid.uuid4().hex[:8]
    p1, m1 = _build_one(tmp_path, f"first_{token}", f"// {token}\ntorch::Tensor scale_a(torch::Tensor x, double k, "
                        "int64_t n) { return x * k + (double)n; }", {"scale_a": 'scales "x" by k'})
    steps: list[str] = []
    p2, m2 = _build_one(tmp_path, f"second_{token}", f"// {token}\ntorch::Tensor scale_bb(torch::Tensor y, double f, "
                        "int64_t m) { return y * f - (double)m; }", ["scale_bb"], steps)
    assert p1.defs == p2.defs and "bind.cpp: cached object" in steps, steps
    assert "names.cpp" in " ".join(steps)
    x = torch.arange(4.0)
    assert torch.equal(m1.scale_a(x, 2.0, 1), x * 2 + 1) and torch.equal(m2.scale_bb(x, 3.0, 1), x * 3 - 1)
    assert not hasattr(m1, "scale_bb") and not hasattr(m2, "scale_a") and not hasattr(m1, "ks_fn_0")
    assert 'scales "x" by k' in m1.scale_a.__doc__ and m2.scale_bb.__name__ == "scale_bb"
    with pytest.raises(TypeError, match=r"scale_bb\(\): incompatible function arguments"):
        m2.scale_bb("not a tensor")


def test_each_of_many_functions_is_bound_to_its_own_name(tmp_path):
    """Eleven functions of one type: ks_fn_1 and ks_fn_10 are different symbols, and each Python name
    calls its own function (an index off by one would return another's result)."""
    import torch
    token = uuid.uuid4().hex[:8]
    src = f"// {token}\n" + "\n".join(f"torch::Tensor add{i}(torch::Tensor x) {{ return x + {i}; }}" for i in range(11))
    p, mod = _build_one(tmp_path, f"many_{token}", src, [f"add{i}" for i in range(11)])
    assert len(p.generic) == 11 and "ks_fn_10(torch::Tensor);" in p.generic[10]
    x = torch.zeros(2)
    for i in range(11):
        assert torch.equal(getattr(mod, f"add{i}")(x), x + i), i


def test_bindings_built_ahead_serve_a_candidate_of_that_signature(tmp_path):
    """`kernelskill warm` builds the bindings of the common signatures the way a candidate's build
    keys them: a candidate with those types, whatever its names, then compiles no bindings."""
    from kernelskill.evaluate.build.extensions import build_root
    sig = "torch::Tensor a, torch::Tensor b, torch::Tensor c, torch::Tensor d, torch::Tensor e, double s, bool f"
    (unit,) = toolchain.common_bindings(build_root(), tmp_path / "warm", False, [sig])
    unit.cached.unlink(missing_ok=True)                     # never built: warm must build it
    said: list[str] = []
    toolchain._build_bindings([unit], 1, "", said.append)
    assert unit.cached.exists() and "built in" in said[0], said
    token = uuid.uuid4().hex[:8]
    steps: list[str] = []
    _build_one(tmp_path, f"ahead_{token}", f"// {token}\ntorch::Tensor combo(torch::Tensor p, torch::Tensor q, "
               "torch::Tensor r, torch::Tensor s, torch::Tensor t, double k, bool z) { return p + q; }", ["combo"], steps)
    assert "bind.cpp: cached object" in steps and "compile bind.cpp" not in steps, steps
    toolchain._build_bindings([unit], 1, "", said.append)
    assert said[-1] == "bindings of 1 common signatures: ready"
    assert "torch::Tensor x" in toolchain.COMMON_SIGNATURES


def test_bindings_whose_generic_types_miss_the_definition_are_built_under_the_real_names(tmp_path, monkeypatch):
    """Should the generic declaration ever read a parameter's type otherwise than the definition
    (here forced: `int` for `int64_t`), the renamed symbol would not exist: the bindings are then
    built under the candidate's own names, as load_inline writes them, and the module works."""
    import torch
    real = toolchain.unnamed
    monkeypatch.setattr(toolchain, "unnamed", lambda params: real(params).replace("int64_t", "int"))
    token = uuid.uuid4().hex[:8]
    steps: list[str] = []
    p, mod = _build_one(tmp_path, f"mismatch_{token}", f"// {token}\ntorch::Tensor add_n(torch::Tensor x, int64_t n) "
                        "{ return x + (double)n; }", ["add_n"], steps)
    assert p.generic == ["torch::Tensor ks_fn_0(torch::Tensor, int);"]
    assert any("the candidate's names" in s for s in steps), steps
    x = torch.arange(3.0)
    assert torch.equal(mod.add_n(x, 5), x + 5)


def _candidate(body: str, token: str, flags: str = '["-O2"]') -> str:
    return f'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = """
#include <torch/extension.h>
// {token}
torch::Tensor relu2(torch::Tensor x) {{
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float* a = xc.data_ptr<float>();
    float* b = y.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) {body}
    return y;
}}
"""
ext = load_inline(name="ks_direct", cpp_sources=SRC, functions=["relu2"], extra_cflags={flags})


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu2(x)
'''


RELU2 = "b[i] = a[i] > 0.f ? 2.f * a[i] : 0.f;"


def test_a_compile_error_comes_from_the_candidates_unit_alone():
    """A typo ends the build when the candidate's own unit fails: the bindings are not waited for."""
    steps: list[str] = []
    src = _candidate("b[i] = a[i] > 0.f ? 2.f * a[i] : 0.f; flot z;", uuid.uuid4().hex)
    res = compile(Candidate.from_source(src), opts=Options(on_step=steps.append))
    assert not res.ok and res.path == "direct"
    d = next(d for d in res.diagnostics if d.severity == "error")
    assert "flot" in d.message and d.file == "candidate"
    assert d.line == src.splitlines().index(next(ln for ln in src.splitlines() if "flot z" in ln)) + 1
    assert "flot z;" in d.source_line
    assert "compile kernel.cpp" in steps and "link" not in steps
    assert "bind.cpp" not in res.units            # cached, or killed when the kernel failed: never awaited
    # The result keeps the build's timeline: when each unit started and when the candidate's failed.
    at = {text: t for t, text in res.steps}
    failed = next(text for text in at if text.startswith("kernel.cpp failed after"))
    assert 0 <= at["compile kernel.cpp"] < at[failed] <= res.seconds + 0.01, res.steps
    assert [text for _, text in res.steps] == [s for s in steps if not s.startswith("load")], (res.steps, steps)


def test_a_one_line_change_rebuilds_the_kernel_unit_only():
    token = uuid.uuid4().hex
    first = compile(Candidate.from_source(_candidate(RELU2, token)))
    assert first.ok and first.path == "direct" and "kernel.cpp" in first.units, first.to_dict()
    steps: list[str] = []
    changed = Candidate.from_source(_candidate("b[i] = a[i] > 0.f ? a[i] + a[i] : 0.f;", token))
    second = compile(changed, opts=Options(on_step=steps.append))
    assert second.ok and not second.cache_hit and second.path == "direct"
    # the candidate's unit alone: the bindings cached (their object renamed to name the module)
    assert set(second.units) == {"kernel.cpp"}, second.units
    assert "bind.cpp: cached object" in steps and "link" in steps
    # the rebuilt extension is the candidate's: verified against the task
    r = evaluate(RELU_TASK, changed, opts=Options(device="cpu", timing=None, profile=False))
    assert r.status == "ok", r.message
    again = compile(changed)
    assert again.ok and again.cache_hit and again.units == {}


def test_what_the_light_header_lacks_is_built_by_torch():
    """torch::get_num_threads is in torch's full C++ API, not in torch/types.h, and no static pattern
    names it: the candidate's unit fails against the light header, and torch's build takes it."""
    src = _candidate(RELU2, uuid.uuid4().hex).replace(
        "auto xc = x.contiguous();", "TORCH_CHECK(torch::get_num_threads() > 0);\n    auto xc = x.contiguous();")
    res = compile(Candidate.from_source(src))
    assert res.ok, res.to_dict()
    assert res.path == "torch" and "light header" in res.fallback


def test_a_precompiled_header_has_one_maker(tmp_path):
    d, ready = toolchain.header_dir(tmp_path, "light", ["-O2"], make=False)
    assert not ready and (d / "torch" / "extension.h").read_text() == toolchain.LIGHT_HEADER
    (d / "cmd.json").write_text('["false"]')
    with open(d / "lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert pch.make_pch(d) is False                  # another maker holds it: no wait, no second copy
    assert pch.make_pch(d) is False and (d / "failed.log").exists()     # `false` failed: logged
    assert not (d / "torch" / "extension.h.gch").exists()
    # another flag set is another header
    assert toolchain.header_dir(tmp_path, "light", ["-O3"], make=False)[0] != d


def test_a_maker_takes_a_free_slot_while_another_header_is_being_made(tmp_path, monkeypatch):
    """`kernelskill warm` on a 16-core machine made eleven headers one after the other (4 min 15 s on
    the H100's host): with two slots, a maker whose first slot is held takes the second at once."""
    import threading
    monkeypatch.setattr(pch, "maker_slots", lambda: 2)
    d, _ = toolchain.header_dir(tmp_path, "light", ["-O1"], make=False)
    (d / "cmd.json").write_text(json.dumps([sys.executable, "-c", "import sys; open(sys.argv[-1], 'w').write('pch')"]))
    with open(tmp_path / "makers.0.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)                       # another header is being made
        done = []
        t = threading.Thread(target=lambda: done.append(pch.make_pch(d)))
        t.start()
        t.join(timeout=120)                                    # a deadline, not a wait: it ends at once
        assert done == [True] and (d / "torch" / "extension.h.gch").read_text() == "pch"
    assert 1 <= pch.maker_slots() <= 8


def test_the_build_phase_eta_learns_from_the_builds_seen():
    eta = BuildEta(total=10, parallel=2)
    assert eta.text() == "ETA ?"
    eta.done(20.0)
    eta.done(20.0)
    assert eta.remaining() == pytest.approx(20.0 * 8 / 2)
    for _ in range(8):
        eta.done(0.5)                                          # cached builds: the estimate follows
    assert eta.remaining() == 0


def test_two_extensions_with_the_same_signatures_keep_their_own_kernels():
    """Both extensions share one bindings object; each must still be its own module. When they
    shared the module's name too, Python handed the second `load_inline` the first one's module:
    ext_b.f computed 2x, not 3x — a silent wrong kernel."""
    token = uuid.uuid4().hex
    src = f'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = """
#include <torch/extension.h>
// {token}
torch::Tensor f(torch::Tensor x) {{ return x * FACTOR; }}
"""
ext_a = load_inline(name="ks_same_a", cpp_sources=SRC.replace("FACTOR", "2"), functions=["f"])
ext_b = load_inline(name="ks_same_b", cpp_sources=SRC.replace("FACTOR", "3"), functions=["f"])


class ModelNew(nn.Module):
    def forward(self, x):
        r = torch.relu(x)
        return ext_b.f(r) - r          # 3r - r: the task's 2·relu(x), only with ext_b's own kernel
'''
    r = evaluate(RELU_TASK, Candidate.from_source(src), opts=Options(device="cpu", timing=None, profile=False))
    assert r.status == "ok", (r.status, r.message)
    assert r.compile.path == "direct" and len(r.compile.extensions) == 2


def test_a_function_declared_but_never_defined_is_a_compile_error_at_its_declaration():
    """The direct build links without complaint (an extension may leave symbols to its loader); its
    module then fails to load. A function the candidate declares and never defines is its own
    error, said at once at the declaration's line (torch's build said the same, 20 s later)."""
    src = f'''import torch
from torch.utils.cpp_extension import load_inline
SRC = """
#include <torch/extension.h>
// {uuid.uuid4().hex}
torch::Tensor g(torch::Tensor x);
torch::Tensor f(torch::Tensor x) {{ return g(x); }}
"""
ext = load_inline(name="ks_undefined", cpp_sources=SRC, functions=["f"])


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return ext.f(x)
'''
    res = compile(Candidate.from_source(src))
    assert not res.ok and res.path == "direct" and not res.fallback, res.to_dict()
    d = res.diagnostics[0]
    assert "undefined symbol: g(at::Tensor)" in d.message and "`g` is declared but defined nowhere" in d.message
    assert d.file == "candidate" and d.line == 6 and d.source_line == "torch::Tensor g(torch::Tensor x);", d


def test_a_symbol_the_candidate_does_not_declare_still_goes_to_torchs_build():
    """Only the candidate's own declarations are judged at once: a missing library symbol (not
    declared in the sources) is left to torch's build, which may link what this one did not."""
    from kernelskill.evaluate.build.extensions import _declared_never_defined
    src = "torch::Tensor g(torch::Tensor x);\ntorch::Tensor f(torch::Tensor x) { return g(x); }\n"
    err = "/b/x.so: undefined symbol: _Z1gN2at6TensorE"
    assert _declared_never_defined(err, [src], src).line == 1
    assert _declared_never_defined("/b/x.so: undefined symbol: cublasSgemm_v2", [src + "cublasSgemm_v2(h);"], src) is None
    defined = src + "torch::Tensor g(torch::Tensor x) { return x; }\n"      # defined: not this cause
    assert _declared_never_defined(err, [defined], defined) is None
    assert _declared_never_defined("libfoo.so: cannot open shared object file", [src], src) is None


# ---- nvcc: the light header and the two front ends side by side -----------------------------------
CUDA_SRC = r'''
#include <torch/extension.h>
__global__ void scale_kernel(const float* x, float* y, int n, float a) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}
using namespace torch;
torch::Tensor scale(torch::Tensor x, double a) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "float32 only");
    auto y = torch::empty_like(x);
    auto z = zeros({1}, x.options());
    int n = x.numel();
    scale_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n, (float)a);
    return y;
}
'''


def test_the_light_nvcc_header_holds_the_ops_the_sources_name_and_compiles(tmp_path):
    text = toolchain.nvcc_light_header([CUDA_SRC])
    assert "#include <ATen/ops/empty_like.h>" in text and "#include <ATen/ops/zeros.h>" in text
    assert "scale_kernel" not in text and "constexpr auto kFloat32 = at::kFloat;" in text
    assert "ATen/ATen.h" not in text and "#include <torch/types.h>" not in text
    inc = toolchain.nvcc_light_dir(tmp_path, [CUDA_SRC])
    assert (inc / "torch" / "types.h").read_text() == text == (inc / "torch" / "extension.h").read_text()
    # the host's view of it, with the kernel launch left out: what the candidate uses is declared
    host = CUDA_SRC.replace("__global__ ", "").replace("<<<(n + 255) / 256, 256>>>", "").replace(
        "blockIdx.x * blockDim.x + threadIdx.x", "0")
    (tmp_path / "host.cpp").write_text(host)
    cxx, _, _ = toolchain._torch_flags(False)
    r = subprocess.run([tools.cxx(), "-fsyntax-only", f"-I{inc}", *cxx, str(tmp_path / "host.cpp")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    bad = subprocess.run([tools.cxx(), "-fsyntax-only", f"-I{inc}", *cxx, "-x", "c++", "-"],
                         input=host.replace("torch::empty_like", "torch::acc_type"), capture_output=True, text=True)
    assert bad.returncode != 0                                  # the test above can fail


def test_a_name_torch_has_goes_to_the_full_header_a_typo_does_not():
    out = ('/b/cuda.cu(110): error: namespace "at" has no member "acc_type"\n'
           '/b/cuda.cu(25): error: identifier "flot" is undefined\n')
    assert toolchain.nvcc_light_miss(out) == "acc_type"
    assert toolchain.nvcc_light_miss('/b/cuda.cu(25): error: identifier "flot" is undefined') is None
    assert toolchain.nvcc_light_miss('x.cu(9): error: namespace "torch" has no member "empty_lik"') is None
    assert toolchain.nvcc_light_miss('x.cu(9): error: identifier "C10_CUDA_KERNEL_LAUNCH_CHECK" is undefined') \
        == "C10_CUDA_KERNEL_LAUNCH_CHECK"


PLAIN_CU = r'''
__global__ void twice(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
void launch_twice(const float* x, float* y, int n) { twice<<<(n + 255) / 256, 256>>>(x, y, n); }
'''


def _defined(obj: Path) -> set[str]:
    out = subprocess.run(["nm", "--defined-only", "-g", str(obj)], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_nvcc_phases_side_by_side_make_what_nvcc_makes(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text(PLAIN_CU)
    flags = ["-c", "-arch=sm_90", "--compiler-options", "-fPIC"]
    serial = subprocess.run(["nvcc", *flags, str(src), "-o", str(tmp_path / "serial.o")], capture_output=True, text=True)
    assert serial.returncode == 0, serial.stderr
    par = subprocess.run([sys.executable, str(toolchain.NVCC_PHASES), "nvcc", *flags, str(src), "-o",
                          str(tmp_path / "par.o")], capture_output=True, text=True)
    assert par.returncode == 0, par.stdout + par.stderr
    keep = tmp_path / "par.nvcc"
    assert (keep / "k.cudafe1.cpp").exists() and (keep / "k.ptx").exists()     # it ran the phases itself
    assert (keep / "k.module_id").read_text().endswith("_k_cu_" + (keep / "k.module_id").read_text()[-8:])
    assert _defined(tmp_path / "par.o") == _defined(tmp_path / "serial.o")
    assert any("launch_twice" in s for s in _defined(tmp_path / "par.o"))


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_nvcc_phases_report_a_device_typo_once_with_its_line(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text(PLAIN_CU.replace("if (i < n) y[i]", "flot z = 1; if (i < n) y[i]"))
    r = subprocess.run([sys.executable, str(toolchain.NVCC_PHASES), "nvcc", "-c", "-arch=sm_90", str(src), "-o",
                        str(tmp_path / "k.o")], capture_output=True, text=True)
    assert r.returncode != 0
    assert r.stdout.count('error: identifier "flot" is undefined') == 1, r.stdout
    assert f"{src}(4): error" in r.stdout


def test_torch_flags_call_no_deprecated_torch_helper():
    """The test run's only warnings came from here: torch deprecates (and empties) the pybind11 ABI
    flag helper. The flags are taken with every warning an error, in a fresh process (the flags are
    cached per process)."""
    code = ("import warnings\nwarnings.simplefilter('error')\n"
            "from kernelskill.evaluate.build import direct as toolchain, pch, tools\n"
            "cxx, _, ld = toolchain._torch_flags(False)\n"
            "assert '-DTORCH_API_INCLUDE_EXTENSION_H' in cxx and '-shared' in ld\nprint('ok')")
    done = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", code], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
