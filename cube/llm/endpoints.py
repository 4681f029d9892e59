"""HTTP to OpenAI-compatible endpoints: one call with its retries, and how it ends.

`Endpoints.call(request)` sends one call to the least busy replica that the circuit breaker lets
through, retrying 408, 409, 429, 5xx, timeouts, connection errors and unusable 200 answers with
exponential backoff and jitter (honouring Retry-After, capped by `backoff_max_s`); other 4xx fail
at once. A failure is a `Response` whose `error` says why, with the API key scrubbed from it.
Every request goes through the transport limits of `cube.llm.transport` (no redirect followed
unless `follow_redirects`, at most `max_reply_bytes`, `timeout_s` for the whole attempt) and every
usable reply is read through `cube.llm.replies.ReplyGuard` (the secrets redacted, nesting bounded,
strings capped: `detail["truncated"]` counts the strings cut).

The ideas it composes, one module each:

    wire         the wire format: the request body and the reading of the reply (ChatCompletions),
                 and the structured-output fallback (FormatFallback)
    retry        retry classification as a table: status / exception -> retry or not, reason label,
                 breaker and concurrency signals; the backoff
    breaker      the circuit breaker (Breaker owns its state: stops, cool-downs, trials, suspicion)
    pool         the endpoint pool: pooled clients per endpoint, least-busy choice
    concurrency  AdaptiveLimit, the calls in flight (AIMD on 429s and timeouts)
    learned_limit  LimitStore, the limit an earlier run learned of the endpoint (its start)

`Endpoints.stopped` holds the reasons endpoints were stopped and `Endpoints.unsent` how many calls
each stopped endpoint refused; `formats_refused` lists the structured-output forms refused and why.
A refused form moves the whole `Endpoints` to the next form at once (the refused request uses one
of its call's attempts, but no backoff and nothing toward the breaker).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from cube.config.model_spec import ModelSpec
from cube.llm.breaker import BREAKER_COOLDOWN_S as BREAKER_COOLDOWN_S
from cube.llm.breaker import Breaker
from cube.llm.calls import Request, Response
from cube.llm.concurrency import AdaptiveLimit
from cube.llm.learned_limit import LimitStore
from cube.llm.pool import POOL_SHARD as POOL_SHARD
from cube.llm.pool import Pool
from cube.llm.replies import ReplyGuard
from cube.llm.retry import BREAKER_STATUS as BREAKER_STATUS
from cube.llm.retry import RETRY_STATUS as RETRY_STATUS
from cube.llm.retry import Fault, backoff_delay, classify, scrub
from cube.llm.retry import connection_reason as connection_reason
from cube.llm.retry import status_detail as status_detail
from cube.llm.transport import Limits
from cube.llm.wire import CHAT, FormatFallback, MalformedReply, format_refused
from cube.llm.wire import FORMATS as FORMATS
from cube.llm.wire import NO_KEY as NO_KEY
from cube.llm.wire import cached_prompt_tokens as cached_prompt_tokens
from cube.llm.wire import parse_completion as parse_completion
from cube.llm.wire import request_body as request_body
from cube.llm.wire import response_format as response_format

log = logging.getLogger("cube.llm")

__all__ = [
    "BREAKER_COOLDOWN_S",
    "BREAKER_STATUS",
    "FORMATS",
    "NO_KEY",
    "POOL_SHARD",
    "RETRY_STATUS",
    "Endpoints",
    "MalformedReply",
    "cached_prompt_tokens",
    "call_cost",
    "connection_reason",
    "parse_completion",
    "request_body",
    "response_format",
    "scrub",
    "status_detail",
]


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
    """The calls of one batch: a shared concurrency bound, the pool of clients, the breaker and
    the retry policy, over the wire format `wire` (OpenAI's chat completions by default)."""

    def __init__(
        self,
        spec: ModelSpec,
        endpoints: list[str],
        api_key: str,
        stopped: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        stopped_at: dict[str, float] | None = None,
        settled: int | None = None,
        wire: Any = CHAT,
        store: LimitStore | None = None,
    ):
        # the API key is passed to the clients and kept only among the values to scrub
        self.spec, self.endpoints, self.wire = spec, endpoints, wire
        # secret header values (header_env): sent, scrubbed, never stored
        self.headers = dict(headers or {})
        self._secrets = [v for v in (api_key, *self.headers.values()) if v and v != NO_KEY]
        # `settled`: where an earlier batch of this model settled for a flat rate (a one-at-a-time
        # server); else what an earlier run learned of the endpoint (`store`, beside the cache)
        self.store = store
        learned = store.read(spec.model, endpoints) if store and settled is None else None
        self.sem = AdaptiveLimit(
            min(spec.min_concurrency, spec.max_concurrency),
            spec.max_concurrency,
            settled=settled,
            learned=learned,
        )
        self.breaker = Breaker(
            spec.model,
            endpoints,
            spec.breaker_threshold,
            spec.max_attempts,
            self._scrub,
            stopped,
            stopped_at,
        )
        self.stopped, self.stopped_at = self.breaker.stopped, self.breaker.stopped_at
        self.unsent = self.breaker.unsent
        self.limits = Limits(
            timeout_s=spec.timeout_s,
            max_reply_bytes=spec.max_reply_bytes,
            follow_redirects=spec.follow_redirects,
            secret_headers=frozenset(self.headers),
            secret_values=tuple(self._secrets),
        )
        self.guard = ReplyGuard(self._secrets)  # replies read with the secrets redacted
        self.pool = Pool(endpoints, api_key, self.headers, self.limits, spec.max_concurrency)
        self.busy = self.pool.busy
        self.fallback = FormatFallback(spec, self._scrub)

    @property
    def format(self) -> str:
        """The structured-output form sent now (`cube.llm.wire.FORMATS`, or "refused")."""
        return self.fallback.format

    @property
    def formats_refused(self) -> dict[str, str]:
        return self.fallback.refused

    async def close(self) -> None:
        """Close the clients; what the limit learned goes to the store for the next run."""
        await self.pool.close()
        if self.store is not None:
            self.store.write(self.spec.model, self.endpoints, self.sem.learned())

    def _scrub(self, text: str) -> str:
        return scrub(text, self._secrets)

    def _pick(self) -> str | None:
        """The least busy endpoint that is not stopped; when every one is, a stopped one whose
        cool-down is over and that has no trial in flight (its trial call); None otherwise."""
        order = self.pool.rotation()
        live = self.breaker.ready(order)  # a replica under a death check only when all are
        return self.pool.least_busy(live) if live else self.breaker.trial(order)

    async def call(self, request: Request) -> Response:
        """One call with its retries. While the endpoint is suspect (`Breaker.suspect`), a call
        that has not sent anything yet waits for the calls in progress to settle."""
        state = {"started": False}
        try:
            return await self._call(request, state)
        finally:
            if state["started"]:
                self.breaker.finished()

    @contextlib.asynccontextmanager
    async def _slot(self, state: dict[str, bool]) -> AsyncIterator[int]:
        """A concurrency slot for one attempt (yields its sequence number for
        `AdaptiveLimit.congested`); a call's first attempt also passes the suspicion gate, and
        every attempt waits out a death check of the endpoints (`Breaker.checked`)."""
        while True:
            seq = await self.sem.acquire()
            # not to a server whose death is being checked (asked with the slot held: a check
            # started while this call waited for the slot counts)
            checking = self.breaker.checking()
            if not checking and not self.breaker.holds_back(state["started"]):
                break
            await self.sem.release()
            await (self.breaker.checked() if checking else self.breaker.wait())
        if not state["started"]:
            state["started"] = True
            self.breaker.started()
        try:
            yield seq
        finally:
            await self.sem.release()

    async def _call(self, request: Request, state: dict[str, bool]) -> Response:
        spec, t0 = self.spec, _Clock()
        fault, ep = None, self.endpoints[0]
        for attempt in range(1, spec.max_attempts + 1):
            t0.waiting()
            # the slot is held only while a request is in flight, not while backing off
            async with self._slot(state) as seq:
                t0.acquired()
                # read with the slot held: a refusal seen meanwhile counts
                form = self.fallback.form(request)
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
                    reason, ep = self.breaker.unsent_reason(attempt - 1, ep)
                    return self._failure(reason, attempt - 1, t0, ep, quiet=True)
                ep = picked
                outcome = await self._attempt(request, form, attempt, t0, ep, seq)
            if isinstance(outcome, Response):
                return outcome
            fault = outcome
            if fault.at_once:  # a refused structured form: the next form at once
                continue
            await self.breaker.settle(ep)  # a refusal may have started its death check
            if ep in self.stopped:  # stopped (dead, or a 401): no backoff, another or none at once
                continue
            if attempt < spec.max_attempts:
                wait = backoff_delay(spec, attempt, fault.retry_after)
                log.debug(
                    "%s: %s on attempt %d; retrying in %.2f s",
                    spec.model,
                    fault.label,
                    attempt,
                    wait,
                )
                await asyncio.sleep(wait)
        n = spec.max_attempts
        assert fault is not None  # max_attempts >= 1: every path above returned or set it
        if fault.no_answer:  # connection error, timeout, unusable answer: the endpoint's fault
            self.breaker.exhausted(ep, fault.label, fault.detail)
        return self._failure(fault.after(n), n, t0, ep)

    async def _attempt(
        self, request: Request, form: str, attempt: int, t0: _Clock, ep: str, seq: int
    ) -> Response | Fault:
        """One request to `ep`: its Response (answered, or failed for good) or the Fault to retry
        after (`at_once` when the endpoint refused the structured form)."""
        self.busy[ep] += 1
        try:
            body = await self.pool.send(
                ep, lambda client: self.wire.send(client, self.spec, request, form)
            )
            return self._answer(request, body, form, attempt, t0, ep)
        except Exception as exc:  # classify() raises again what no table row covers
            fault = classify(exc, self.spec.timeout_s)
            # an error body may echo a key too (a 401 or 422 quoting the request's headers): the
            # detail is stored as the call's error and shown, so the secrets go first
            fault = dataclasses.replace(fault, detail=self.guard.redact(fault.detail))
        finally:
            self.busy[ep] -= 1
            t0.released()
        self.breaker.attempt_failed(ep)
        if fault.no_answer:
            self.breaker.no_answer(ep, fault.detail)
        if fault.congestion:
            self.sem.congested(seq, fault.congestion)
        if (
            fault.status is not None
            and form != "text"
            and format_refused(fault.status, fault.detail)
        ):
            self.fallback.refuse(form, fault.detail)
            # no fault of the endpoint: no backoff, nothing toward the breaker
            return dataclasses.replace(fault, at_once=True)
        if not fault.retry:
            if fault.stop:
                self.breaker.stop(ep, fault.not_retried())
            return self._failure(fault.not_retried(), attempt, t0, ep)
        return fault

    def _answer(
        self, request: Request, body: str, form: str, attempt: int, t0: _Clock, ep: str
    ) -> Response:
        """The Response of a call answered on `attempt` (raises MalformedReply on an unusable
        body): the endpoint counts as healthy and the concurrency bound may grow."""
        spec = self.spec
        reply = self.wire.read(body, self.guard)
        self.breaker.healthy(ep)
        self.sem.success()
        t0.released()
        n_in, n_out, n_cached = reply.input_tokens, reply.output_tokens, reply.cached_input_tokens
        return Response(
            text=reply.text,
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
                "finish_reason": reply.finish_reason,
                "served_model": reply.served_model,
                **({"truncated": n} if (n := (reply.notes or {}).get("truncated")) else {}),
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
