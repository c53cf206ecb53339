"""The wheel, as a user gets it from `pip install .` or an index: built from a copy of the checkout,
installed into a fresh virtual environment outside it, it carries every shipped skill and example
task, and the skill library, the suite, the MCP catalogue and the dashboard's list find them there."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from kernelskill.paths import EXAMPLES_DIR, SKILLS_DIR

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("pyproject.toml", "setup.py", "README.md", "kernelskill", "tui", "mcp_server", "skills", "examples")

PROBE = r"""
import json, sys
import kernelskill
from kernelskill.paths import EXAMPLES_DIR, SKILLS_DIR
from kernelskill.skills import SkillBook
from kernelskill.bench.suite import discover, resolve_suite
from kernelskill.tui.launch import list_examples
from kernelskill.mcp_server.roots import example_names
print(json.dumps({
    "package": kernelskill.__file__,
    "skills_dir": str(SKILLS_DIR), "examples_dir": str(EXAMPLES_DIR),
    "skills": sorted(s.id for s in SkillBook.load(stats_path=sys.argv[1])),
    "suite": sorted(t.id for t in discover(resolve_suite("examples"))),
    "tui": sorted(e.name for e in list_examples(EXAMPLES_DIR)),
    "mcp": example_names(),
    "files": sorted(str(p.relative_to(EXAMPLES_DIR)) for p in EXAMPLES_DIR.rglob("*")
                    if p.is_file() and "__pycache__" not in p.parts),
}))
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, dict]:
    """(the fresh environment's python, what the probe found there)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    for name in SOURCES:        # a copy: building writes build/ and *.egg-info beside the sources
        item = ROOT / name
        if item.is_dir():
            shutil.copytree(item, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            src.mkdir(exist_ok=True)
            shutil.copy2(item, src / name)
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                            "--disable-pip-version-check", "-w", str(tmp / "dist"), str(src)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    assert "BuildBackendWarning" not in build.stdout + build.stderr, "setuptools warned while building"
    wheel, = (tmp / "dist").glob("kernelskill-*.whl")

    env_dir = tmp / "env"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    # the wheel alone goes in; torch, numpy, textual and mcp come from this interpreter's site-packages
    # through a plain path entry (no .pth of ours there runs, so the checkout's editable install stays out)
    install = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-compile",
                              "--disable-pip-version-check", "--target", purelib, str(wheel)],
                             capture_output=True, text=True)
    assert install.returncode == 0, install.stderr[-3000:]
    host = [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages")]
    Path(purelib, "zz_host_packages.pth").write_text("\n".join(host) + "\n")

    out = subprocess.run([str(py), "-c", PROBE, str(tmp / "stats.toml")], cwd=tmp, capture_output=True,
                         text=True, env={"PATH": "/usr/bin:/bin", "KERNELSKILL_HOME": str(tmp / "home")})
    assert out.returncode == 0, out.stderr[-3000:]
    return py, json.loads(out.stdout)


def test_the_installed_package_is_the_wheel_not_the_checkout(installed):
    py, found = installed
    assert Path(found["package"]).is_relative_to(py.parent.parent), found["package"]
    assert not Path(found["package"]).is_relative_to(ROOT)
    assert Path(found["skills_dir"]).name == "_skills" and Path(found["examples_dir"]).name == "_examples"


def test_every_shipped_skill_is_in_the_wheel(installed):
    _, found = installed
    from kernelskill.skills import SkillBook
    here = sorted(s.id for s in SkillBook.load(dirs=[SKILLS_DIR]))
    assert len(here) >= 50 and found["skills"] == here


def test_every_example_task_and_file_is_in_the_wheel(installed):
    _, found = installed
    from kernelskill.bench.suite import discover
    tasks = sorted(t.id for t in discover(EXAMPLES_DIR))
    assert len(tasks) >= 24 and found["suite"] == tasks
    assert found["tui"] == found["mcp"] == sorted(p.parent.name for p in EXAMPLES_DIR.glob("*/reference.py"))
    files = sorted(str(p.relative_to(EXAMPLES_DIR)) for p in EXAMPLES_DIR.rglob("*")
                   if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")
    assert found["files"] == files


def test_the_installed_command_runs_a_shipped_example(installed, tmp_path):
    py, _ = installed
    r = subprocess.run([str(py), "-m", "kernelskill", "task", "show", "softmax_rows", "--preset", "small"],
                       cwd=tmp_path, capture_output=True, text=True,
                       env={"PATH": "/usr/bin:/bin", "KERNELSKILL_HOME": str(tmp_path / "home")})
    assert r.returncode == 0, r.stderr[-2000:]
    assert "softmax" in r.stdout.lower() and "_examples" in r.stdout


def test_an_install_without_its_skills_says_so(tmp_path, monkeypatch):
    """A broken install (the skills directory missing) is an error that names it, never 0 skills."""
    import kernelskill.paths as paths
    from kernelskill.errors import UserError
    from kernelskill.skills import SkillBook
    monkeypatch.setattr(paths, "SKILLS_DIR", tmp_path / "_skills")
    monkeypatch.setenv("KERNELSKILL_HOME", str(tmp_path / "home"))
    with pytest.raises(UserError, match="shipped skills are missing"):
        SkillBook.load()
