"""Shared fixtures: a persistent build cache (so one C++ source is built once per machine) and a
private KERNELSKILL_HOME per test session."""
from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
os.environ.setdefault("KERNELSKILL_CACHE", str(ROOT / ".kernelskill-cache"))
# The builds are shared by the suite's parallel workers; the MCP servers' device locks are not: a
# test that times how soon its own server frees the device must not wait on another worker's test.
os.environ.setdefault("KERNELSKILL_LOCKS", str(Path(os.environ["KERNELSKILL_CACHE"]) /
                                               f"locks-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"))

HAS_CUDA = bool(torch.version.cuda) and torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the GPU machine: pytest -m gpu)")
    for item in items:
        if ("gpu" in item.keywords or "gpu_suite" in item.keywords) and not HAS_CUDA:
            item.add_marker(skip)


@pytest.fixture(autouse=True, scope="session")
def _home(tmp_path_factory):
    os.environ["KERNELSKILL_HOME"] = str(tmp_path_factory.mktemp("home"))
    yield


# What a run of the whole suite writes at most, in its build cache and pytest's temporary folders
# together (docs/testing.md, "Disk"): a run that starts with less free is told so.
SUITE_DISK_GB = 5


def _disk_line() -> tuple[str, bool]:
    """The free space where the suite writes, and whether it is below what a run needs."""
    import shutil
    import tempfile
    places = {"cache": Path(os.environ["KERNELSKILL_CACHE"]), "tmp": Path(tempfile.gettempdir())}
    free = {}
    for name, path in places.items():
        probe = path if path.exists() else path.parent
        free[name] = shutil.disk_usage(probe).free / 2 ** 30
    line = "disk free: " + ", ".join(f"{n} {gb:.1f} GB" for n, gb in free.items())
    low = min(free.values()) < SUITE_DISK_GB
    if low:
        line += (f" -- LOW: the suite writes up to ~{SUITE_DISK_GB} GB (precompiled headers of ~0.5 GB "
                 "each); free space first, or tests will fail with 'No space left on device'")
    return line, low


def pytest_report_header(config):
    return _disk_line()[0]


def pytest_sessionstart(session):
    """Under -q the header is not shown: a run short of disk is told so anyway (not an xdist worker's)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    line, low = _disk_line()
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if low and reporter is not None:
        reporter.write_line("WARNING " + line, yellow=True, bold=True)


@pytest.fixture(autouse=True)
def _drop_private_headers(request):
    """A test that builds in a cache of its own (under tmp_path) makes precompiled headers of about
    0.5 GB each, and pytest keeps every tmp_path until the session ends: the suite's disk use grew
    by a gigabyte for each such test. Its headers go when it ends (its other files stay, for a
    failure's post-mortem)."""
    tmp = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    yield
    if tmp is None or not tmp.exists():
        return
    # A detached maker the test's builds started may still be at work: it would write its header
    # after this. It is this test's alone (its cache is under tmp_path): stopped first.
    from kernelskill.evaluate.build.own_builds import own_builds
    for cache in {m.parents[4] for m in tmp.rglob("_pch/busy/*.json")}:
        for b in own_builds(cache):
            try:
                if os.getpgid(b["pid"]) == b["pid"] != os.getpid():
                    os.killpg(b["pid"], signal.SIGKILL)
            except OSError:
                pass                       # it just ended
    for f in [*tmp.rglob("*.gch"), *tmp.rglob("extension.h.*.tmp")]:
        f.unlink(missing_ok=True)


@pytest.fixture
def fast():
    """Evaluation options for tests: few timing reps, short caps."""
    from kernelskill.evaluate.api import Options
    from kernelskill.evaluate.worker.timing import TimingConfig
    return Options(device="cpu", timing=TimingConfig(warmup=1, min_reps=5, max_reps=20, time_cap_s=0.5, retimes=0),
                   build_timeout=600, run_timeout=60)


def pytest_sessionfinish(session, exitstatus):
    """The suite leaves no process behind: every worker, spare and guard it started is gone at the
    end (waited for, bounded), else the run fails and names them."""
    import time

    from kernelskill.evaluate.launch.isolation import _kill_live, stop_spares
    from procs import cmdline, descendants
    stop_spares()
    _kill_live()
    deadline = time.monotonic() + 30
    while True:
        left = [p for p in descendants(os.getpid()) if "kernelskill.evaluate.worker" in cmdline(p)]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    if left:
        print(f"\n{len(left)} worker process(es) outlived the tests: "
              + "; ".join(" ".join(cmdline(p))[:160] for p in left))
        session.exitstatus = 1
