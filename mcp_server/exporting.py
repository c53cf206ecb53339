"""``export_kernel``: a verified candidate as a package (kernelskill.export, docs/export.md), from the server.

Export runs the candidate's module (to read its ``load_inline`` calls and record its output shapes), so
it never runs in the server's process: the server checks the arguments (the run and node, the task, a
destination inside the roots), then a child process started like the evaluator's workers (scrubbed
environment, its own scratch directory and process group, a time limit, killed on cancel) writes the
package. With ``build``, a second child builds it in place (``setup.py build_ext --inplace``: nothing is
installed into the server's environment) and a third imports it from there and compares its ``ModelNew``
with the reference on the task's inputs. The device is held meanwhile, as an evaluation holds it.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

from pydantic import BaseModel, Field

from kernelskill.errors import UserError
from kernelskill.evaluate.launch import lifeline
from kernelskill.evaluate.launch.isolation import Cancelled, kill_group, scrubbed_env, spawn
from kernelskill.paths import cache_root

Progress = Callable[[float, float, str], None]
STEPS = 4
EXPORT_TIMEOUT = 900.0        # the candidate's builds (cached by content) and the shape recording
BUILD_TIMEOUT = 900.0         # setup.py build_ext: about a minute for the C++ GELU on a small host
                              # (figures: docs/mcp.md, "Measurements behind the code")
CHECK_TIMEOUT = 300.0
_MARK = "\n@@kernelskill-export@@"

_EXPORT_CHILD = r"""
import json, sys
from kernelskill.evaluate.launch.lifeline import hold
hold()
from pathlib import Path
from kernelskill.errors import UserError
req = json.loads(sys.argv[1])
try:
    from kernelskill.export import export
    from kernelskill.task import Task
    task = Task.load(req["task"], preset=req["preset"], overrides=req["overrides"] or None)
    path = Path(req["path"]) if req["path"] else None
    res = export(req["source"], task, req["to"], package=req["package"], path=path, provenance=req["provenance"],
                 force=req["force"])
    out = {"ok": True, "result": res.to_dict()}
except UserError as e:
    out = {"ok": False, "error": str(e)}
except Exception as e:  # noqa: BLE001 - the candidate's own failure, reported as data
    out = {"ok": False, "error": f"export raised {type(e).__name__}: {e}"}
sys.stdout.write(MARK + json.dumps(out, default=str))
sys.stdout.flush()
""".replace("MARK", repr(_MARK))

_CHECK_CHILD = r"""
import json, sys
from kernelskill.evaluate.launch.lifeline import hold
hold()
req = json.loads(sys.argv[1])
sys.path.insert(0, req["dir"])
out = {"ok": False}
try:
    import torch
    import torch.utils.cpp_extension as ce
    def _no_jit(*a, **k):
        raise RuntimeError("the package compiled a kernel at import (load_inline): it was not built ahead of time")
    ce.load_inline = _no_jit
    pkg = __import__(req["package"])
    out["file"] = pkg.__file__
    torch.manual_seed(0)
    init = pkg.get_init_inputs()
    ref = pkg.Model(*init)
    new = pkg.ModelNew(*init)
    new.load_state_dict(ref.state_dict(), strict=False)
    dev = req["device"]
    torch.manual_seed(1)
    xs = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in pkg.get_inputs()]
    ref, new = ref.to(dev), new.to(dev)
    with torch.no_grad():
        want, got = ref(*xs), new(*xs)
    want = want if isinstance(want, (list, tuple)) else [want]
    got = got if isinstance(got, (list, tuple)) else [got]
    same = all(a.shape == b.shape and torch.allclose(a.float(), b.float(), atol=req["atol"], rtol=req["rtol"])
               for a, b in zip(want, got))
    out.update(ok=bool(same), message="ModelNew matches the reference on the task's inputs" if same else
               "ModelNew differs from the reference on the task's inputs")
except BaseException as e:  # noqa: BLE001 - reported as data
    out["message"] = f"{type(e).__name__}: {e}"
