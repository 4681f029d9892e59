"""The endpoint pool of one batch: pooled `openai` clients per endpoint, least-busy choice.

Connection pools are sized to the concurrency, so no request waits for a socket. aiohttp carries
the requests when installed (openai's `DefaultAioHttpClient`): about 30 % less CPU per call than
httpx. httpx's pool scans every connection of the pool (a readability poll on each idle one) for
every request, so one httpx pool of 256 connections cost several ms of CPU per call and capped a
client at ~84 calls in flight at 256 (issue 15): without aiohttp, each endpoint gets pools of at
most `POOL_SHARD` connections and a request goes through the least busy one.

The next endpoint is the least busy one among those the breaker lets through (`least_busy`), the
order rotating by one per pick so equally busy replicas take turns (round-robin).

Every client is built by `make_client`, the one place an `openai.AsyncOpenAI` is made (the pool's
and preflight's): its HTTP client is wrapped by `cube.llm.transport.guarded_client`, so redirects,
reply size and the per-attempt deadline (`Limits`) hold for every request.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Awaitable, Callable
from typing import Any

import openai

from cube.llm.http import httpx_module
from cube.llm.transport import Limits, guarded_client

POOL_SHARD = 16  # connections per httpx pool


@functools.cache
def http_client() -> tuple[type, int]:
    """(the openai HTTP client class, connections per pool): aiohttp's when installed (one pool
    scales), else httpx's in pools of POOL_SHARD connections."""
    aio = getattr(
        openai, "DefaultAioHttpClient", None
    )  # openai >= 1.8x; a stub raising without aiohttp
    if aio is not None and (
        importlib.util.find_spec("aiohttp") is None or aio.__name__.startswith("_Missing")
    ):
        aio = None
    return (aio, 1 << 30) if aio is not None else (openai.DefaultAsyncHttpxClient, POOL_SHARD)


@functools.cache
def ssl_context() -> Any:
    """The TLS context every client shares: httpx's default (its CA bundle), built once per process.
    Each client building its own loaded the CA bundle again (~65 ms of CPU per pool and batch)."""
    return httpx_module().create_ssl_context()


def make_client(
    api_key: str,
    base_url: str,
    headers: dict[str, str],
    limits: Limits,
    max_connections: int,
) -> openai.AsyncOpenAI:
    """An `openai.AsyncOpenAI` (its own retries off: ours are `cube.llm.retry`'s) whose HTTP
    client applies `limits` (`cube.llm.transport`) over a pool of `max_connections`."""
    client_class, _ = http_client()
    pool = type(openai.DEFAULT_CONNECTION_LIMITS)(
        max_connections=max_connections, max_keepalive_connections=max_connections
    )
    return openai.AsyncOpenAI(
        api_key=api_key,
        base_url=base_url,
        timeout=limits.timeout_s,
        max_retries=0,  # we own retries
        default_headers=headers or None,
        http_client=guarded_client(client_class)(
            guard=limits, limits=pool, timeout=limits.timeout_s, verify=ssl_context()
        ),
    )


class Pool:
    """One `openai.AsyncOpenAI` per endpoint and connection pool (its own retries off: ours are
    `cube.llm.retry`'s), with the calls in flight per endpoint (`busy`) and per pool.

    Args:
        endpoints: base URLs (endpoint ids).
        api_key: the key the clients send (`Authorization: Bearer`); "" sends none.
        headers: extra headers of every request (secret values: the caller scrubs them).
        limits: the transport limits (`cube.llm.transport.Limits`: its `timeout_s` bounds each
            attempt).
        max_concurrency: the most calls in flight (sizes the pools).
    """

    def __init__(
        self,
        endpoints: list[str],
        api_key: str,
        headers: dict[str, str],
        limits: Limits,
        max_concurrency: int,
    ):
        self.endpoints = endpoints
        self.busy = dict.fromkeys(endpoints, 0)
        self._next = 0
        _, shard = http_client()
        shards = -(-max_concurrency // shard)
        size = -(-max_concurrency // shards)
        self.clients = {
            ep: [make_client(api_key, ep, headers, limits, size) for _ in range(shards)]
            for ep in endpoints
        }
        self._shard_busy = {ep: [0] * shards for ep in endpoints}

    def rotation(self) -> list[str]:
        """The endpoints in this pick's order (it starts one further at each pick)."""
        n = len(self.endpoints)
        start, self._next = self._next, (self._next + 1) % n
        return [self.endpoints[(start + i) % n] for i in range(n)]

    def least_busy(self, live: list[str]) -> str:
        """The endpoint of `live` with the fewest calls in flight (the first of equals)."""
        return min(live, key=self.busy.__getitem__)

    async def send(self, ep: str, request: Callable[[Any], Awaitable[str]]) -> str:
        """`request(client)` through the least busy connection pool of `ep` (never more in flight
        than its size, as the calls in flight never exceed `max_concurrency`)."""
        busy = self._shard_busy[ep]
        shard = busy.index(min(busy))
        busy[shard] += 1
        try:
            return await request(self.clients[ep][shard])
        finally:
            busy[shard] -= 1

    async def close(self) -> None:
        for shards in self.clients.values():
            for client in shards:
                await client.close()
