"""LLMs: the protocol the agents call, an OpenAI-compatible client, and a scripted model.

``OpenAIChat`` talks to any chat-completions endpoint (OpenAI, vLLM, SGLang, Ollama, llama.cpp, …)
through the ``openai`` package, imported only when a client is made. ``ScriptedLLM`` replies from a
list or a function: tests and demos run the whole loop with it.
"""
from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence
from urllib.parse import urlparse

from .errors import UserError

Message = dict[str, str]              # {"role": "system" | "user" | "assistant", "content": …}
StreamCallback = Callable[[str], None]


@dataclass
class LLMResponse:
    """One completion: its text and what it cost."""
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    seconds: float = 0.0
    model: str = ""
    estimated: bool = False           # token counts estimated from characters (no usage reported)
    retries: int = 0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class LLM(Protocol):
    def complete(self, messages: list[Message], *, role: str,
                 stream_cb: StreamCallback | None = None) -> LLMResponse:
        """Reply to ``messages`` as agent ``role`` (planner, coder, debugger)."""
        ...


def estimate_tokens(text: str) -> int:
    """About four characters per token: used when an endpoint reports no usage."""
    return max(1, len(text) // 4) if text else 0


# ---- scripted -----------------------------------------------------------------------------------
class ScriptedLLM:
    """Replies in order from a list, or from ``fn(role, messages)``.

    A list item may be text, ``(role, text)`` (the role is checked), an ``LLMResponse`` or an
    exception to raise. ``calls`` keeps (role, messages) of every request.
    """

    def __init__(self, replies: Sequence[Any] | Callable[[str, list[Message]], Any], *,
                 model: str = "scripted", chunk: int = 64):
        self._fn = replies if callable(replies) else None
        self._queue = [] if callable(replies) else list(replies)
        self.model, self.chunk = model, chunk
        self.calls: list[tuple[str, list[Message]]] = []

    def complete(self, messages: list[Message], *, role: str,
                 stream_cb: StreamCallback | None = None) -> LLMResponse:
        started = time.perf_counter()
        self.calls.append((role, [dict(m) for m in messages]))
        if self._fn is not None:
            reply = self._fn(role, messages)
        elif not self._queue:
            raise UserError(f"ScriptedLLM: no reply left for the {role} (call {len(self.calls)})")
        else:
            reply = self._queue.pop(0)
        if isinstance(reply, tuple):
            want, reply = reply
            if want != role:
                raise UserError(f"ScriptedLLM: call {len(self.calls)} is for the {role}, the script "
                                f"expected the {want}")
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, LLMResponse):
            return reply
        text = str(reply)
        for i in range(0, len(text), self.chunk):
            if stream_cb:
                stream_cb(text[i:i + self.chunk])
        prompt = sum(estimate_tokens(m.get("content", "")) for m in messages)
        return LLMResponse(text=text, prompt_tokens=prompt, completion_tokens=estimate_tokens(text),
                           seconds=time.perf_counter() - started, model=self.model, estimated=True)


# ---- OpenAI-compatible --------------------------------------------------------------------------
@dataclass
class _Call:
    model: str
    temperature: float
    max_tokens: int | None
    stream: bool


PREFLIGHT_HEADER = "X-KernelSkill-Preflight"       # marks the one-token pre-flight request


class _Silent(Exception):
    """The model stopped answering: which setting ran out."""

    def __init__(self, key: str, seconds: float, what: str):
        super().__init__(key)
        self.key, self.seconds, self.what = key, seconds, what


