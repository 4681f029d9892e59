"""One interface for every model: OpenAI-compatible endpoints and offline algorithms.

The interface other modules code against:

    Request(messages, context={}, template_version="", sample=0)
    Response(text, error, input_tokens, output_tokens, cost, latency_s, cached, attempts,
             model, endpoint, detail)
    make_model(spec: ModelSpec, cache_path: Path | None = None, calls: CallLog | None = None)
    Model.name                                 # spec.model
    Model.offline                              # True for deterministic algorithms
    Model.complete(requests, role=..., desc=None, progress=True) -> list[Response]  # sync, ordered
    await Model.acomplete(requests, role=...) -> list[Response]                     # async, ordered
    @register_offline("name") class X(OfflineModel): def respond(self, request) -> Response
    response_accounting(resp, role) -> dict     # the ACCOUNTING_COLUMNS of a table row
    usage_summary(tables) -> DataFrame          # calls, tokens, cost this run / in total, per
                                                # role and model

An LLM reads `Request.messages`; an offline algorithm reads the structured
`Request.context` (question, documents, answer, dimension, ...). Callers always fill both,
so no pipeline branches on "offline".

`provider: openai` models (`OpenAIModel`) go through `openai.AsyncOpenAI` (its own retries off; HTTP
over aiohttp when installed, see `cube.llm.pool`): at most `max_concurrency` requests in
flight, spread over `base_urls` (least busy first); retries with exponential backoff and jitter on
429, 5xx, timeouts, connection errors and unusable 200 answers, honouring Retry-After (capped by
`backoff_max_s`); other 4xx fail at once. A failure is a Response whose `error` says why ("HTTP 429
after 5 attempts: ...") and never contains the API key. Processes sharing one cache claim each call
before sending it and wait for another's in-flight answer instead of paying for it twice
(`CallCache.claim`). Successful calls are stored in a SQLite cache (`CallCache`), one committed row
each, keyed by `cache_key`; a re-run, or a run resumed after being killed, sends only what is not
stored, and a fully cached batch needs no API key at all. A reply cut at the token limit
(`detail["finish_reason"] == "length"`) is kept, not an error; a batch with such replies logs one
warning ("m: 12 of 300 replies were cut at max_tokens=512; raise max_tokens").

Modules behind it (all in `cube.llm`): `calls` (Request, Response), `endpoints` (one call and its
retries, composing `wire`, `retry`, `breaker` and `pool`), `cache` (the SQLite cache), `usage`
(accounting), `concurrency` (AIMD); their public names are re-exported by `cube.llm`.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import functools
import hashlib
import logging
import os
import random
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

# `cube.llm.endpoints` (and openai with it) is imported by the first model that sends a call: a
# run whose models are all offline never imports openai (~0.9 s of CPU in each kernel of a run)
from cube.config.model_spec import ModelSpec, redact_url
from cube.llm.cache import CLAIM_LEASE_S, cached_response, canonical_json, endpoint_id
from cube.llm.cache import CacheError as CacheError
from cube.llm.cache import CallCache as CallCache
from cube.llm.cache import cache_key as cache_key
from cube.llm.cache import key_payload as key_payload
from cube.llm.calls import Request as Request
from cube.llm.calls import Response as Response
from cube.llm.concurrency import merge_summaries
from cube.llm.usage import response_accounting as response_accounting
from cube.llm.usage import usage_summary as usage_summary
from cube.llm.wire import CHAT, NO_KEY


def progress_bar(iterable: Any = None, **kwargs: Any) -> Any:
    """A tqdm progress bar with rate and ETA. Inside a notebook executed by `cube run` (which
    sets CUBE_PROGRESS=terminal) it draws on the kernel's inherited terminal instead of the
    notebook, so long LLM work is visible where `cube run` was started and the published
    report is not cluttered with progress lines; there, bars are drawn only when that stderr is a
    terminal (a redirected log holds one line per stage)."""
    import os
    import sys

    if os.environ.get("CUBE_PROGRESS") == "terminal":
        from tqdm import tqdm

        # drawn only on a terminal (disable=None: tqdm asks isatty): a log of `make run` gets the
        # stage lines
        if not kwargs.get("disable"):
            kwargs["disable"] = None
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
        self,
        requests: Sequence[Request],
        *,
        role: str,
        desc: str | None = None,
        progress: bool = True,
    ) -> list[Response]:
        raise NotImplementedError


class OfflineModel(Model):
    """A deterministic, non-LLM algorithm behind the model interface (no tokens, no cost)."""

    offline = True

    def respond(self, request: Request) -> Response:
        raise NotImplementedError

    def release_caches(self) -> None:
        """Forget the digests of long texts the call ids were made with (`_text_digest`): its
        keys hold the texts themselves (the judges' documents and answers, ~20k at the paper's
        scale), which a caller done with them (`score_answers`, after each slice of answers)
        would otherwise keep alive to the end of its process."""
        _text_digest.cache_clear()

    def _id_head(self) -> bytes:
        """The call id's canonical JSON up to its context: `[name,options,`."""
        return canonical_json([self.name, self.spec.options])[:-1].encode() + b","

    def _call_id(
        self,
        request: Request,
        head: bytes | None = None,
        pairs: dict[tuple[str, str | None], bytes] | None = None,
    ) -> str:
        # The inputs' hash, with each long text (a ~1 KB document shared by dozens of calls)
        # replaced by its own digest, computed once per text: the same identity, far less hashing.
        flat = _flat_context_bytes(request.context, {} if pairs is None else pairs)
        if flat is not None:
            # a context of texts (the rubric judge's: 233k calls at the paper's scale): its
            # canonical JSON joined from each key and text's encoding, made once per batch in
            # `pairs`, after `head` (`_id_head`, made once per batch) (tests/llm/test_call_id.py:
            # the same bytes as the formula below)
            h = hashlib.sha256(self._id_head() if head is None else head)
            h.update(flat)
            h.update(_tail_bytes(request.template_version, request.sample))
            return h.hexdigest()
        context, spliced = _digested(request.context)
        if not spliced:
            return hashlib.sha256(
                canonical_json(
                    [
                        self.name,
                        self.spec.options,
                        context,
                        request.template_version,
                        request.sample,
                    ],
                ).encode()
            ).hexdigest()
        # A list of long texts (the extractive answerer's 8 documents) stays in the hash in full
        # (its call ids predate the digests), so its canonical JSON is spliced in from each text's
        # encoding, made once per text (~15 KB re-encoded per call was most of the id's cost):
        # the same bytes as `canonical_json` of the whole list (tests/llm/test_call_id.py).
        head = canonical_json([self.name, self.spec.options])[:-1].encode() + b","
        h = hashlib.sha256(head + _context_bytes(context))
        h.update(
            canonical_json([request.template_version, request.sample]).replace("[", ",", 1).encode()
        )
        return h.hexdigest()

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
        # The first request of a call id gets the response itself, a repeat a copy of it (its own
        # detail): copying every response cost ~1 s of CPU at the paper's scale, where repeats
        # are rare.
        done: dict[str, Response] = {}
        out = []
        # the call ids' common head and each context pair's encoding, made once in the batch
        # (and freed with it: stage 03's peak is the run's largest process)
        head, pairs = self._id_head(), {}
        for r in bar(requests):
            cid = self._call_id(r, head, pairs)
            if cid not in done:
                done[cid] = self._one(r, cid)
                out.append(done[cid])
                continue
            one = copy.copy(
                done[cid]
            )  # cheaper than dataclasses.replace (no __init__ re-validation)
            one.detail = dict(one.detail) if one.detail else None
            out.append(one)
        return out

    async def acomplete(self, requests: Sequence[Request], *, role: str) -> list[Response]:
        return self._batch(requests, lambda x: x)

    def complete(
        self,
        requests: Sequence[Request],
        *,
        role: str,
        desc: str | None = None,
        progress: bool = True,
    ) -> list[Response]:
        return self._batch(
            requests, lambda x: progress_bar(x, desc=desc or self.name, disable=not progress)
        )


