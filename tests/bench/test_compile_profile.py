"""benchmarks/compile_profile.py: the compiler wrappers log real calls (duration, status, output, the
flags that pick a header, the test), pass the compiler's exit status through, and the tables sum
them by kind, header and test."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import compile_profile  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("c++") is None, reason="needs a C++ compiler")


def test_a_wrapped_compiler_logs_each_call_and_keeps_its_exit_status(tmp_path):
    log = tmp_path / "calls.tsv"
    log.write_text("")
    assert "c++" in compile_profile.write_wrappers(tmp_path / "bin", log)
    env = dict(os.environ, PATH=f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
               PYTEST_CURRENT_TEST="tests/x.py::test_y (call)")
    (tmp_path / "h.h").write_text("inline int twice(int x) { return 2 * x; }\n")
    (tmp_path / "bad.cpp").write_text("int f( {\n")
    ok = subprocess.run(["c++", "-O2", "-x", "c++-header", "h.h", "-o", "h.h.gch"], cwd=tmp_path, env=env)
    bad = subprocess.run(["c++", "-c", "bad.cpp", "-o", "bad.o"], cwd=tmp_path, env=env, capture_output=True)
    assert ok.returncode == 0 and (tmp_path / "h.h.gch").exists()
    assert bad.returncode != 0 and b"error" in bad.stderr          # the compiler's own status and message
    first, second = compile_profile.read_log(log)
    assert first["compiler"] == "c++" and first["rc"] == 0 and first["out"] == "h.h.gch"
    assert first["flags"] == "-O2 c++-header" and first["test"] == "tests/x.py::test_y"
    assert first["seconds"] > 0 and compile_profile.kind(first) == "precompiled header"
    assert second["rc"] == bad.returncode and second["out"] == "bad.o" and compile_profile.kind(second) == "other"


def test_the_tables_sum_by_kind_header_and_test(tmp_path, capsys):
    rows = [("c++", 1.0, 40.0, 0, "/c/_pch/light/torch/extension.h.gch.1.tmp", "-O2 c++-header", "t::a"),
            ("c++", 2.0, 30.0, 0, "/c/ks_x/bind.o", "-O2", "t::a"),
            ("c++", 3.0, 10.0, 0, "/c/ks_x/kernel.o", "-O2", "t::b"),
            ("c++", 4.0, 15.0, 0, "/tmp/x/cuda_host.o", "", "t::b"),
            ("c++", 5.0, 5.0, 0, "/c/ks_x/ks_x.so", "-shared", "")]
    log = tmp_path / "calls.tsv"
    log.write_text("".join("\t".join(map(str, r)) + "\n" for r in rows) + "truncated line\n")
    assert compile_profile.main(["--summarize", str(log)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("5 compiler calls, 100 compiler-seconds")
    assert "| precompiled header | 1 | 40 | 40% |" in out and "| bindings | 1 | 30 | 30% |" in out
    assert "| CUDA split unit | 1 | 15 | 15% |" in out and "| link | 1 | 5 | 5% |" in out
    assert "| `-O2` | 40 | t::a |" in out
    assert out.index("| t::a | 70 |") < out.index("| t::b | 25 |") < out.index("| (outside a test) | 5 |")


def test_a_missing_log_is_a_clear_error(tmp_path, capsys):
    assert compile_profile.main(["--summarize", str(tmp_path / "nope.tsv")]) == 2
    assert "no such file" in capsys.readouterr().err
