"""Package layout only (the metadata is in pyproject.toml): which directories become which packages.

The front ends install under the kernelskill namespace (``kernelskill.tui``, ``kernelskill.mcp_server``),
never as generic top-level names in site-packages; the shipped skills and example tasks travel
inside the package (``kernelskill/_skills``, ``kernelskill/_examples``; ``kernelskill/paths.py``
finds them in either layout). Every directory is listed as a package, data-only ones included, so
that setuptools neither drops nor warns about them."""
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent
ROOTS = {"kernelskill": "kernelskill", "kernelskill.tui": "tui", "kernelskill.mcp_server": "mcp_server",
         "kernelskill._skills": "skills", "kernelskill._examples": "examples"}
DATA = ["*.py", "*.toml", "*.md", "*.h", "*.sh", "*.tcss", "*.jsonl", "py.typed"]


def _packages() -> tuple[list[str], dict[str, str], dict[str, list[str]]]:
    packages, dirs, data = [], {}, {}
    for name, rel in ROOTS.items():
        dirs[name] = rel
        for d in sorted(p for p in [HERE / rel, *(HERE / rel).rglob("*")] if p.is_dir()):
            if d.name == "__pycache__" or any(part.startswith(".") for part in d.relative_to(HERE).parts):
                continue
            sub = d.relative_to(HERE / rel).parts
            if name == "kernelskill" and sub and sub[0] in ("tui", "mcp_server"):
                continue
            pkg = ".".join((name, *sub))
            packages.append(pkg)
            data[pkg] = DATA
    return packages, dirs, data


packages, package_dir, package_data = _packages()
setup(packages=packages, package_dir=package_dir, package_data=package_data)
