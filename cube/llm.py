"""One interface for every model: OpenAI-compatible endpoints and offline algorithms.

The interface other modules code against:

    Request(messages, context={}, template_version="", sample=0)
    Response(text, error, input_tokens, output_tokens, cost, latency_s, cached, attempts,
             model, endpoint, detail)
    make_model(spec: ModelSpec, cache_path: Path | None = None) -> Model
    Model.name                                 # spec.model
    Model.offline                              # True for deterministic algorithms
    Model.complete(requests, role=..., desc=None, progress=True) -> list[Response]  # sync, ordered
    await Model.acomplete(requests, role=...) -> list[Response]                     # async, ordered
    @register_offline("name") class X(OfflineModel): def respond(self, request) -> Response
    response_accounting(resp, role) -> dict     # the ACCOUNTING_COLUMNS of a table row
    usage_summary(tables) -> DataFrame          # calls, tokens, cost this run / in total, per role and model

An LLM reads `Request.messages`; an offline algorithm reads the structured
`Request.context` (question, documents, answer, dimension, ...). Callers always fill both,
so no pipeline branches on "offline".

`provider: openai` models (`OpenAIModel`) go through `openai.AsyncOpenAI` (its own retries
off): at most `max_concurrency` requests in flight, spread over `base_urls` (least busy
first); retries with exponential backoff and jitter on 429, 5xx, timeouts, connection errors
and unusable 200 answers, honouring Retry-After (capped by `backoff_max_s`); other 4xx fail at
once. A failure is a Response whose `error` says why ("HTTP 429 after 5 attempts: ...") and
never contains the API key. Successful calls are stored in a SQLite cache (`CallCache`),
one committed row each, keyed by `cache_key`; a re-run, or a run resumed after being killed,
sends only what is not stored, and a fully cached batch needs no API key at all. A reply cut
at the token limit (`detail["finish_reason"] == "length"`) is kept, not an error; a batch
with such replies logs one warning ("m: 12 of 300 replies were cut at max_tokens=512; raise
max_tokens").
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import openai

from cube.cache import CacheError as CacheError
from cube.cache import CallCache as CallCache
from cube.cache import _cached_response, _canonical, _endpoint_id
from cube.cache import cache_key as cache_key
from cube.cache import key_payload as key_payload
from cube.config import ModelSpec
from cube.usage import response_accounting as response_accounting
from cube.usage import usage_summary as usage_summary


@dataclass(frozen=True)
class Request:
    """One chat call. `messages` for LLMs; `context` (structured inputs) for offline models.

    `template_version` and `sample` enter the cache key: a changed prompt template or a
    repeated judgment (`samples: n`) is a different call. `context` does not (it is derived
    from the same inputs as the messages).
    """

    messages: tuple[dict[str, str], ...]
    context: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    template_version: str = ""
    sample: int = 0


@dataclass
class Response:
    """The outcome of one call: `text` on success, `error` (with its reason) on failure."""

    text: str | None
    error: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None
    latency_s: float = 0.0
    cached: bool = False
    attempts: int = 0
    model: str = ""
    endpoint: str = ""
    detail: dict[str, Any] | None = None
    call_id: str = ""  # identifies the call: the cache key (LLM) or a hash of the inputs (offline)

    @property
    def ok(self) -> bool:
        return self.error is None and self.text is not None


def progress_bar(iterable: Any = None, **kwargs: Any) -> Any:
    """A tqdm progress bar with rate and ETA. Inside a notebook executed by `cube run` (which
    sets CUBE_PROGRESS=terminal) it draws on the kernel's inherited terminal instead of the
    notebook, so long LLM work is visible where `cube run` was started and the published
    report is not cluttered with progress lines."""
    import os
    import sys

    if os.environ.get("CUBE_PROGRESS") == "terminal":
        from tqdm import tqdm

        return tqdm(iterable, file=sys.__stderr__, mininterval=2.0, **kwargs)
    from tqdm.auto import tqdm

    return tqdm(iterable, **kwargs)


class Model:
    """Base of every model. Subclasses implement `acomplete`."""

    offline: bool = False

    def __init__(self, spec: ModelSpec):
        self.spec = spec
        self.name = spec.model

    async def acomplete(self, requests: Sequence[Request], *, role: str) -> list[Response]:
        raise NotImplementedError

    def complete(
        self, requests: Sequence[Request], *, role: str, desc: str | None = None, progress: bool = True
    ) -> list[Response]:
        raise NotImplementedError


class OfflineModel(Model):
    """A deterministic, non-LLM algorithm behind the model interface (no tokens, no cost)."""

    offline = True

    def respond(self, request: Request) -> Response:
        raise NotImplementedError

    def _call_id(self, request: Request) -> str:
        return hashlib.sha256(
            _canonical([self.name, self.spec.options, request.context, request.template_version, request.sample],
                       ).encode()
        ).hexdigest()

    def _one(self, request: Request, call_id: str) -> Response:
        t0 = time.perf_counter()
        try:
            r = self.respond(request)
        except Exception as exc:  # an algorithm bug must not pass as a score
            r = Response(text=None, error=f"{type(exc).__name__}: {exc}")
        r.latency_s = time.perf_counter() - t0
        r.model = r.model or self.name
        r.endpoint = r.endpoint or "offline"
        r.attempts = 1
        r.cost = 0.0
        r.call_id = call_id
        return r

    def _batch(self, requests: Sequence[Request], bar: Any) -> list[Response]:
        # Like an LLM batch, identical requests are computed once (same call_id, counted once).
        done: dict[str, Response] = {}
        out = []
        for r in bar(requests):
            cid = self._call_id(r)
            if cid not in done:
                done[cid] = self._one(r, cid)
            out.append(replace(done[cid], detail=dict(done[cid].detail) if done[cid].detail else None))
        return out

    async def acomplete(self, requests: Sequence[Request], *, role: str) -> list[Response]:
        return self._batch(requests, lambda x: x)

    def complete(
        self, requests: Sequence[Request], *, role: str, desc: str | None = None, progress: bool = True
    ) -> list[Response]:
        return self._batch(requests, lambda x: progress_bar(x, desc=desc or self.name, disable=not progress))


_OFFLINE: dict[str, Callable[[ModelSpec], OfflineModel]] = {}


def register_offline(name: str) -> Callable[[type[OfflineModel]], type[OfflineModel]]:
    """Class decorator: make an offline algorithm available as `provider: offline, model: name`."""

    def deco(cls: type[OfflineModel]) -> type[OfflineModel]:
        _OFFLINE[name] = cls
        return cls

    return deco


def offline_names() -> list[str]:
    _load_builtin_offline_models()
    return sorted(_OFFLINE)


def _load_builtin_offline_models() -> None:
    # Importing these modules registers their algorithms (extractive answerer, rubric judge).
    import importlib

    for mod in ("cube.systems.extractive", "cube.judges.rubric"):
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:  # pragma: no cover - only while a module is absent
            if exc.name != mod:
                raise


def make_model(spec: ModelSpec, cache_path: Path | None = None) -> Model:
    """The model a spec describes. Offline names are looked up in the registry."""
    if spec.provider == "offline":
        _load_builtin_offline_models()
        if spec.model not in _OFFLINE:
            raise ValueError(
                f"unknown offline model '{spec.model}'; available: {sorted(_OFFLINE)} "
                "(for an LLM use provider: openai with a base_url)"
            )
        return _OFFLINE[spec.model](spec)
    return OpenAIModel(spec, cache_path=cache_path)


def run_sync(coro: Any) -> Any:
    """Run a coroutine from sync code, also inside a running event loop (Jupyter)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


