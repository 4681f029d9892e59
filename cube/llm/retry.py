"""Retry classification: what a failed attempt says about the request and the endpoint.

`classify(exc, timeout_s)` turns what the client raised into a `Fault`: its reason label ("HTTP
500", "timeout", "connection error", "malformed response"), its detail, whether another attempt
may get through, and what it tells the circuit breaker and the concurrency bound. The rules are
two tables, read top to bottom, first match wins:

`STATUS_TABLE` (an HTTP error answer):

    status           retry  breaker        concurrency   why
    429              yes    -              cut           rate limited (Retry-After honoured)
    408, 409         yes    -              -             request timeout, conflict: transient
    5xx              yes    -              -             the server hiccuped
    401, 403, 404    no     stop at once   -             bad key, no access, unknown model or URL
    other 4xx        no     -              -             the request itself is wrong

`EXCEPTION_TABLE` (no usable answer at all; each counts toward the breaker's streak):

    exception                         retry  label               concurrency
    MalformedReply                    yes    malformed response  -
    openai.APITimeoutError            yes    timeout             cut (a real timeout only)
    openai.APIConnectionError         yes    connection error    -
    any other openai.OpenAIError      no     its type name       -

A transport limit (`cube.llm.transport.TransportLimit`, found among the causes) comes first: a
redirect not followed, a reply too large or in an unknown encoding fail at once; a missed
deadline is the timeout it is ("timeout after 1 attempt: no answer within 5 s
(deadline: timeout_s bounds the whole request)").

aiohttp's transport reports a refused or dropped connection as a connect *timeout*
(`not_a_timeout`): such a timeout is classified as the connection error it is, named by its causes
and without a concurrency cut. `backoff_delay` is the wait before the next attempt: the server's
Retry-After when it gave one, else exponential backoff with "equal jitter", both capped by
`backoff_max_s`.
"""

from __future__ import annotations

import errno
import random
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import openai

from cube.config.model_spec import ModelSpec
from cube.llm.replies import REDACTED
from cube.llm.transport import TransportLimit, limit_in
from cube.llm.wire import MalformedReply

RETRY_STATUS = frozenset({408, 409, 429})  # plus every 5xx; other 4xx are the caller's fault
BREAKER_STATUS = frozenset({401, 403, 404})  # the endpoint, not the request, is wrong


@dataclass(frozen=True)
class StatusRule:
    """One row of `STATUS_TABLE`: the statuses it covers and how their attempt is handled."""

    statuses: frozenset[int] | range
    retry: bool
    stop: bool = False  # the breaker stops the endpoint at once
    congestion: str | None = None  # the AdaptiveLimit cut reason it reports


STATUS_TABLE: tuple[StatusRule, ...] = (
    StatusRule(frozenset({429}), retry=True, congestion="http_429"),
    StatusRule(RETRY_STATUS - {429}, retry=True),
    StatusRule(range(500, 1000), retry=True),
    StatusRule(BREAKER_STATUS, retry=False, stop=True),
    StatusRule(range(0, 500), retry=False),
)


@dataclass(frozen=True)
class ExceptionRule:
    """One row of `EXCEPTION_TABLE`: an exception type without an HTTP status."""

    kind: type[BaseException]
    label: str  # "" : the exception's type name
    retry: bool
    no_answer: bool  # the endpoint gave no usable answer: counts toward the breaker


EXCEPTION_TABLE: tuple[ExceptionRule, ...] = (
    ExceptionRule(MalformedReply, "malformed response", retry=True, no_answer=True),
    ExceptionRule(openai.APITimeoutError, "timeout", retry=True, no_answer=True),
    ExceptionRule(openai.APIConnectionError, "connection error", retry=True, no_answer=True),
    ExceptionRule(openai.OpenAIError, "", retry=False, no_answer=False),
)


@dataclass(frozen=True)
class Fault:
    """How one failed attempt is handled (see the module's tables)."""

    label: str
    detail: str
    retry: bool
    stop: bool = False
    no_answer: bool = False
    congestion: str | None = None
    retry_after: float | None = None
    status: int | None = None
    at_once: bool = False  # retry without backoff (the endpoint refused a structured form)

    def not_retried(self) -> str:
        """The call's failure reason when this fault ends it at once."""
        return f"{self.label} (not retried): {self.detail}"

    def after(self, attempts: int) -> str:
        """The call's failure reason when its last attempt, of `attempts`, ended on this fault."""
        return f"{self.label} after {attempts} attempt{'s' * (attempts > 1)}: {self.detail}"


def status_rule(status: int) -> StatusRule:
    """The first row of `STATUS_TABLE` covering `status`."""
    for rule in STATUS_TABLE:
        if status in rule.statuses:
            return rule
    return StatusRule(frozenset({status}), retry=False)


