"""The OpenAI-compatible client against a real local chat-completions server; the scripted LLM."""
from __future__ import annotations

import subprocess
import sys

import pytest

from kernelskill.config import load_config
from kernelskill.errors import UserError
from kernelskill.llm import LLMResponse, OpenAIChat, ScriptedLLM

from chat_server import ChatServer

MSGS = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello " * 40}]


def client(server, tmp_path, **flags):
    cfg = load_config({"llm.base_url": server.url, "llm.model": "m", "llm.retry_base_s": 0.001,
                       "llm.roles.coder.model": "coder-m", **flags}, cwd=tmp_path, env={})
    return OpenAIChat(cfg)


def test_streaming_usage_roles_and_cost(tmp_path):
    with ChatServer(["<think>plan</think>the answer " * 10, "short"]) as server:
        llm = client(server, tmp_path, **{"prices.coder-m": {"input": 1.0, "output": 2.0}})
        pieces = []
        resp = llm.complete(MSGS, role="planner", stream_cb=pieces.append)
        assert "".join(pieces) == resp.text and len(pieces) > 1 and resp.text.startswith("<think>")
        assert not resp.estimated and resp.prompt_tokens > 0 and resp.completion_tokens == len(resp.text) // 4
        resp2 = llm.complete(MSGS, role="coder")
        assert resp2.model == "coder-m" and resp2.cost == pytest.approx((resp2.prompt_tokens + 2 * 1) / 1e6)
        first, second = server.requests
        assert first["stream"] is True and first["stream_options"] == {"include_usage": True}
        assert (first["model"], first["temperature"]) == ("m", 0.8)
        assert (second["model"], second["temperature"]) == ("coder-m", 0.1)


def test_non_streaming_and_servers_without_usage(tmp_path):
    with ChatServer(["plain reply", "streamed"]) as server:
        llm = client(server, tmp_path, **{"llm.stream": False})
        assert llm.complete(MSGS, role="debugger").text == "plain reply"
        assert "stream" not in server.requests[0] and server.requests[0]["temperature"] == 0.1
        llm = client(server, tmp_path, **{"llm.stream_usage": False})
        resp = llm.complete(MSGS, role="planner")
        assert resp.estimated and resp.completion_tokens == 2           # no usage chunk: estimated


def test_server_refusing_stream_options_is_asked_again_without(tmp_path):
    with ChatServer(["ok"], failures=[400]) as server:
        resp = client(server, tmp_path).complete(MSGS, role="planner")
        assert resp.text == "ok" and resp.estimated and resp.retries == 0
        assert "stream_options" in server.requests[0] and "stream_options" not in server.requests[1]


def test_retries_with_backoff_on_429_and_5xx(tmp_path):
    with ChatServer(["finally"], failures=[429, 500, 503]) as server:
        delays = []
        llm = client(server, tmp_path)
        llm._sleep = delays.append
        resp = llm.complete(MSGS, role="planner")
        assert resp.text == "finally" and resp.retries == 3
        assert server.statuses == [429, 500, 503, 200]
        assert delays == [0.001, 0.002, 0.004]                  # exponential


def test_retries_run_out_and_client_errors_are_not_retried(tmp_path):
    with ChatServer(["never"], failures=[500, 500, 500]) as server:
        llm = client(server, tmp_path, **{"llm.max_retries": 2})
        with pytest.raises(UserError, match="kept failing \\(HTTP 500 after 3 tries\\)"):
            llm.complete(MSGS, role="planner")
    with ChatServer(["x"], failures=[401]) as server:
        with pytest.raises(UserError, match="refused the credentials"):
            client(server, tmp_path).complete(MSGS, role="planner")
        assert len(server.requests) == 1
    with ChatServer(["x"], failures=[404]) as server:
        with pytest.raises(UserError, match="HTTP 404 for model 'm'"):
            client(server, tmp_path).complete(MSGS, role="planner")


def test_unreachable_endpoint_names_the_setting(tmp_path):
    with ChatServer([]) as server:
        url = server.url
    cfg = load_config({"llm.base_url": url, "llm.model": "m", "llm.max_retries": 1, "llm.retry_base_s": 0.001},
                      cwd=tmp_path, env={})
    llm = OpenAIChat(cfg)
    with pytest.raises(UserError, match="unreachable.*check base_url \\(from flags\\)"):
        llm.check()
    with pytest.raises(UserError, match="unreachable.*after 2 tries"):
        llm.complete(MSGS, role="planner")


