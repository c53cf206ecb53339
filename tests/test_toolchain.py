"""The direct build (evaluate/toolchain.py): declarations read from the sources, what goes to torch's
own build, a compile error from the candidate's unit alone, a one-line change rebuilding one unit,
the light header's misses caught, the precompiled headers' lock, the build steps reported."""
from __future__ import annotations

import fcntl
import json
import sys
import uuid

import pytest

from kernelskill import Candidate
from kernelskill.evaluate import compile, evaluate
from kernelskill.evaluate import toolchain
from kernelskill.evaluate.api import Options
from kernelskill.executors import BuildEta

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
    assert toolchain.init_source(p) != toolchain.init_source(q)      # each extension its own module


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


def test_a_one_line_change_rebuilds_the_kernel_unit_only():
    token = uuid.uuid4().hex
    first = compile(Candidate.from_source(_candidate(RELU2, token)))
    assert first.ok and first.path == "direct" and "kernel.cpp" in first.units, first.to_dict()
    steps: list[str] = []
    changed = Candidate.from_source(_candidate("b[i] = a[i] > 0.f ? a[i] + a[i] : 0.f;", token))
    second = compile(changed, opts=Options(on_step=steps.append))
    assert second.ok and not second.cache_hit and second.path == "direct"
    # the candidate's unit and the module's few-line init (it names the extension); the bindings cached
    assert set(second.units) == {"kernel.cpp", "init.cpp"}, second.units
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
        assert toolchain.make_pch(d) is False                  # another maker holds it: no wait, no second copy
    assert toolchain.make_pch(d) is False and (d / "failed.log").exists()     # `false` failed: logged
    assert not (d / "torch" / "extension.h.gch").exists()
    # another flag set is another header
    assert toolchain.header_dir(tmp_path, "light", ["-O3"], make=False)[0] != d


def test_a_maker_takes_a_free_slot_while_another_header_is_being_made(tmp_path, monkeypatch):
    """`kernelskill warm` on a 16-core machine made eleven headers one after the other (4 min 15 s on
    the H100's host): with two slots, a maker whose first slot is held takes the second at once."""
    import threading
    monkeypatch.setattr(toolchain, "maker_slots", lambda: 2)
    d, _ = toolchain.header_dir(tmp_path, "light", ["-O1"], make=False)
    (d / "cmd.json").write_text(json.dumps([sys.executable, "-c", "import sys; open(sys.argv[-1], 'w').write('pch')"]))
    with open(tmp_path / "makers.0.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)                       # another header is being made
        done = []
        t = threading.Thread(target=lambda: done.append(toolchain.make_pch(d)))
        t.start()
        t.join(timeout=120)                                    # a deadline, not a wait: it ends at once
        assert done == [True] and (d / "torch" / "extension.h.gch").read_text() == "pch"
    assert 1 <= toolchain.maker_slots() <= 8


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


def test_a_function_declared_but_never_defined_is_a_compile_error_in_torchs_words():
    """The direct build links without complaint (an extension may leave symbols to its loader); its
    module then fails to load. That goes to torch's build, whose diagnostic names the symbol."""
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
    assert not res.ok and res.path == "torch" and "did not load" in res.fallback, res.to_dict()
    assert any("undefined symbol" in d.message for d in res.diagnostics), res.diagnostics
