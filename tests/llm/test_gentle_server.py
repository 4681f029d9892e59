"""Never the one that breaks the server (issue 38: a llama-cpp-python server died of a
segmentation fault after `cube plan`'s tokenize requests). Token counting uses the
served GGUF's own tokenizer where the file is known (no request), else the tokenize route one
request at a time and never while this process has calls in flight to the server; a server that
dies mid-run is named as dead (still refusing a moment after its first refusal), not retried as if
it were busy; one that is back by then (a restart) is retried as usual. Inside `cube run` the
tokenize route is never asked, and its replies are bounded in size and time."""

from __future__ import annotations

import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from cube.config.model_spec import ModelSpec
from cube.llm import Request, local, make_model, tokens
from cube.llm import breaker as breaker_mod
from tests.openai_server import ServerProcess


class TokenizeServer:
    """A tokenize route (`POST /extras/tokenize`, one token per word) that records how many of
    its requests ran at once, and a `GET /v1/models` naming `model_ids`."""

    def __init__(self, model_ids: list[str] | None = None, hold_s: float = 0.01):
        self.max_at_once = self.at_once = self.requests = 0
        self.model_ids, self.hold_s = model_ids or ["m"], hold_s
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def _send(self, body: dict) -> None:
                raw = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self) -> None:
                self._send({"data": [{"id": i, "object": "model"} for i in outer.model_ids]})

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with outer._lock:
                    outer.requests += 1
                    outer.at_once += 1
                    outer.max_at_once = max(outer.max_at_once, outer.at_once)
                time.sleep(outer.hold_s)
                with outer._lock:
                    outer.at_once -= 1
                words = str(json.loads(raw).get("input", "")).split()
                self._send({"tokens": list(range(len(words)))})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> TokenizeServer:
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_tokenize_requests_go_one_at_a_time_even_from_several_threads() -> None:
    texts = [f"word {i} and some more words" for i in range(30)]
    with TokenizeServer() as srv:
        spec = ModelSpec(model="m", base_url=srv.url)
        got: list[tokens.TokenCount] = []
        threads = [
            threading.Thread(target=lambda: got.append(tokens.count_prompt_tokens(spec, texts)))
            for _ in range(4)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert [g.counts for g in got] == [[6] * 30] * 4
    assert {g.method for g in got} == {"server tokenize route"}
    assert srv.max_at_once == 1 and srv.requests == 4 * 31  # a probe and one per text, in turn


def test_no_tokenize_request_while_this_process_has_calls_in_flight_to_the_server() -> None:
    with TokenizeServer() as srv:
        spec = ModelSpec(model="m", base_url=srv.url)
        breaker_mod._count_in_flight([srv.url], 1)  # a run's call to this server, in flight
        try:
            busy = tokens.count_prompt_tokens(spec, ["one two three four five six seven"])
        finally:
            breaker_mod._count_in_flight([srv.url], -1)
        assert breaker_mod.calls_in_flight([srv.url]) == 0
        idle = tokens.count_prompt_tokens(spec, ["one two three four five six seven"])
    assert busy.method == tokens.ESTIMATE and busy.counts == [9]
    assert idle.method == "server tokenize route" and idle.counts == [7]
    assert srv.requests == 2  # only the idle count's probe and text


class FakeVocab:
    def tokenize(self, text: bytes, special: bool = True) -> list[int]:
        return [1] + list(range(len(text.split())))  # BOS + one per word


def test_the_served_gguf_s_own_tokenizer_counts_without_any_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(tokens, "_gguf_vocab", lambda path: FakeVocab())
    monkeypatch.setattr(local.tempfile, "gettempdir", lambda: str(tmp_path))
    with TokenizeServer() as srv:
        port = int(srv.url.rsplit(":", 1)[1].split("/")[0])
        # the params name the GGUF itself
        by_path = tokens.count_prompt_tokens(ModelSpec(model=str(gguf), base_url=srv.url), ["a b"])
        # `cube serve` noted the port, its alias and its (live) process
        note = local._record_path(port)
        note.parent.mkdir(parents=True)
        note.write_text(json.dumps({"pid": os.getpid(), "alias": "local", "model": str(gguf)}))
        by_note = tokens.count_prompt_tokens(ModelSpec(model="local", base_url=srv.url), ["a b c"])
        assert local.served_gguf(srv.url, "other-alias") is None
        posts = srv.requests
        # a note of a dead process is not trusted: the route counts (one request at a time)
        note.write_text(json.dumps({"pid": 2**22 + 12345, "alias": "local", "model": str(gguf)}))
        stale = tokens.count_prompt_tokens(ModelSpec(model="local", base_url=srv.url), ["a b c"])
    assert posts == 0  # no tokenize request while the GGUF was known
    assert by_path.counts == [3] and by_note.counts == [4]
    assert by_note.method.startswith("the model's own tokenizer (model.gguf")
    assert stale.method == "server tokenize route" and stale.counts == [3]


def test_a_server_naming_its_gguf_as_model_id_is_counted_locally(tmp_path: Path) -> None:
    gguf = tmp_path / "smol.gguf"
    gguf.write_bytes(b"GGUF")
    with TokenizeServer(model_ids=[str(gguf)]) as srv:
        assert local.served_gguf(srv.url, "smol.gguf") == gguf
        assert local.served_gguf(srv.url, "m") is None
    assert local.served_gguf("https://example.com/v1", str(tmp_path / "none.gguf")) is None


def test_a_server_that_dies_mid_run_is_named_dead_not_retried_as_if_busy(tmp_path: Path) -> None:
    srv = ServerProcess(latency_s=0.05, reply="score").start()  # a process: SIGKILL drops it all
    spec = ModelSpec(
        model="m",
        base_url=srv.url,
        max_concurrency=2,
        max_attempts=5,
        backoff_base_s=0.05,
        backoff_max_s=0.1,
    )
    reqs = [Request(({"role": "user", "content": f"q {i}"},)) for i in range(40)]
    cache = tmp_path / "cache.sqlite"
    out: list = []
    worker = threading.Thread(
        target=lambda: out.extend(
            make_model(spec, cache).complete(reqs, role="judging", progress=False)
        )
    )
    try:
        worker.start()
        deadline = time.monotonic() + 30
        while srv.stats()["requests_total"] < 6 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        assert srv.proc is not None
        srv.proc.kill()  # what a segmentation fault looks like to the client
        srv.proc.wait()
        srv.proc = None
        worker.join(timeout=60)
    failed = [r for r in out if not r.ok]
    assert len(out) == 40 and 3 <= 40 - len(failed) < 40
    assert all("server dead: connection refused after it had answered" in r.error for r in failed)
    assert "in flight when it died" in failed[0].error
    # the calls in flight met the death and may try once more; the rest are not sent at all
    assert sum(r.attempts for r in failed) <= 8, [(r.attempts, r.error) for r in failed]
    assert sum(r.attempts == 0 for r in failed) >= len(failed) - 5


def test_preflight_names_a_server_that_dies_answering_the_check(tmp_path: Path) -> None:
    import socket

    from cube.config.params import parse_params
    from cube.llm.preflight import check_endpoints

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]

    def crash_on_first_request() -> None:
        conn, _ = listener.accept()
        conn.recv(65536)  # the check's request arrives ...
        listener.close()  # ... and the server dies: no answer, nothing listens any more
        conn.close()

    threading.Thread(target=crash_on_first_request, daemon=True).start()
    model = {"provider": "openai", "model": "m", "base_url": f"http://127.0.0.1:{port}/v1"}
    params = parse_params({"run": "x", "judges": [{"name": "j", "model": model}]})
    lines = check_endpoints(params, timeout_s=5)
    assert len(lines) == 1 and "server dead: it took the request" in lines[0], lines