sys.stdout.write(MARK + json.dumps(out, default=str))
sys.stdout.flush()
""".replace("MARK", repr(_MARK))


class ExportedKernel(BaseModel):
    """A candidate written as a package: AOT-built kernels as torch.library ops (docs/export.md)."""
    path: str = Field(description="the package's directory (pip install --no-build-isolation <path> installs it)")
    package: str = Field(description="the Python package's name (import it; also the ops' namespace)")
    backend: str
    files: list[str] = Field(description="the files written, relative to path")
    ops: list[str] = Field(description="the torch.library ops: torch.ops.<package>.<op>")
    recorded: bool = Field(description="output shapes recorded for the fake implementations (torch.compile)")
    notes: list[str] = Field(default_factory=list)
    source: str = Field(description="what was exported: the run and node, or 'source'")
    task: str
    built: bool | None = Field(default=None, description="build requested: whether setup.py build_ext --inplace "
                               "succeeded; null when not asked to build")
    build_log: str | None = Field(default=None, description="the build's last lines (when it failed)")
    imported: bool | None = Field(default=None, description="after a build: the package imported from path without "
                                  "compiling anything, and its ModelNew matched the reference on the task's inputs")
    import_message: str | None = None
    export_s: float = Field(description="seconds to write the package (the candidate run once per recorded shape)")
    build_s: float | None = None
    seconds: float = Field(description="the whole call")
    summary: str
    next_step: str


def _wait(proc: subprocess.Popen, timeout: float, cancel: threading.Event | None, what: str) -> tuple[str, str]:
    """The child's (stdout, stderr); killed on ``cancel`` (Cancelled) or after ``timeout`` (UserError)."""
    deadline = time.monotonic() + timeout
    out: list[bytes] = []
    err: list[bytes] = []

    def drain(stream, into):
        for chunk in iter(lambda: stream.read(65536), b""):
            into.append(chunk)
    readers = [threading.Thread(target=drain, args=(proc.stdout, out), daemon=True),
               threading.Thread(target=drain, args=(proc.stderr, err), daemon=True)]
    for r in readers:
        r.start()
    try:
        while proc.poll() is None:
            if cancel is not None and cancel.is_set():
                raise Cancelled(f"{what} cancelled")
            if time.monotonic() > deadline:
                raise UserError(f"{what} took longer than {timeout:.0f} s and was stopped")
            time.sleep(0.05)
    finally:
        kill_group(proc)
        for r in readers:
            r.join(timeout=5)
    return b"".join(out).decode(errors="replace"), b"".join(err).decode(errors="replace")


def _reply(what: str, out: str, err: str, rc: int | None) -> dict:
    if _MARK not in out:
        why = f"signal {-rc}" if rc is not None and rc < 0 else f"exit code {rc}"
        tail = "\n".join(err.strip().splitlines()[-6:])
        raise UserError(f"{what} crashed ({why})" + (f":\n{tail}" if tail else ""))
    return json.loads(out.rsplit(_MARK, 1)[1])


def _child(argv: list[str], scratch_root: Path, what: str, timeout: float, cancel) -> tuple[str, str, int | None]:
    scratch = Path(tempfile.mkdtemp(prefix="export-", dir=scratch_root))
    try:
        extra = {"KERNELSKILL_CACHE": str(cache_root())}           # the evaluator's build cache
        proc = spawn(argv, scratch, extra_env=extra, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = _wait(proc, timeout, cancel, what)
        return out, err, proc.returncode
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run_export(req: dict, scratch_root: Path, cancel: threading.Event | None) -> dict:
    """kernelskill.export.export in a child process: its result dict; UserError with the reason."""
    out, err, rc = _child([sys.executable, "-c", _EXPORT_CHILD, json.dumps(req)], scratch_root,
                          "the export (running the candidate to record its shapes)", EXPORT_TIMEOUT, cancel)
    reply = _reply("the export", out, err, rc)
    if not reply["ok"]:
        raise UserError(reply["error"])
    return reply["result"]


def build_inplace(pkg_dir: Path, scratch_root: Path, cancel: threading.Event | None) -> tuple[bool, str]:
    """``setup.py build_ext --inplace`` in the package's directory: (ok, the log's tail)."""
    scratch = Path(tempfile.mkdtemp(prefix="export-build-", dir=scratch_root))
    try:
        env = scrubbed_env(scratch, {"KERNELSKILL_CACHE": str(cache_root())})
        proc = subprocess.Popen([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=pkg_dir, env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True, **lifeline.child_options(env))
        out, err = _wait(proc, BUILD_TIMEOUT, cancel, "the package's build")
        log = "\n".join((out + err).strip().splitlines()[-15:])
        return proc.returncode == 0, log
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def check_import(pkg_dir: Path, package: str, device: str, tolerance: tuple[float, float], scratch_root: Path,
                 cancel: threading.Event | None) -> tuple[bool, str]:
    """Import the built package from ``pkg_dir`` (nothing compiled at import) and compare its ModelNew with the
    reference on the task's inputs: (ok, message)."""
    req = {"dir": str(pkg_dir), "package": package, "device": device, "atol": tolerance[0], "rtol": tolerance[1]}
    out, err, rc = _child([sys.executable, "-c", _CHECK_CHILD, json.dumps(req)], scratch_root,
                          "importing the built package", CHECK_TIMEOUT, cancel)
    try:
        reply = _reply("importing the built package", out, err, rc)
    except UserError as e:
        return False, str(e)
    return bool(reply.get("ok")), reply.get("message", "")


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() and "build" not in p.relative_to(root).parts[:1] and "__pycache__" not in p.parts)
