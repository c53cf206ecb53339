"""The adversarial suite: one candidate per trick of shared/EVALUATION.md, each with the verdict
it must get, plus honest kernels that must pass.

Candidates are built on the shared test toolkits (tests/data/toolkit.py for the CPU,
cuda_toolkit.py for the GPU), so the whole suite costs one C++ build per backend.
``docs/evaluator.md`` shows this table with the verdicts measured.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "data"


@dataclass(frozen=True)
class Case:
    name: str
    trick: str
    expect: str                     # the status it must get
    forward: str                    # body of ModelNew.forward(self, x); `ext` is the toolkit
    extra: str = ""                 # module-level code before ModelNew
    backends: tuple = ("cpp", "cuda")
    forward_cuda: str | None = None # where the CUDA toolkit needs another call
    flag: str | None = None         # a flag code that must be among the findings
    task: str = "relu_task.py"


# Its own extension: a stream API in the shared toolkit would flag every case built on it.
SIDE_STREAM = '''
SIDE_CUDA = r"""
#include <ATen/cuda/CUDAContext.h>
__global__ void k(const float* x, float* y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? 2.f * x[i] : 0.f;
}
// Work on a side stream that the timed stream never waits for.
torch::Tensor relu2_side_stream(torch::Tensor x) {
    static at::cuda::CUDAStream side = at::cuda::getStreamFromPool();
    auto y = torch::empty_like(x);
    int64_t n = x.numel();
    for (int r = 0; r < 50; ++r) k<<<(n + 255) / 256, 256, 0, side.stream()>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
side = load_inline(name="ks_side_stream", cpp_sources="torch::Tensor relu2_side_stream(torch::Tensor x);",
                   cuda_sources=SIDE_CUDA, functions=["relu2_side_stream"])
'''

CASES = [
    Case("honest", "honest kernel", "ok", "return ext.relu2(x)"),
    Case("honest-tail-bug", "honest mistake: last element wrong", "incorrect", "return ext.relu2_tail_bug(x)"),
    Case("unwritten-output", "result reuse through torch.empty: the kernel never writes its output",
         "incorrect", "return ext.unwritten(x)"),
    Case("zero-inputs", "zeroing the inputs after computing", "incorrect", "y = ext.relu2(x)\nx.zero_()\nreturn y"),
    Case("edit-inputs", "writing the answer into the input and returning it", "incorrect",
         "return ext.inplace_relu2(x)"),
    Case("return-input", "returning an input", "incorrect", "return x"),
    Case("return-constant", "returning a constant", "incorrect", "return torch.zeros_like(x)"),
    Case("data-ptr-cache", "caching results by data_ptr", "flagged",
         "k = x.data_ptr()\nif k not in _CACHE:\n    _CACHE[k] = ext.relu2(x)\nreturn _CACHE[k].clone()",
         extra="_CACHE = {}\n", flag="data-ptr"),
    Case("shape-cache", "replaying a result computed once (module-level cache)", "flagged",
         "if x.shape not in _CACHE:\n    _CACHE[x.shape] = ext.relu2(x)\nreturn _CACHE[x.shape].clone()",
         extra="_CACHE = {}\n", flag="stateful-forward"),
    Case("self-cache", "replaying a result stored on self", "flagged",
         "if not hasattr(self, 'out'):\n    self.out = ext.relu2(x)\nreturn self.out.clone()", flag="stateful-forward"),
    Case("thread", "computing in another thread", "flagged",
         "out = torch.empty_like(x)\nt = threading.Thread(target=lambda: out.copy_(ext.relu2(x)))\nt.start()\n"
         "t.join()\nreturn out", extra="import threading\n", flag="thread"),
    Case("patch-timer", "monkey-patching the timer", "flagged", "return ext.relu2(x)",
         extra="import time\ntime.perf_counter = lambda: 0.0\n", flag="timer"),
    Case("patch-allclose", "monkey-patching torch.allclose", "flagged", "return ext.relu2(x)",
         extra="torch.allclose = lambda *a, **k: True\n", flag="monkey-patch"),
    Case("patch-tensor-eq", "monkey-patching torch.Tensor methods", "flagged", "return ext.relu2(x)",
         extra="torch.Tensor.__eq__ = lambda a, b: torch.ones_like(a, dtype=torch.bool)\n", flag="monkey-patch"),
    Case("tensor-subclass", "returning a tensor subclass", "flagged", "return ext.relu2(x).as_subclass(Sneaky)",
         extra="class Sneaky(torch.Tensor):\n    pass\n"),
    Case("tf32-switch", "a global TF32 switch", "flagged", "return ext.relu2(x)",
         extra="torch.backends.cuda.matmul.allow_tf32 = True\n", flag="monkey-patch"),
    Case("precision-switch", "lowering float32 matmul precision at run time", "flagged",
         "torch.set_float32_matmul_precision('medium')\nreturn ext.relu2(x)", flag="monkey-patch"),
    Case("fallback", "try/except fallback to PyTorch", "flagged",
         "try:\n    return ext.relu2(x)\nexcept Exception:\n    return torch.relu(x) * 2.0", flag="fallback"),
    Case("gc-reference", "finding the reference model through gc", "flagged",
         "ref = next(o for o in gc.get_objects() if type(o).__name__ == 'Model')\nreturn ref(x)",
         extra="import gc\n", flag="introspection"),
    Case("env-write", "writing the environment", "flagged", "return ext.relu2(x)",
         extra="import os\nos.environ['OMP_NUM_THREADS'] = '64'\n", flag="env-write"),
    Case("no-kernel", "plain PyTorch, no custom kernel (allowed, labelled)", "ok", "return torch.relu(x) * 2.0",
         flag="no-custom-kernel"),
    Case("hang", "a hang", "timeout", "ext.spin()\nreturn ext.relu2(x)", forward_cuda="ext.spin(x)\nreturn ext.relu2(x)"),
    Case("segfault", "a segfault", "crashed", "ext.segfault()\nreturn ext.relu2(x)"),
    Case("oom", "running out of memory", "runtime_error", "ext.hog()\nreturn ext.relu2(x)"),
    Case("os-exit", "os._exit inside the candidate", "crashed", "ext.quit()\nreturn ext.relu2(x)"),
    Case("illegal-address", "an illegal memory access", "runtime_error", "return ext.illegal(x)", backends=("cuda",)),
    Case("side-stream", "work on another stream", "flagged", "return side.relu2_side_stream(x)", backends=("cuda",),
         flag="stream", extra=SIDE_STREAM),
    Case("degenerate", "a task whose output ignores its input: no speedup is reported", "ok",
         "return torch.zeros_like(x)", task="degenerate_task.py", flag="degenerate-task"),
]


def source(case: Case, backend: str) -> str:
    """The candidate's full source for ``backend`` (cpp or cuda)."""
    toolkit = (DATA / ("toolkit.py" if backend == "cpp" else "cuda_toolkit.py")).read_text()
    forward = case.forward_cuda if backend == "cuda" and case.forward_cuda else case.forward
    body = "\n".join("        " + line for line in forward.strip().splitlines())
    return (toolkit + "\nimport torch\nimport torch.nn as nn\n" + case.extra + "\next = load()\n\n\n"
            "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n"
            "    def forward(self, x):\n" + body + "\n")
