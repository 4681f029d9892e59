"""cube.llm against a local OpenAI-compatible server: retries, cache, concurrency, accounting."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from cube.config.model_spec import ModelSpec
from cube.config.schema import ACCOUNTING_COLUMNS
from cube.llm import (
    LLMConfigError,
    Request,
    Response,
    cache_key,
    make_model,
    response_accounting,
    usage_summary,
)
from tests import ROOT
from tests.openai_server import OpenAIServer, broken_endpoint, closed_port_url

KEY = "sk-test-DO-NOT-LEAK-7f3a9c21"


def reqs(n: int, prefix: str = "question") -> list[Request]:
    return [Request(messages=({"role": "user", "content": f"{prefix} {i}"},)) for i in range(n)]


def spec_for(url: str | list[str], **kw: object) -> ModelSpec:
    base = {"base_urls": url} if isinstance(url, list) else {"base_url": url}
    opts = {
        "model": "m",
        "api_key_env": "CUBE_TEST_KEY",
        "backoff_base_s": 0.01,
        "backoff_max_s": 0.05,
    }
    return ModelSpec(**{**opts, **base, **kw})


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUBE_TEST_KEY", KEY)


def test_success_shape_order_tokens_and_cost(openai_server: OpenAIServer, tmp_path: Path) -> None:
    # 2 USD / M input, 8 USD / M output. "question 3" = 2 prompt tokens, "echo: question 3" = 3.
    spec = spec_for(openai_server.url, price_input_per_m=2.0, price_output_per_m=8.0)
    rs = make_model(spec, tmp_path / "c.sqlite").complete(reqs(5), role="judging", progress=False)
    assert [r.text for r in rs] == [f"echo: question {i}" for i in range(5)]
    r = rs[3]
    assert (r.input_tokens, r.output_tokens, r.attempts, r.cached) == (2, 3, 1, False)
    assert r.cost == pytest.approx(2.0 * 2 / 1e6 + 8.0 * 3 / 1e6)
    assert (
        r.endpoint == openai_server.url and r.model == "m" and r.detail["finish_reason"] == "stop"
    )
    assert set(openai_server.authorizations) == {f"Bearer {KEY}"}  # the key was sent


def test_no_price_means_unknown_cost_and_no_auth_sends_placeholder(
    openai_server: OpenAIServer,
) -> None:
    spec = spec_for(openai_server.url, api_key_env=None)
    (r,) = make_model(spec).complete(reqs(1), role="answering", progress=False)
    assert r.ok and r.cost is None
    assert openai_server.authorizations == ["Bearer EMPTY"]


def test_out_of_range_score_text_is_passed_through(tmp_path: Path) -> None:
    # Judging whether "Score: 42" is usable is the judge's parser's job, not the transport's.
    with OpenAIServer(reply=lambda body: "Score: 42") as server:
        (r,) = make_model(spec_for(server.url)).complete(reqs(1), role="judging", progress=False)
    assert r.ok and r.text == "Score: 42"


def test_two_500_then_ok_succeeds_on_third_attempt(openai_server: OpenAIServer) -> None:
    openai_server.fail("500", times=2)
    (r,) = make_model(spec_for(openai_server.url)).complete(reqs(1), role="judging", progress=False)
    assert r.ok and r.attempts == 3 and openai_server.requests_total == 3


def test_always_500_fails_after_max_attempts_with_reason(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.fail("500", times=None)
    model = make_model(spec_for(openai_server.url, max_attempts=4), tmp_path / "c.sqlite")
    (r,) = model.complete(reqs(1), role="judging", progress=False)
    assert not r.ok and r.text is None and r.attempts == 4
    assert r.error.startswith("HTTP 500 after 4 attempts: HTTP 500 (test fault)")
    assert openai_server.requests_total == 4
    # Errors are not cached: once the endpoint recovers, the call is made again and succeeds.
    openai_server.clear_faults()
    (r2,) = model.complete(reqs(1), role="judging", progress=False)
    assert r2.ok and not r2.cached and openai_server.requests_total == 5


def test_retry_after_is_honoured(openai_server: OpenAIServer) -> None:
    openai_server.fail("429", retry_after=1)
    t0 = time.perf_counter()
    spec = spec_for(openai_server.url, backoff_max_s=30)
    (r,) = make_model(spec).complete(reqs(1), role="judging", progress=False)
    assert time.perf_counter() - t0 >= 1.0
    assert r.ok and r.attempts == 2


def test_retry_after_is_capped_by_backoff_max(openai_server: OpenAIServer) -> None:
    openai_server.fail("429", times=None, retry_after=100)
    t0 = time.perf_counter()
    spec = spec_for(openai_server.url, max_attempts=3, backoff_max_s=0.1)
    (r,) = make_model(spec).complete(reqs(1), role="judging", progress=False)
    assert time.perf_counter() - t0 < 3
    assert r.error.startswith("HTTP 429 after 3 attempts: Rate limit reached")


@pytest.mark.parametrize("kind", ["400", "401", "404"])
def test_client_errors_are_not_retried(openai_server: OpenAIServer, kind: str) -> None:
    openai_server.fail(kind)
    (r,) = make_model(spec_for(openai_server.url)).complete(reqs(1), role="judging", progress=False)
    assert r.error.startswith(f"HTTP {kind} (not retried): ") and r.attempts == 1
    assert openai_server.requests_total == 1


def test_timeout_is_retried_then_recorded(openai_server: OpenAIServer) -> None:
    openai_server.fail("slow", delay_s=1.0)
    spec = spec_for(openai_server.url, timeout_s=0.25, max_attempts=2)
    (r,) = make_model(spec).complete(reqs(1), role="judging", progress=False)
    assert r.ok and r.attempts == 2
    openai_server.fail("slow", times=None, delay_s=1.0)
    (r,) = make_model(spec).complete(reqs(1, "other"), role="judging", progress=False)
    # the client's read timeout, or the deadline of the whole attempt (cube.llm.transport)
    assert r.error.startswith("timeout after 2 attempts: no answer within 0.25 s")


@pytest.mark.parametrize("kind", ["malformed", "garbage", "no_choices"])
def test_unusable_200_is_retried_like_a_transient_fault(
    openai_server: OpenAIServer, kind: str
) -> None:
    openai_server.fail(kind)
    (r,) = make_model(spec_for(openai_server.url)).complete(reqs(1), role="judging", progress=False)
    assert r.ok and r.attempts == 2
    openai_server.fail(kind, times=None)
    (r,) = make_model(spec_for(openai_server.url, max_attempts=2)).complete(
        reqs(1, "x"), role="judging", progress=False
    )
    assert r.error.startswith("malformed response after 2 attempts: ")


def test_concurrency_limit_is_reached_and_never_exceeded(openai_server: OpenAIServer) -> None:
    openai_server.latency_s = 0.05
    rs = make_model(spec_for(openai_server.url, max_concurrency=6)).complete(
        reqs(48), role="judging", progress=False
    )
    assert all(r.ok for r in rs)
    assert openai_server.max_in_flight == 6


def test_second_run_is_served_from_cache_and_duplicates_are_sent_once(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    spec = spec_for(openai_server.url, price_input_per_m=1.0, price_output_per_m=1.0)
    batch = reqs(10) + reqs(10)  # every request twice
    first = make_model(spec, tmp_path / "c.sqlite").complete(batch, role="judging", progress=False)
    assert openai_server.requests_total == 10
    assert max(openai_server.body_counts.values()) == 1
    second = make_model(spec, tmp_path / "c.sqlite").complete(batch, role="judging", progress=False)
    assert openai_server.requests_total == 10  # zero new requests
    assert all(r.cached for r in second) and not any(r.cached for r in first)
    assert [r.text for r in second] == [r.text for r in first]
    # A cached response carries the original call's tokens and cost.
    assert [(r.input_tokens, r.output_tokens, r.cost) for r in second] == [
        (r.input_tokens, r.output_tokens, r.cost) for r in first
    ]


def test_cache_key_covers_answer_settings_only(tmp_path: Path) -> None:
    base = spec_for(["http://a/v1", "http://b/v1"])
    r = reqs(1)[0]
    k = cache_key(base, r)
    same = [
        spec_for(["http://b/v1", "http://a/v1/"]),  # replicas in any order share the cache
        spec_for(
            ["http://a/v1", "http://b/v1"],
            timeout_s=1,
            max_attempts=1,
            max_concurrency=2,
            api_key_env="X",
        ),
    ]
    assert all(cache_key(s, r) == k for s in same)
    different = [
        spec_for(["http://a/v1", "http://b/v1"], **{f: v})
        for f, v in [
            ("temperature", 0.7),
            ("top_p", 0.9),
            ("seed", 1),
            ("max_tokens", 5),
            ("model", "other"),
        ]
    ]
    assert all(cache_key(s, r) != k for s in different)
    assert cache_key(base, Request(r.messages, template_version="v2")) != k
    assert cache_key(base, Request(r.messages, sample=1)) != k
    assert cache_key(base, Request(r.messages, context={"ignored": 1})) == k


def test_requests_are_spread_across_base_urls(tmp_path: Path) -> None:
    with OpenAIServer(latency_s=0.01) as a, OpenAIServer(latency_s=0.01) as b:
        spec = spec_for([a.url, b.url], max_concurrency=4)
        rs = make_model(spec, tmp_path / "c.sqlite").complete(
            reqs(40), role="judging", progress=False
        )
        assert all(r.ok for r in rs) and a.requests_total + b.requests_total == 40
        assert a.requests_total >= 10 and b.requests_total >= 10
        assert {r.endpoint for r in rs} == {a.url, b.url}
        # The same replicas listed the other way round hit the same cache.
        again = make_model(spec_for([b.url, a.url]), tmp_path / "c.sqlite").complete(
            reqs(40), role="judging", progress=False
        )
        assert all(r.cached for r in again) and a.requests_total + b.requests_total == 40


def test_api_key_never_stored_returned_or_logged(
    openai_server: OpenAIServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # openai, httpx and our own loggers at their most verbose
    openai_server.fail("401", when=lambda body: "question 1" in json.dumps(body))  # echoes the key
    openai_server.fail("500", times=None, when=lambda body: "question 2" in json.dumps(body))
    cache = tmp_path / "c.sqlite"
    # breaker off: this test is about scrubbing, the 401 must not stop the endpoint
    rs = make_model(
        spec_for(openai_server.url, max_attempts=2, breaker_threshold=0), cache
    ).complete(reqs(4), role="judging", progress=False)
    assert [r.ok for r in rs] == [True, False, False, True]
    assert "Bearer [redacted]" in rs[1].error  # the echoed credential was scrubbed
    assert KEY not in repr(rs)
    assert KEY not in caplog.text and "m (judging): 2 of 4 calls failed; first: " in caplog.text
    blob = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("c.sqlite"))
    assert KEY.encode() not in blob and b"echo: question 0" in blob


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("401", "HTTP 401 (not retried): Incorrect API key provided: Bearer [redacted]"),
        ("unknown_model", "HTTP 404 (not retried): The model `no-such-model` does not exist"),
        ("refused", "5 calls in a row failed all 3 attempts: connection error: connection refused"),
        (
            "no_choices",
            "5 calls in a row failed all 3 attempts: malformed response: no choices in the answer",
        ),
    ],
)
def test_circuit_breaker_stops_sending_to_a_broken_endpoint(
    case: str, reason: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Before the breaker every one of the 60 calls was sent (x3 attempts for refused / empty
    # choices).
    n, conc = 60, 4
    with OpenAIServer(strict_model=True, model="m") as server:
        url, model = broken_endpoint(server, case, "m")
        spec = spec_for(url, model=model, max_concurrency=conc, max_attempts=3)
        llm = make_model(spec, tmp_path / "c.sqlite")
        with caplog.at_level(logging.INFO, logger="cube"):
            rs = llm.complete(reqs(n), role="judging", desc="judging: gpt", progress=False)
        sent = server.requests_total
        again = llm.complete(
            reqs(n, "later"), role="judging", progress=False
        )  # a later batch: nothing sent
        assert server.requests_total == sent and all(
            r.error.startswith("not sent: ") for r in again
        )
    assert all(not r.ok for r in rs)
    attempts = sum(r.attempts for r in rs)
    if case in ("401", "unknown_model"):  # stopped at once: only the requests in flight then
        assert attempts <= conc and sent <= conc, (attempts, sent)
        unsent = [r for r in rs if r.error.startswith("not sent: endpoint stopped after ")]
        assert len(unsent) >= n - conc
    else:  # stopped once 5 calls used up their 3 attempts; calls still backing off are not retried
        assert sum(r.attempts == 3 for r in rs) >= 5 and all(r.attempts <= 3 for r in rs)
        unsent = [
            r
            for r in rs
            if r.error.startswith(("not sent: endpoint stopped after ", "not retried after "))
        ]
        assert unsent
    assert all(reason in r.error and r.endpoint == url for r in unsent), unsent[0].error
    assert all(reason in r.error for r in rs if r.error.startswith("not retried after "))
    assert KEY not in caplog.text and KEY not in repr(rs)
    lines = [r.getMessage() for r in caplog.records if "gpt: model" in r.getMessage()]
    n_unsent = sum(r.error.startswith("not sent: ") for r in rs)
    assert lines == [
        f"judging: gpt: model {model} at {url}: stopped sending: "
        f"{unsent[0].error.split('endpoint stopped after ', 1)[1]}; "
        f"{n_unsent} of {n} calls not sent ({n} failed in all)"
    ]
    assert not [r for r in caplog.records if "calls failed" in r.getMessage()]  # one line, not two


def test_a_stopped_replica_leaves_its_calls_to_the_working_one(tmp_path: Path) -> None:
    with OpenAIServer() as good, OpenAIServer() as bad:
        bad.fail("401", times=None)
        spec = spec_for([bad.url, good.url], max_concurrency=2)
        rs = make_model(spec, tmp_path / "c.sqlite").complete(
            reqs(30), role="judging", progress=False
        )
    assert bad.requests_total <= 2 and good.requests_total == 30 - sum(not r.ok for r in rs)
    assert (
        sum(r.ok for r in rs) >= 28
    )  # only the calls that hit the replica before it was stopped fail


def test_breaker_trips_at_threshold_times_attempts_faults_in_a_row_not_before(
    openai_server: OpenAIServer,
) -> None:
    # breaker_threshold 1 x max_attempts 5: 4 faults in a row (then a success) never stop the
    # endpoint...
    for i, kind in enumerate(("no_choices", "500", "garbage", "slow", "malformed") * 2):
        openai_server.fail(
            kind, times=4, delay_s=1.0, when=lambda body, i=i: f"question {i}" in json.dumps(body)
        )
    spec = spec_for(openai_server.url, max_concurrency=1, breaker_threshold=1, timeout_s=0.3)
    model = make_model(
        spec
    )  # one call at a time (in one batch, calls backing off interleave their faults)
    rs = [model.complete([r], role="judging", progress=False)[0] for r in reqs(10)]
    assert all(r.ok and r.attempts == 5 for r in rs) and openai_server.requests_total == 50
    # ... while a 5th fault in a row does: the next calls are not sent.
    openai_server.fail("no_choices", times=5)
    model = make_model(spec)

    async def one_by_one() -> list[Response]:
        return [(await model.acomplete([r], role="judging"))[0] for r in reqs(3, "other")]

    rs = asyncio.run(one_by_one())
    assert [r.attempts for r in rs] == [5, 0, 0] and openai_server.requests_total == 55
    assert rs[1].error == (
        "not sent: endpoint stopped after 1 call in a row failed all 5 attempts: "
        "malformed response: no choices in the answer"
    )
    # 5xx are the server's own transient errors: they never stop it
    model = make_model(spec_for(openai_server.url, max_attempts=1, breaker_threshold=1))
    openai_server.fail("500", times=20)
    rs = model.complete(reqs(30, "five"), role="judging", progress=False)
    assert sum(r.ok for r in rs) == 10 and not model.stopped


def test_a_brief_outage_does_not_trip_the_breaker_retries_get_through(tmp_path: Path) -> None:
    # Review finding 1: 16 calls refused at the same moment by a restarting server used to count
    # as "5 connection failures in a row" and stop the endpoint after one attempt each (50 of 50
    # failed, the server saw none). Only calls that used up their retries count now.
    url = closed_port_url()
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    box: dict[str, OpenAIServer] = {}

    def late_start() -> None:
        time.sleep(0.3)
        box["srv"] = OpenAIServer(port=port).start()

    import threading

    thread = threading.Thread(target=late_start)
    thread.start()
    try:
        spec = spec_for(
            url, max_concurrency=16, backoff_base_s=0.2, backoff_max_s=1.0
        )  # 0.2+0.4+0.8+1 s of retries
        model = make_model(spec, tmp_path / "c.sqlite")
        rs = model.complete(reqs(50), role="judging", progress=False)
        thread.join()
        assert [r.error for r in rs if not r.ok] == [] and not model.stopped
        assert box["srv"].requests_total == 50
        assert max(r.attempts for r in rs) > 1  # the first calls were refused and retried
    finally:
        thread.join()
        if "srv" in box:
            box["srv"].stop()


def test_a_dead_endpoint_costs_the_attempts_of_the_calls_already_started_not_of_every_call(
    tmp_path: Path,
) -> None:
    # Backing off frees the concurrency slot, so every pending call used to make its first
    # attempts before five calls had used up theirs: 181 calls to a closed port made 729 attempts.
    # Once every attempt in a row fails, calls that have not sent anything wait for the started
    # ones to settle; the breaker then stops the endpoint and the rest fail unsent.
    spec = spec_for(closed_port_url(), max_concurrency=16, backoff_base_s=0.05, backoff_max_s=0.2)
    model = make_model(spec, tmp_path / "c.sqlite")
    rs = model.complete(reqs(181), role="judging", progress=False)
    attempts = sum(r.attempts for r in rs)
    assert all(not r.ok for r in rs) and model.stopped
    assert attempts <= 2 * spec.max_concurrency * spec.max_attempts < 181  # was 729 (181 x 4 + 5)
    assert sum(r.error.startswith("not sent: ") for r in rs) >= 181 - 2 * spec.max_concurrency


def test_a_stopped_endpoint_gets_one_trial_after_its_cool_down_and_resumes(
    openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import cube.llm.breaker

    monkeypatch.setattr(cube.llm.breaker, "BREAKER_COOLDOWN_S", 0.3)
    openai_server.fail("no_choices", times=None)
    model = make_model(
        spec_for(openai_server.url, max_concurrency=1, max_attempts=1, breaker_threshold=1)
    )
    rs = model.complete(reqs(4, "a"), role="judging", progress=False)
    assert (
        openai_server.requests_total == 1
        and [r.attempts for r in rs] == [1, 0, 0, 0]
        and model.stopped
    )
    rs = model.complete(
        reqs(4, "b"), role="judging", progress=False
    )  # within the cool-down: nothing sent
    assert openai_server.requests_total == 1 and all(r.error.startswith("not sent: ") for r in rs)
    time.sleep(0.4)
    rs = model.complete(
        reqs(4, "c"), role="judging", progress=False
    )  # one trial, it fails: re-armed
    assert (
        openai_server.requests_total == 2
        and [r.attempts for r in rs] == [1, 0, 0, 0]
        and model.stopped
    )
    openai_server.clear_faults()
    rs = model.complete(
        reqs(4, "d"), role="judging", progress=False
    )  # the cool-down restarted at the trial
    assert openai_server.requests_total == 2 and not any(r.ok for r in rs)
    time.sleep(0.4)
    rs = model.complete(reqs(4, "e"), role="judging", progress=False)  # the trial works: resumed
    assert all(r.ok for r in rs) and openai_server.requests_total == 6 and not model.stopped


def test_missing_key_variable_is_a_clear_error_before_any_request(
    openai_server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec, cache = spec_for(openai_server.url), tmp_path / "c.sqlite"
    make_model(spec, cache).complete(reqs(3), role="judging", progress=False)
    monkeypatch.delenv("CUBE_TEST_KEY")
    # A fully cached batch needs no key: a paper run re-executes offline from its cache.
    assert all(
        r.cached for r in make_model(spec, cache).complete(reqs(3), role="judging", progress=False)
    )
    with pytest.raises(LLMConfigError, match="CUBE_TEST_KEY"):
        make_model(spec, cache).complete(reqs(4), role="judging", progress=False)
    assert openai_server.requests_total == 3


def test_complete_works_inside_a_running_event_loop(openai_server: OpenAIServer) -> None:
    model = make_model(spec_for(openai_server.url))

    async def notebook_cell() -> list[Response]:  # Jupyter runs cells inside a running loop
        return model.complete(reqs(3), role="judging", progress=False)

    assert [r.text for r in asyncio.run(notebook_cell())] == [
        f"echo: question {i}" for i in range(3)
    ]


def test_models_route(openai_server: OpenAIServer) -> None:
    import openai

    client = openai.OpenAI(base_url=openai_server.url, api_key="EMPTY", max_retries=0)
    assert [m.id for m in client.models.list()] == ["test-model"]


KILL_SCRIPT = """
import json, sys
from cube.config.params import ModelSpec
from cube.llm import Request, make_model
url, cache, out = sys.argv[1:4]
spec = ModelSpec(model="m", base_url=url, api_key_env="CUBE_TEST_KEY", max_concurrency=4)
batch = [Request(messages=({"role": "user", "content": f"question {i}"},)) for i in range(200)]
rs = make_model(spec, cache).complete(batch, role="judging", progress=False)
json.dump([[r.text, r.error] for r in rs], open(out, "w"))
"""


def _rows(cache: Path) -> list[str]:
    try:
        with sqlite3.connect(f"file:{cache}?mode=ro", uri=True) as conn:
            return [t for (t,) in conn.execute("SELECT text FROM calls")]
    except sqlite3.OperationalError:  # not created yet
        return []


def test_run_killed_with_sigkill_resumes_without_repeating_completed_calls(tmp_path: Path) -> None:
    script, cache, out = tmp_path / "run.py", tmp_path / "c.sqlite", tmp_path / "out.json"
    script.write_text(KILL_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with OpenAIServer(latency_s=0.02) as server:
        cmd = [sys.executable, str(script), server.url, str(cache), str(out)]
        proc = subprocess.Popen(cmd, env=env, cwd=ROOT)
        deadline = time.monotonic() + 30
        while len(_rows(cache)) < 50 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        done_at_kill = _rows(cache)
        assert 50 <= len(done_at_kill) < 200 and not out.exists()
        subprocess.run(cmd, env=env, cwd=ROOT, check=True, timeout=60)
        counts = server.body_counts
        by_text = {
            f"echo: {b['messages'][-1]['content']}": c
            for b, c in zip(
                server.bodies, [counts[k] for k in map(_digest, server.bodies)], strict=True
            )
        }
        assert all(by_text[t] == 1 for t in done_at_kill)  # completed calls were never re-sent
        assert (
            len(counts) == 200 and server.requests_total <= 200 + 4
        )  # at most the in-flight repeat
        resumed = json.loads(out.read_text())
        with OpenAIServer(latency_s=0.0) as fresh:
            straight = make_model(spec_for(fresh.url, max_concurrency=16)).complete(
                reqs(200), role="judging", progress=False
            )
    assert resumed == [[r.text, r.error] for r in straight]


def _digest(body: dict) -> str:
    from tests.openai_server import body_digest

    return body_digest(body)


def test_response_accounting_columns() -> None:
    r = Response(
        text="x", input_tokens=3, output_tokens=4, cost=None, latency_s=0.5, cached=True, model="m"
    )
    acc = response_accounting(r, "judging")
    assert tuple(acc) == ACCOUNTING_COLUMNS
    assert acc["cached"] is True and math.isnan(acc["cost"]) and acc["input_tokens"] == 3
    with pytest.raises(ValueError, match="judgeing"):
        response_accounting(r, "judgeing")


def test_usage_summary_splits_this_run_from_total() -> None:
    ids = iter(range(100))

    def row(
        model: str, role: str, cost: float | None, cached: bool, error: str | None = None
    ) -> dict:
        r = Response(
            text="x",
            input_tokens=10,
            output_tokens=2,
            cost=cost,
            cached=cached,
            model=model,
            call_id=f"call-{next(ids)}",
        )
        return {**response_accounting(r, role), "error": error}

    answers = pd.DataFrame(
        [row("gpt", "answering", 0.5, False), row("gpt", "answering", 0.25, True)]
    )
    scores = pd.DataFrame(
        [
            row("judge", "judging", 1.0, False),
            row("judge", "judging", 2.0, True),
            row("judge", "judging", 0.0, False, error="HTTP 500 after 5 attempts: boom"),
            row("local", "judging", None, False),
            row("local", "judging", None, True),
        ]
    )
    corpus = pd.DataFrame({"doc_id": ["d1"]})  # no accounting columns: skipped
    s = usage_summary([corpus, answers, scores]).set_index(["role", "model"])
    assert s.loc[("answering", "gpt"), ["calls", "cached_calls", "failed_calls"]].tolist() == [
        2,
        1,
        0,
    ]
    # this run: 0.5 (the cached 0.25 was spent by an earlier run); total: 0.5 + 0.25
    assert s.loc[("answering", "gpt"), "cost_this_run"] == pytest.approx(0.5)
    assert s.loc[("answering", "gpt"), "cost_total"] == pytest.approx(0.75)
    j = s.loc[("judging", "judge")]
    assert (j["calls"], j["cached_calls"], j["failed_calls"], j["input_tokens"]) == (3, 1, 1, 30)
    assert (j["cost_this_run"], j["cost_total"]) == (pytest.approx(1.0), pytest.approx(3.0))
    assert math.isnan(s.loc[("judging", "local"), "cost_total"])  # no price: unknown, not zero
    assert list(s.index.get_level_values("role")) == ["answering", "judging", "judging"]
    assert (s["skipped"] == 0).all() and (s["truncated"] == 0).all()  # every row above was a call


class CuttingServer(OpenAIServer):
    """The test server honouring `max_tokens` like a real endpoint: a longer reply is cut to that
    many (whitespace) tokens and reported with finish_reason 'length'."""

    def _completion(self, body: dict, text: str) -> dict:
        limit = body.get("max_tokens")
        words = text.split()
        cut = limit is not None and len(words) > limit
        out = super()._completion(body, " ".join(words[:limit]) if cut else text)
        if cut:
            out["choices"][0]["finish_reason"] = "length"
        return out


def test_truncated_replies_are_kept_flagged_and_warned_once_per_batch(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    long = [Request(messages=({"role": "user", "content": f"long {i}"},)) for i in range(2)]
    with CuttingServer(
        reply=lambda b: "a b c d e f" if "long" in b["messages"][-1]["content"] else "ok"
    ) as server:
        model = make_model(spec_for(server.url, max_tokens=3), tmp_path / "c.sqlite")
        with caplog.at_level(logging.WARNING, logger="cube.llm"):
            rs = model.complete([*long, *reqs(3)], role="answering", progress=False)
            again = model.complete(
                [*long, *reqs(3)], role="answering", progress=False
            )  # from the cache
    assert [r.text for r in rs[:2]] == ["a b c", "a b c"] and all(
        r.ok for r in rs
    )  # kept, not an error
    assert [r.detail["finish_reason"] for r in rs] == ["length", "length", "stop", "stop", "stop"]
    assert (
        all(r.cached for r in again)
        and [r.detail["finish_reason"] for r in again][:2] == ["length"] * 2
    )
    warnings = [r.getMessage() for r in caplog.records if "were cut" in r.getMessage()]
    assert warnings == ["m: 2 of 5 replies were cut at max_tokens=3; raise max_tokens"] * 2
    # the tables keep the flag; usage counts truncated calls once each
    rows = pd.DataFrame(
        [
            {**response_accounting(r, "answering"), "finish_reason": r.detail["finish_reason"]}
            for r in [*rs, *rs[:2]]
        ]
    )
    assert usage_summary([rows]).loc[0, ["calls", "truncated"]].tolist() == [5, 2]


def test_progress_bar_shows_count_and_rate(
    openai_server: OpenAIServer, capsys: pytest.CaptureFixture
) -> None:
    make_model(spec_for(openai_server.url)).complete(reqs(5), role="judging", desc="judge-x")
    err = capsys.readouterr().err
    assert "judge-x" in err and "5/5" in err and "call/s" in err


def test_request_fields_follow_the_spec_and_enter_the_cache_key(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    """o-series models want max_completion_tokens; extra_body fields reach the server and the cache
    key."""
    plain = spec_for(openai_server.url, max_tokens=7)
    o_series = spec_for(
        openai_server.url,
        max_tokens=7,
        max_tokens_param="max_completion_tokens",
        extra_body={"chat_template_kwargs": {"enable_thinking": False}},
    )
    request = Request(messages=({"role": "user", "content": "hi"},))
    make_model(o_series, tmp_path / "c.sqlite").complete([request], role="judging", progress=False)
    body = openai_server.bodies[-1]
    assert body["max_completion_tokens"] == 7 and "max_tokens" not in body
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert cache_key(plain, request) != cache_key(o_series, request)
    assert cache_key(plain, request) == cache_key(
        spec_for(openai_server.url, max_tokens=7, timeout_s=3), request
    )


def test_failed_calls_are_not_cached_and_a_rerun_sends_exactly_them(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    failing = {"question 2", "question 5", "question 7"}
    openai_server.fail("500", times=3, when=lambda body: body["messages"][0]["content"] in failing)
    cache = tmp_path / "c.sqlite"
    spec = spec_for(openai_server.url, max_attempts=1)
    first = make_model(spec, cache).complete(reqs(10), role="judging", progress=False)
    assert [i for i, r in enumerate(first) if not r.ok] == [2, 5, 7]
    with sqlite3.connect(cache) as conn:
        stored = {
            json.loads(r)["messages"][0]["content"]
            for (r,) in conn.execute("SELECT request FROM calls")
        }
    assert len(stored) == 7 and not stored & failing  # a failure is never stored as an answer
    openai_server.reset_stats()
    again = make_model(spec, cache).complete(reqs(10), role="judging", progress=False)
    assert all(r.ok for r in again)
    assert sorted(b["messages"][0]["content"] for b in openai_server.bodies) == sorted(failing)


def test_latency_excludes_the_wait_for_a_concurrency_slot_which_is_queue_s(tmp_path: Path) -> None:
    n, server_latency = 5, 0.2
    with OpenAIServer(latency_s=server_latency) as server:
        model = make_model(spec_for(server.url, max_concurrency=1), tmp_path / "c.sqlite")
        t0 = time.perf_counter()
        rs = model.complete(reqs(n), role="judging", progress=False)
        wall = time.perf_counter() - t0
    assert all(r.ok for r in rs)
    # one slot: the requests never overlap, so their latencies add up to at most the wall time
    # (before, each call's latency included its wait: 0.2 + 0.4 + ... + 1.0 s = 3 x the wall time)
    assert sum(r.latency_s for r in rs) <= wall
    assert all(r.latency_s >= server_latency for r in rs)
    # the k-th call waited for the k calls before it
    assert sum(r.queue_s for r in rs) >= server_latency * sum(range(n)) * 0.99
    rows = pd.DataFrame([response_accounting(r, "judging") for r in rs])
    assert list(rows.columns) == list(ACCOUNTING_COLUMNS)
    s = usage_summary([rows]).iloc[0]
    assert s["latency_s_median"] == pytest.approx(rows["latency_s"].median())
    assert s["queue_s_median"] == pytest.approx(rows["queue_s"].median())
    again = make_model(spec_for(server.url, max_concurrency=1), tmp_path / "c.sqlite").complete(
        reqs(n), role="judging", progress=False
    )
    assert all(r.cached and r.queue_s == 0.0 for r in again)


def test_concurrent_batches_sharing_a_cache_send_each_call_once(tmp_path: Path) -> None:
    # Two batches (as two processes would) ask the same 40 calls at once through one cache file:
    # each call is claimed by one of them, the other waits for its answer.
    with OpenAIServer(latency_s=0.02) as server:
        spec, cache = spec_for(server.url, max_concurrency=4), tmp_path / "c.sqlite"

        async def both() -> list[list[Response]]:
            a, b = make_model(spec, cache), make_model(spec, cache)
            return list(
                await asyncio.gather(
                    a.acomplete(reqs(40), role="judging"), b.acomplete(reqs(40), role="judging")
                )
            )

        ra, rb = asyncio.run(both())
        assert server.requests_total == 40 and len(server.body_counts) == 40
    assert [r.text for r in ra] == [r.text for r in rb] and all(r.ok for r in ra + rb)
    assert sum(not r.cached for r in ra + rb) == 40  # every call paid once, by one of the two
    with sqlite3.connect(cache) as conn:
        assert (
            conn.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 0
        )  # nothing left claimed


def test_a_live_claim_is_waited_for_and_a_dead_one_taken_over(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    from cube.llm.cache import CallCache

    spec, path = spec_for(openai_server.url), tmp_path / "c.sqlite"
    (req,) = reqs(1)
    key = cache_key(spec, req)
    other = CallCache(path)
    assert (
        other.claim(key, "other-process") == "mine"
    )  # a live process (this one's pid) is sending it

    async def answer_later() -> None:  # ... and stores its answer a moment later
        await asyncio.sleep(0.6)
        other.put(
            key, Response(text="the other's answer", model="m", endpoint=openai_server.url), "{}"
        )
        other.release("other-process", [key])

    async def ask() -> list[Response]:
        return (
            await asyncio.gather(
                make_model(spec, path).acomplete([req], role="judging"), answer_later()
            )
        )[0]

    (r,) = asyncio.run(ask())
    assert r.text == "the other's answer" and r.cached and openai_server.requests_total == 0
    # a claim held by a process that is gone (killed) is taken over at once
    (req2,) = reqs(1, "other")
    key2 = cache_key(spec, req2)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    other.conn.execute(
        "INSERT INTO claims VALUES (?,?,?,?,?)",
        (key2, "killed", __import__("socket").gethostname(), int(dead.stdout), time.time() + 600),
    )
    (r2,) = make_model(spec, path).complete([req2], role="judging", progress=False)
    assert r2.ok and not r2.cached and openai_server.requests_total == 1
    other.close()


def test_two_processes_upgrading_an_old_cache_at_once_both_open_it(tmp_path: Path, monkeypatch):
    """Both read the old columns, both ALTER TABLE: the second gets 'duplicate column name', which
    means the upgrade is done, not that the cache is unusable (it was a CacheError)."""
    from cube.llm import cache as cache_module

    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as old:  # a cache written before cached_input_tokens was kept
        old.execute(
            cache_module._SCHEMA.replace(
                ",\n    cached_input_tokens INTEGER NOT NULL DEFAULT 0", ""
            )
        )
    assert "cached_input_tokens" not in {
        r[1] for r in sqlite3.connect(path).execute("PRAGMA table_info(calls)")
    }
    real_connect = sqlite3.connect

    # the other process's ALTER lands between this one's check and its ALTER
    class OtherProcessFirst:
        def __init__(self, conn):
            self.conn = conn

        def execute(self, sql, *args):
            if sql.startswith("ALTER TABLE"):
                other = real_connect(path, isolation_level=None)
                other.execute(sql)
                other.close()
            return self.conn.execute(sql, *args)

        def __getattr__(self, name):
            return getattr(self.conn, name)

    monkeypatch.setattr(
        cache_module.sqlite3, "connect", lambda *a, **k: OtherProcessFirst(real_connect(*a, **k))
    )
    cache = cache_module.CallCache(path)
    monkeypatch.undo()
    assert cache.get_many(["nothing"]) == {}
    assert "cached_input_tokens" in {
        r[1] for r in sqlite3.connect(path).execute("PRAGMA table_info(calls)")
    }


def test_a_recorded_failure_is_replayed_not_sent_also_inside_a_running_loop(tmp_path: Path) -> None:
    """A model given a `CallLog` adds every call that failed to its `failed`; a model given those
    as its `replay` fails them again with the same reason without sending them, also from a
    running event loop (Jupyter: `run_sync` works in a thread), while an answered call is cached
    and any other call is sent as usual; a model without the log sends a failed call again. The
    log is an argument of the model, never ambient state."""
    from cube.llm import CallLog

    with OpenAIServer() as server:
        server.fail("400", times=None, when=lambda b: "question 1" in json.dumps(b))
        log = CallLog()
        model = make_model(spec_for(server.url), tmp_path / "c.sqlite", calls=log)
        first = model.complete(reqs(3), role="judging", progress=False)
        assert [r.ok for r in first] == [True, False, True]
        assert log.failed == {first[1].call_id: first[1].error} and server.requests_total == 3
        replaying = make_model(
            spec_for(server.url), tmp_path / "c.sqlite", calls=CallLog(replay=log.failed)
        )

        async def in_a_loop() -> list[Response]:  # complete() from inside a running loop
            return replaying.complete(reqs(4), role="judging", progress=False)

        server.reset_stats()
        again = asyncio.run(in_a_loop())
        assert server.requests_total == 1  # only "question 3", never asked before
        assert not again[1].ok and again[1].error == first[1].error
        assert again[1].call_id == first[1].call_id and again[1].cost in (None, 0, 0.0)
        assert again[0].ok and again[0].cached and again[3].ok
        plain = make_model(spec_for(server.url), tmp_path / "c.sqlite")
        plain.complete(reqs(2), role="judging", progress=False)  # no log: asked again
        assert server.requests_total == 2


def test_canonical_json_is_the_sorted_compact_json_dumps():
    """Cache keys and call ids hash `canonical_json`: the text `json.dumps` gave with these options
    (a cache written before the encoder was built once must still be hit)."""
    import json

    from cube.llm.cache import canonical_json

    for obj in (
        {"b": [1, 2.5, None], "a": "名字", "c": {"z": True, "y": "x"}},
        ["m", {"temperature": 0.0}, {"answer": "sha256:ab", "lang": "zh"}, "v1", 0],
        "text",
        3,
    ):
        want = json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        assert canonical_json(obj) == want
