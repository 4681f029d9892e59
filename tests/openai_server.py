"""A local OpenAI-compatible chat server for tests and benchmarks (stdlib only).

It speaks the real protocol of `POST /v1/chat/completions` (the response JSON shape of the
OpenAI API: id, object, created, model, choices[{index, message{role, content},
finish_reason}], usage{prompt_tokens, completion_tokens, total_tokens}) and `GET /v1/models`,
so `cube.llm` is exercised through the `openai` client exactly as against a real endpoint.

Use in a test (a thread of the test process):

    with OpenAIServer(reply=lambda body: "Score: 7", latency_s=0.05) as server:
        spec = ModelSpec(model="m", base_url=server.url)       # url ends with /v1
        server.fail("429", times=2, retry_after=1)             # the next 2 requests get 429
        ...
        server.requests_total, server.body_counts, server.max_in_flight, server.authorizations

or as a separate process (no GIL contention; used by the benchmark):

    with ServerProcess(latency_s=0.1, reply="score") as server:  # same `url`, `stats()`
        ...

Fault kinds for `fail`: "429" (with Retry-After), "500", "503", "400", "401" (the body echoes
the Authorization header and any x-* / api-* header, as some providers and gateways do, so
tests can prove we scrub secrets), "404",
"slow" (answers after `delay_s`, longer than the client's timeout), "malformed" (200 with
broken JSON), "garbage" (200 with text/plain junk), "no_choices" (200, valid JSON, empty
choices). A reply that is valid protocol but an unusable score ("Score: 42") is a reply
function, not a fault: `OpenAIServer(reply=lambda body: "Score: 42")`.

Endpoints for the subprocess mode: `GET /_stats` (the counters as JSON), `POST /_reset`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.request import Request as _UrlRequest
from urllib.request import urlopen

Reply = Callable[[dict[str, Any]], str]
FAULT_KINDS = (
    "429",
    "500",
    "503",
    "400",
    "401",
    "404",
    "slow",
    "malformed",
    "garbage",
    "no_choices",
)


def closed_port_url() -> str:
    """A `/v1` URL on 127.0.0.1 where nothing listens (a port just bound and released)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def broken_endpoint(server: OpenAIServer, case: str, model: str, **fail: Any) -> tuple[str, str]:
    """`(base_url, model)` for one broken-endpoint case against `server`: "refused" (a closed
    port), "unknown_model" (a model the server does not list; needs `strict_model=True`), or a
    fault kind injected for every request (`fail` passes e.g. `delay_s`)."""
    if case == "refused":
        return closed_port_url(), model
    if case == "unknown_model":
        return server.url, "no-such-model"
    server.fail(case, times=None, **fail)
    return server.url, model


def last_user_message(body: dict[str, Any]) -> str:
    """The content of the last `user` message of a chat request body ('' if none)."""
    for m in reversed(body.get("messages") or []):
        if m.get("role") == "user":
            return str(m.get("content", ""))
    return ""


def echo_reply(body: dict[str, Any]) -> str:
    """Default reply: deterministic, derived from the last user message."""
    return "echo: " + last_user_message(body)[:80]


def score_reply(body: dict[str, Any]) -> str:
    """A judge-like reply: an integer score 0-10 derived deterministically from the prompt."""
    digest = hashlib.sha256(last_user_message(body).encode()).digest()
    return f"Score: {digest[0] % 11}"


REPLIES: dict[str, Reply] = {"echo": echo_reply, "score": score_reply}


def body_digest(body: dict[str, Any]) -> str:
    """A stable id of a request body (for counting repeats of the same call)."""
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = (
        1024  # the stdlib default (5) drops bursts of concurrent connects (256 clients at once)
    )


@dataclass
class _Rule:
    kind: str
    times: int | None  # None: every matching request
    retry_after: float | None
    delay_s: float
    when: Callable[[dict[str, Any]], bool] | None
    message: str | None = None


