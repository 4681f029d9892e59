"""HTTP to OpenAI-compatible endpoints: one pooled client per replica, retries, failures.

`Endpoints.call(request)` sends one chat completion to the least busy replica, retrying 408,
409, 429, 5xx, timeouts, connection errors and unusable 200 answers with exponential backoff
and jitter (honouring Retry-After, capped by `backoff_max_s`); other 4xx fail at once. A
failure is a `Response` whose `error` says why, with the API key scrubbed from it.

Circuit breaker: an endpoint that answers 401, 403 or 404 (bad key, no access, unknown model or
wrong base_url), or where `breaker_threshold` calls in a row used up all their attempts on
connection errors, timeouts or unusable answers (e.g. it always answers with empty choices), is
stopped. Only a call that exhausted its retries counts: calls refused at the same moment by a server
that is restarting retry with backoff and go through once it is back. Replicas that still work take
the calls of a stopped one; when none is left, the remaining calls fail at once without a request,
with the reason the endpoint was stopped ("not sent: endpoint stopped after HTTP 401 ..."). A stop
is not forever: `BREAKER_COOLDOWN_S` after it (or after its last failed trial) one call is let
through as a trial (half-open); its success resumes the endpoint, its failure re-arms the cool-down.
`Endpoints.stopped` holds the reasons and `Endpoints.unsent` how many calls each stopped endpoint
refused.

Structured output (`structured_output: auto | on` and a request with a `schema`): the request asks
for JSON the schema constrains, first as OpenAI's `response_format` `json_schema` (OpenAI, vLLM),
and where the endpoint refuses that type (an HTTP 4xx/5xx whose message names `response_format` or
`json_schema`; llama-cpp-python answers 500 "Input should be 'text' or 'json_object'") as
llama.cpp's `{"type": "json_object", "schema": ...}`, then (auto) as free text, which the caller
parses as before. A refusal moves the whole `Endpoints` to the next form at once (the refused
request uses one of its call's attempts, but no backoff and nothing toward the breaker). `on` fails
the calls instead of sending free text. `formats_refused` lists what was refused and why.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import json
import logging
import random
import ssl
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import openai

from cube.config.model_spec import ModelSpec
from cube.llm.calls import Request, Response
from cube.llm.concurrency import AdaptiveLimit
from cube.llm.http import httpx_module

log = logging.getLogger("cube.llm")
RETRY_STATUS = frozenset({408, 409, 429})  # plus every 5xx; other 4xx are the caller's fault
BREAKER_STATUS = frozenset(
    {401, 403, 404}
)  # the endpoint, not the request, is wrong: stop sending to it
BREAKER_COOLDOWN_S = 30.0  # a stopped endpoint gets one trial call this long after its stop
POOL_SHARD = 16  # connections per httpx pool (see Endpoints.__init__)
NO_KEY = "EMPTY"  # placeholder key for endpoints without auth (vLLM, Ollama accept it)
FORMATS = ("json_schema", "json_object", "text")  # structured-output forms, tried in this order


def response_format(form: str, schema: dict[str, Any]) -> dict[str, Any] | None:
    """The `response_format` request field of one structured-output form (None: free text)."""
    if form == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": "reply", "schema": schema, "strict": True},
        }
    if (
        form == "json_object"
    ):  # llama.cpp (llama-cpp-python's server): a grammar built from the schema
        return {"type": "json_object", "schema": schema}
    return None


def request_body(spec: ModelSpec, request: Request, form: str = "text") -> dict[str, Any]:
    """The chat-completions body of one call (the live client's and a batch file's), with the
    `response_format` of structured-output `form` when the request has a schema."""
    body: dict[str, Any] = {"model": spec.model, "temperature": spec.temperature}
    for name in ("top_p", "seed"):
        if getattr(spec, name) is not None:
            body[name] = getattr(spec, name)
    if spec.max_tokens is not None:
        body[spec.max_tokens_param] = spec.max_tokens
    body.update(spec.extra_body)
    body["messages"] = list(request.messages)
    if request.schema is not None and (fmt := response_format(form, request.schema)) is not None:
        body["response_format"] = fmt
    return body


def format_refused(status: int, detail: str) -> bool:
    """An error answer that refuses the request's response_format (not the request as a whole)."""
    low = detail.lower()
    return status != 429 and status >= 400 and ("response_format" in low or "json_schema" in low)


