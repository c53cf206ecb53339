"""A real HTTP server that speaks the OpenAI chat-completions protocol, for tests.

    with ChatServer(lambda request: "reply text", failures=[429, 500]) as server:
        client base_url = server.url            # http://127.0.0.1:<port>/v1

Replies come from a list (in order) or from a function of the request body; ``failures`` are
HTTP status codes answered, one per request, before any reply (to test retries). Both
``stream=true`` (server-sent events, with a usage chunk when ``stream_options.include_usage``)
and plain JSON responses are served. ``requests`` keeps every request body received.

The client's one-token pre-flight (header ``X-KernelSkill-Preflight``) is answered "OK" by the
server itself (counted in ``preflights``), so scripted replies are not spent on it. A server that
hangs: ``stall="headers"`` accepts a request and never answers it, ``stall="content"`` sends the
stream's headers and its first (empty) chunk, then nothing; ``pace_s`` sleeps between chunks.
A stalled handler is released when the server stops.
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


def _tokens(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


class ChatServer:
    def __init__(self, replies: list[str] | Callable[[dict], str], failures: list[int] | None = None,
                 chunk: int = 40, stall: str | None = None, pace_s: float = 0.0):
        self.replies = replies
        self.failures = list(failures or [])
        self.chunk, self.stall, self.pace_s = chunk, stall, pace_s
        self.preflights = 0
        self._stop = threading.Event()
        self.requests: list[dict] = []
        self.statuses: list[int] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> "ChatServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def _next(self, body: dict) -> tuple[int | None, str]:
        with self._lock:
            self.requests.append(body)
            if self.failures:
                return self.failures.pop(0), ""
            if callable(self.replies):
                return None, self.replies(body)
            if not self.replies:
                return 500, ""
            return None, self.replies.pop(0)

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:       # keep test output quiet
                pass

            def _json(self, code: int, payload: dict, headers: dict | None = None, count: bool = True) -> None:
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)
                if count:                       # pre-flights are counted apart (server.preflights)
                    server.statuses.append(code)

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._json(200, {"object": "list", "data": [{"id": "test-model", "object": "model"}]})
                else:
                    self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                    return
                if server.stall == "headers":
                    with server._lock:
                        server.requests.append(body)
                    server._stop.wait()
                    return
                if self.headers.get("X-KernelSkill-Preflight") and server.stall is None:
                    with server._lock:
                        server.preflights += 1
                    self._json(200, {"id": "chatcmpl-preflight", "object": "chat.completion", "created": 0,
                                     "model": body.get("model", ""),
                                     "choices": [{"index": 0, "finish_reason": "length",
                                                  "message": {"role": "assistant", "content": "OK"}}]},
                               count=False)
                    return
                failure, text = server._next(body)
                if failure:
                    kind = "rate_limit_exceeded" if failure == 429 else "server_error"
                    self._json(failure, {"error": {"message": f"injected {failure}", "type": kind}},
                               {"Retry-After": "0"})
                    return
                prompt = sum(_tokens(m.get("content") or "") for m in body.get("messages", []))
                usage = {"prompt_tokens": prompt, "completion_tokens": _tokens(text),
                         "total_tokens": prompt + _tokens(text)}
                if body.get("stream"):
                    self._stream(body, text, usage)
                    return
                self._json(200, {"id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()),
                                 "model": body.get("model", ""), "usage": usage,
                                 "choices": [{"index": 0, "finish_reason": "stop",
                                              "message": {"role": "assistant", "content": text}}]})

            def _stream(self, body: dict, text: str, usage: dict) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                base = {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": int(time.time()),
                        "model": body.get("model", "")}

                def send(payload: dict | str) -> None:
                    data = payload if isinstance(payload, str) else json.dumps(payload)
                    self.wfile.write(f"data: {data}\n\n".encode())
                    self.wfile.flush()

                send({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                           "finish_reason": None}]})
                if server.stall == "content":
                    server._stop.wait()
                    return
                for i in range(0, len(text), server.chunk):
                    if server.pace_s and server._stop.wait(server.pace_s):
                        return
                    send({**base, "choices": [{"index": 0, "delta": {"content": text[i:i + server.chunk]},
                                               "finish_reason": None}]})
                send({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
                if (body.get("stream_options") or {}).get("include_usage"):
                    send({**base, "choices": [], "usage": usage})
                send("[DONE]")
                server.statuses.append(200)
                self.close_connection = True

        return Handler
