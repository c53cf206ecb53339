"""What shipping a kernel as a package costs and gains (issue 47): each shipped solution of this
machine's backend exported, built ahead of time in a fresh venv, imported, tested, and timed
against the load_inline ModelNew it came from.

    python benchmarks/export_cost.py                       # C++ solutions on a CPU, CUDA ones on a GPU
    python benchmarks/export_cost.py --backend triton      # Triton ones (a GPU; TRITON_INTERPRET=1 on a CPU)
    python benchmarks/export_cost.py --only relu_gelu,layernorm --jobs 4 --json out.json
    python benchmarks/export_cost.py --list                # what would run, nothing built

Per solution, in this order:
- export: `kernelskill export SOLUTION --task DIR --preset P --to WORK/pkg` (its wall time);
- load_inline's first import on a new machine: the solution imported in a fresh process with an
  empty TORCH_EXTENSIONS_DIR (the JIT build), then again with that cache (its import alone);
- build: `pip install --no-build-isolation --no-deps` into a fresh venv that sees this
  interpreter's torch (the ahead-of-time build, once); then `import PKG` after `import torch`;
- the package's own tests (`pytest --pyargs PKG`): registered ops, the reference, fullgraph compile;
- speed: the solution's ModelNew (load_inline) and the package's ModelNew on the package's inputs,
  interleaved call by call in one process (each first every other round), each call synchronized;
  medians and the ratio.

A Triton solution builds nothing at import: Triton compiles each kernel on its first launch. So for
it the two "import" columns are the first call instead (import, ModelNew, one forward on the task's
inputs): the solution's with an empty TRITON_CACHE_DIR, then the package's with its own empty one;
"build" is the pure-Python install.

Builds run `--jobs` at a time (each pipeline in order); the speed runs come after every build, one
at a time, so no build competes with a timing. The table prints at the end; `--json` is rewritten
after every solution, so a run cut short keeps what finished. Exit 0 when every solution got
through, 1 when one failed (its row says where), 2 for usage errors.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

SPEED = textwrap.dedent('''\
    import importlib.util, json, statistics, sys, time
    import torch
    sys.path.insert(0, sys.argv[2])
    pkg = __import__(sys.argv[3])
    spec = importlib.util.spec_from_file_location("solution", sys.argv[1])
    sol = importlib.util.module_from_spec(spec); spec.loader.exec_module(sol)
    dev = pkg.__dict__.get("DEVICE") or json.loads(open(pkg.__path__[0] + "/export.json").read())["device"]
    init = pkg.get_init_inputs()
    torch.manual_seed(0); ref = pkg.Model(*init)
    models = {}
    for name, cls in (("load_inline", sol.ModelNew), ("exported", pkg.ModelNew)):
        torch.manual_seed(0); m = cls(*init)
        own = m.state_dict()
        m.load_state_dict({k: v for k, v in ref.state_dict().items() if k in own and own[k].shape == v.shape}, strict=False)
        models[name] = m.to(dev).eval()
    torch.manual_seed(1)
    xs = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in pkg.get_inputs()]
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    times = {k: [] for k in models}
    with torch.no_grad():
        a = models["load_inline"](*xs); b = models["exported"](*xs)
        same = all(torch.allclose(p, q, atol=1e-5, rtol=1e-5) for p, q in zip(a if isinstance(a, (list, tuple)) else [a], b if isinstance(b, (list, tuple)) else [b]))
        for _ in range(5):
            for m in models.values(): m(*xs)
        sync()
        deadline = time.perf_counter() + float(sys.argv[4])
        pairs = list(models.items())
        while time.perf_counter() < deadline or len(times["exported"]) < 20:
            pairs.reverse()             # each goes first every other round: no order bias in the ratio
            for k, m in pairs:
                sync(); t = time.perf_counter(); m(*xs); sync(); times[k].append(time.perf_counter() - t)
            if len(times["exported"]) >= 2000: break
    out = {k: {"median_ms": statistics.median(v) * 1e3, "iqr_ms": (statistics.quantiles(v, n=4)[2] - statistics.quantiles(v, n=4)[0]) * 1e3, "n": len(v)} for k, v in times.items()}
    print(json.dumps({"speed": out, "outputs_equal": same}))
''')


FIRST_CALL = textwrap.dedent('''\
    import importlib.util, json, sys, time
    import torch
    ref = importlib.util.spec_from_file_location("reference", sys.argv[2])
    ref_mod = importlib.util.module_from_spec(ref); ref.loader.exec_module(ref_mod)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    init = ref_mod.get_init_inputs()
    torch.manual_seed(1)
    xs = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in ref_mod.get_inputs()]
    t = time.perf_counter()
    if sys.argv[1].endswith(".py"):
        s = importlib.util.spec_from_file_location("solution", sys.argv[1])
        mod = importlib.util.module_from_spec(s); s.loader.exec_module(mod)
    else:
        mod = __import__(sys.argv[1])
    with torch.no_grad():
        mod.ModelNew(*init).to(dev)(*xs)
    if dev == "cuda":
        torch.cuda.synchronize()
    print(time.perf_counter() - t)
    ''')


def _first_call(py: str, what: str, reference: Path, env: dict, cwd: Path) -> float | None:
    """Import ``what`` (a solution file or a package), build ModelNew, one forward: the seconds."""
    _, r = _run([py, "-c", FIRST_CALL, what, str(reference)], env=env, cwd=cwd)
    return float(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else None


def solutions(backend: str, only: set[str]) -> list[tuple[Path, Path]]:
    prefix = {"cpp": "cpp_", "cuda": "cuda_", "triton": "triton_"}[backend]
    out = []
    for sol in sorted(EXAMPLES.glob(f"*/solutions/{prefix}*.py")):
        task = sol.parent.parent
        if not only or task.name in only:
            out.append((task, sol))
    return out


def fresh_venv(where: Path) -> Path:
    """A venv without pip of its own that sees this interpreter's site-packages (torch, setuptools,
    pip, pytest) through a .pth file: the package is built by the torch it will run with."""
    base = Path(getattr(sys, "_base_executable", sys.executable))
    subprocess.run([str(base), "-m", "venv", "--without-pip", str(where)], check=True)
    py = where / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "kernelskill_parent.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return py


def _run(cmd, **kw) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    return time.perf_counter() - t, r


def _timed_import(py: str, code_before: str, what: str, env: dict, cwd: Path) -> float | None:
    code = f"import time\n{code_before}\nt = time.perf_counter()\n{what}\nprint(time.perf_counter() - t)"
    _, r = _run([py, "-c", code], env=env, cwd=cwd)
    return float(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else None


def pipeline(task: Path, sol: Path, preset: str | None, work: Path) -> dict:
    """Export, load_inline's first import, the AOT build, import, the package's tests."""
    row: dict = {"task": task.name, "solution": sol.name, "stage": "export"}
    d = work / task.name / sol.stem
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    cmd = [sys.executable, "-m", "kernelskill", "export", str(sol), "--task", str(task), "--to", str(d / "pkg"), "--json"]
    if preset:
        cmd += ["--preset", preset]
    row["export_s"], r = _run(cmd, cwd=ROOT)
    if r.returncode != 0:
        return {**row, "error": (r.stderr or r.stdout).strip()[-600:]}
    res = json.loads(r.stdout.strip().splitlines()[-1])
    row.update(package=res["package"], ops=len(res["ops"]), recorded=res["recorded"])
    row["stage"] = "load_inline"
    triton = sol.name.startswith("triton_")
    reference = d / "pkg" / row["package"] / "reference.py"
    if triton:
        env = dict(os.environ, TRITON_CACHE_DIR=str(d / "triton-jit"), PYTHONPATH="")
        row["jit_first_import_s"] = _first_call(sys.executable, str(sol), reference, env, d)
        row["jit_cached_import_s"] = _first_call(sys.executable, str(sol), reference, env, d)
    else:
        env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(d / "jit"), PYTHONPATH="")
        load = (f"import importlib.util as u\ns = u.spec_from_file_location('solution', {str(sol)!r})\n"
                "s.loader.exec_module(u.module_from_spec(s))")
        row["jit_first_import_s"] = _timed_import(sys.executable, "import torch", load, env, d)
        row["jit_cached_import_s"] = _timed_import(sys.executable, "import torch", load, env, d)
    row["stage"] = "build"
    py = fresh_venv(d / "venv")
    venv_env = dict(os.environ, PYTHONPATH="")
    row["build_s"], r = _run([str(py), "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps",
                              str(d / "pkg")], env=venv_env, cwd=d)
    if r.returncode != 0:
        return {**row, "error": (r.stdout + r.stderr).strip()[-600:]}
    if triton:          # the package's first call, with its own empty Triton cache
        venv_env["TRITON_CACHE_DIR"] = str(d / "triton-pkg")
        row["import_s"] = _first_call(str(py), row["package"], reference, venv_env, d)
    else:
        row["import_s"] = _timed_import(str(py), "import torch", f"import {row['package']}", venv_env, d)
    row["stage"] = "tests"
    _, r = _run([str(py), "-m", "pytest", "-q", "-p", "no:cacheprovider", "--pyargs", row["package"]],
                env=venv_env, cwd=d)
    last = (r.stdout.strip().splitlines() or [""])[-1]
    row["tests"] = last
    if r.returncode != 0:
        return {**row, "error": (r.stdout + r.stderr).strip()[-600:]}
    row["stage"] = "speed"
    row["_venv"] = str(py)
    return row


def speed(row: dict, seconds: float) -> dict:
    sol = EXAMPLES / row["task"] / "solutions" / row["solution"]
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(Path(row["_venv"]).parents[2] / "jit"), PYTHONPATH="")
    _, r = _run([row["_venv"], "-c", SPEED, str(sol), str(sol.parent.parent), row["package"], str(seconds)],
                env=env, cwd=Path(row["_venv"]).parents[2])
    if r.returncode != 0:
        return {**row, "error": (r.stdout + r.stderr).strip()[-600:]}
    out = json.loads(r.stdout.strip().splitlines()[-1])
    s = out["speed"]
    ratio = s["load_inline"]["median_ms"] / s["exported"]["median_ms"]
    return {**row, "stage": "done", "outputs_equal": out["outputs_equal"],
            "load_inline_ms": s["load_inline"], "exported_ms": s["exported"], "exported_speed_ratio": ratio}


def table(rows: list[dict]) -> list[str]:
    def f(x, spec=".2f"):
        return "—" if x is None else format(x, spec)
    if rows and all(r["solution"].startswith("triton_") for r in rows):
        head = ("| task | solution | export s | solution's first call s | cached s | install s | package's first "
                "call s | tests | solution ms | exported ms | ratio | outputs equal |")
    else:
        head = ("| task | solution | export s | load_inline first import s | cached s | AOT build s | import s | "
                "tests | load_inline ms | exported ms | ratio | outputs equal |")
    lines = [head, "|" + "---|" * 12]
    for r in rows:
        li, ex = r.get("load_inline_ms") or {}, r.get("exported_ms") or {}
        lines.append(f"| {r['task']} | {r['solution']} | {f(r.get('export_s'), '.1f')} | "
                     f"{f(r.get('jit_first_import_s'), '.1f')} | {f(r.get('jit_cached_import_s'))} | "
                     f"{f(r.get('build_s'), '.1f')} | {f(r.get('import_s'), '.3f')} | {r.get('tests', '—')} | "
                     f"{f(li.get('median_ms'), '.4f')} | {f(ex.get('median_ms'), '.4f')} | "
                     f"{f(r.get('exported_speed_ratio'), '.3f')} | {r.get('outputs_equal', '—')} |")
        if r.get("error"):
            lines.append(f"|  | failed at {r['stage']}: {r['error'].splitlines()[-1][:200]} |" + " |" * 10)
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    ap.add_argument("--backend", choices=["cpp", "cuda", "triton"],
                    help="default: cuda where a GPU is present, else cpp (triton: on a GPU, or TRITON_INTERPRET=1)")
    ap.add_argument("--only", default="", help="comma-separated example task names")
    ap.add_argument("--preset", help="the tasks' preset (default: the task's sizes on a GPU, else small)")
    ap.add_argument("--jobs", type=int, default=1, help="pipelines (export, builds, tests) at a time (default 1)")
    ap.add_argument("--seconds", type=float, default=2.0, help="timed seconds per solution (default 2)")
    ap.add_argument("--work", type=Path, help="where packages and venvs go (default: a temporary directory)")
    ap.add_argument("--json", type=Path, metavar="OUT")
    ap.add_argument("--list", action="store_true", help="print the solutions that would run and stop")
    a = ap.parse_args(argv)
    if a.jobs < 1 or a.seconds <= 0:
        ap.error("--jobs must be >= 1 and --seconds > 0")
    backend = a.backend
    if backend is None:
        import torch
        backend = "cuda" if torch.cuda.is_available() else "cpp"
    only = {s for s in a.only.split(",") if s}
    todo = solutions(backend, only)
    unknown = only - {t.name for t, _ in todo}
    if unknown:
        ap.error(f"--only: no {backend} solution for {', '.join(sorted(unknown))}")
    if a.list or not todo:
        print("\n".join(f"{t.name}: {s.name}" for t, s in todo) or f"no {backend} solutions")
        return 0
    import torch
    preset = a.preset or ("small" if backend == "cpp" or not torch.cuda.is_available() else None)
    work = a.work or Path(tempfile.mkdtemp(prefix="ks-export-cost-"))
    rows: list[dict] = []

    def save():
        if a.json:
            a.json.write_text(json.dumps({"backend": backend, "preset": preset, "rows":
                                          [{k: v for k, v in r.items() if not k.startswith("_")} for r in rows]}, indent=1))

    with ThreadPoolExecutor(a.jobs) as pool:
        for row in pool.map(lambda ts: pipeline(ts[0], ts[1], preset, work), todo):
            print(f"{row['task']}/{row['solution']}: {'failed at ' + row['stage'] if row.get('error') else 'built'}",
                  flush=True)
            rows.append(row)
            save()
    for i, row in enumerate(rows):
        if not row.get("error"):
            rows[i] = speed(row, a.seconds)
            save()
    print("\n".join(table(rows)))
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if any(r.get("error") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
