"""Streamable HTTP transport, behind the server's own guard.

The guard answers before the MCP app sees a request: a Host header that is not the loopback name
the server is bound to (DNS rebinding) → 421; an Origin that is neither a localhost origin nor one
allowed with ``--allow-origin`` → 403; a missing or wrong bearer token, when one is set → 401; a
declared body over the limit → 413 (the SDK enforces the same limit on chunked bodies). Binding
anything but a loopback address requires a token.
"""
from __future__ import annotations

import errno
import hmac
import ipaddress
import socket
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from kernelskill.errors import UserError

LOCAL_NAMES = {"localhost", "127.0.0.1", "::1"}
MIN_TOKEN_CHARS = 16


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or address) only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass
class HttpPolicy:
    """Where the HTTP server listens and whom it answers."""
    host: str = "127.0.0.1"
    port: int = 8765
    token: str | None = None
    allow_origins: list[str] = field(default_factory=list)
    max_body_bytes: int = 2 * 1024 * 1024
    path: str = "/mcp"

    def check(self) -> None:
        """UserError for a policy that would expose the evaluator."""
        if not is_loopback(self.host) and not self.token:
            raise UserError(f"--host {self.host} is reachable from other machines: set a bearer token with "
                            f"--token or the KERNELSKILL_MCP_TOKEN environment variable, or bind 127.0.0.1")
        if self.token is not None and len(self.token) < MIN_TOKEN_CHARS:
            raise UserError(f"the token has {len(self.token)} characters; use at least {MIN_TOKEN_CHARS}, e.g. "
                            f"python -c 'import secrets; print(secrets.token_urlsafe(32))'")
        if self.max_body_bytes < 64 * 1024:
            raise UserError(f"--max-body {self.max_body_bytes}: at least 65536 bytes are needed for a candidate")
        for origin in self.allow_origins:
            if not urlsplit(origin.removesuffix(":*")).scheme:
                raise UserError(f"--allow-origin {origin}: expected an origin like https://app.example.com "
                                f"(or http://host:* for any port)")

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{self.path}"


class Guard:
    """ASGI middleware that enforces an ``HttpPolicy`` on every HTTP request."""

    def __init__(self, app: ASGIApp, policy: HttpPolicy):
        self.app, self.policy = app, policy
        self.loopback = is_loopback(policy.host)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = self.refusal(Headers(scope=scope))
            if refusal is not None:
                status, text, headers = refusal
                await PlainTextResponse(text, status_code=status, headers=headers)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def refusal(self, headers: Headers) -> tuple[int, str, dict[str, str]] | None:
        """(status, message, headers) when the request must be refused, else None."""
        if self.loopback and not self._host_ok(headers.get("host")):
            return 421, "Invalid Host header: this server only answers requests addressed to localhost", {}
        origin = headers.get("origin")
        if origin is not None and not self._origin_ok(origin):
            return 403, (f"Origin {origin!r} is not allowed; the server's operator can allow it with "
                         f"--allow-origin {origin}"), {}
        if self.policy.token and not self._token_ok(headers.get("authorization")):
            return 401, "Unauthorized: send the header 'Authorization: Bearer <token>'", \
                {"WWW-Authenticate": 'Bearer realm="kernelskill"'}
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self.policy.max_body_bytes:
            return 413, f"Request body too large: {length} bytes, the limit is {self.policy.max_body_bytes}", {}
        return None

    def _host_ok(self, host: str | None) -> bool:
        if not host:
            return False
        name = urlsplit(f"//{host}").hostname or ""
        return name in LOCAL_NAMES or name == self.policy.host.strip("[]")

    def _origin_ok(self, origin: str) -> bool:
        parts = urlsplit(origin)
        if parts.scheme in ("http", "https") and parts.hostname in LOCAL_NAMES:
            return True
        for allowed in self.policy.allow_origins:
            if origin == allowed or (allowed.endswith(":*") and origin.startswith(allowed[:-1])
                                     and origin[len(allowed) - 1:].isdigit()):
                return True
        return False

    def _token_ok(self, header: str | None) -> bool:
        scheme, _, value = (header or "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(),
                                                                   (self.policy.token or "").encode())


def bind(policy: HttpPolicy) -> socket.socket:
    """The listening socket for ``policy`` (port 0: any free port, written back into the policy), made
    before anything announces the URL; a taken port is a UserError that names it."""
    host = policy.host.strip("[]")
    try:
        sock = socket.create_server((host, policy.port), family=socket.AF_INET6 if ":" in host else socket.AF_INET)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise UserError(f"port {policy.port} on {host} is already in use (another kernelskill mcp?); "
                            f"choose another with --port, or --port 0 for any free one") from None
        raise UserError(f"cannot listen on {host}:{policy.port}: {e.strerror or e}") from None
    policy.port = sock.getsockname()[1]
    return sock


async def run_http(server, policy: HttpPolicy, sock: socket.socket | None = None) -> None:
    """Serve ``server`` over streamable HTTP at ``policy.url`` until interrupted (on ``sock`` when
    given: ``bind`` made it before the URL was announced)."""
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    policy.check()
    # Host and Origin are checked by the guard (which knows --allow-origin); the SDK still checks the
    # content type and buffers bodies up to the same limit.
    app = server.streamable_http_app(
        streamable_http_path=policy.path, max_request_body_size=policy.max_body_bytes, host=policy.host,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
    config = uvicorn.Config(Guard(app, policy), host=policy.host.strip("[]"), port=policy.port,
                            log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock] if sock is not None else None)