def test_a_server_that_refuses_briefly_and_comes_back_gets_every_call_answered(
    tmp_path: Path,
) -> None:
    """A restart on this machine (the listener gone for 0.3 s, then back on the same port) is not
    a death: the death check finds it listening again and the calls retry through."""
    first = ServerProcess(latency_s=0.05, reply="score").start()  # killed: every connection drops
    spec = ModelSpec(
        model="m",
        base_url=first.url,
        max_concurrency=2,
        max_attempts=5,
        backoff_base_s=0.05,
        backoff_max_s=0.1,
    )
    reqs = [Request(({"role": "user", "content": f"q {i}"},)) for i in range(40)]
    out: list = []
    worker = threading.Thread(
        target=lambda: out.extend(
            make_model(spec, tmp_path / "cache.sqlite").complete(
                reqs, role="judging", progress=False
            )
        )
    )
    second = ServerProcess(latency_s=0.05, reply="score", port=first.port)
    try:
        worker.start()
        deadline = time.monotonic() + 30
        while first.stats()["requests_total"] < 6 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert first.proc is not None
        first.proc.kill()  # the restart: nothing listens for a moment ...
        first.proc.wait()
        first.proc = None
        time.sleep(0.3)
        second.start()  # ... then the server is back on its port
        worker.join(timeout=60)
        answered_after = second.stats()["requests_total"]
    finally:
        second.stop()
    assert len(out) == 40 and all(r.ok for r in out), [r.error for r in out if not r.ok]
    assert answered_after >= 30  # the restarted server answered the rest


