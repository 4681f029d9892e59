"""Calling a user's function for many questions: at most N at a time, through the call cache.

`call_all` runs sync functions in a thread pool and async ones on one event loop under a
semaphore; an exception is its call's error (type: message, cut at `MAX_ERROR_CHARS`), never the
run's. `CachedCaller` keys every call by the sha256 of the function's identity (name, source
digest, version) and its arguments, reads hits back, and stores only successful replies.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import inspect
import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cube.llm import CallCache, Response, progress_bar, run_sync
from cube.llm.cache import canonical_json
from cube.systems.python_contract import Reply, ShapeError

MAX_ERROR_CHARS = 500  # an exception's message kept in `error` (a traceback-sized one is cut)


def _reason(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."


def _is_async(fn: Any) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.iscoroutinefunction(fn):
        return True
    # an object whose class defines `async def __call__`
    return not inspect.isroutine(fn) and inspect.iscoroutinefunction(type(fn).__call__)


async def call_all(
    fn: Callable[..., Any], calls: list[tuple[Any, ...]], limit: int, bar: Any = None
) -> list[tuple[Any, str | None, float]]:
    """`fn(*args)` for every args of `calls`, at most `limit` at a time: (value, error, seconds)
    each, in order; an exception is its call's error (type: message), never raised."""
    sem = asyncio.Semaphore(limit)
    is_async = _is_async(fn)
    loop = asyncio.get_running_loop()
    pool = None if is_async else ThreadPoolExecutor(limit, thread_name_prefix="cube-python")

    async def one(args: tuple[Any, ...]) -> tuple[Any, str | None, float]:
        async with sem:
            t0 = time.perf_counter()
            value, error = None, None
            try:
                if pool is None:
                    value = await fn(*args)
                else:
                    value = await loop.run_in_executor(pool, functools.partial(fn, *args))
                if inspect.isawaitable(value):  # a sync wrapper handing back a coroutine
                    value = await value
            except Exception as exc:  # the question's failure, never the run's
                value, error = None, _reason(exc)
            if bar is not None:
                bar.update(1)
            return value, error, time.perf_counter() - t0

    try:
        return list(await asyncio.gather(*(one(a) for a in calls)))
    finally:
        if pool is not None:
            pool.shutdown(wait=True)


@dataclass
class Outcome:
    """One call's result: its accounting `Response` (text = the answer) and the parsed reply
    (None when the call failed or the reply had the wrong shape)."""

    response: Response
    reply: Reply | None


class CachedCaller:
    """Calls one user function for many argument tuples, through the call cache.

    Args:
        fn: the function.
        label: the accounting model name (`python:<name>`, `bounds:<function>`).
        identity: what identifies the function beside its arguments (name, source digest,
            version), hashed into every key.
        parse: the reply's parser (`parse_answer`, `parse_bound`), raising `ShapeError`.
        cache_path: the call cache (None: no cache).
        limit: calls at a time.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        label: str,
        identity: dict[str, Any],
        parse: Callable[[Any], Reply],
        cache_path: Path | None,
        limit: int,
    ):
        self.fn, self.label, self.identity, self.parse = fn, label, identity, parse
        self.cache_path, self.limit = cache_path, limit
        self.calls = 0  # sent by this object (not served from the cache)

    def key(self, payload: dict[str, Any]) -> str:
        return hashlib.sha256(
            canonical_json({**self.identity, "call": payload}).encode()
        ).hexdigest()

    def run(
        self,
        calls: list[tuple[Any, ...]],
        payloads: list[dict[str, Any]],
        desc: str,
        progress: bool,
    ) -> list[Outcome]:
        """Each call's outcome, in order: cached ones read back, the others made (and stored when
        they succeeded)."""
        keys = [self.key(p) for p in payloads]
        cache = CallCache(self.cache_path) if self.cache_path is not None and calls else None
        try:
            out = self._cached(cache, keys)
            todo = [i for i, o in enumerate(out) if o is None]
            raw = self._call(calls, todo, desc, progress)
            for i, (value, error, seconds) in zip(todo, raw, strict=True):
                made = out[i] = self._made(value, error, seconds, keys[i])
                if cache is not None:
                    self._store(cache, made, seconds, keys[i], payloads[i])
        finally:
            if cache is not None:
                cache.close()
        return out  # type: ignore[return-value]

    def _cached(self, cache: CallCache | None, keys: list[str]) -> list[Outcome | None]:
        """Each call's outcome read back from the cache; None for a call to make."""
        hits = cache.get_many(keys) if cache else {}
        return [self._hit(hits[k], k) if k in hits else None for k in keys]

    def _call(
        self, calls: list[tuple[Any, ...]], todo: list[int], desc: str, progress: bool
    ) -> list[tuple[Any, str | None, float]]:
        """Make the calls not served from the cache, with a progress bar over all of them."""
        bar = progress_bar(
            total=len(calls), initial=len(calls) - len(todo), desc=desc, disable=not progress
        )
        try:
            raw = run_sync(call_all(self.fn, [calls[i] for i in todo], self.limit, bar))
        finally:
            bar.close()
        self.calls += len(todo)
        return raw

    def _store(
        self, cache: CallCache, made: Outcome, seconds: float, key: str, payload: dict[str, Any]
    ) -> None:
        """A call that succeeded, stored in the cache (a failed one is made again next time)."""
        if made.reply is None or not made.response.ok:
            return
        stored = Response(
            text=json.dumps(made.reply, ensure_ascii=False),
            latency_s=seconds,
            model=self.label,
            endpoint="python",
            attempts=1,
        )
        cache.put(key, stored, canonical_json({**self.identity, **payload}))

    def _hit(self, row: dict[str, Any], key: str) -> Outcome:
        reply = json.loads(row["text"])
        resp = Response(
            text=reply["answer"],
            latency_s=float(row["latency_s"] or 0.0),
            cached=True,
            model=self.label,
            endpoint="python",
            call_id=key,
        )
        return Outcome(resp, reply)

    def _made(self, value: Any, error: str | None, seconds: float, key: str) -> Outcome:
        reply = None
        if error is None:
            try:
                reply = self.parse(value)
            except ShapeError as err:
                error = f"wrong reply shape: {err}"
        if reply is not None and not reply["answer"].strip():
            error = "empty answer"
        resp = Response(
            text=reply["answer"] if reply is not None and error is None else None,
            error=error,
            latency_s=seconds,
            attempts=1,
            model=self.label,
            endpoint="python",
            call_id=key,
        )
        return Outcome(resp, reply)