def classify(exc: BaseException, timeout_s: float) -> Fault:
    """The `Fault` of one failed attempt; raises `exc` again when no table covers it (a bug of
    ours, not the endpoint's)."""
    if (limit := limit_in(exc)) is not None:  # a transport limit (the client wraps it)
        return _limit_fault(limit)
    if isinstance(exc, openai.APIStatusError):
        return _status_fault(exc)
    if isinstance(exc, openai.APITimeoutError):
        return _timeout_fault(exc, timeout_s)
    fault = _table_fault(exc)
    if fault is None:
        raise exc
    return fault


def _limit_fault(limit: TransportLimit) -> Fault:
    """A transport limit's fault: retried (as no answer) when the limit says so; a timeout is
    congestion."""
    return Fault(
        limit.label,
        limit.detail,
        limit.retry,
        no_answer=limit.retry,
        congestion="timeouts" if limit.label == "timeout" else None,
    )


def _status_fault(exc: openai.APIStatusError) -> Fault:
    """An HTTP status's fault, by `STATUS_TABLE` (the server's Retry-After when it is retried)."""
    rule = status_rule(exc.status_code)
    return Fault(
        f"HTTP {exc.status_code}",
        status_detail(exc),
        rule.retry,
        stop=rule.stop,
        congestion=rule.congestion,
        retry_after=retry_after(exc) if rule.retry else None,
        status=exc.status_code,
    )


def _timeout_fault(exc: openai.APITimeoutError, timeout_s: float) -> Fault:
    """A timeout (congestion), or a connection error reported as one (`not_a_timeout`)."""
    if not_a_timeout(exc):
        return Fault("connection error", connection_reason(exc), True, no_answer=True)
    return Fault(
        "timeout",
        f"no answer within {timeout_s:g} s",
        True,
        no_answer=True,
        congestion="timeouts",
    )


def _table_fault(exc: BaseException) -> Fault | None:
    """The fault of the first `EXCEPTION_TABLE` row covering `exc`; None when none does."""
    for row in EXCEPTION_TABLE:
        if isinstance(exc, row.kind):
            detail = connection_reason(exc) if row.kind is openai.APIConnectionError else str(exc)
            return Fault(
                row.label or type(exc).__name__, detail, row.retry, no_answer=row.no_answer
            )
    return None


def backoff_delay(spec: ModelSpec, attempt: int, retry_after_s: float | None) -> float:
    """Seconds to wait after failed `attempt` (1-based): the server's Retry-After when given, else
    `backoff_base_s * 2**(attempt-1)` with "equal jitter" (spread retries, keep a floor); both
    capped by `backoff_max_s`."""
    cap = spec.backoff_max_s
    if retry_after_s is not None:
        return min(retry_after_s, cap)
    base = min(cap, spec.backoff_base_s * 2 ** (attempt - 1))
    return base / 2 + random.uniform(0, base / 2)


def not_a_timeout(exc: openai.APITimeoutError) -> bool:
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


def retry_after(exc: openai.APIStatusError) -> float | None:
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


STATUS_DETAIL_CHARS = 4000  # an error body kept for its reason (callers redact, then cut)


def status_detail(exc: openai.APIStatusError) -> str:
    """What an error answer says: its JSON `message` (OpenAI's shape), else its `detail`
    (FastAPI's), else its text; the client's 'Error code: 500' when it says nothing."""
    body = exc.body
    if isinstance(body, dict):
        for key in ("message", "detail"):
            if body.get(key):
                return str(body[key])
    if isinstance(body, str) and body.strip():
        # cut long, not short: every caller redacts the run's secrets from this text before it
        # cuts it to what it shows (a key straddling a short cut would survive as a prefix)
        return body.strip()[:STATUS_DETAIL_CHARS]
    return str(exc.message)


def scrub(text: str, secrets: list[str]) -> str:
    """`text` with every secret (API key, secret header values) replaced by the one mark of a
    redaction, `cube.llm.replies.REDACTED` (also a reply's)."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return text


def _refused(exc: BaseException) -> bool:
    """A ConnectionRefusedError (or errno ECONNREFUSED) among the causes: aiohttp's message
    ("Connect call failed") does not say refused; its errno does."""
    cause = exc.__cause__
    for _ in range(10):
        if cause is None:
            return False
        if (
            isinstance(cause, ConnectionRefusedError)
            or getattr(cause, "errno", None) == errno.ECONNREFUSED
        ):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def _causes(exc: BaseException) -> str:
    """Each cause's text once, in order (causes may form a loop)."""
    cause, parts, seen = exc.__cause__, [], set()
    while cause is not None and id(cause) not in seen and sum(map(len, parts)) < 400:
        seen.add(id(cause))
        if str(cause) and str(cause) not in parts:
            parts.append(str(cause))
        cause = cause.__cause__ or cause.__context__
    return " ".join(parts)


def connection_reason(exc: openai.APIError) -> str:
    """'connection refused', 'host not found' or the client's message with its causes (each cause's
    text once). A connection error aiohttp raised as a timeout (`not_a_timeout`) is named by its
    causes alone ('Server disconnected'): the client's 'Request timed out.' would be untrue."""
    text = _causes(exc)
    low = text.lower()
    if _refused(exc) or "refused" in low or "errno 111" in low:
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
