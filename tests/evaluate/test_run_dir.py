"""Every temporary folder a process makes lies under its own run folder: removed at exit, and when
the process is killed (no atexit), by the next kernelskill process that makes one."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from kernelskill.evaluate import host

MAKE = textwrap.dedent("""\
    import os, sys
    from kernelskill.evaluate import host
    folder = host.temp_dir("kernelskill-")
    (folder / "f").write_text("x")
    print(host.run_dir(), flush=True)
    if sys.argv[1] == "killed":
        os._exit(0)               # no atexit, as after SIGKILL
    if sys.argv[1] == "wait":
        sys.stdin.read()          # alive until its stdin closes
    if sys.argv[1] == "fork":
        pid = os.fork()
        if pid == 0:
            sys.exit(0)           # the child's atexit runs: it must leave its parent's folder alone
        os.waitpid(pid, 0)
        print(host.run_dir().exists(), flush=True)
""")


def _start(mode: str, tmp: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", MAKE, mode], env=dict(os.environ, TMPDIR=str(tmp)),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def _run(mode: str, tmp: Path) -> list[str]:
    proc = _start(mode, tmp)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0
    return out.split()


def test_a_process_removes_its_folder_at_exit_and_the_next_removes_a_killed_ones(tmp_path):
    (killed,) = _run("killed", tmp_path)
    assert Path(killed).is_dir() and Path(killed).name.startswith(host.RUN_PREFIX)
    live = _start("wait", tmp_path)
    live_dir = Path(live.stdout.readline().strip())
    # A folder named for a live pid but another start time: that pid was reused, its maker is gone.
    reused = tmp_path / f"{host.RUN_PREFIX}{live.pid}-1"
    reused.mkdir()
    other = tmp_path / "kernelskill-something-else"
    other.mkdir()
    try:
        (normal,) = _run("normal", tmp_path)
        assert not Path(normal).exists()                   # its own: removed at its exit
        assert not Path(killed).exists() and not reused.exists()
        assert live_dir.is_dir() and (next(live_dir.iterdir()) / "f").exists()     # a live one's stays
        assert other.is_dir()                              # not a run folder: not ours to judge
    finally:
        live.communicate(timeout=120)
    assert not live_dir.exists()


def test_a_forked_child_leaves_its_parents_folder(tmp_path):
    folder, exists_after_child = _run("fork", tmp_path)
    assert exists_after_child == "True"
    assert not Path(folder).exists()                       # the parent's own exit removed it


def test_workers_folders_lie_under_the_run_folder(tmp_path, fast):
    from kernelskill.evaluate.options import workdir
    d = workdir(fast)
    try:
        assert d.parent == host.run_dir() and d.name.startswith("kernelskill-")
    finally:
        d.rmdir()
