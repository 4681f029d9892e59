"""Preflight: what a run needs from the outside world, checked before any stage runs.

    check_keys(params) -> list[str]                 every key variable the run needs and lacks
    check_endpoints(params, timeout_s=10) -> list[str]  one tiny request per distinct LLM endpoint
                                                         (5xx and timeouts retried)

Each returned line names who uses it (judge / answerer / question generator / system), the
model, the endpoint without credentials, and the reason ("unauthorised (HTTP 401)",
"connection refused", "unknown model (HTTP 404)", "empty choices", "timeout"). An empty list
means the check passed. Offline models need neither keys nor endpoints and are skipped. A 5xx
(or 408, 409) answer or a timeout is retried as a normal call retries it (the retry table of
`cube.llm.retry`, the model's `max_attempts` and backoff), so one hiccup of a flaky endpoint does
not stop the run; the reason of an endpoint that failed them all says so ("HTTP 500: ... (all 5
attempts failed)").
`cube validate` checks keys (and endpoints with `--check-endpoints`); `cube run` checks both
at its start when the params use LLM models, so a dead or unauthorised endpoint fails in
seconds instead of after stages 00-02 and hundreds of failed calls.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field

import openai

from cube.config.model_spec import ModelSpec, redact_url
from cube.config.params import Params
from cube.llm.pool import make_client
from cube.llm.replies import ReplyGuard
from cube.llm.retry import (
    Fault,
    backoff_delay,
    classify,
    connection_reason,
    not_a_timeout,
    scrub,
    status_detail,
)
from cube.llm.transport import Limits, TransportLimit, limit_in
from cube.llm.wire import NO_KEY, MalformedReply, parse_completion


@dataclass
class _Use:
    """One model spec and every place of the params that uses it."""

    spec: ModelSpec
    users: list[str] = field(default_factory=list)


def model_uses(params: Params) -> list[_Use]:
    """The LLM (`provider: openai`) specs a run would call, each with the places using it."""
    refs: list[tuple[str, object]] = []
    if params.questions.generator == "llm" and params.questions.model is not None:
        refs.append(("question generator", params.questions.model))
    for s in params.systems:
        refs.append((f"system '{s.name}' answerer", params.system_answerer(s)))
    refs += [(f"judge '{j.name}'", j.model) for j in params.judges]
    uses: dict[str, _Use] = {}
    for who, ref in refs:
        spec = params.model(ref)  # type: ignore[arg-type]
        if spec.provider != "openai":
            continue
        key = spec.model_dump_json()
        uses.setdefault(key, _Use(spec)).users.append(who)
    return list(uses.values())


def uses_llm(params: Params) -> bool:
    """True when the run would call an LLM endpoint (then `cube run` checks endpoints first)."""
    return bool(model_uses(params))


def check_keys(params: Params) -> list[str]:
    """One line per key variable the run needs that is unset or empty (all of them at once)."""
    need: dict[tuple[str, str], list[str]] = {}  # (variable, params key) -> users
    for use in model_uses(params):
        vars_ = [(use.spec.api_key_env, "api_key_env")] + [
            (v, "header_env") for v in use.spec.header_env.values()
        ]
        for var, where in vars_:
            if var:
                need.setdefault((var, where), []).extend(
                    f"{w} (model {use.spec.model})" for w in use.users
                )
    for s in params.systems:  # each kind says which secrets its entry reads
        envs = getattr(s, "secret_envs", None)
        for var, where, who in envs() if envs is not None else []:
            need.setdefault((var, where), []).append(f"system '{s.name}' ({who})")
    return [
        f"environment variable {var} ({where}) is not set or empty; needed by "
        f"{', '.join(dict.fromkeys(users))}; export {var}=<your "
        f"{'API key' if where == 'api_key_env' else 'header value'}>"
        for (var, where), users in need.items()
        if not os.environ.get(var)
    ]


def _reason(exc: BaseException, timeout_s: float, secrets: list[str]) -> str:
    if (limit := limit_in(exc)) is not None and limit.label != "timeout":
        return str(limit)  # a redirect not followed, a reply too large, ...
    if limit is not None:  # the deadline of the whole request
        return f"timeout (no answer within {timeout_s:g} s)"
    if isinstance(exc, openai.APITimeoutError) and not_a_timeout(exc):
        return connection_reason(exc)  # aiohttp names a refused connection a connect timeout
    if isinstance(exc, TimeoutError | openai.APITimeoutError):
        return f"timeout (no answer within {timeout_s:g} s)"
    if isinstance(exc, openai.APIConnectionError):
        return connection_reason(exc)
    if isinstance(exc, openai.APIStatusError):
        code, detail = exc.status_code, scrub(status_detail(exc), secrets)[:200]
        if code in (401, 403):
            return f"unauthorised (HTTP {code}): check the key in the api_key_env variable"
        if code == 404:
            return f"unknown model or wrong base_url (HTTP 404): {detail}"
        return f"HTTP {code}: {detail}"
    return f"{type(exc).__name__}: {str(exc)[:200]}"


def _has_message(body: str) -> bool:
    """A chat completion whose first choice has a message object (its content may be null)."""
    import json

    try:
        choice = json.loads(body)["choices"][0]
    except (ValueError, KeyError, IndexError, TypeError, RecursionError):
        return False
    return isinstance(choice, dict) and isinstance(choice.get("message"), dict)


def _retried(exc: BaseException, timeout_s: float) -> Fault | None:
    """The retry table's `Fault` when `exc` is one a normal call retries and preflight does too:
    a 5xx, 408 or 409 answer, or a timeout; None for the rest (a refused connection says nothing
    listens there, a 4xx or an unusable answer says the endpoint is wrong: one request tells)."""
    if isinstance(exc, TimeoutError):
        return Fault("timeout", f"no answer within {timeout_s:g} s", retry=True, no_answer=True)
    if not isinstance(exc, openai.OpenAIError) and limit_in(exc) is None:
        return None
    fault = classify(exc, timeout_s)
    transient = fault.label == "timeout" or (fault.status is not None and fault.status != 429)
    return fault if fault.retry and transient else None


def _refuses(url: str) -> bool:
    """Nothing listens at `url`'s host and port now (the connection is refused)."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname or "", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    except OSError:
        return False
    return False


