"""``kernelskill mcp`` (and the ``kernelskill-mcp`` entry point): parse, build the config, serve.

Importing this module needs no MCP packages: ``kernelskill`` lists the command even where the
``mcp`` extra is not installed, and says how to install it when it is run.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from kernelskill.errors import UserError

EPILOG = """examples:
  kernelskill mcp --root .                       stdio, for Claude Code, Cursor and other local clients
  claude mcp add kernelskill -- kernelskill mcp --root .
  kernelskill mcp --transport http --port 8765   streamable HTTP at http://127.0.0.1:8765/mcp
  KERNELSKILL_MCP_TOKEN=... kernelskill mcp --transport http --host 0.0.0.0 --root ~/tasks

Tasks are read only inside the --root directories (default: the current directory) or from the
shipped examples; candidate code only runs in the evaluator's isolated workers."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--transport", choices=("stdio", "http"), default="stdio",
                   help="stdio (default; the client starts the server) or streamable HTTP")
    p.add_argument("--root", action="append", metavar="DIR",
                   help="a directory whose task files the tools may read (repeatable; default: .)")
    p.add_argument("--host", default="127.0.0.1", help="HTTP: address to bind (default 127.0.0.1; any other "
                   "address requires a token)")
    p.add_argument("--port", type=int, default=8765, help="HTTP: port (default 8765)")
    p.add_argument("--token", default=None, help="HTTP: bearer token clients must send (default: "
                   "$KERNELSKILL_MCP_TOKEN; prefer the variable, arguments are visible to other users)")
    p.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                   help="HTTP: a browser origin allowed besides localhost (repeatable; http://host:* for any port)")
    p.add_argument("--max-body", type=int, default=2 * 1024 * 1024, metavar="BYTES",
                   help="HTTP: largest request body accepted (default 2 MiB)")
    p.add_argument("--device", default="auto", help="cpu, cuda or cuda:N (default: cuda for CUDA/Triton "
                   "candidates when a GPU is present, else cpu)")
    p.add_argument("--trials", type=int, default=5, help="correctness trials per evaluation (default 5)")
    p.add_argument("--build-timeout", type=float, default=900.0, metavar="S",
                   help="seconds a candidate's build may take before the verdict is timeout (default 900)")
    p.add_argument("--run-timeout", type=float, default=300.0, metavar="S",
                   help="seconds a candidate may run in each phase after its build (default 300); also the most "
                        "a tool call may ask for with run_timeout_s, and how long a hung candidate holds the device")
    p.add_argument("--time-cap", type=float, default=10.0, help="seconds of timing per model at most (default 10)")


def add_parser(subparsers) -> None:
    """Register ``kernelskill mcp``."""
    p = subparsers.add_parser("mcp", help="serve the evaluator and skills to MCP clients (Claude Code, Cursor, …)",
                              description="Run the KernelSkill MCP server: compile, verify, profile, evaluate "
                              "and skill lookup as tools for external agents.", epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    p.set_defaults(func=cmd_mcp)


def cmd_mcp(args: argparse.Namespace) -> int:
    """Build the configuration from ``args`` and serve until stopped."""
    try:
        from .http import HttpPolicy
        from .roots import Roots
        from .server import serve
        from .toolbox import ServerConfig
    except ImportError as e:
        raise UserError(f"the MCP server needs the mcp package ({e.name} is missing): "
                        f"pip install 'kernelskill[mcp]'") from None
    from kernelskill.evaluate.api import Options, resolve_device
    from kernelskill.evaluate.worker.timing import TimingConfig

    if args.trials < 1:
        raise UserError(f"--trials {args.trials}: at least 1")
    for flag, value in (("--build-timeout", args.build_timeout), ("--run-timeout", args.run_timeout)):
        if not value >= 1:
            raise UserError(f"{flag} {value:g}: at least 1 second")
    policy = HttpPolicy(host=args.host, port=args.port, token=args.token or os.environ.get("KERNELSKILL_MCP_TOKEN"),
                        allow_origins=list(args.allow_origin), max_body_bytes=args.max_body)
    if args.transport == "http":
        policy.check()
    config = ServerConfig(roots=[Path(r) for r in (args.root or ["."])],
                          options=Options(device=args.device, trials=args.trials,
                                          timing=TimingConfig(time_cap_s=args.time_cap),
                                          build_timeout=args.build_timeout, run_timeout=args.run_timeout))
    Roots(config.roots)                  # a wrong --root or --device fails now, not at the first call
    resolve_device(args.device)
    sock = None
    if args.transport == "http":
        from .http import bind
        sock = bind(policy)              # listening before the URL is announced; a taken port fails here
        print(f"kernelskill MCP server on {policy.url} (roots: {', '.join(map(str, config.roots))})",
              file=sys.stderr, flush=True)
    serve(config, args.transport, policy, sock)
    return 0


def main(argv: list[str] | None = None) -> int:
    """The ``kernelskill-mcp`` console entry point: the options of ``kernelskill mcp``, without the
    subcommand."""
    parser = argparse.ArgumentParser(prog="kernelskill-mcp", description="The KernelSkill MCP server.",
                                     epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return cmd_mcp(args)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
