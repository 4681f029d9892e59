"""Transport limits and secrets against a hostile service (tests/hostile_server.py), through both
HTTP clients the openai client can use (aiohttp's and httpx's): redirects, reply size, deadline,
defensive decoding, redaction, caps; for an http system's wire and for a chat endpoint."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time

import openai
import pytest

from cube.config.model_spec import ModelSpec
from cube.llm import JsonWire, OpenAIModel, Request
from cube.llm import pool as pool_module
from cube.llm.replies import MAX_TEXT_CHARS, REDACTED, ReplyGuard
from cube.llm.wire import MalformedReply
from tests.hostile_server import ANSWER, HostileServer, Recorder

KEY = "canary-Zq8xT4mW2nR7vK9pL3sB6dF1"


@pytest.fixture(params=["aiohttp", "httpx"])
def client_kind(request, monkeypatch):
    """Each test runs through aiohttp's transport (the default) and httpx's."""
    if request.param == "httpx":
        monkeypatch.setattr(
            pool_module, "http_client", lambda: (openai.DefaultAsyncHttpxClient, 16)
        )
    return request.param


@pytest.fixture
def servers():
    with Recorder() as sink, HostileServer(redirect_to=sink.url + "/elsewhere") as hostile:
        yield hostile, sink


def _check(data):
    if not isinstance(data, dict) or "answer" not in data:
        raise MalformedReply("no answer")


def http_model(url, tmp_path=None, **spec):
    """An http system's model: POST JSON to `url`, `X-Api-Key` from header_env."""
    model_spec = ModelSpec(
        provider="openai",
        model="http:svc",
        base_url=url,
        header_env={"X-Api-Key": "SVC_KEY"},
        max_attempts=1,
        **{"timeout_s": 5, **spec},
    )
    wire = JsonWire("POST", url, {}, _check, secret_headers=("X-Api-Key",))
    cache = tmp_path / "cache.sqlite" if tmp_path is not None else None
    return OpenAIModel(model_spec, cache_path=cache, wire=wire)


def chat_model(url, **spec):
    """A judge on a chat endpoint with an Azure-style `api-key` header and an API key."""
    return OpenAIModel(
        ModelSpec(
            provider="openai",
            model="m",
            base_url=url,
            api_key_env="JUDGE_KEY",
            header_env={"api-key": "SVC_KEY"},
            max_attempts=1,
            **{"timeout_s": 5, **spec},
        )
    )


def ask(model, text="q"):
    return model.complete(
        [Request(messages=[{"role": "user", "content": text}], context={"q": text})],
        role="t",
        progress=False,
    )[0]


def http_ask(model, text="q"):
    return model.complete(
        [Request(messages=[], context={}, payload={"query": text})], role="t", progress=False
    )[0]


@pytest.fixture(autouse=True)
def keys(monkeypatch):
    monkeypatch.setenv("SVC_KEY", KEY)
    monkeypatch.setenv("JUDGE_KEY", KEY + "-judge")


# ------------------------------------------------------------------ redirects
def test_a_redirect_is_not_followed_by_default_and_names_where_it_pointed(client_kind, servers):
    hostile, sink = servers
    r = http_ask(http_model(hostile.url("redirect")))
    assert not r.ok
    assert f"redirect to http://127.0.0.1:{sink.port} not followed" in r.error
    assert sink.requests == []  # nothing was sent there
    r = ask(chat_model(hostile.url("redirect", chat=True)))
    assert not r.ok and f"redirect to http://127.0.0.1:{sink.port} not followed" in r.error
    assert sink.requests == []


def test_a_followed_redirect_never_carries_a_secret_header_to_another_origin(client_kind, servers):
    hostile, sink = servers
    r = http_ask(http_model(hostile.url("redirect"), follow_redirects=True))
    assert r.ok, r.error
    r = ask(chat_model(hostile.url("redirect", chat=True), follow_redirects=True))
    assert r.ok, r.error
    assert len(sink.requests) == 2
    for _, headers in sink.requests:
        low = {k.lower(): v for k, v in headers.items()}
        assert not {"x-api-key", "api-key", "authorization", "cookie"} & set(low)
        assert not any(KEY in v for v in low.values())


def test_preflight_does_not_follow_a_redirect_with_the_judges_api_key_header(servers):
    from cube.llm.preflight import _probe

    hostile, sink = servers
    spec = chat_model(hostile.url("redirect", chat=True)).spec
    reason = asyncio.run(_probe(spec, spec.base_url, 5))
    assert reason is not None and "not followed" in reason
    assert sink.requests == []


# ------------------------------------------------------------------ size
@pytest.mark.parametrize("mode", ["bomb", "big"])
def test_a_reply_over_the_limit_is_a_failed_call_with_its_reason(client_kind, servers, mode):
    hostile, _ = servers
    t0 = time.perf_counter()
    r = http_ask(http_model(hostile.url(mode)))
    assert not r.ok and "reply too large" in r.error and "max_reply_bytes" in r.error
    assert time.perf_counter() - t0 < 5
    r = ask(chat_model(hostile.url(mode, chat=True), max_reply_bytes=1 << 20))
    assert not r.ok and "reply too large" in r.error