def test_scripted_llm_lists_roles_functions_and_errors():
    llm = ScriptedLLM([("planner", "p"), "any", LLMResponse(text="r", prompt_tokens=5), RuntimeError("boom")])
    pieces = []
    assert llm.complete(MSGS, role="planner", stream_cb=pieces.append).text == "p" and pieces == ["p"]
    assert llm.complete(MSGS, role="coder").text == "any"
    assert llm.complete(MSGS, role="coder").prompt_tokens == 5
    with pytest.raises(RuntimeError):
        llm.complete(MSGS, role="coder")
    with pytest.raises(UserError, match="no reply left"):
        llm.complete(MSGS, role="coder")
    with pytest.raises(UserError, match="expected the planner"):
        ScriptedLLM([("planner", "p")]).complete(MSGS, role="coder")
    fn = ScriptedLLM(lambda role, messages: f"{role}:{len(messages)}")
    assert fn.complete(MSGS, role="debugger").text == "debugger:2" and fn.calls[0][0] == "debugger"


def test_import_kernelskill_does_not_import_openai():
    code = ("import sys, kernelskill, kernelskill.optimizer, kernelskill.llm, kernelskill.cli.optimize; "
            "assert 'openai' not in sys.modules, 'openai imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


# ---- endpoint health: a model that says nothing is reported, not waited on for 25 minutes ---------

BOUND_S = 60          # generous upper bounds on the reports below (the settings are 1-2 s)


def test_preflight_makes_a_real_request_per_model(tmp_path):
    with ChatServer(["unused"]) as server:
        llm = client(server, tmp_path)
        llm.check()
        assert server.preflights == 2 and server.requests == []         # m and coder-m; no reply spent


def test_preflight_reports_a_server_that_accepts_and_never_answers(tmp_path):
    import time
    with ChatServer(["unused"], stall="headers") as server:
        llm = client(server, tmp_path, **{"llm.first_token_timeout_s": 1.0})
        t = time.monotonic()
        with pytest.raises(UserError, match=r"did not answer a one-token test request within 1 s "
                                            r"\(llm.first_token_timeout_s = 1, from flags\)"):
            llm.check()
        assert time.monotonic() - t < BOUND_S


@pytest.mark.parametrize("stall", ["headers", "content"])
def test_a_silent_model_is_reported_after_first_token_timeout_without_retries(tmp_path, stall):
    import time
    with ChatServer(["never sent"], stall=stall) as server:
        llm = client(server, tmp_path, **{"llm.first_token_timeout_s": 1.0, "llm.max_retries": 4})
        t = time.monotonic()
        with pytest.raises(UserError, match=r"model 'm' sent no.*(llm.first_token_timeout_s = 1, from flags)"):
            llm.complete(MSGS, role="planner")
        assert time.monotonic() - t < BOUND_S
        assert len(server.requests) == 1                                 # not retried


def test_a_reply_that_outlives_the_call_timeout_is_cut(tmp_path):
    with ChatServer(["x" * 4000], chunk=10, pace_s=0.05) as server:      # 400 chunks, 20 s
        llm = client(server, tmp_path, **{"llm.call_timeout_s": 1.0})
        streamed = []
        with pytest.raises(UserError, match=r"did not finish its reply within 1 s \(llm.call_timeout_s = 1"):
            llm.complete(MSGS, role="planner", stream_cb=streamed.append)
        assert streamed and len("".join(streamed)) < 4000


def test_without_streaming_the_whole_call_is_bounded_by_call_timeout(tmp_path):
    import time
    with ChatServer(["never sent"], stall="headers") as server:
        llm = client(server, tmp_path, **{"llm.stream": False, "llm.call_timeout_s": 1.0,
                                          "llm.first_token_timeout_s": 300.0})
        t = time.monotonic()
        with pytest.raises(UserError, match=r"did not finish its reply within 1 s \(llm.call_timeout_s = 1"):
            llm.complete(MSGS, role="planner")
        assert time.monotonic() - t < BOUND_S and len(server.requests) == 1