def test_only_a_server_on_this_machine_is_stopped_on_a_refusal() -> None:
    """A remote service refusing after it answered (a rolling restart) is left to the retries; a
    loopback one gets its death check."""
    assert breaker_mod.on_this_machine("http://127.0.0.1:8000/v1")
    assert breaker_mod.on_this_machine("http://localhost:8000/v1")
    assert breaker_mod.on_this_machine("http://[::1]:8000/v1")
    assert not breaker_mod.on_this_machine("http://10.0.0.5:8000/v1")
    assert not breaker_mod.on_this_machine("https://vllm.example.com/v1")

    async def checking_after_a_refusal(url: str) -> bool:
        b = breaker_mod.Breaker("m", [url], 5, 5, str)
        b.healthy(url)
        b.no_answer(url, breaker_mod.REFUSED)
        checking = b.checking()
        for task in list(b._checks.values()):
            task.cancel()
        return checking

    import asyncio

    assert asyncio.run(checking_after_a_refusal("http://127.0.0.1:9/v1"))
    assert not asyncio.run(checking_after_a_refusal("https://vllm.example.com/v1"))


def test_inside_cube_run_no_tokenize_request_is_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run's calls are made in its kernel, another process than a count made during the run
    (the sequential driver's plan): there the tokenize route is never asked, whatever this
    process has in flight."""
    texts = ["one two three four five six seven"]
    monkeypatch.setenv(tokens.IN_RUN_ENV, "1")
    with TokenizeServer() as srv:
        spec = ModelSpec(model="m", base_url=srv.url)
        inside = tokens.count_prompt_tokens(spec, texts, [("user",)], [(({"content": "a"},), 5)])
        assert srv.requests == 0
        monkeypatch.delenv(tokens.IN_RUN_ENV)
        outside = tokens.count_prompt_tokens(spec, texts)
    assert inside.counts == [9] and inside.method.startswith(tokens.ESTIMATE)
    assert tokens.IN_RUN in inside.method
    assert outside.counts == [7] and outside.method == "server tokenize route"


def test_cube_run_marks_its_stages_as_inside_a_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import yaml

    from cube.kb.demo import generate_demo_corpus
    from cube.run import execute
    from tests import ROOT

    seen: list[str | None] = []
    monkeypatch.setattr(
        execute, "_run_stages", lambda *a, **k: seen.append(os.environ.get(tokens.IN_RUN_ENV))
    )
    monkeypatch.delenv(tokens.IN_RUN_ENV, raising=False)
    monkeypatch.chdir(ROOT)
    corpus = tmp_path / "kb.csv"
    generate_demo_corpus(6, "en", seed=1).drop(columns=["text"]).to_csv(corpus, index=False)
    params = tmp_path / "p.yaml"
    judge = {"name": "r", "model": {"provider": "offline", "model": "rubric-strict"}}
    params.write_text(
        yaml.safe_dump(
            {
                "run": "inrun",
                "outputs_dir": str(tmp_path / "out"),
                "judges": [judge],
                "corpus": {"source": "file", "path": str(corpus)},
            }
        ),
        encoding="utf-8",
    )
    execute.execute_run(params, only="00..01", log=lambda _: None)
    assert seen == ["1"]  # set while the stages run (their kernel inherits it) ...
    assert tokens.IN_RUN_ENV not in os.environ  # ... and only then


class OddTokenizeServer(TokenizeServer):
    """A tokenize route answering `body` (bytes), in pieces `drip_s` apart."""

    def __init__(self, body: bytes, drip_s: float = 0.0):
        super().__init__()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with outer._lock:
                    outer.requests += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()  # no Content-Length: the size shows only while reading
                try:
                    for i in range(0, len(body), 4096):
                        self.wfile.write(body[i : i + 4096])
                        self.wfile.flush()
                        time.sleep(drip_s)
                except OSError:  # the client stopped reading at its limit
                    pass

        self.httpd.RequestHandlerClass = Handler


def test_a_tokenize_reply_is_bounded_in_size_and_time() -> None:
    huge = json.dumps({"tokens": list(range(200_000))}).encode()  # ~1.4 MB
    with OddTokenizeServer(huge) as srv:
        spec = ModelSpec(model="m", base_url=srv.url, max_reply_bytes=64 * 1024)
        assert tokens._server_counter(spec) is None  # the reply refused past 64 KB
        got = tokens.count_prompt_tokens(spec, ["one two three four"])
    assert got.method == tokens.ESTIMATE and got.counts == [5]

    from cube.llm.http import httpx_module
    from cube.llm.transport import Limits, TransportLimit

    # ~30 KB in 8 pieces 0.2 s apart: each read is within the 0.5 s timeout, the whole is not
    slow = json.dumps({"tokens": list(range(5_000))}).encode()
    with OddTokenizeServer(slow, drip_s=0.2) as srv:
        spec = ModelSpec(model="m", base_url=srv.url)
        url = f"{srv.url[:-3]}/extras/tokenize"
        with (
            httpx_module().Client(timeout=0.5) as client,
            pytest.raises(TransportLimit, match="timeout"),
        ):
            tokens._bounded_post(client, url, {"input": "a"}, Limits(timeout_s=0.5))
        assert tokens._server_counter(spec, timeout_s=0.5) is None


def test_a_dead_replica_is_stopped_and_the_other_answers_every_call(tmp_path: Path) -> None:
    dying = ServerProcess(latency_s=0.05, reply="score").start()
    other = ServerProcess(latency_s=0.05, reply="score").start()
    spec = ModelSpec(
        model="m",
        base_urls=[dying.url, other.url],
        max_concurrency=2,
        max_attempts=5,
        backoff_base_s=0.05,
        backoff_max_s=0.1,
    )
    reqs = [Request(({"role": "user", "content": f"q {i}"},)) for i in range(40)]
    out: list = []
    worker = threading.Thread(
        target=lambda: out.extend(
            make_model(spec, tmp_path / "cache.sqlite").complete(
                reqs, role="judging", progress=False
            )
        )
    )
    try:
        worker.start()
        deadline = time.monotonic() + 30
        while dying.stats()["requests_total"] < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert dying.proc is not None
        dying.proc.kill()
        dying.proc.wait()
        dying.proc = None
        worker.join(timeout=60)
        answered_by_other = other.stats()["requests_total"]
    finally:
        other.stop()
    assert len(out) == 40 and all(r.ok for r in out), [r.error for r in out if not r.ok]
    assert answered_by_other >= 20