class OpenAIChat:
    """Any OpenAI-compatible chat-completions endpoint; per-role model and temperature."""

    def __init__(self, config, *, sleep: Callable[[float], None] = time.sleep):
        self.config = config
        llm = config.llm
        self.base_url, self.model = llm.base_url, llm.model
        self._sleep = sleep
        if not self.base_url:
            raise UserError("no LLM endpoint: set base_url in kernelskill.toml [llm] or KERNELSKILL_BASE_URL "
                            "(or pass --base-url), e.g. http://localhost:8000/v1")
        if not self.model and not all(config.role(r).model for r in ("planner", "coder", "debugger")):
            raise UserError("no LLM model: set model in kernelskill.toml [llm] or KERNELSKILL_MODEL "
                            "(or pass --model)")
        key_env = llm.api_key_env
        key = os.environ.get(key_env) if key_env else None
        if key_env and not key:
            raise UserError(f"the API key variable {key_env} is not set (named by llm.api_key_env, from "
                            f"{config.where('llm.api_key_env')}); export it or change api_key_env")
        try:
            import openai
        except ImportError:
            raise UserError("the LLM client needs the openai package: pip install 'kernelskill[llm]'") from None
        self._openai = openai
        self._stream_usage = bool(llm.stream_usage)
        # Local servers need no key, but the client insists on one.
        self._client = openai.OpenAI(base_url=self.base_url, api_key=key or "not-needed",
                                     timeout=llm.timeout_s, max_retries=0)

    def check(self) -> None:
        """Fail fast, before anything runs: the endpoint's host must accept connections, and each role's
        model must answer a one-token request within ``llm.first_token_timeout_s``."""
        url = urlparse(self.base_url)
        port = url.port or (443 if url.scheme == "https" else 80)
        try:
            socket.create_connection((url.hostname or "localhost", port), timeout=10).close()
        except OSError as e:
            raise UserError(self._unreachable(e)) from None
        for model in sorted({self.config.role(r).model for r in ("planner", "coder", "debugger")}):
            try:
                self._client.with_options(timeout=self._timeout(self._first_token_s)) \
                    .chat.completions.create(model=model, messages=[{"role": "user", "content": "Reply with OK."}],
                                             max_tokens=1, extra_headers={PREFLIGHT_HEADER: "1"})
            except self._openai.APITimeoutError:
                raise UserError(self._silent(model, "first_token_timeout_s", self._first_token_s,
                                             f"did not answer a one-token test request within "
                                             f"{self._first_token_s:.0f} s")) from None
            except self._openai.APIStatusError as e:
                raise UserError(self._status_error(e.status_code, e, model)) from None
            except self._openai.APIConnectionError as e:
                raise UserError(self._unreachable(e)) from None

    @property
    def _first_token_s(self) -> float:
        return float(self.config.llm.first_token_timeout_s)

    @property
    def _call_s(self) -> float:
        return float(self.config.llm.call_timeout_s)

    def _timeout(self, read: float):
        """The client's timeouts (openai.Timeout) for a request that may wait ``read`` seconds for data:
        streaming, first_token_timeout_s for the headers and between chunks (the watchdog in _request
        bounds the first content and the whole call); a plain request, call_timeout_s for its body."""
        return self._openai.Timeout(read, connect=min(10.0, read), write=60.0, pool=60.0)

    def _silent(self, model: str, key: str, seconds: float, what: str = "") -> str:
        what = what or f"sent nothing for {seconds:.0f} s"
        return (f"LLM endpoint {self.base_url}: model {model!r} {what} (llm.{key} = {seconds:g}, from "
                f"{self.config.where('llm.' + key)}); the server accepted the request but does not answer: check "
                f"that it serves {model!r} and is not stuck, or raise llm.{key}")

    def _unreachable(self, e: Exception) -> str:
        return (f"LLM endpoint {self.base_url} is unreachable ({e}); check base_url (from "
                f"{self.config.where('llm.base_url')}) or start the server")

    def complete(self, messages: list[Message], *, role: str,
                 stream_cb: StreamCallback | None = None) -> LLMResponse:
        rc = self.config.role(role)
        llm = self.config.llm
        call = _Call(model=rc.model, temperature=rc.temperature, max_tokens=rc.max_tokens, stream=llm.stream)
        started = time.perf_counter()
        retries = 0
        while True:
            try:
                text, usage = self._request(messages, call, stream_cb)
                break
            except self._openai.APIStatusError as e:
                code = e.status_code
                if code == 400 and call.stream and self._stream_usage:
                    self._stream_usage = False       # an older server that refuses stream_options: ask without
                    continue
                if code != 429 and code < 500:
                    raise UserError(self._status_error(code, e, call.model)) from None
                if retries >= llm.max_retries:
                    raise UserError(f"LLM endpoint {self.base_url} kept failing (HTTP {code} after {retries + 1} "
                                    f"tries): {_brief(e)}") from None
                delay = max(_retry_after(e), llm.retry_base_s * 2 ** retries)
            except _Silent as e:               # a stuck model is reported, not waited on again
                raise UserError(self._silent(call.model, e.key, e.seconds, e.what)) from None
            except self._openai.APITimeoutError:    # streaming: a silent gap; plain: the whole call
                key, limit = ("first_token_timeout_s", self._first_token_s) if call.stream else \
                    ("call_timeout_s", self._call_s)
                what = "" if call.stream else f"did not finish its reply within {limit:.0f} s"
                raise UserError(self._silent(call.model, key, limit, what)) from None
            except self._openai.APIConnectionError as e:
                if retries >= llm.max_retries:
                    raise UserError(self._unreachable(e) + f" after {retries + 1} tries") from None
                delay = llm.retry_base_s * 2 ** retries
            retries += 1
            self._sleep(min(delay, llm.retry_max_s))
        prompt = usage.get("prompt_tokens")
        completion = usage.get("completion_tokens")
        estimated = prompt is None or completion is None
        if prompt is None:
            prompt = sum(estimate_tokens(m.get("content", "")) for m in messages)
        if completion is None:
            completion = estimate_tokens(text)
        pin, pout = self.config.price(call.model)
        return LLMResponse(text=text, prompt_tokens=prompt, completion_tokens=completion,
                           cost=(prompt * pin + completion * pout) / 1e6, seconds=time.perf_counter() - started,
                           model=call.model, estimated=estimated, retries=retries)

    def _request(self, messages, call: _Call, stream_cb) -> tuple[str, dict]:
        kw: dict[str, Any] = {"model": call.model, "messages": messages, "temperature": call.temperature}
        if call.max_tokens:
            kw["max_tokens"] = call.max_tokens
        client = self._client.with_options(timeout=self._timeout(self._first_token_s if call.stream else self._call_s))
        if not call.stream:
            resp = client.chat.completions.create(**kw)
            text = (resp.choices[0].message.content or "") if resp.choices else ""
            return text, _usage(resp.usage)
        if self._stream_usage:
            kw["stream_options"] = {"include_usage": True}
        parts: list[str] = []
        usage: dict = {}
        stream = client.chat.completions.create(stream=True, **kw)
        # The watchdog closes the stream when no content came within first_token_timeout_s (a server
        # that sends its headers, then nothing) or the call outlives call_timeout_s.
        started, why = time.monotonic(), []
        done = threading.Event()

        def watch() -> None:
            while not done.wait(0.2):
                waited = time.monotonic() - started
                if not parts and waited > self._first_token_s:
                    why.append(_Silent("first_token_timeout_s", self._first_token_s,
                                       f"sent no content in the first {self._first_token_s:.0f} s"))
                elif waited > self._call_s:
                    why.append(_Silent("call_timeout_s", self._call_s,
                                       f"did not finish its reply within {self._call_s:.0f} s"))
                else:
                    continue
                with contextlib.suppress(Exception):
                    stream.close()
                return
        threading.Thread(target=watch, daemon=True, name="llm-watchdog").start()
        try:
            for chunk in stream:
                if getattr(chunk, "usage", None):
                    usage = _usage(chunk.usage)
                for choice in chunk.choices or ():
                    piece = getattr(choice.delta, "content", None) if choice.delta else None
                    if piece:
                        parts.append(piece)
                        if stream_cb:
                            stream_cb(piece)
        except Exception:
            if why:
                raise why[0] from None
            raise
        finally:
            done.set()
        if why:
            raise why[0]
        return "".join(parts), usage

    def _status_error(self, code: int, e: Exception, model: str) -> str:
        if code in (401, 403):
            env = self.config.llm.api_key_env
            hint = f"check the key in ${env}" if env else "set llm.api_key_env to the variable that holds the key"
            return f"LLM endpoint {self.base_url} refused the credentials (HTTP {code}); {hint}"
        if code == 404:
            return (f"LLM endpoint {self.base_url}: HTTP 404 for model {model!r} — check base_url (it usually "
                    f"ends in /v1) and the model name (llm.model or llm.roles.*.model): {_brief(e)}")
        return f"LLM endpoint {self.base_url} rejected the request (HTTP {code}): {_brief(e)}"


def _usage(u: Any) -> dict:
    if u is None:
        return {}
    return {"prompt_tokens": getattr(u, "prompt_tokens", None), "completion_tokens": getattr(u, "completion_tokens", None)}


def _retry_after(e: Any) -> float:
    try:
        return float(e.response.headers.get("retry-after", 0) or 0)
    except (AttributeError, TypeError, ValueError):
        return 0.0


def _brief(e: Exception) -> str:
    return str(e).splitlines()[0][:300] if str(e) else type(e).__name__


def make_llm(config) -> OpenAIChat:
    """The configured client (raises UserError naming the setting to fix)."""
    return OpenAIChat(config)