@functools.cache
def _http_client() -> tuple[type, int]:
    """(the openai HTTP client class, connections per pool): aiohttp's when installed (one pool
    scales), else httpx's in pools of POOL_SHARD connections (see `Endpoints.__init__`)."""
    import importlib.util

    aio = getattr(
        openai, "DefaultAioHttpClient", None
    )  # openai >= 1.8x; a stub raising without aiohttp
    if aio is not None and (
        importlib.util.find_spec("aiohttp") is None or aio.__name__.startswith("_Missing")
    ):
        aio = None
    return (aio, 1 << 30) if aio is not None else (openai.DefaultAsyncHttpxClient, POOL_SHARD)


def _not_a_timeout(exc: openai.APITimeoutError) -> bool:
    """aiohttp's transport reports a refused or dropped connection as a connect *timeout*; a real
    timeout has a TimeoutError among its causes. Such an error is a connection error, not
    congestion (no AIMD cut), and is named as one ('connection refused')."""
    cause, from_aiohttp = exc.__cause__, False
    for _ in range(10):
        if cause is None or isinstance(cause, TimeoutError):
            return cause is None and from_aiohttp
        from_aiohttp = from_aiohttp or type(cause).__module__.startswith("aiohttp")
        cause = cause.__cause__ or cause.__context__
    return from_aiohttp


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """The TLS context every client shares: httpx's default (its CA bundle), built once per process.
    Each client building its own loaded the CA bundle again (~65 ms of CPU per pool and batch)."""
    return httpx_module().create_ssl_context()


def call_cost(
    spec: ModelSpec, input_tokens: int, output_tokens: int, cached_input_tokens: int = 0
) -> float | None:
    """price_in * (in - cached) / 1e6 + price_cached * cached / 1e6 + price_out * out / 1e6; None
    when the spec sets no price (an unset one of the two prices counts as free).
    `cached_input_tokens` are the input tokens the provider served from its prompt cache, priced at
    `price_cached_input_per_m` (default: the input price)."""
    if spec.price_input_per_m is None and spec.price_output_per_m is None:
        return None
    price_in = spec.price_input_per_m or 0.0
    cached = min(max(cached_input_tokens, 0), input_tokens)
    price_cached = (
        price_in if spec.price_cached_input_per_m is None else spec.price_cached_input_per_m
    )
    return (
        price_in * (input_tokens - cached)
        + price_cached * cached
        + (spec.price_output_per_m or 0.0) * output_tokens
    ) / 1e6


def cached_prompt_tokens(usage: dict) -> int:
    """Prompt tokens the provider served from its prompt cache: OpenAI's
    `usage.prompt_tokens_details.cached_tokens` (vLLM and llama.cpp's server report it the same way
    when they do), DeepSeek's `prompt_cache_hit_tokens`; 0 when not reported."""
    details = usage.get("prompt_tokens_details") or {}
    value = details.get("cached_tokens") if isinstance(details, dict) else None
    if value is None:
        value = usage.get("prompt_cache_hit_tokens")
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError):
        return 0


class MalformedReply(Exception):
    """A 200 answer we cannot use (not JSON, no choices): treated as a transient fault."""


def parse_completion(body: str) -> tuple[str, int, int, str | None, str | None, int]:
    """(text, prompt tokens, completion tokens, finish reason, served model, cached prompt
    tokens)."""
    try:
        data = json.loads(body)
    except ValueError:
        raise MalformedReply(f"not JSON: {body[:80]!r}") from None
    if not isinstance(data, dict) or not data.get("choices"):
        err = data.get("error") if isinstance(data, dict) else None
        raise MalformedReply(f"no choices in the answer{f' (error: {err})' if err else ''}")
    choice = data["choices"][0] if isinstance(data["choices"], list) else None
    content = (choice.get("message") or {}).get("content") if isinstance(choice, dict) else None
    if not isinstance(content, str):
        raise MalformedReply("the first choice has no message content")
    usage = data.get("usage") or {}
    try:
        n_in, n_out = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    except (AttributeError, TypeError, ValueError):
        raise MalformedReply(f"unreadable usage {usage!r}") from None
    return (
        content,
        n_in,
        n_out,
        choice.get("finish_reason"),
        data.get("model"),
        cached_prompt_tokens(usage),
    )


