"""The coder's build guidance for the cpp backend is correct for the installed torch: the flags it
names, passed to load_inline as it says, give a `#pragma omp parallel for` and an at::parallel_for
that run on more than one thread (without -fopenmp both run on one, with this torch's OpenMP
parallel backend)."""
from __future__ import annotations

import re

import pytest
import torch

from kernelskill.agents.templates import load_prompts

SRC = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <omp.h>
#include <atomic>

int64_t pragma_threads() {
    int n = 1;
    #pragma omp parallel
    {
        #pragma omp single
        n = omp_get_num_threads();
    }
    return n;
}

int64_t parallel_for_threads() {
    std::atomic<int> most{0};
    at::parallel_for(0, 1 << 16, 1, [&](int64_t, int64_t) {
        int t = at::get_thread_num(), seen = most.load();
        while (t > seen && !most.compare_exchange_weak(seen, t)) {}
    });
    return most.load() + 1;
}
"""


def _flags(note: str, key: str) -> list[str]:
    m = re.search(key + r"=\[([^\]]*)\]", note)
    assert m, f"the cpp build guidance names no {key}"
    return re.findall(r'"([^"]+)"', m.group(1))


def test_the_cpp_build_guidance_names_openmp_for_compiling_and_linking():
    note = load_prompts(None)["coder"]["cpp"].render("system")        # the flags as the coder reads them
    cflags, ldflags = _flags(note, "extra_cflags"), _flags(note, "extra_ldflags")
    assert "-fopenmp" in cflags and "-fopenmp" in ldflags


@pytest.mark.slow       # load_inline's own build with the guidance's flags: 59 s on 2 cores
@pytest.mark.skipif(torch.get_num_threads() < 2, reason="one thread: nothing to show")
def test_the_cpp_build_guidance_runs_on_more_than_one_thread(tmp_path):
    from torch.utils.cpp_extension import load_inline
    note = load_prompts(None)["coder"]["cpp"].render("system")
    cflags, ldflags = _flags(note, "extra_cflags"), _flags(note, "extra_ldflags")
    ext = load_inline("ks_guidance_threads", SRC, functions=["pragma_threads", "parallel_for_threads"],
                      extra_cflags=cflags, extra_ldflags=ldflags, build_directory=str(tmp_path))
    assert ext.pragma_threads() > 1
    assert ext.parallel_for_threads() > 1