# --------------------------------------------------------------------------- OpenAI-compatible endpoints
log = logging.getLogger(__name__)
_RETRY_STATUS = frozenset({408, 409, 429})  # plus every 5xx; other 4xx are the caller's fault
_NO_KEY = "EMPTY"  # placeholder key for endpoints without auth (vLLM, Ollama accept it)


class LLMConfigError(ValueError):
    """A model that cannot be called as configured (e.g. its API key variable is unset)."""


def call_cost(spec: ModelSpec, input_tokens: int, output_tokens: int) -> float | None:
    """price_in * in / 1e6 + price_out * out / 1e6; None when the spec sets no price (an unset
    one of the two prices counts as free)."""
    if spec.price_input_per_m is None and spec.price_output_per_m is None:
        return None
    return (spec.price_input_per_m or 0.0) * input_tokens / 1e6 + (spec.price_output_per_m or 0.0) * output_tokens / 1e6


class _Malformed(Exception):
    """A 200 answer we cannot use (not JSON, no choices): treated as a transient fault."""


def _parse_completion(body: str) -> tuple[str, int, int, str | None, str | None]:
    try:
        data = json.loads(body)
    except ValueError:
        raise _Malformed(f"not JSON: {body[:80]!r}") from None
    if not isinstance(data, dict) or not data.get("choices"):
        err = data.get("error") if isinstance(data, dict) else None
        raise _Malformed(f"no choices in the answer{f' (error: {err})' if err else ''}")
    choice = data["choices"][0] if isinstance(data["choices"], list) else None
    content = (choice.get("message") or {}).get("content") if isinstance(choice, dict) else None
    if not isinstance(content, str):
        raise _Malformed("the first choice has no message content")
    usage = data.get("usage") or {}
    try:
        n_in, n_out = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    except (AttributeError, TypeError, ValueError):
        raise _Malformed(f"unreadable usage {usage!r}") from None
    return content, n_in, n_out, choice.get("finish_reason"), data.get("model")


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