def test_a_gzipped_reply_within_the_limit_is_read(client_kind, servers):
    hostile, _ = servers
    r = http_ask(http_model(hostile.url("gzipped")))
    assert r.ok and json.loads(r.text)["answer"] == ANSWER


# ------------------------------------------------------------------ deadline
def test_a_slow_drip_fails_at_the_deadline_not_per_read(client_kind, servers):
    hostile, _ = servers
    t0 = time.perf_counter()
    r = http_ask(http_model(hostile.url("drip"), timeout_s=1.5))
    took = time.perf_counter() - t0
    assert not r.ok and "deadline" in r.error and r.error.startswith("timeout")
    assert took < 1.5 + 1.5  # the deadline plus slack (a drip byte comes every 0.4 s)
    r = ask(chat_model(hostile.url("drip", chat=True), timeout_s=1.5))
    assert not r.ok and "deadline" in r.error


# ------------------------------------------------------------------ decoding
def test_a_lone_surrogate_is_replaced_and_deep_nesting_is_a_failed_call(client_kind, servers):
    hostile, _ = servers
    r = http_ask(http_model(hostile.url("surrogate")))
    assert r.ok
    r.text.encode("utf-8")  # pyarrow and sqlite can store it
    assert "\ufffd" in json.loads(r.text)["answer"]
    r = ask(chat_model(hostile.url("surrogate", chat=True)))
    assert r.ok and r.text == "bad \ufffd x"
    r = http_ask(http_model(hostile.url("deep")))
    assert not r.ok and "nested deeper" in r.error
    r = ask(chat_model(hostile.url("deep", chat=True)))
    assert not r.ok and "nested deeper" in r.error


def test_a_padded_answer_is_capped_and_the_cut_recorded(client_kind, servers, tmp_path):
    hostile, _ = servers
    r = http_ask(http_model(hostile.url("padded"), tmp_path=tmp_path))
    assert r.ok
    answer = json.loads(r.text)["answer"]
    assert answer.startswith(ANSWER) and answer.endswith("characters in all]")
    assert len(answer) < MAX_TEXT_CHARS + 60  # the cut, and its mark
    assert r.detail["truncated"] == 1
    assert (tmp_path / "cache.sqlite").stat().st_size < 4 * MAX_TEXT_CHARS


# ------------------------------------------------------------------ secrets
def test_a_key_the_service_echoes_is_redacted_before_it_is_cached(client_kind, servers, tmp_path):
    hostile, _ = servers
    r = http_ask(http_model(hostile.url("echo"), tmp_path=tmp_path))
    assert r.ok and KEY not in r.text and REDACTED in r.text
    r = ask(chat_model(hostile.url("echo", chat=True)))
    assert r.ok and KEY not in r.text and REDACTED in r.text
    with sqlite3.connect(tmp_path / "cache.sqlite") as db:
        dump = "\n".join(db.iterdump())
    assert KEY not in dump and REDACTED in dump


def test_a_key_an_error_answer_echoes_is_redacted_from_the_calls_error(client_kind, servers):
    # a 422 whose body quotes the request's headers: the error is stored, shown and grouped into
    # the run's failure reasons, so it must not carry the key either
    hostile, _ = servers
    r = http_ask(http_model(hostile.url("echo422")))
    assert not r.ok and "422" in r.error
    assert KEY not in r.error and REDACTED in r.error
    r = ask(chat_model(hostile.url("echo422", chat=True)))
    assert not r.ok and KEY not in r.error and KEY + "-judge" not in r.error


def test_the_guard_redacts_escaped_secrets_and_refuses_what_it_cannot_parse():
    guard = ReplyGuard([KEY])
    escaped = json.dumps({"a": KEY}, ensure_ascii=True).replace("Z", "\\u005a")
    data, text, _ = guard.loads(escaped)
    assert data == {"a": REDACTED} and KEY not in text
    with pytest.raises(MalformedReply, match="not JSON"):
        guard.loads("{" + KEY)
    with pytest.raises(MalformedReply, match="nested deeper"):
        guard.loads("[" * 100 + "]" * 100)


@pytest.mark.parametrize("mode", ["deep", "bomb", "surrogate"])
def test_preflight_names_a_hostile_reply_and_does_not_crash(servers, mode):
    from cube.llm.preflight import _probe

    hostile, _ = servers
    spec = chat_model(hostile.url(mode, chat=True)).spec
    reason = asyncio.run(_probe(spec, spec.base_url, 5))
    expected = {"deep": "nested deeper", "bomb": "reply too large", "surrogate": None}[mode]
    assert reason is None if expected is None else expected in reason
