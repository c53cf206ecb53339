"""nvcc with its host and device front ends side by side: ``python nvcc_phases.py NVCC ARGS…``.

nvcc runs its phases one after the other: the host preprocessor and front end (``cudafe++``), then
the device preprocessor, ``cicc``, ``ptxas`` and ``fatbinary``, then the host compiler over what
``cudafe++`` wrote. The two front ends parse the same source (each ~40 % of a build that includes
torch's headers) and share one input only, the module id, which nvcc has ``cudafe++`` write and
``cicc`` read. This script asks nvcc for its plan (``--dryrun``), writes the module id itself, and
runs the host lane (preprocess, ``cudafe++``) beside the device lane (preprocess, ``cicc``,
``ptxas``, ``fatbinary``), then the host compile: the first lane to fail ends the build with its own
diagnostics (the other is killed, so an error is not printed twice). A plan of another shape
(relocatable device code, several sources, a phase it does not know) runs nvcc itself, unchanged.

Standard library only, run by path: the build starts it without importing kernelskill or torch.
"""
from __future__ import annotations

import hashlib
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
from pathlib import Path

ENV_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(\S*)\s*$")
DEVICE_TOOLS = ("cicc", "ptxas")


def plan(cmd: list[str], keep: Path) -> tuple[dict, list[list[str]], list[list[str]], list[str]] | None:
    """(environment, host lane, device lane, final compile) of nvcc's plan for ``cmd``, or None."""
    keep.mkdir(parents=True, exist_ok=True)
    dry = subprocess.run([*cmd, "--dryrun", "--keep", "--keep-dir", str(keep)], capture_output=True, text=True)
    if dry.returncode != 0:
        return None
    env = dict(os.environ)
    lines = []
    for raw in dry.stderr.splitlines():
        if not raw.startswith("#$ "):
            continue
        text = raw[3:]
        m = ENV_LINE.match(text)
        if m:
            env[m.group(1)] = m.group(2)
        elif not re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", text):
            lines.append(shlex.split(text))
    lines = [[_expand(a, env) for a in line] for line in lines]
    if len(lines) < 5:
        return None
    tool = [Path(line[0]).name for line in lines]
    host_prep, front, final, fatbin = lines[0], lines[1], lines[-1], lines[-2]
    if (tool[1] != "cudafe++" or "-E" not in host_prep or any(a.startswith("-D__CUDA_ARCH__=") for a in host_prep)
            or tool[-2] != "fatbinary" or "-c" not in final):
        return None
    device = lines[2:-2]
    for line, name in zip(device, tool[2:-2]):
        if name not in DEVICE_TOOLS and "-E" not in line:
            return None
    if "--gen_module_id_file" not in front or "cicc" not in tool[2:-2]:
        return None
    module_id = front[front.index("--module_id_file_name") + 1]
    front = [a for a in front if a != "--gen_module_id_file"]
    # The module id names this unit's registration symbols: unique to the source and the command.
    digest = hashlib.sha256(" ".join(cmd).encode() + _source_bytes(cmd)).hexdigest()
    stem = re.sub(r"\W", "_", Path(_source(cmd) or "unit.cu").name)
    Path(module_id).write_text(f"_{digest[:8]}_{len(stem)}_{stem}_{digest[8:16]}")
    return env, [host_prep, front], [*device, fatbin], final


def _expand(arg: str, env: dict) -> str:
    return re.sub(r"\$(\w+)|\$\{(\w+)\}", lambda m: env.get(m.group(1) or m.group(2), ""), arg)


def _source(cmd: list[str]) -> str | None:
    cus = [a for a in cmd[1:] if a.endswith(".cu")]
    return cus[0] if len(cus) == 1 else None


def _source_bytes(cmd: list[str]) -> bytes:
    src = _source(cmd)
    try:
        return Path(src).read_bytes() if src else b""
    except OSError:
        return b""


class Lane(threading.Thread):
    """Runs its commands in order; stops at the first failure or when told to."""

    def __init__(self, commands: list[list[str]], env: dict, stop: threading.Event):
        super().__init__(daemon=True)
        self.commands, self.env, self.stop = commands, env, stop
        self.rc, self.output, self.proc = 0, "", None

    def run(self) -> None:
        for cmd in self.commands:
            if self.stop.is_set():
                return
            try:
                self.proc = subprocess.Popen(cmd, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, text=True, start_new_session=True)
            except OSError as e:
                self.rc, self.output = 127, f"{cmd[0]}: {e}\n"
                self.stop.set()
                return
            out, _ = self.proc.communicate()
            self.output += out
            if self.proc.returncode != 0:
                self.rc = self.proc.returncode if not self.stop.is_set() else 0
                self.stop.set()
                return

    def kill(self) -> None:
        proc = self.proc
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass


def main(cmd: list[str]) -> int:
    out = next((cmd[i + 1] for i, a in enumerate(cmd[:-1]) if a == "-o"), None)
    if not cmd or out is None or _source(cmd) is None or "-c" not in cmd:
        os.execvp(cmd[0], cmd)
    keep = Path(out).with_suffix(".nvcc")
    p = plan(cmd, keep)
    if p is None:
        os.execvp(cmd[0], cmd)
    env, host, device, final = p
    stop = threading.Event()
    lanes = [Lane(host, env, stop), Lane(device, env, stop)]
    for lane in lanes:
        lane.start()
    while any(lane.is_alive() for lane in lanes):
        stop.wait(0.05)
        if stop.is_set():
            for lane in lanes:
                lane.kill()
    for lane in lanes:
        lane.join()
    failed = next((lane for lane in lanes if lane.rc != 0), None)
    if failed is not None:
        sys.stdout.write(failed.output)
        return failed.rc
    sys.stdout.write(lanes[0].output + lanes[1].output)
    done = subprocess.run(final, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sys.stdout.write(done.stdout)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
