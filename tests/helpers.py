"""Candidate sources for tests, built on the shared C++ toolkit (one build for all of them)."""
from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
RELU_TASK = DATA / "relu_task.py"
TOOLKIT = (DATA / "toolkit.py").read_text()


def toolkit_candidate(forward: str, extra: str = "") -> str:
    """A ModelNew whose forward body is ``forward`` (indented 8), with ``ext`` = the toolkit."""
    body = "\n".join("        " + line for line in forward.strip().splitlines())
    return (TOOLKIT + "\nimport torch\nimport torch.nn as nn\n" + extra + "\next = load()\n\n\n"
            "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n"
            "    def forward(self, x):\n" + body + "\n")