def _died(url: str, exc: BaseException) -> str:
    """A prefix naming a server that took the check's request, closed the connection without an
    answer and now refuses connections: it died answering (issue 38: a llama-cpp-python server
    that crashed); "" otherwise."""
    if not isinstance(exc, openai.APIConnectionError):
        return ""
    # aiohttp's transport reports the dropped connection as a connect timeout (`not_a_timeout`)
    if isinstance(exc, openai.APITimeoutError) and not not_a_timeout(exc):
        return ""
    if connection_reason(exc) == "connection refused" or not _refuses(url):
        return ""
    return (
        "server dead: it took the request, closed the connection without an answer and now "
        "refuses connections (a crash? see the server's log): "
    )


async def _ask(
    client: openai.AsyncOpenAI, body: dict, timeout_s: float, secrets: list[str]
) -> str | None:
    """One tiny chat request: None when its answer is usable, else the reason (raises the
    client's error, or TimeoutError, for the caller to classify)."""
    text = await asyncio.wait_for(
        client.post("/chat/completions", body=body, cast_to=str), timeout_s + 1
    )
    try:
        parse_completion(text, ReplyGuard(secrets))
    except MalformedReply as exc:
        msg = str(exc)
        if "no choices" in msg:
            return "empty choices (the answer has no choices)"
        if _has_message(text):  # e.g. a reasoning model spent the tiny budget thinking: content
            return None  # null, but the protocol is right, so the endpoint is reachable
        return scrub(f"unusable answer ({msg})", secrets)
    return None


async def _probe(spec: ModelSpec, url: str, timeout_s: float) -> str | None:
    """None when one tiny chat request to `url` gives a usable answer, else the reason.

    A 5xx (or 408, 409) answer or a timeout is retried as a normal call retries it
    (`cube.llm.retry`): up to the model's `max_attempts`, waiting `backoff_delay` (Retry-After
    honoured) between attempts, each attempt given `timeout_s`; the reason then says how many
    attempts failed. A 429 means reachable and authorised (the run's retries honour the limit)."""
    key = os.environ.get(spec.api_key_env or "", "") or NO_KEY
    headers = {h: os.environ.get(v, "") for h, v in spec.header_env.items()}
    secrets = [v for v in (key, *headers.values()) if v and v != NO_KEY]
    limits = Limits(
        timeout_s=timeout_s,
        max_reply_bytes=spec.max_reply_bytes,
        follow_redirects=spec.follow_redirects,
        secret_headers=frozenset(headers),
        secret_values=tuple(secrets),
    )
    client = make_client(key, url, headers, limits, 1)
    body = {
        **spec.extra_body,
        "model": spec.model,
        "temperature": spec.temperature,
        "messages": [{"role": "user", "content": "Reply with OK."}],
        spec.max_tokens_param: 16,
    }
    n = spec.max_attempts
    try:
        for attempt in range(1, n + 1):
            try:
                return await _ask(client, body, timeout_s, secrets)
            except (TimeoutError, openai.OpenAIError, TransportLimit) as exc:
                if isinstance(exc, openai.RateLimitError):
                    return None  # reachable and authorised; the run's retries honour the limit
                fault = _retried(exc, timeout_s)
                if fault is None:
                    return scrub(_died(url, exc) + _reason(exc, timeout_s, secrets), secrets)
                if attempt == n:
                    why = _reason(exc, timeout_s, secrets)
                    return scrub(f"{why} (all {n} attempt{'s' * (n > 1)} failed)", secrets)
            await asyncio.sleep(backoff_delay(spec, attempt, fault.retry_after))
        return None  # not reached: the last attempt returns
    finally:
        await client.close()


def check_endpoints(params: Params, timeout_s: float = 10.0) -> list[str]:
    """One tiny request per distinct (model, base_url), all at once; one line per problem.

    A model whose key variable is unset is left to `check_keys` (its line says so).
    """
    probes: dict[
        tuple[str, str, str, str], tuple[_Use, str]
    ] = {}  # (model, url, credentials) -> probe
    for use in model_uses(params):
        if any(
            v and not os.environ.get(v)
            for v in (use.spec.api_key_env, *use.spec.header_env.values())
        ):
            continue
        for url in use.spec.endpoints():
            ident = (
                use.spec.model,
                url.rstrip("/"),
                use.spec.api_key_env or "",
                repr(sorted(use.spec.header_env.items())),
            )
            if (
                ident in probes
            ):  # e.g. the same model at two temperatures: one request, every user named
                probes[ident][0].users.extend(
                    u for u in use.users if u not in probes[ident][0].users
                )
            else:
                probes[ident] = (_Use(use.spec, list(use.users)), url)
    todo = list(probes.values())

    async def run() -> list[str | None]:
        return await asyncio.gather(*(_probe(u.spec, url, timeout_s) for u, url in todo))

    from cube.llm.models import run_sync

    reasons = run_sync(run()) if todo else []
    return [
        f"{', '.join(u.users)}: model {u.spec.model} at {redact_url(url)}: {reason}"
        for (u, url), reason in zip(todo, reasons, strict=True)
        if reason is not None
    ]