class OpenAIServer:
    """An OpenAI-compatible server on 127.0.0.1 in a background thread.

    Args:
        reply: request JSON -> reply text (default `echo_reply`).
        latency_s: fixed delay before every answer.
        model: model id listed by `GET /v1/models`.
        port: 0 picks a free port.
        strict_model: answer a request for any other model with 404 `model_not_found`, as
            OpenAI does for an unknown model.
        rate_limit_rps: answer 429 (with `retry-after-ms` until the next free slot) to requests
            beyond this many per second (a token bucket holding `rate_burst` requests, default
            0.1 s worth), as a provider's rate limiter does; `rate_limited` counts them.
        tokenize: answer llama-cpp-python's `POST /extras/tokenize {"input"}` with one token per
            whitespace word (the count `usage.prompt_tokens` reports); `tokenize_requests` counts
            them.
        cached_tokens: report this many of each prompt's tokens (at most all) as served from a
            prompt cache (`usage.prompt_tokens_details.cached_tokens`, as OpenAI does).
        serial: answer one request at a time, the others queueing (llama-cpp-python's server).
        template_tokens: (per message, per call) tokens a chat template adds to
            `usage.prompt_tokens` beyond the messages' words (what a tokenize route never sees),
            e.g. ChatML's role markers.
    """

    def __init__(
        self,
        reply: Reply | None = None,
        *,
        latency_s: float = 0.0,
        model: str = "test-model",
        port: int = 0,
        strict_model: bool = False,
        rate_limit_rps: float | None = None,
        rate_burst: float | None = None,
        tokenize: bool = False,
        cached_tokens: int = 0,
        serial: bool = False,
        template_tokens: tuple[int, int] = (0, 0),
    ):
        self.template_tokens = template_tokens
        self.tokenize, self.cached_tokens, self.tokenize_requests = tokenize, cached_tokens, 0
        self._serial = threading.Lock() if serial else None
        self.reply = reply or echo_reply
        self.rate_limit_rps = rate_limit_rps
        self._burst = rate_burst or max(1.0, (rate_limit_rps or 0) * 0.1)
        self._tokens, self._refilled = self._burst, time.monotonic()
        self.latency_s = latency_s
        self.model = model
        self.strict_model = strict_model
        self._lock = threading.Lock()
        self._rules: list[_Rule] = []
        self.reset_stats()
        self._httpd = _Server(("127.0.0.1", port), self._handler_class())
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------
    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """Base URL to give the client (ends with /v1, as OpenAI's does)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> OpenAIServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- scripting ---------------------------------------------------------------------
    def fail(
        self,
        kind: str,
        *,
        times: int | None = 1,
        retry_after: float | None = None,
        delay_s: float = 5.0,
        when: Callable[[dict[str, Any]], bool] | None = None,
        message: str | None = None,
    ) -> None:
        """Answer the next `times` matching requests (None: all of them) with fault `kind`.

        Rules apply in the order added; `when` (request JSON -> bool) restricts a rule; `message`
        replaces the error message of an HTTP fault (e.g. a real server's context-window error).
        """
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; expected one of {FAULT_KINDS}")
        with self._lock:
            self._rules.append(_Rule(kind, times, retry_after, delay_s, when, message))

    def clear_faults(self) -> None:
        with self._lock:
            self._rules.clear()

    def reset_stats(self) -> None:
        with getattr(self, "_lock", threading.Lock()):
            self.requests_total = 0
            self.body_counts: Counter[str] = Counter()
            self.bodies: list[dict[str, Any]] = []
            self.authorizations: list[str] = []
            self.headers: list[dict[str, str]] = []
            self.in_flight = 0
            self.max_in_flight = 0
            self.rate_limited = 0

    def stats(self) -> dict[str, Any]:
        """The counters as plain data (the same shape `ServerProcess.stats` returns)."""
        with self._lock:
            return {
                "requests_total": self.requests_total,
                "body_counts": dict(self.body_counts),
                "max_in_flight": self.max_in_flight,
                "authorizations": list(self.authorizations),
                "rate_limited": self.rate_limited,
            }

    def _over_rate(self) -> float | None:
        """None when a request may pass the rate limiter, else seconds until it could."""
        if self.rate_limit_rps is None:
            return None
        with self._lock:
            now = time.monotonic()
            self._tokens = min(
                self._burst, self._tokens + (now - self._refilled) * self.rate_limit_rps
            )
            self._refilled = now
            if self._tokens >= 1:
                self._tokens -= 1
                return None
            self.rate_limited += 1
            return (1 - self._tokens) / self.rate_limit_rps

    def _take_rule(self, body: dict[str, Any]) -> _Rule | None:
        with self._lock:
            for rule in self._rules:
                if rule.when is None or rule.when(body):
                    if rule.times is not None:
                        rule.times -= 1
                        if rule.times <= 0:
                            self._rules.remove(rule)
                    return rule
        return None

    # -- protocol ----------------------------------------------------------------------
    def _completion(self, body: dict[str, Any], text: str) -> dict[str, Any]:
        messages = body.get("messages", [])
        per_message, per_call = self.template_tokens
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in messages)
        prompt_tokens += (per_message * len(messages) + per_call) if messages else 0
        completion_tokens = len(text.split())
        return {
            "id": f"chatcmpl-{body_digest(body)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", self.model),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
                **(
                    {
                        "prompt_tokens_details": {
                            "cached_tokens": min(self.cached_tokens, prompt_tokens)
                        }
                    }
                    if self.cached_tokens
                    else {}
                ),
            },
        }

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real endpoints
            disable_nagle_algorithm = True  # headers and body are separate writes: no 40 ms stall

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _send(
                self, status: int, payload: bytes, ctype: str = "application/json", **headers: str
            ) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(payload)))
                    for k, v in headers.items():
                        self.send_header(k.replace("_", "-"), v)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                    pass

            def _error(self, status: int, message: str, **headers: str) -> None:
                err = {"error": {"message": message, "type": "test_fault", "code": status}}
                self._send(status, json.dumps(err).encode(), **headers)

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/v1/models":
                    data = [
                        {
                            "id": server.model,
                            "object": "model",
                            "created": 0,
                            "owned_by": "cube-tests",
                        }
                    ]
                    self._send(200, json.dumps({"object": "list", "data": data}).encode())
                elif self.path == "/_stats":
                    self._send(200, json.dumps(server.stats()).encode())
                else:
                    self._error(404, f"no route GET {self.path}")

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path == "/_reset":
                    server.reset_stats()
                    server.clear_faults()
                    return self._send(200, b"{}")
                if self.path == "/extras/tokenize" and server.tokenize:
                    with server._lock:
                        server.tokenize_requests += 1
                    words = str(json.loads(raw).get("input", "")).split()
                    return self._send(200, json.dumps({"tokens": list(range(len(words)))}).encode())
                if self.path.rstrip("/") != "/v1/chat/completions":
                    return self._error(404, f"no route POST {self.path}")
                try:
                    body = json.loads(raw)
                except ValueError:
                    return self._error(400, "request body is not JSON")
                with server._lock:
                    server.requests_total += 1
                    server.body_counts[body_digest(body)] += 1
                    server.bodies.append(body)
                    server.authorizations.append(self.headers.get("Authorization", ""))
                    server.headers.append({k.lower(): v for k, v in self.headers.items()})
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    if server._serial is not None:
                        with server._serial:
                            self._answer(body)
                    else:
                        self._answer(body)
                finally:
                    with server._lock:
                        server.in_flight -= 1

            def _answer(self, body: dict[str, Any]) -> None:
                if server.strict_model and body.get("model") != server.model:
                    msg = (
                        f"The model `{body.get('model')}` does not "
                        f"exist or you do not have access to it."
                    )
                    return self._error(404, msg)
                wait = server._over_rate()
                if wait is not None:
                    return self._error(
                        429,
                        "Rate limit reached (test rate limiter)",
                        retry_after_ms=f"{wait * 1000:.0f}",
                    )
                rule = server._take_rule(body)
                if server.latency_s:
                    time.sleep(server.latency_s)
                kind = rule.kind if rule else None
                if kind == "429":
                    headers = (
                        {} if rule.retry_after is None else {"Retry_After": f"{rule.retry_after:g}"}
                    )
                    return self._error(429, "Rate limit reached (test fault)", **headers)
                if kind in ("500", "503", "400", "404"):
                    return self._error(int(kind), rule.message or f"HTTP {kind} (test fault)")
                if kind == "401":
                    # Like providers that echo the credential they rejected (and gateways that echo
                    # headers).
                    extra = {
                        k: v
                        for k, v in self.headers.items()
                        if k.lower().startswith(("x-", "api-"))
                        and not k.lower().startswith("x-stainless")
                    }
                    echo = f"; headers: {extra}" if extra else ""
                    return self._error(
                        401,
                        f"Incorrect API key provided: {self.headers.get('Authorization')}{echo}",
                    )
                if kind == "slow":
                    time.sleep(rule.delay_s)
                if kind == "malformed":
                    return self._send(200, b'{"id": "x", "choices": [{"index": 0, "message": ')
                if kind == "garbage":
                    return self._send(200, b"<html>upstream proxy error</html>", "text/plain")
                if kind == "no_choices":
                    payload = server._completion(body, "")
                    payload["choices"] = []
                    return self._send(200, json.dumps(payload).encode())
                text = server.reply(body)
                self._send(200, json.dumps(server._completion(body, text)).encode())

        return Handler


class ServerProcess:
    """The same server in a child process (so it does not compete with the client for the GIL).

    Args:
        latency_s: fixed delay before every answer.
        reply: a name in `REPLIES` ("echo" or "score").
        rate_limit_rps: as `OpenAIServer`'s (its `rate_limited` count is in `stats()`).
        port: 0 picks a free port (another: a restart on the port of a server that was killed).
    """

    def __init__(
        self,
        *,
        latency_s: float = 0.0,
        reply: str = "echo",
        rate_limit_rps: float | None = None,
        port: int = 0,
    ):
        self.latency_s = latency_s
        self.reply = reply
        self.rate_limit_rps = rate_limit_rps
        self.proc: subprocess.Popen[str] | None = None
        self.port = port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> ServerProcess:
        cmd = [sys.executable, __file__, "--latency", str(self.latency_s), "--reply", self.reply]
        if self.rate_limit_rps is not None:
            cmd += ["--rate-limit-rps", str(self.rate_limit_rps)]
        if self.port:
            cmd += ["--port", str(self.port)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError(f"test server did not start (got {line!r})")
        self.port = int(line.split()[1])
        return self

    def stats(self) -> dict[str, Any]:
        with urlopen(f"http://127.0.0.1:{self.port}/_stats", timeout=10) as r:
            return json.loads(r.read())

    def reset(self) -> None:
        urlopen(_UrlRequest(f"http://127.0.0.1:{self.port}/_reset", data=b"{}"), timeout=10).close()

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            self.proc = None

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Local OpenAI-compatible test server")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--latency", type=float, default=0.0)
    ap.add_argument("--reply", choices=sorted(REPLIES), default="echo")
    ap.add_argument("--rate-limit-rps", type=float, default=None)
    args = ap.parse_args(argv)
    server = OpenAIServer(
        REPLIES[args.reply],
        latency_s=args.latency,
        port=args.port,
        rate_limit_rps=args.rate_limit_rps,
    )
    print(f"PORT {server.port}", flush=True)
    try:
        server._httpd.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