@functools.lru_cache(maxsize=65536)
def _text_digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _is_text_list(value: Any) -> bool:
    """A list that `_context_bytes` splices: one starting with a long text (documents)."""
    return type(value) is list and bool(value) and type(value[0]) is str and len(value[0]) > 64


def _digested(context: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The context with each long text replaced by its digest, and whether `_context_bytes` can
    splice it (a list of long texts, str keys only), found in the same pass."""
    out: dict[str, Any] = {}
    spliced = False
    for k, v in context.items():
        if isinstance(v, str):
            if len(v) > 64:
                v = _text_digest(v)
        elif not spliced and _is_text_list(v):
            spliced = True
        out[k] = v
    return out, spliced and all(type(k) is str for k in out)


def _flat_context_bytes(
    context: dict[str, Any], pairs: dict[tuple[str, str | None], bytes]
) -> bytes | None:
    """`canonical_json(_digested(context)[0]).encode()` of a mapping of text keys to texts and
    Nones (None for any other context): its sorted pairs, each encoded once in `pairs` (a
    memo of `_pair_bytes` the caller keeps: None and a text are never equal keys)."""
    if not (
        _TEXT_ONLY.issuperset(map(type, context))
        and _TEXT_OR_NONE.issuperset(map(type, context.values()))
    ):
        return None
    parts = []
    for item in sorted(context.items()):
        encoded = pairs.get(item)
        if encoded is None:
            encoded = pairs[item] = _pair_bytes(*item)
        parts.append(encoded)
    return b"{" + b",".join(parts) + b"}"


_TEXT_ONLY = frozenset({str})
_TEXT_OR_NONE = frozenset({str, type(None)})


def _pair_bytes(key: str, value: str | None) -> bytes:
    """A context pair's canonical JSON `"key":value`, a text over 64 characters as its digest."""
    if value is not None and len(value) > 64:
        value = _text_digest(value)
    return canonical_json({key: value})[1:-1].encode()


def _tail_bytes(template_version: str, sample: int) -> bytes:
    """`,template_version,sample]` as the call id's canonical JSON ends (memoised for a text and
    an int: True equals 1 as a key, not as JSON)."""
    if type(template_version) is str and type(sample) is int:
        return _tail_memo(template_version, sample)
    return canonical_json([template_version, sample]).replace("[", ",", 1).encode()


@functools.lru_cache(maxsize=1024)
def _tail_memo(template_version: str, sample: int) -> bytes:
    return canonical_json([template_version, sample]).replace("[", ",", 1).encode()


def _context_bytes(context: dict[str, Any]) -> bytes:
    """`canonical_json(context).encode()` of a dict of str keys: sorted keys, a list of texts
    joined from its texts' cached encodings, every other value encoded as it is."""
    parts = []
    for key in sorted(context):
        value = context[key]
        if _is_text_list(value):
            items = [
                _json_bytes(x) if type(x) is str else canonical_json(x).encode() for x in value
            ]
            encoded = b"[" + b",".join(items) + b"]"
        else:
            encoded = canonical_json(value).encode()
        parts.append(_json_bytes(key) + b":" + encoded)
    return b"{" + b",".join(parts) + b"}"


@functools.lru_cache(maxsize=65536)
def _json_bytes(text: str) -> bytes:
    """A string's canonical JSON, UTF-8 encoded (what it contributes to any canonical text)."""
    return canonical_json(text).encode()


_OFFLINE: dict[str, Callable[[ModelSpec], OfflineModel]] = {}


def register_offline(name: str) -> Callable[[type[OfflineModel]], type[OfflineModel]]:
    """Class decorator: make an offline algorithm available as `provider: offline, model: name`."""

    def deco(cls: type[OfflineModel]) -> type[OfflineModel]:
        _OFFLINE[name] = cls
        return cls

    return deco


def offline_names() -> list[str]:
    """The offline algorithms registered so far (a module registers its own when imported: the
    judges package registers the rubric judges, the systems package the extractive answerer)."""
    return sorted(_OFFLINE)


def make_model(
    spec: ModelSpec, cache_path: Path | None = None, calls: CallLog | None = None
) -> Model:
    """The model a spec describes. Offline names are looked up in the registry; `calls`: the
    failed calls an LLM records and replays (`CallLog`; an offline algorithm sends none)."""
    if spec.provider == "offline":
        if spec.model not in _OFFLINE:
            raise ValueError(
                f"unknown offline model '{spec.model}'; registered: {sorted(_OFFLINE)} (an offline "
                "algorithm registers when its module is imported: `import cube.judges` for the "
                "rubric judges, `import cube.systems` for the extractive answerer; for an LLM use "
                "provider: openai with a base_url)"
            )
        return _OFFLINE[spec.model](spec)
    return OpenAIModel(spec, cache_path=cache_path, calls=calls)


def run_sync(coro: Any) -> Any:
    """Run a coroutine from sync code, also inside a running event loop (Jupyter: in a thread,
    with the caller's context variables)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    import concurrent.futures

    context = contextvars.copy_context()
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(context.run, asyncio.run, coro).result()


# ------------------------------------------------------------------- a run's failed calls
@dataclass
class CallLog:
    """The failed calls of a stretch of a run, handed to the models that send them (an argument
    of `make_model`, never ambient state). Failures are never cached (a later run asks again), but
    within one run the stages after the sequential driver rest on the driver's outcome
    (`cube.run.sequential`): the driver's models add every call that fails to `failed` (its cache
    key -> the failure's reason), and a call whose key is in `replay` and that the cache does not
    hold is not sent: its response is that failure, with its reason (nothing spent)."""

    replay: Mapping[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)

    def replayed(self, key: str, model: str) -> Response | None:
        """The replayed failure of call `key`, None when it is not one to replay."""
        if key not in self.replay:
            return None
        return Response(
            None,
            self.replay[key],
            model=model,
            call_id=key,
            detail={"cache_key": key, "replayed": True},
        )


# ---------------------------------------------------------------------- OpenAI-compatible endpoints
log = logging.getLogger(__name__)


class LLMConfigError(ValueError):
    """A model that cannot be called as configured (e.g. its API key variable is unset)."""


def warn_truncated(name: str, spec: ModelSpec, responses: Sequence[Response]) -> int:
    """Log one warning when replies of a batch were cut at the token limit; return how many.

    A cut reply (`finish_reason` 'length') is kept as it is, not treated as an error, but it
    biases what is measured (an answer cut short looks incomplete), so the run says so; tables
    keep `finish_reason` and `usage_summary` counts `truncated` calls.
    """
    cut = sum((r.detail or {}).get("finish_reason") == "length" for r in responses)
    if cut:
        limit = (
            f"{spec.max_tokens_param}={spec.max_tokens}"
            if spec.max_tokens is not None
            else "the server's output limit (max_tokens not set)"
        )
        log.warning(
            "%s: %d of %d replies were cut at %s; raise max_tokens",
            name,
            cut,
            len(responses),
            limit,
        )
    return cut


class OpenAIModel(Model):
    """Any OpenAI-compatible chat endpoint, with cache, retries, concurrency bound and accounting.

    Args:
        spec: the model spec (`provider: openai`).
        cache_path: the SQLite call cache (the pipeline passes `outputs/cache.sqlite`); None
            disables persistence (identical requests of one batch are still sent once).
        wire: the wire format (`cube.llm.wire`): OpenAI's chat completions, or another JSON
            protocol sent with the same machinery (`cube.llm.json_wire.JsonWire`, an HTTP system).
        calls: the run's failed calls to record and to replay (`CallLog`); None: neither.
    """

    def __init__(
        self,
        spec: ModelSpec,
        cache_path: Path | None = None,
        wire: Any = CHAT,
        calls: CallLog | None = None,
    ):
        super().__init__(spec)
        self.wire = wire
        self.calls = calls
        self.cache_path = Path(cache_path) if cache_path is not None else None
        self.endpoints = [endpoint_id(u) for u in spec.endpoints()]
        self.counts: Counter[str] = Counter()  # requests, cache_hits, calls, failed (all batches)
        self.stopped: dict[
            str, str
        ] = {}  # endpoints the circuit breaker stopped, for every later batch too
        self.stopped_at: dict[
            str, float
        ] = {}  # ... and when: each gets a trial call after its cool-down
        # AdaptiveLimit.summary() over every batch that sent calls (merge_summaries), plus where
        self.concurrency: dict[str, Any] = {}
        self.settled: int | None = (
            None  # the limit the last batch settled at (a flat rate), the next starts there
        )

    def concurrency_record(self) -> dict[str, Any]:
        """What this model's calls reached, for the run manifest: the adaptive limit's course over
        every batch that sent calls (`cube.llm.concurrency`) with `calls_sent`, or, when every call
        was served from the cache, `calls_sent: 0` and a note (never an earlier run's figures)."""
        where = {"model": self.spec.model, "endpoints": [redact_url(e) for e in self.endpoints]}
        if not self.counts["calls"]:
            return {
                **where,
                "calls_sent": 0,
                "note": "every call was served from the cache: no request sent",
            }
        return {**self.concurrency, **where, "calls_sent": self.counts["calls"]}

    def api_key(self) -> str:
        """The key from the variable named by `api_key_env` ("EMPTY" when there is none, or when
        the wire sends no key)."""
        name = self.spec.api_key_env
        if name is None or not self.wire.uses_key:
            return NO_KEY
        key = os.environ.get(name)
        if not key:
            raise LLMConfigError(
                f"model '{self.name}': the environment variable {name} (api_key_env) is not set or "
                f"empty; export {name}=<your API key> before running (cached calls need no key)"
            )
        return key

    def headers(self) -> dict[str, str]:
        """The secret headers (`header_env`: header name -> variable), read from the environment
        now."""
        missing = [v for v in self.spec.header_env.values() if not os.environ.get(v)]
        if missing:
            raise LLMConfigError(
                f"model '{self.name}': the environment variable(s) {', '.join(missing)} "
                "(header_env) are not set or empty; export them before running (cached calls "
                "need none)"
            )
        return {h: os.environ[v] for h, v in self.spec.header_env.items()}

    def complete(
        self,
        requests: Sequence[Request],
        *,
        role: str,
        desc: str | None = None,
        progress: bool = True,
    ) -> list[Response]:
        return run_sync(self.acomplete(requests, role=role, desc=desc, progress=progress))

    async def acomplete(
        self,
        requests: Sequence[Request],
        *,
        role: str,
        desc: str | None = None,
        progress: bool = False,
    ) -> list[Response]:
        keys = [self._key(r) for r in requests]
        out: list[Response | None] = [None] * len(requests)
        todo: dict[str, list[int]] = {}  # key -> positions; identical requests are sent once
        cache = CallCache(self.cache_path) if self.cache_path is not None and requests else None
        try:
            hits = cache.get_many(keys) if cache else {}
            for i, k in enumerate(keys):
                if k in hits:
                    out[i] = cached_response(hits[k], k)
                elif (
                    self.calls is not None
                    and (failure := self.calls.replayed(k, self.spec.model)) is not None
                ):
                    out[i] = failure  # failed earlier in this run: not sent again
                else:
                    todo.setdefault(k, []).append(i)
            self.counts.update(
                requests=len(requests), cache_hits=len(requests) - sum(map(len, todo.values()))
            )
            if todo:
                await self._send(
                    requests,
                    todo,
                    out,
                    cache,
                    desc or f"{self.name} ({role})",
                    progress_bar(
                        total=len(requests),
                        initial=len(requests) - sum(map(len, todo.values())),
                        desc=desc or f"{self.name} ({role})",
                        unit="call",
                        disable=not progress,
                    ),
                )
        finally:
            if cache is not None:
                cache.close()
        missing = [i for i, r in enumerate(out) if r is None]
        if missing:  # only a bug here could cause it; never return a shorter, misaligned list
            raise RuntimeError(f"{self.name}: no response for request(s) {missing[:5]}")
        warn_truncated(self.name, self.spec, out)  # type: ignore[arg-type]
        return out  # type: ignore[return-value]

    def call_key(self, request: Request) -> str:
        """The cache key of a call (`_key`), e.g. to recognise the calls a pilot made."""
        return self._key(request)

    def _key(self, request: Request) -> str:
        """The cache key of a call: sha256 of the canonical JSON of the wire's `key_payload`
        (`cache_key` for chat completions)."""
        payload = canonical_json(self.wire.key_payload(self.spec, request))
        return hashlib.sha256(payload.encode()).hexdigest()

    async def _send(
        self,
        requests: Sequence[Request],
        todo: dict[str, list[int]],
        out: list[Response | None],
        cache: CallCache | None,
        label: str,
        bar: Any,
    ) -> None:
        # the key and secret headers are needed only now (a fully cached batch needs none)
        from cube.llm.endpoints import Endpoints
        from cube.llm.learned_limit import LimitStore

        pool = Endpoints(
            self.spec,
            self.endpoints,
            self.api_key(),
            self.stopped,
            self.headers(),
            self.stopped_at,
            settled=self.settled,
            wire=self.wire,
            store=LimitStore.beside(self.cache_path),  # the limit learned in earlier runs
        )

        owner = f"{uuid.uuid4().hex}"  # this batch's in-flight claims in the shared cache

        claims = cache.claim_many(list(todo), owner) if cache is not None else {}

        async def one(key: str, where: list[int]) -> None:
            state = claims.get(key, "mine")
            if (
                state == "theirs"
            ):  # another process is sending it: wait for its answer (or take over)
                state = await _claim(cache, key, owner)  # type: ignore[arg-type]
            if state == "done":  # another process answered it
                resp = cached_response(cache.get_many([key])[key], key)  # type: ignore[union-attr]
                self.counts.update(peer_hits=1)
            else:
                resp = await pool.call(requests[where[0]])
                resp.detail = {**(resp.detail or {}), "cache_key": key}
                resp.call_id = key
                if cache is not None and resp.ok:
                    # its claim stays until the batch ends (one DELETE): a stored answer outranks
                    # any claim
                    payload = self.wire.key_payload(self.spec, requests[where[0]])
                    cache.put(key, resp, canonical_json(payload))
                elif cache is not None:
                    cache.release(owner, [key])
                self.counts.update(calls=1, failed=int(not resp.ok))
                if not resp.ok and self.calls is not None:
                    self.calls.failed[key] = str(resp.error)
            for j in where:
                out[j] = replace(resp, detail=dict(resp.detail or {}))
            bar.update(len(where))

        async def heartbeat() -> None:  # keep this batch's claims alive while it works
            while cache is not None:
                await asyncio.sleep(CLAIM_LEASE_S / 3)
                cache.renew(owner)

        beat = asyncio.ensure_future(heartbeat())
        try:
            await asyncio.gather(*(one(k, w) for k, w in todo.items()))
        finally:
            beat.cancel()
            if cache is not None:
                cache.release(owner)  # interrupted or failed: leave nothing claimed
            bar.close()
            await pool.close()
            self.settled = pool.sem.settled_limit()
            self.concurrency = {
                **merge_summaries(self.concurrency, pool.sem.summary()),  # the limit's course
                "model": self.spec.model,
                "endpoints": [redact_url(e) for e in self.endpoints],
            }
        failed = [out[w[0]] for w in todo.values() if not out[w[0]].ok]  # type: ignore[union-attr]
        for (
            ep,
            why,
        ) in pool.stopped.items():  # one line per stopped endpoint and batch, not one per call
            _say(
                f"{label}: model {self.name} at {redact_url(ep)}: stopped sending: {why}; "
                f"{pool.unsent[ep]} of {len(todo)} calls not sent ({len(failed)} failed in all)"
            )
        if failed and not pool.stopped:
            log.warning(
                "%s: %d of %d calls failed; first: %s",
                label,
                len(failed),
                len(todo),
                failed[0].error,
            )


async def _claim(cache: CallCache, key: str, owner: str) -> str:
    """Claim `key` for this batch ('mine') or wait until another process's answer is stored
    ('done'); a claim whose owner is gone or whose lease ran out is taken over."""
    while True:
        await asyncio.sleep(0.2 + random.random() * 0.3)
        if cache.peek(key, owner) != "theirs":
            state = cache.claim(key, owner)
            if state != "theirs":
                return state


def _say(line: str) -> None:
    """An error line for the log, and for the terminal of `cube run` when inside its kernel."""
    log.error("%s", line)
    if os.environ.get("CUBE_PROGRESS") == "terminal":
        import sys

        print(f"cube: {line}", file=sys.__stderr__, flush=True)