def _status_detail(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict) and body.get("message"):
        return str(body["message"])
    return str(exc.message)


class _Endpoints:
    """The clients of one batch: one AsyncOpenAI per base URL, a shared concurrency bound,
    least-busy choice of replica (round-robin among equally busy ones), and the retry policy."""

    def __init__(self, spec: ModelSpec, endpoints: list[str], api_key: str):
        self.spec, self.endpoints, self.key = spec, endpoints, api_key
        self.sem = asyncio.Semaphore(spec.max_concurrency)
        self.busy = dict.fromkeys(endpoints, 0)
        self._next = 0
        n = spec.max_concurrency
        # A connection pool per endpoint sized to the concurrency: no request waits for a socket.
        limits = type(openai.DEFAULT_CONNECTION_LIMITS)(max_connections=n, max_keepalive_connections=n)
        self.clients = {
            ep: openai.AsyncOpenAI(
                api_key=api_key, base_url=ep, timeout=spec.timeout_s, max_retries=0,  # we own retries
                http_client=openai.DefaultAsyncHttpxClient(limits=limits, timeout=spec.timeout_s),
            )
            for ep in endpoints
        }
        self.kwargs: dict[str, Any] = {"model": spec.model, "temperature": spec.temperature}
        for name in ("top_p", "seed"):
            if getattr(spec, name) is not None:
                self.kwargs[name] = getattr(spec, name)
        if spec.max_tokens is not None:
            self.kwargs[spec.max_tokens_param] = spec.max_tokens
        self.kwargs.update(spec.extra_body)

    async def close(self) -> None:
        for client in self.clients.values():
            await client.close()

    def _pick(self) -> str:
        n = len(self.endpoints)
        start, self._next = self._next, (self._next + 1) % n
        return min((self.endpoints[(start + i) % n] for i in range(n)), key=self.busy.__getitem__)

    def _scrub(self, text: str) -> str:
        return text.replace(self.key, "***") if self.key and self.key != _NO_KEY else text

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        cap = self.spec.backoff_max_s
        if retry_after is not None:
            return min(retry_after, cap)
        base = min(cap, self.spec.backoff_base_s * 2 ** (attempt - 1))
        return base / 2 + random.uniform(0, base / 2)  # "equal jitter": spread retries, keep a floor

    async def call(self, request: Request) -> Response:
        spec, t0 = self.spec, time.perf_counter()
        label, detail, ep = "", "", self.endpoints[0]
        for attempt in range(1, spec.max_attempts + 1):
            retry_after = None
            async with self.sem:  # held only while a request is in flight, not while backing off
                ep = self._pick()
                self.busy[ep] += 1
                try:
                    # The documented raw route (`post`, cast_to=str): the same HTTP call as
                    # `chat.completions.create` without its per-call param transform and model
                    # parsing, which cost more CPU than the rest of a call; we parse the body.
                    body = await self.clients[ep].post(
                        "/chat/completions", body={**self.kwargs, "messages": list(request.messages)}, cast_to=str
                    )
                    text, n_in, n_out, finish, served = _parse_completion(body)
                    return Response(
                        text=text, input_tokens=n_in, output_tokens=n_out, cost=call_cost(spec, n_in, n_out),
                        latency_s=time.perf_counter() - t0, attempts=attempt, model=spec.model, endpoint=ep,
                        detail={"finish_reason": finish, "served_model": served},
                    )
                except _Malformed as exc:
                    label, detail = "malformed response", str(exc)
                except openai.APITimeoutError:
                    label, detail = "timeout", f"no answer within {spec.timeout_s:g} s"
                except openai.APIConnectionError as exc:
                    label, detail = "connection error", f"{exc.message} ({exc.__cause__ or ''})"
                except openai.APIStatusError as exc:
                    label, detail = f"HTTP {exc.status_code}", _status_detail(exc)
                    if exc.status_code not in _RETRY_STATUS and exc.status_code < 500:
                        return self._failure(f"{label} (not retried): {detail}", attempt, t0, ep)
                    retry_after = _retry_after(exc)
                except openai.OpenAIError as exc:  # anything else the client raises: not transient
                    return self._failure(f"{type(exc).__name__} (not retried): {exc}", attempt, t0, ep)
                finally:
                    self.busy[ep] -= 1
            if attempt < spec.max_attempts:
                wait = self._delay(attempt, retry_after)
                log.debug("%s: %s on attempt %d; retrying in %.2f s", spec.model, label, attempt, wait)
                await asyncio.sleep(wait)
        n = spec.max_attempts
        return self._failure(f"{label} after {n} attempt{'s' * (n > 1)}: {detail}", n, t0, ep)

    def _failure(self, reason: str, attempts: int, t0: float, ep: str) -> Response:
        reason = self._scrub(reason)[:500]
        log.info("%s: call failed: %s", self.spec.model, reason)
        return Response(
            text=None, error=reason, cost=call_cost(self.spec, 0, 0), latency_s=time.perf_counter() - t0,
            attempts=attempts, model=self.spec.model, endpoint=ep,
        )


