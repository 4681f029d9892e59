"""RAGFlow's SDK client under the transport limits (`GuardedRAGFlow` -> `sync_request`), against
the hostile service of tests/hostile_server.py: no redirect followed (no key sent elsewhere), a
bomb or an oversized body refused while read, a slow drip stopped at the deadline, an echoed key
redacted."""

from __future__ import annotations

import dataclasses
import time

import pytest

from cube.llm.transport import TransportLimit
from cube.systems.ragflow import GuardedRAGFlow
from tests.hostile_server import HostileServer, Recorder

KEY = "ragflow-Zq8xT4mW2nR7vK9pL3sB6dF1"


@pytest.fixture
def servers():
    with Recorder() as sink, HostileServer(redirect_to=sink.url + "/elsewhere") as hostile:
        yield hostile, sink


def client(hostile: HostileServer, mode: str, **limits) -> GuardedRAGFlow:
    rag = GuardedRAGFlow(KEY, f"http://127.0.0.1:{hostile.port}/{mode}")
    rag.limits = dataclasses.replace(rag.limits, **limits)
    return rag


def test_a_redirect_is_not_followed_and_no_key_goes_elsewhere(servers):
    hostile, sink = servers
    with pytest.raises(TransportLimit, match=f"redirect to http://127.0.0.1:{sink.port} not"):
        client(hostile, "redirect").post("/chats/c/completions", {"question": "q"})
    assert sink.requests == []
    res = client(hostile, "redirect", follow_redirects=True).get("/chats", {"page": 1})
    assert res.status_code == 200 and len(sink.requests) == 1
    assert "Authorization" not in sink.requests[0][1]


@pytest.mark.parametrize("mode", ["bomb", "big"])
def test_an_oversized_reply_is_refused_while_read(servers, mode):
    hostile, _ = servers
    with pytest.raises(TransportLimit, match="reply too large"):
        client(hostile, mode).post("/chats/c/completions", {"question": "q"})


def test_a_slow_drip_stops_at_the_deadline(servers):
    hostile, _ = servers
    t0 = time.perf_counter()
    with pytest.raises(TransportLimit, match="deadline"):
        client(hostile, "drip", timeout_s=1.5).post("/chats/c/completions", {"question": "q"})
    assert time.perf_counter() - t0 < 1.5 + 1.5


def test_an_echoed_key_is_redacted_from_the_reply(servers):
    hostile, _ = servers
    res = client(hostile, "echo").post("/chats/c/completions", {"question": "q"})
    assert KEY not in res.text and "[redacted]" in res.json()["answer"]
