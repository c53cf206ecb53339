"""Static checks: each trick is found; honest solutions raise no cheating flag."""
from __future__ import annotations

from pathlib import Path

import pytest

from kernelskill.evaluate.judge.static import check_source, is_cheat

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("src, code", [
    ("import threading\n", "thread"),
    ("import subprocess\n", "process"),
    ("import socket\n", "socket"),
    ("open('x', 'w').write('1')\n", "file-io"),
    ("import os\nos.environ['A'] = '1'\n", "env-write"),
    ("import torch\ntorch.allclose = lambda *a: True\n", "monkey-patch"),
    ("import time\ntime.perf_counter = lambda: 0\n", "timer"),
    ("from time import perf_counter\nimport time as t\nt.perf_counter = perf_counter\n", "timer"),
    ("import torch\ns = torch.cuda.Stream()\n", "stream"),
    ("SRC = '''\nvoid f() { cudaStream_t s; cudaStreamCreate(&s); int pad_to_forty_characters = 0; }\n'''\n", "stream"),
    ("SRC = '''\nvoid f() { std::thread t([]{}); t.detach(); int pad_to_forty_characters = 0; }\n'''\n", "thread"),
    ("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        try:\n"
     "            return f(x)\n        except Exception:\n            return torch.relu(x)\n", "fallback"),
    ("class ModelNew:\n    def forward(self, x):\n        self.cache = x\n        return x\n", "stateful-forward"),
    ("C = {}\nclass ModelNew:\n    def forward(self, x):\n        C.setdefault(1, x)\n        return x\n", "stateful-forward"),
    ("import torch\nx = torch.ones(1).half()\n", "downcast"),
    ("import gc\n", "introspection"),
    ("import torch\nsetattr(torch, 'allclose', lambda *a: True)\n", "monkey-patch"),
    ("y = get_inputs()\n", "reference-call"),
])
def test_each_trick_is_found(src, code):
    assert any(f.startswith(code + ":") for f in check_source(src)), check_source(src)


def test_downcast_is_review_not_cheat():
    flags = check_source("import torch\nx = torch.ones(1).to(torch.float16)\n")
    assert flags and not any(is_cheat(f) for f in flags)
    assert not check_source("import torch\nx = torch.ones(1).to(torch.float16)\n", task_dtype="float16")


def test_honest_example_solutions_raise_no_cheat_flag():
    files = [p for p in EXAMPLES.glob("*/solutions/*.py")]
    assert len(files) >= 24
    for p in files:
        cheats = [f for f in check_source(p.read_text()) if is_cheat(f)]
        assert not cheats, (p, cheats)


def test_own_kernel_names_of_every_gpu_solution():
    from kernelskill.evaluate.worker.guards import own_kernel_names
    src = ('K = r"""\n__global__ void __launch_bounds__(256) fused(float* y) {}\n'
           'template <int B> __global__ void tiled_k(const float* x) {}\n"""\n'
           'import triton\n@triton.autotune(configs=[], key=["n"])\n@triton.jit\ndef tk(x, n):\n    pass\n'
           '@triton.jit(do_not_specialize=["n"])\ndef tk2(x, n):\n    pass\n')
    assert own_kernel_names(src) == {"fused", "tiled_k", "tk", "tk2"}
    for p in list(EXAMPLES.glob("*/solutions/cuda_*.py")) + list(EXAMPLES.glob("*/solutions/triton_*.py")):
        assert own_kernel_names(p.read_text()), p


def test_setattr_on_self_is_not_patching():
    src = "class ModelNew:\n    def __init__(self):\n        setattr(self, 'w', 1)\n"
    assert not check_source(src)


# ---- issue 26: the field's catalogue ---------------------------------------------------------------
JOINED_SRC = '''SRC = r"""
void f(torch::Tensor x) {
    static at::cuda::CUDAStream side = at::cuda::getStreamFromPool();
    cudaEventRecord(ready, at::cuda::getCurrentCUDAStream().stream());
    cudaStreamWaitEvent(side.stream(), ready, 0);
    k<<<1, 1, 0, side.stream()>>>(x.data_ptr<float>());
    cudaEventRecord(done, side.stream());
    cudaStreamWaitEvent(at::cuda::getCurrentCUDAStream().stream(), done, 0);
}
"""
'''


@pytest.mark.parametrize("src, code, line", [
    # reading the environment or the loaded modules: how a candidate tells the harness apart
    ("import os\nif os.environ.get('CI'):\n    pass\n", "introspection", 2),
    ("import os\nx = os.getenv('HOME')\n", "introspection", 2),
    ("from os import environ\nx = environ['A']\n", "introspection", 2),
    ("import sys\nmods = sys.modules\n", "introspection", 2),
    ("import traceback\n", "introspection", 1),
    # L2 persistence between timed calls: the line of the C++ that does it
    ('SRC = """\nvoid f() {\n  cudaStreamAttrValue a = {};\n  a.accessPolicyWindow.num_bytes = 1 << 20;\n}\n"""\n',
     "l2-persist", 4),
    # a library kernel called from native code: labelled with the op and its line
    ('SRC = """\ntorch::Tensor f(torch::Tensor x, torch::Tensor w) {\n  auto y = at::mm(x, w);\n  return y;\n}\n"""\n',
     "library-call", 3),
])
def test_catalogue_findings_name_their_line(src, code, line):
    found = [f for f in check_source(src) if f.startswith(code + ":")]
    assert found and found[0].endswith(f"(line {line})"), check_source(src)
    assert is_cheat(found[0]) == (code not in ("library-call",))


def test_writing_the_environment_is_not_also_reading_it():
    assert [f.split(":")[0] for f in check_source("import os\nos.environ['A'] = '1'\n")] == ["env-write"]


def test_a_second_stream_joined_back_is_for_review_and_one_that_is_not_is_a_cheat():
    joined = check_source(JOINED_SRC)
    assert [f.split(":")[0] for f in joined] == ["stream-joined"] and not is_cheat(joined[0])
    assert joined[0].endswith("(line 3)")                       # where the second stream is taken
    escaped = JOINED_SRC.replace("cudaStreamWaitEvent", "noop").replace("cudaEventRecord", "noop")
    assert [f.split(":")[0] for f in check_source(escaped)] == ["stream"]
    assert "library-call" in check_source(JOINED_SRC.replace("k<<<1, 1", "at::relu(x); k<<<1, 1"))[-1]


def test_a_join_the_wrong_way_round_is_still_a_cheat():
    """Seen on the H100: the side stream waiting for the current one (and never the reverse) passed as
    joined, and the escaped work stayed under the run-time clock check's threshold."""
    wrong = JOINED_SRC.replace("cudaStreamWaitEvent(at::cuda::getCurrentCUDAStream().stream(), done, 0);", "")
    assert [f.split(":")[0] for f in check_source(wrong)] == ["stream"]
    named = JOINED_SRC.replace("void f(torch::Tensor x) {", "void f(torch::Tensor x) {\n    auto cur = at::cuda::getCurrentCUDAStream();")
    named = named.replace("cudaStreamWaitEvent(at::cuda::getCurrentCUDAStream().stream(), done, 0);",
                          "cudaStreamWaitEvent(cur.stream(), done, 0);")
    assert [f.split(":")[0] for f in check_source(named)] == ["stream-joined"]
    host = wrong.replace("cudaEventRecord(done, side.stream());", "cudaStreamSynchronize(side.stream());")
    assert [f.split(":")[0] for f in check_source(host)] == ["stream-joined"]
