"""Candidate sources for tests, built on the shared C++ toolkit (one build for all of them), and task files."""
from __future__ import annotations

import hashlib
import threading
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
RELU_TASK = DATA / "relu_task.py"
DROPOUT_TASK = DATA / "dropout_task.py"       # dropout in training mode: the reference draws random numbers
TOOLKIT = (DATA / "toolkit.py").read_text()
# A minimal valid skill file (tests of the skill schema, the gate, distillation).
_SKILL_TOML = '''
id = "SID"
title = "A test skill"
category = "memory"
backends = ["cuda"]
applies_to = APPLIES_TO
bottlenecks = BOTTLENECKS
when = "always"
summary = "one line"
guidance = "what, why, cost"
steps = ["do it"]
pitfalls = ["careful"]
expected_gain = "2x"
example = "__global__ void k() {}"
example_lang = "cuda"
'''


def skill_toml(sid: str = "my-skill", applies_to: str = '["softmax"]', bottlenecks: str = '["memory-bound"]') -> str:
    """A minimal valid skill file; the three values are TOML."""
    return (_SKILL_TOML.replace("SID", sid).replace("APPLIES_TO", applies_to)
            .replace("BOTTLENECKS", bottlenecks))


VALID_SKILL = skill_toml()


def toolkit_candidate(forward: str, extra: str = "") -> str:
    """A ModelNew whose forward body is ``forward`` (indented 8), with ``ext`` = the toolkit."""
    body = "\n".join("        " + line for line in forward.strip().splitlines())
    return (TOOLKIT + "\nimport torch\nimport torch.nn as nn\n" + extra + "\next = load()\n\n\n"
            "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n"
            "    def forward(self, x):\n" + body + "\n")


SCALE_TASK = '''import torch
import torch.nn as nn

batch_size = 4
dim = 8


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(dim))
        self.register_buffer("scale", torch.full((dim,), 2.0))

    def forward(self, x):
        return x * self.weight * self.scale


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim]
'''


def kernelbench_file(root, folder="level2", name="7_Scale.py"):
    """A KernelBench-layout file (KernelBench/level2/7_Scale.py) with one parameter and one buffer."""
    path = root / "KernelBench" / folder / name
    path.parent.mkdir(parents=True)
    path.write_text(SCALE_TASK)
    return path


def eval_result(status: str = "ok", profile: dict | None = None, **fields):
    """A whole EvalResult from the few fields a test cares about: a node's result is always one
    (``Node.result``), so the build and the profile's device are filled in as an evaluation leaves them."""
    from kernelskill.results import EvalResult
    data = {"status": status, "compile": {"ok": status != "compile_error", "backend": "cpp"}, **fields}
    if profile is not None:
        data["profile"] = {"device": "cpu", **profile}
    return EvalResult.from_dict(data)


class Busy:
    """``n`` threads that each keep a core busy (hashlib releases the GIL), until the block ends."""

    def __init__(self, n: int):
        self.n, self.stop, self.threads = n, threading.Event(), []

    def _spin(self) -> None:
        data = b"x" * (1 << 20)
        while not self.stop.is_set():
            hashlib.sha256(data).digest()

    def __enter__(self):
        self.threads = [threading.Thread(target=self._spin, daemon=True) for _ in range(self.n)]
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join()


def limits(build: float = 600, run: float = 60, cancel: threading.Event | None = None):
    """The timeouts and cancel ``isolation.run_worker`` reads (an Options has them too)."""
    from kernelskill.evaluate.options import Options
    return Options(build_timeout=build, run_timeout=run, cancel=cancel)


def hear(phase=None, decide=None):
    """A worker listener that passes each phase to ``phase`` and each decision to ``decide``."""
    from kernelskill.evaluate.launch.isolation import Listener

    class Hear(Listener):
        def phase(self, name: str) -> None:
            if phase:
                phase(name)

        def decide(self, out_dir) -> bool:
            return decide(out_dir) if decide else True
    return Hear()


def ref_meta(**fields):
    """A reference's meta (``launch.reply.ReferenceMeta``) with the fields a test sets (work: flops, bytes)."""
    from kernelskill.evaluate.launch.reply import ReferenceMeta
    base = {"seed": 42, "distributions": ["task"], "output_bytes": 0}
    return ReferenceMeta.parse({**base, **fields})
