"""The compilers every build and check runs: one C++ compiler lookup (``cxx``), one nvcc lookup
(``nvcc``: torch's CUDA_HOME first, as torch's own build), and CUDA's headers beside that nvcc."""
from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import subprocess
from pathlib import Path


def cxx() -> str:
    """The C++ compiler every build and check runs: ``$CXX``, else ``c++`` (as torch's own build)."""
    return os.environ.get("CXX") or "c++"


def nvcc() -> str | None:
    """The nvcc every build and check runs: the one in torch's CUDA_HOME (what torch's own build
    runs; from $CUDA_HOME, the PATH's nvcc or /usr/local/cuda), else the PATH's; None without one."""
    import torch.utils.cpp_extension as ext
    path = Path(ext.CUDA_HOME or os.environ.get("CUDA_HOME") or "/usr/local/cuda") / "bin" / "nvcc"
    return str(path) if path.exists() else shutil.which("nvcc")


def nvcc_or_default() -> str:
    """nvcc, or where it would be (its command then fails with a clear 'not found')."""
    return nvcc() or "/usr/local/cuda/bin/nvcc"


@functools.cache
def cuda_include_dir(nvcc: str) -> Path:
    """CUDA's own headers (cuda.h): beside the nvcc that runs — which may be a wrapper script on
    the PATH — as nvcc itself says (``--dryrun``), else CUDA_HOME's or /usr/local/cuda's."""
    guesses = [Path(nvcc).resolve().parent.parent / "include"]
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run([nvcc, "--dryrun", "-E", "-x", "cu", "/dev/null"], capture_output=True, text=True,
                             timeout=30).stderr
        guesses += [Path(m) for m in re.findall(r'INCLUDES="[^"]*?-I"?([^"\s]+)', out)]
    guesses += [Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "include", Path("/usr/local/cuda/include")]
    return next((g for g in guesses if (g / "cuda.h").exists()), guesses[0])