def _retry_after(exc: openai.APIStatusError) -> float | None:
    """Seconds the server asked us to wait (`retry-after-ms`, `Retry-After` seconds or date)."""
    headers = exc.response.headers
    try:
        if headers.get("retry-after-ms"):
            return float(headers["retry-after-ms"]) / 1000
        value = headers.get("retry-after")
        if not value:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            return max(0.0, (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds())
    except (TypeError, ValueError):
        return None


def status_detail(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict) and body.get("message"):
        return str(body["message"])
    return str(exc.message)


def scrub(text: str, secrets: list[str]) -> str:
    """`text` with every secret (API key, secret header values) replaced by ***."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def connection_reason(exc: openai.APIError) -> str:
    """'connection refused', 'host not found' or the client's message with its causes (each cause's
    text once). A connection error aiohttp raised as a timeout (`_not_a_timeout`) is named by its
    causes alone ('Server disconnected'): the client's 'Request timed out.' would be untrue."""
    cause, parts, seen = exc.__cause__, [], set()
    while (
        cause is not None and id(cause) not in seen and sum(map(len, parts)) < 400
    ):  # causes may form a loop
        seen.add(id(cause))
        if str(cause) and str(cause) not in parts:
            parts.append(str(cause))
        cause = cause.__cause__ or cause.__context__
    text = " ".join(parts)
    low = text.lower()
    refused, cause = False, exc.__cause__
    for _ in range(
        10
    ):  # aiohttp's message ("Connect call failed") does not say refused; its errno does
        if cause is None or refused:
            break
        refused = (
            isinstance(cause, ConnectionRefusedError)
            or getattr(cause, "errno", None) == errno.ECONNREFUSED
        )
        cause = cause.__cause__ or cause.__context__
    if refused or "refused" in low or "errno 111" in low:
        return "connection refused"
    if any(
        s in low
        for s in (
            "name or service not known",
            "nodename nor servname",
            "getaddrinfo",
            "name resolution",
        )
    ):
        return "host not found"
    if isinstance(exc, openai.APITimeoutError):  # only reached for aiohttp's dropped connections
        return text[:200] or "connection closed without an answer"
    return f"{exc.message} ({text[:200]})" if text else exc.message


class _Clock:
    """The time one call spends waiting for a concurrency slot (`queue_s`) and holding one
    (`latency_s`: its requests, retries included; the backoff sleeps between them are neither)."""

    def __init__(self) -> None:
        self.queue_s = self.latency_s = 0.0
        self._t, self._holding = time.perf_counter(), False

    def waiting(self) -> None:
        self._t = time.perf_counter()

    def acquired(self) -> None:
        now = time.perf_counter()
        self.queue_s += now - self._t
        self._t, self._holding = now, True

    def released(self) -> None:
        if self._holding:
            now = time.perf_counter()
            self.latency_s += now - self._t
            self._t, self._holding = now, False


