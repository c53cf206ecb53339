"""Where a command's compiler time goes: every c++/g++/gcc/cc call it makes, logged and summed.

    python benchmarks/compile_profile.py                       # the default test run, fresh build cache
    python benchmarks/compile_profile.py -- tests/evaluate -q -n 2   # pytest with these arguments instead
    python benchmarks/compile_profile.py --summarize LOG       # the tables of an earlier log

The compilers are wrapped by scripts first on the PATH (nvcc's host passes go through them too), each
call logged with its duration, exit status, output file, the flags that pick a precompiled header
(-O*, -march, -mprefer-vector-width, -fopenmp) and the pytest test it ran under
(PYTEST_CURRENT_TEST, which the evaluator's workers keep). The command runs with a fresh
KERNELSKILL_CACHE (what a fresh clone and CI have), unless --keep-cache.

Printed: the command's wall time, the compiler-seconds by kind (precompiled headers, binding units,
kernel units, CUDA host units, links, other), each precompiled header with its flags and the test
that paid for it, and the tests that spent the most compiler time. --log keeps the raw log
(tab-separated: compiler, start, seconds, rc, output, flags, test). Exit status: the command's.
Measured figures: docs/testing.md, "Where the compiler goes".
"""
from __future__ import annotations

import argparse
import collections
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMPILERS = ("c++", "g++", "gcc", "cc")
# One line per call, appended (a line under PIPE_BUF is written whole even from parallel calls).
WRAPPER = r"""#!/bin/bash
s=$(date +%s.%N)
{real} "$@"
rc=$?
e=$(date +%s.%N)
out=""; prev=""; fl=""
for a in "$@"; do
  [ "$prev" = "-o" ] && out="$a"
  case "$a" in -O*|-march=*|-fopenmp|-mprefer*|c++-header|-shared) fl="$fl $a";; esac
  prev="$a"
done
t=${{PYTEST_CURRENT_TEST%% *}}
printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "{name}" "$s" "$(awk -v a="$s" -v b="$e" 'BEGIN{{printf "%.3f", b - a}}')" \
    "$rc" "$out" "${{fl# }}" "$t" >> "{log}"
exit $rc
"""


def write_wrappers(bindir: Path, log: Path) -> list[str]:
    """A logging wrapper in ``bindir`` for each compiler found on the PATH; the names wrapped."""
    bindir.mkdir(parents=True, exist_ok=True)
    done = []
    for name in COMPILERS:
        real = shutil.which(name)
        if real is None:
            continue
        w = bindir / name
        w.write_text(WRAPPER.format(real=real, name=name, log=log))
        w.chmod(w.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        done.append(name)
    return done


def read_log(path: Path) -> list[dict]:
    rows = []
    for line in Path(path).read_text().splitlines():
        f = line.split("\t")
        if len(f) < 7:
            continue
        rows.append({"compiler": f[0], "start": float(f[1]), "seconds": float(f[2]), "rc": int(f[3]),
                     "out": f[4], "flags": f[5], "test": f[6]})
    return rows


def kind(row: dict) -> str:
    out, flags = row["out"], row["flags"].split()
    if "c++-header" in flags:
        return "precompiled header"
    if "-shared" in flags:
        return "link"
    name = out.rsplit("/", 1)[-1]
    if name == "bind.o":
        return "bindings"
    if name == "kernel.o":
        return "kernel unit"
    if name in ("cuda_host.o", "host.o", "cuda.o", "dev.o", "main.o"):
        return "CUDA split unit"
    return "other"


def summarize(rows: list[dict], top: int = 12) -> list[str]:
    total = sum(r["seconds"] for r in rows)
    lines = [f"{len(rows)} compiler calls, {total:.0f} compiler-seconds", "",
             "| kind | calls | seconds | share |", "|---|---|---|---|"]
    by = collections.defaultdict(lambda: [0, 0.0])
    for r in rows:
        by[kind(r)][0] += 1
        by[kind(r)][1] += r["seconds"]
    for k, (n, s) in sorted(by.items(), key=lambda kv: -kv[1][1]):
        lines.append(f"| {k} | {n} | {s:.0f} | {s / total:.0%} |" if total else f"| {k} | {n} | {s:.0f} | - |")
    pchs = [r for r in rows if kind(r) == "precompiled header"]
    if pchs:
        lines += ["", "| precompiled header: flags | seconds | paid by |", "|---|---|---|"]
        for r in sorted(pchs, key=lambda r: r["start"]):
            flags = " ".join(f for f in r["flags"].split() if f != "c++-header") or "(none)"
            lines.append(f"| `{flags}` | {r['seconds']:.0f} | {r['test'] or '-'} |")
    per_test = collections.Counter()
    for r in rows:
        per_test[r["test"] or "(outside a test)"] += r["seconds"]
    lines += ["", f"| test (the {top} with most compiler time) | seconds |", "|---|---|"]
    lines += [f"| {t} | {s:.0f} |" for t, s in per_test.most_common(top)]
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--summarize", metavar="LOG", help="print the tables of an earlier log and exit")
    ap.add_argument("--log", metavar="FILE", help="keep the raw log here (default: a temporary file)")
    ap.add_argument("--keep-cache", action="store_true", help="use the KERNELSKILL_CACHE set (or the tests' "
                                                                  "own) instead of a fresh one")
    ap.add_argument("--top", type=int, default=12, help="tests listed (default 12)")
    ap.add_argument("pytest_args", nargs="*", help="after --: pytest's arguments (default: -q -n 2, "
                                                   "the README's test command)")
    args = ap.parse_args(argv)
    if args.summarize:
        if not Path(args.summarize).is_file():
            print(f"compile_profile.py: --summarize {args.summarize}: no such file", file=sys.stderr)
            return 2
        print("\n".join(summarize(read_log(Path(args.summarize)), args.top)))
        return 0
    work = Path(tempfile.mkdtemp(prefix="compile-profile-"))
    try:
        log = Path(args.log).resolve() if args.log else work / "calls.tsv"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("")
        wrapped = write_wrappers(work / "bin", log)
        if not wrapped:
            print("compile_profile.py: no c++, g++, gcc or cc on the PATH", file=sys.stderr)
            return 2
        env = dict(os.environ, PATH=f"{work / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
        if not args.keep_cache:
            env["KERNELSKILL_CACHE"] = str(work / "cache")
        cmd = [sys.executable, "-m", "pytest", *(args.pytest_args or ["-q", "-n", "2"])]
        print(f"… {' '.join(cmd)} (compilers wrapped: {', '.join(wrapped)}; "
              f"{'the build cache as set' if args.keep_cache else 'a fresh build cache'})", file=sys.stderr, flush=True)
        t0 = time.monotonic()
        rc = subprocess.call(cmd, cwd=ROOT, env=env)
        wall = time.monotonic() - t0
        print(f"\nwall {wall:.0f} s, exit status {rc}")
        print("\n".join(summarize(read_log(log), args.top)))
        if args.log:
            print(f"\nraw log: {log}")
        return rc
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