def warn_truncated(name: str, spec: ModelSpec, responses: Sequence[Response]) -> int:
    """Log one warning when replies of a batch were cut at the token limit; return how many.

    A cut reply (`finish_reason` 'length') is kept as it is, not treated as an error, but it
    biases what is measured (an answer cut short looks incomplete), so the run says so; tables
    keep `finish_reason` and `usage_summary` counts `truncated` calls.
    """
    cut = sum((r.detail or {}).get("finish_reason") == "length" for r in responses)
    if cut:
        limit = (f"{spec.max_tokens_param}={spec.max_tokens}" if spec.max_tokens is not None
                 else "the server's output limit (max_tokens not set)")
        log.warning("%s: %d of %d replies were cut at %s; raise max_tokens", name, cut, len(responses), limit)
    return cut


class OpenAIModel(Model):
    """Any OpenAI-compatible chat endpoint, with cache, retries, concurrency bound and accounting.

    Args:
        spec: the model spec (`provider: openai`).
        cache_path: the SQLite call cache (the pipeline passes `outputs/cache.sqlite`); None
            disables persistence (identical requests of one batch are still sent once).
    """

    def __init__(self, spec: ModelSpec, cache_path: Path | None = None):
        super().__init__(spec)
        self.cache_path = Path(cache_path) if cache_path is not None else None
        self.endpoints = [_endpoint_id(u) for u in spec.endpoints()]
        self.counts: Counter[str] = Counter()  # requests, cache_hits, calls, failed (all batches)

    def api_key(self) -> str:
        """The key from the variable named by `api_key_env` ("EMPTY" when there is none)."""
        name = self.spec.api_key_env
        if name is None:
            return _NO_KEY
        key = os.environ.get(name)
        if not key:
            raise LLMConfigError(
                f"model '{self.name}': the environment variable {name} (api_key_env) is not set or empty; "
                f"export {name}=<your API key> before running (cached calls need no key)"
            )
        return key

    def complete(
        self, requests: Sequence[Request], *, role: str, desc: str | None = None, progress: bool = True
    ) -> list[Response]:
        return run_sync(self.acomplete(requests, role=role, desc=desc, progress=progress))

    async def acomplete(
        self, requests: Sequence[Request], *, role: str, desc: str | None = None, progress: bool = False
    ) -> list[Response]:
        keys = [cache_key(self.spec, r) for r in requests]
        out: list[Response | None] = [None] * len(requests)
        todo: dict[str, list[int]] = {}  # key -> positions; identical requests are sent once
        cache = CallCache(self.cache_path) if self.cache_path is not None and requests else None
        try:
            hits = cache.get_many(keys) if cache else {}
            for i, k in enumerate(keys):
                if k in hits:
                    out[i] = _cached_response(hits[k], k)
                else:
                    todo.setdefault(k, []).append(i)
            self.counts.update(requests=len(requests), cache_hits=len(requests) - sum(map(len, todo.values())))
            if todo:
                await self._send(requests, todo, out, cache, progress_bar(
                    total=len(requests), initial=len(requests) - sum(map(len, todo.values())),
                    desc=desc or f"{self.name} ({role})", unit="call", disable=not progress,
                ))
        finally:
            if cache is not None:
                cache.close()
        missing = [i for i, r in enumerate(out) if r is None]
        if missing:  # only a bug here could cause it; never return a shorter, misaligned list
            raise RuntimeError(f"{self.name}: no response for request(s) {missing[:5]}")
        warn_truncated(self.name, self.spec, out)  # type: ignore[arg-type]
        return out  # type: ignore[return-value]

    async def _send(
        self, requests: Sequence[Request], todo: dict[str, list[int]], out: list[Response | None],
        cache: CallCache | None, bar: Any,
    ) -> None:
        pool = _Endpoints(self.spec, self.endpoints, self.api_key())  # the key is needed only now

        async def one(key: str, where: list[int]) -> None:
            resp = await pool.call(requests[where[0]])
            resp.detail = {**(resp.detail or {}), "cache_key": key}
            resp.call_id = key
            if resp.ok and cache is not None:
                cache.put(key, resp, _canonical(key_payload(self.spec, requests[where[0]])))
            self.counts.update(calls=1, failed=int(not resp.ok))
            for j in where:
                out[j] = replace(resp, detail=dict(resp.detail))
            bar.update(len(where))

        try:
            await asyncio.gather(*(one(k, w) for k, w in todo.items()))
        finally:
            bar.close()
            await pool.close()
        failed = [out[w[0]] for w in todo.values() if not out[w[0]].ok]  # type: ignore[union-attr]
        if failed:
            log.warning("%s: %d of %d calls failed; first: %s", self.name, len(failed), len(todo), failed[0].error)