class Endpoints:
    """The clients of one batch: one AsyncOpenAI per base URL, a shared concurrency bound,
    least-busy choice of replica (round-robin among equally busy ones), and the retry policy."""

    def __init__(
        self,
        spec: ModelSpec,
        endpoints: list[str],
        api_key: str,
        stopped: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        stopped_at: dict[str, float] | None = None,
        settled: int | None = None,
    ):
        # the API key is passed to the clients and kept only among the values to scrub
        self.spec, self.endpoints = spec, endpoints
        # secret header values (header_env): sent, scrubbed, never stored
        self.headers = dict(headers or {})
        self._secrets = [v for v in (api_key, *self.headers.values()) if v and v != NO_KEY]
        # `settled`: where an earlier batch of this model settled for a flat rate (a one-at-a-time
        # server)
        self.sem = AdaptiveLimit(
            min(spec.min_concurrency, spec.max_concurrency), spec.max_concurrency, settled=settled
        )
        self.busy = dict.fromkeys(endpoints, 0)
        self._next = 0
        # endpoint -> why no more requests go to it (shared by the batches of one model)
        self.stopped: dict[str, str] = stopped if stopped is not None else {}
        # endpoint -> time.monotonic() of its stop or last failed trial (shared like `stopped`)
        self.stopped_at: dict[str, float] = stopped_at if stopped_at is not None else {}
        self.unsent: dict[str, int] = dict.fromkeys(endpoints, 0)  # calls refused after the stop
        self._streak = dict.fromkeys(endpoints, 0)  # consecutive calls that used up their attempts
        self._fails = dict.fromkeys(
            endpoints, 0
        )  # consecutive failed attempts (no answer) since a success
        self._active = 0  # calls that made their first attempt and have not returned
        self._wake = asyncio.Event()  # set when suspicion ends, a stop happens or no call is active
        self._trial: set[str] = set()  # stopped endpoints with their one trial request in flight
        # Connection pools sized to the concurrency, so no request waits for a socket. aiohttp
        # carries the requests when installed (openai's `DefaultAioHttpClient`): about 30 % less CPU
        # per call than httpx. httpx's pool scans every connection of the pool (a readability poll
        # on each idle one) for every request, so one httpx pool of 256 connections cost several ms
        # of CPU per call and capped a client at ~84 calls in flight at 256 (issue 15): without
        # aiohttp, pools of at most POOL_SHARD connections.
        n = spec.max_concurrency
        client_class, shard = _http_client()
        shards = -(-n // shard)
        size = -(-n // shards)
        limits = type(openai.DEFAULT_CONNECTION_LIMITS)(
            max_connections=size, max_keepalive_connections=size
        )
        self.clients = {
            ep: [
                openai.AsyncOpenAI(
                    api_key=api_key,
                    base_url=ep,
                    timeout=spec.timeout_s,
                    max_retries=0,  # we own retries
                    default_headers=self.headers or None,
                    http_client=client_class(
                        limits=limits, timeout=spec.timeout_s, verify=_ssl_context()
                    ),
                )
                for _ in range(shards)
            ]
            for ep in endpoints
        }
        self._shard_busy = {ep: [0] * shards for ep in endpoints}
        # structured output: the form sent now (FORMATS), and the forms the endpoint refused -> why
        self.format = FORMATS[0] if spec.structured_output != "off" else "text"
        self.formats_refused: dict[str, str] = {}

    async def close(self) -> None:
        for shards in self.clients.values():
            for client in shards:
                await client.close()

    def _form(self, request: Request) -> str:
        return self.format if request.schema is not None else "text"

    def _refuse_format(self, form: str, detail: str) -> None:
        """The endpoint refused `form`: later requests use the next form (once, however many calls
        saw the refusal at the same time)."""
        if form == self.format and form != "text":
            self.formats_refused[form] = self._scrub(detail)[:200]
            self.format = FORMATS[FORMATS.index(form) + 1]
            if self.format == "text" and self.spec.structured_output == "on":
                self.format = "refused"
            log.warning(
                "%s: the endpoint refused response_format %s (%s); next: %s",
                self.spec.model,
                form,
                self.formats_refused[form][:80],
                self.format,
            )

    async def _post(self, ep: str, request: Request, form: str = "text") -> str:
        """POST the chat completion through the least busy connection pool of `ep` (never more in
        flight than its size, as the calls in flight never exceed `max_concurrency`)."""
        busy = self._shard_busy[ep]
        shard = busy.index(min(busy))
        busy[shard] += 1
        try:
            return await self.clients[ep][shard].post(
                "/chat/completions", body=request_body(self.spec, request, form), cast_to=str
            )
        finally:
            busy[shard] -= 1

    def _pick(self) -> str | None:
        """The least busy endpoint that is not stopped; when every one is, a stopped one whose
        cool-down is over and that has no trial in flight (its trial call); None otherwise."""
        n = len(self.endpoints)
        start, self._next = self._next, (self._next + 1) % n
        order = [self.endpoints[(start + i) % n] for i in range(n)]
        live = [e for e in order if e not in self.stopped]
        if live:
            return min(live, key=self.busy.__getitem__)
        now = time.monotonic()
        for ep in order:
            if ep not in self._trial and now - self.stopped_at.get(ep, now) >= BREAKER_COOLDOWN_S:
                self._trial.add(ep)
                log.debug("%s: trial call to stopped %s after its cool-down", self.spec.model, ep)
                return ep
        return None

    def _stop(self, ep: str, reason: str) -> None:
        if ep not in self.stopped and self.spec.breaker_threshold:
            self.stopped[ep] = self._scrub(reason)[:300]
            self.stopped_at[ep] = time.monotonic()
            self._wake.set()
            log.debug("%s: stopped sending to %s: %s", self.spec.model, ep, self.stopped[ep])

    def _suspect(self) -> bool:
        """Every endpoint still sending has failed `breaker_threshold` attempts in a row without
        an answer: hold new calls back until the calls already retrying show whether it is a
        brief outage (one answers: go on) or a dead endpoint (they use up their attempts: stop)."""
        t = self.spec.breaker_threshold
        live = [e for e in self.endpoints if e not in self.stopped]
        return bool(t and live) and all(self._fails[e] >= t for e in live)

    def _no_answer(self, ep: str) -> None:
        """An attempt got no usable answer (connection error, timeout, malformed reply)."""
        self._fails[ep] += 1

    async def call(self, request: Request) -> Response:
        """One call with its retries. While the endpoint is suspect (see `_suspect`), a call that
        has not sent anything yet waits for the calls in progress to settle, so a dead endpoint
        costs the attempts of the calls already started, not `max_attempts` attempts of every
        pending call, and a brief outage costs a short pause."""
        state = {"started": False}
        try:
            return await self._call(request, state)
        finally:
            if state["started"]:
                self._active -= 1
                if self._active == 0:
                    self._wake.set()

    @contextlib.asynccontextmanager
    async def _slot(self, state: dict[str, bool]) -> AsyncIterator[int]:
        """A concurrency slot for one attempt (yields its sequence number for
        `AdaptiveLimit.congested`); a call's first attempt also passes the suspicion gate."""
        while True:
            seq = await self.sem.acquire()
            if state["started"] or not (self._suspect() and self._active > 0):
                break
            await self.sem.release()
            self._wake.clear()
            await self._wake.wait()
        if not state["started"]:
            state["started"] = True
            self._active += 1
        try:
            yield seq
        finally:
            await self.sem.release()

    def _healthy(self, ep: str) -> None:
        self._streak[ep] = 0
        if self._fails[ep]:
            self._fails[ep] = 0
            self._wake.set()
        if ep in self._trial:  # the trial after the cool-down went through: resume the endpoint
            self._trial.discard(ep)
            self.stopped.pop(ep, None)
            self.stopped_at.pop(ep, None)
            log.info("%s: %s answers again; resumed sending to it", self.spec.model, ep)

    def _attempt_failed(self, ep: str) -> None:
        """Any failed attempt: a failed trial re-arms the cool-down of its stopped endpoint."""
        if ep in self._trial:
            self._trial.discard(ep)
            self.stopped_at[ep] = time.monotonic()

    def _exhausted(self, ep: str, label: str, detail: str) -> None:
        """A call used up all its attempts on connection errors, timeouts or unusable answers:
        `breaker_threshold` such calls in a row stop the endpoint (scattered or brief faults,
        which retries get through, never do)."""
        self._streak[ep] += 1
        if self.spec.breaker_threshold and self._streak[ep] >= self.spec.breaker_threshold:
            n, a = self._streak[ep], self.spec.max_attempts
            self._stop(
                ep,
                f"{n} call{'s' * (n > 1)} in a row failed all {a} attempt{'s' * (a > 1)}: "
                f"{label}: {detail}",
            )

    def _unsent(self, attempts: int, t0: _Clock, ep: str) -> Response:
        """A call refused because every endpoint is stopped: failed with the stop reason, no
        request."""
        stopped = ep if ep in self.stopped else next(iter(self.stopped))
        self.unsent[stopped] += attempts == 0
        verb = (
            "not sent"
            if attempts == 0
            else f"not retried after {attempts} attempt{'s' * (attempts > 1)}"
        )
        return self._failure(
            f"{verb}: endpoint stopped after {self.stopped[stopped]}",
            attempts,
            t0,
            stopped,
            quiet=True,
        )

    def _scrub(self, text: str) -> str:
        return scrub(text, self._secrets)

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        cap = self.spec.backoff_max_s
        if retry_after is not None:
            return min(retry_after, cap)
        base = min(cap, self.spec.backoff_base_s * 2 ** (attempt - 1))
        return base / 2 + random.uniform(
            0, base / 2
        )  # "equal jitter": spread retries, keep a floor

    async def _call(self, request: Request, state: dict[str, bool]) -> Response:
        spec, t0 = self.spec, _Clock()
        label, detail, ep = "", "", self.endpoints[0]
        for attempt in range(1, spec.max_attempts + 1):
            retry_after = None
            t0.waiting()
            # the slot is held only while a request is in flight, not while backing off
            async with self._slot(state) as seq:
                t0.acquired()
                # read with the slot held: a refusal seen meanwhile counts
                form = self._form(request)
                if form == "refused":
                    return self._failure(
                        f"not sent: structured_output is on and the endpoint refused every "
                        f"structured form ({'; '.join(self.formats_refused.values())})",
                        attempt - 1,
                        t0,
                        ep,
                        quiet=True,
                    )
                picked = self._pick()
                if picked is None:
                    return self._unsent(attempt - 1, t0, ep)
                ep = picked
                self.busy[ep] += 1
                try:
                    # The documented raw route (`post`, cast_to=str): the same HTTP call as
                    # `chat.completions.create` without its per-call param transform and model
                    # parsing, which cost more CPU than the rest of a call; we parse the body.
                    body = await self._post(ep, request, form)
                    return self._answer(request, body, form, attempt, t0, ep)
                except MalformedReply as exc:
                    label, detail = "malformed response", str(exc)
                    self._attempt_failed(ep)
                    self._no_answer(ep)
                except openai.APITimeoutError as exc:
                    label, detail = self._timed_out(exc, seq)
                    self._attempt_failed(ep)
                    self._no_answer(ep)
                except openai.APIConnectionError as exc:
                    label, detail = "connection error", connection_reason(exc)
                    self._attempt_failed(ep)
                    self._no_answer(ep)
                except openai.APIStatusError as exc:
                    label, detail = f"HTTP {exc.status_code}", status_detail(exc)
                    self._attempt_failed(ep)
                    if form != "text" and format_refused(exc.status_code, detail):
                        self._refuse_format(form, detail)
                        # the next form at once: a refused form is no fault of the endpoint
                        continue
                    if exc.status_code not in RETRY_STATUS and exc.status_code < 500:
                        reason = f"{label} (not retried): {detail}"
                        if exc.status_code in BREAKER_STATUS:
                            self._stop(ep, reason)
                        return self._failure(reason, attempt, t0, ep)
                    if exc.status_code == 429:
                        self.sem.congested(seq, "http_429")
                    retry_after = _retry_after(exc)  # 429 and 5xx: the server says it is busy or
                    # hiccuped, which retries are for; neither counts toward nor resets the streak
                except openai.OpenAIError as exc:  # anything else the client raises: not transient
                    self._attempt_failed(ep)
                    return self._failure(
                        f"{type(exc).__name__} (not retried): {exc}", attempt, t0, ep
                    )
                finally:
                    self.busy[ep] -= 1
                    t0.released()
            if attempt < spec.max_attempts:
                wait = self._delay(attempt, retry_after)
                log.debug(
                    "%s: %s on attempt %d; retrying in %.2f s", spec.model, label, attempt, wait
                )
                await asyncio.sleep(wait)
        n = spec.max_attempts
        # connection error, timeout, unusable answer: the endpoint's fault
        if not label.startswith("HTTP "):
            self._exhausted(ep, label, detail)
        return self._failure(f"{label} after {n} attempt{'s' * (n > 1)}: {detail}", n, t0, ep)

    def _timed_out(self, exc: openai.APITimeoutError, seq: int) -> tuple[str, str]:
        """(label, detail) of a timeout raised by the client: a connection error in disguise, or
        a real timeout, which tells the concurrency bound the server is congested."""
        if _not_a_timeout(exc):
            return "connection error", connection_reason(exc)
        self.sem.congested(seq, "timeouts")
        return "timeout", f"no answer within {self.spec.timeout_s:g} s"

    def _answer(
        self, request: Request, body: str, form: str, attempt: int, t0: _Clock, ep: str
    ) -> Response:
        """The Response of a call answered on `attempt` (raises MalformedReply on an unusable
        body): the endpoint counts as healthy and the concurrency bound may grow."""
        spec = self.spec
        text, n_in, n_out, finish, served, n_cached = parse_completion(body)
        self._healthy(ep)
        self.sem.success()
        t0.released()
        return Response(
            text=text,
            input_tokens=n_in,
            output_tokens=n_out,
            cached_input_tokens=n_cached,
            cost=call_cost(spec, n_in, n_out, n_cached),
            latency_s=t0.latency_s,
            queue_s=t0.queue_s,
            attempts=attempt,
            model=spec.model,
            endpoint=ep,
            detail={
                "finish_reason": finish,
                "served_model": served,
                **({"response_format": form} if request.schema is not None else {}),
            },
        )

    def _failure(
        self, reason: str, attempts: int, t0: _Clock, ep: str, quiet: bool = False
    ) -> Response:
        t0.released()
        reason = self._scrub(reason)[:500]
        if not quiet:
            log.info("%s: call failed: %s", self.spec.model, reason)
        return Response(
            text=None,
            error=reason,
            cost=call_cost(self.spec, 0, 0),
            latency_s=t0.latency_s,
            queue_s=t0.queue_s,
            attempts=attempts,
            model=self.spec.model,
            endpoint=ep,
        )
