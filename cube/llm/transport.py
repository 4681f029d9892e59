"""The transport limits of every request that leaves the process: redirects, reply size, deadline.

Every endpoint a run calls (LLM judges and answerers through chat completions, http systems
through `cube.llm.json_wire`, RAGFlow through ragflow-sdk) is reached through this module, so the
same three limits hold for all of them (`Limits`, built from a model spec's `timeout_s`,
`max_reply_bytes` and `follow_redirects`):

- **Redirects are not followed** unless `follow_redirects` is on. A redirect not followed is a
  failed call whose reason names where it pointed ("redirect to http://host:port not followed"),
  never a silent second request. When following, at most `MAX_REDIRECTS` hops, only to http(s),
  and no header that holds a secret (`Authorization`, `Proxy-Authorization`, `Cookie`, `api-key`,
  every `header_env` name, any header carrying a value the run holds as a secret) is sent to
  another origin (scheme, host, port): the openai client's httpx follows redirects itself and drops
  only `Authorization`, so a 302 to another port received `X-Api-Key` on every question.
- **A reply is at most `max_reply_bytes`** (default `DEFAULT_MAX_REPLY_BYTES`), counted while
  streaming both on the wire and inflated: the body is inflated here, `MAX_INFLATE_STEP` bytes at a
  time (zlib's `max_length`), so a 2 MB gzip bomb that inflates to 2 GB costs a few MB before it is
  refused, never the whole body in memory. A `Content-Length` over the limit is refused before
  reading. Only gzip and deflate are asked for (`Accept-Encoding`) and decoded; any other encoding
  is a failed call.
- **`timeout_s` bounds the whole attempt** (connecting, every redirect hop, the headers and the last
  byte of the body), not each read: a server that drips one byte every 2 s fails at `timeout_s`
  with the reason "deadline".

Where the limits sit. The openai client sends through an `httpx.AsyncClient` whichever HTTP library
carries the bytes: openai's `DefaultAioHttpClient` is an `httpx.AsyncClient` whose transport is
aiohttp's (`AiohttpTransport`: no redirects, no decompression of its own, the raw bytes as an
`httpx.AsyncByteStream`), `DefaultAsyncHttpxClient` one with httpx's own transport. Both build
their transports in the client's `_init_transport` / `_init_proxy_transport` (the hook the
vendored aiohttp client itself overrides), so `guarded_client` wraps whatever transport the client
builds, proxies included, in `GuardedTransport`: one wrapper at the transport interface serves
both libraries, the openai client above keeps its request building and error mapping, and the
body the client reads is already inflated, bounded and on time. The alternatives were worse: the
client's streaming raw-response API would leave error bodies (which the client reads whole before
raising its status error) unbounded, and an aiohttp session setting covers aiohttp only. The
client's own redirect following is turned off (`follow_redirects=False`): the wrapper answers a
redirect itself, so the client never sees one.

A refused reply raises `TransportLimit` (label, detail, retried or not; a missed deadline is
labelled "timeout", retried as one, its detail "no answer within 5 s (deadline: ...)"); the
openai client wraps it in `APIConnectionError` (or lets it through), and
`cube.llm.retry.classify` finds it among the causes. RAGFlow's SDK sends through `requests`;
`sync_request` applies the same limits there (`cube.systems.ragflow`).
"""

from __future__ import annotations

import asyncio
import functools
import time
import zlib
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from cube.config.model_spec import DEFAULT_MAX_REPLY_BYTES
from cube.llm.http import httpx_module

MAX_REDIRECTS = 5
MAX_INFLATE_STEP = 256 * 1024  # the most one inflation step produces (bounds a bomb's footprint)
ACCEPT_ENCODING = "gzip, deflate"
REDIRECT_STATUS = frozenset({301, 302, 303, 307, 308})
# headers that carry credentials whatever the service: never sent to another origin
SECRET_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "cookie", "api-key", "x-api-key"}
)


class TransportLimit(Exception):
    """A reply refused by a transport limit: `label` ("redirect", "reply too large", "timeout" (a
    missed deadline), "content-encoding", "malformed response") and `detail`; `retry` when
    another attempt may get through."""

    def __init__(self, label: str, detail: str, retry: bool = False):
        super().__init__(f"{label}: {detail}")
        self.label, self.detail, self.retry = label, detail, retry


@dataclass(frozen=True)
class Limits:
    """The limits of one endpoint's requests.

    Args:
        timeout_s: the deadline of one attempt, redirects and the whole body included.
        max_reply_bytes: the most bytes of a reply, on the wire and inflated.
        follow_redirects: follow redirects (secret headers never go to another origin).
        secret_headers: names of headers holding a secret (header_env), beside SECRET_HEADERS.
        secret_values: values the run holds as secrets: a header carrying one is a secret header.
    """

    timeout_s: float
    max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES
    follow_redirects: bool = False
    secret_headers: frozenset[str] = field(default_factory=frozenset)
    secret_values: tuple[str, ...] = ()

    def secret_header(self, name: str, value: str) -> bool:
        low = name.lower()
        return (
            low in SECRET_HEADERS
            or low in {h.lower() for h in self.secret_headers}
            or any(s and s in value for s in self.secret_values)
        )

    def too_large(self, size: int, what: str) -> TransportLimit:
        return TransportLimit(
            "reply too large",
            f"{what} over {self.max_reply_bytes:,} bytes (max_reply_bytes); not read further",
        )

    def deadline_passed(self) -> TransportLimit:
        return TransportLimit(
            "timeout",
            f"no answer within {self.timeout_s:g} s (deadline: timeout_s bounds the whole request)",
            retry=True,
        )


def origin(url: str) -> str:
    """`scheme://host:port` of `url` (no path, query or user-info: safe to show)."""
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme, 0)
    return f"{parts.scheme}://{parts.hostname or ''}:{port}"


# ------------------------------------------------------------------ inflating, bounded
class Inflater:
    """Decodes one `Content-Encoding` (identity, gzip, deflate) at most `MAX_INFLATE_STEP` bytes
    at a time, so a highly compressed body never inflates at once."""

    def __init__(self, encoding: str):
        enc = (encoding or "").strip().lower()
        if enc in ("", "identity"):
            self._wbits: int | None = None
        elif enc in ("gzip", "x-gzip"):
            self._wbits = 16 + zlib.MAX_WBITS
        elif enc == "deflate":
            self._wbits = zlib.MAX_WBITS  # zlib-wrapped; raw deflate is tried when that fails
        else:
            raise TransportLimit(
                "content-encoding",
                f"the reply is encoded as {enc[:40]!r}; only gzip and deflate are decoded",
            )
        self._d = zlib.decompressobj(self._wbits) if self._wbits is not None else None
        self._started = False

    def feed(self, data: bytes) -> Iterator[bytes]:
        """The inflated bytes of `data`, in steps of at most MAX_INFLATE_STEP."""
        if self._d is None:
            yield data
            return
        try:
            yield from self._inflate(data)
        except zlib.error as exc:
            raise TransportLimit(
                "malformed response", f"the body does not inflate ({exc})"
            ) from None

    def _sniff_deflate(self, data: bytes) -> None:
        """A server's "deflate" is zlib-wrapped or raw: try the header once, on the first bytes."""
        if self._started or self._wbits != zlib.MAX_WBITS or not data:
            return
        self._started = True
        try:
            zlib.decompressobj(zlib.MAX_WBITS).decompress(data[:2])
        except zlib.error:
            self._d = zlib.decompressobj(-zlib.MAX_WBITS)

    def _gzip_member_ended(self) -> bool:
        """Whether a gzip member ended with bytes after it: the next member (gzip may hold
        several)."""
        assert self._d is not None
        return bool(self._d.eof and self._d.unused_data and self._wbits == 16 + zlib.MAX_WBITS)

    def _inflate(self, data: bytes) -> Iterator[bytes]:
        assert self._d is not None
        self._sniff_deflate(data)
        while True:
            out = self._d.decompress(data, MAX_INFLATE_STEP)
            if out:
                yield out
            data = self._d.unconsumed_tail
            if self._gzip_member_ended():
                data, self._d = self._d.unused_data, zlib.decompressobj(self._wbits)  # next member
                continue
            if not data and len(out) < MAX_INFLATE_STEP:
                return


class Counter:
    """The bytes of one reply on the wire and inflated, each checked against the limit."""

    def __init__(self, limits: Limits, encoding: str):
        self.limits, self.inflater = limits, Inflater(encoding)
        self.wire = self.inflated = 0

    def feed(self, chunk: bytes) -> Iterator[bytes]:
        self.wire += len(chunk)
        if self.wire > self.limits.max_reply_bytes:
            raise self.limits.too_large(self.wire, "the reply on the wire is")
        for out in self.inflater.feed(chunk):
            self.inflated += len(out)
            if self.inflated > self.limits.max_reply_bytes:
                raise self.limits.too_large(self.inflated, "the inflated reply is")
            yield out


def declared_too_large(limits: Limits, headers: Any) -> bool:
    """A `Content-Length` over the limit (refused before reading)."""
    try:
        return int(headers.get("content-length") or 0) > limits.max_reply_bytes
    except ValueError:
        return False


def decoded_headers(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """A reply's headers once its body is inflated here: no encoding, no length (it changed)."""
    return [(k, v) for k, v in headers if k.lower() not in ("content-encoding", "content-length")]


# ------------------------------------------------------------------ redirects
def redirect_target(url: str, status: int, location: str | None) -> str | None:
    """The absolute URL a redirect points to, None when `status` is no redirect."""
    if status not in REDIRECT_STATUS or not location:
        return None
    from urllib.parse import urljoin

    return urljoin(url, location.strip())


def refused_redirect(limits: Limits, target: str, hops: int) -> TransportLimit | None:
    """Why a redirect to `target` is not followed (None: follow it)."""
    scheme = urlsplit(target).scheme.lower()
    if scheme not in ("http", "https"):
        return TransportLimit("redirect", f"redirect to a {scheme or 'relative'}: URL not followed")
    if not limits.follow_redirects:
        return TransportLimit(
            "redirect", f"redirect to {origin(target)} not followed (follow_redirects is off)"
        )
    if hops >= MAX_REDIRECTS:
        return TransportLimit(
            "redirect",
            f"more than {MAX_REDIRECTS} redirects, the last to {origin(target)}: not followed",
        )
    return None


def next_hop_headers(limits: Limits, headers: Iterable[tuple[str, str]], cross: bool) -> list:
    """The headers of the next hop: no Host or length (recomputed), and, to another origin, no
    header that holds a secret."""
    return [
        (k, v)
        for k, v in headers
        if k.lower() not in ("host", "content-length", "transfer-encoding")
        and not (cross and limits.secret_header(k, v))
    ]


def next_method(method: str, status: int) -> str:
    """The method after a redirect: 303 (and 301/302 after a POST, as browsers do) turn into GET."""
    if status == 303 and method != "HEAD":
        return "GET"
    if status in (301, 302) and method == "POST":
        return "GET"
    return method


# ------------------------------------------------------------------ the async transport
_httpx = httpx_module()  # imported with openai anyway: this module sits under its client


class _LimitedStream(_httpx.AsyncByteStream):
    """The body of one reply, inflated and counted while read, each read bounded by the deadline
    (an `httpx.AsyncByteStream`)."""

    def __init__(self, inner: Any, counter: Counter, deadline: float):
        self._inner, self._counter, self._deadline = inner, counter, deadline

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunks = self._inner.__aiter__()
        while True:
            try:
                async with asyncio.timeout_at(self._deadline):
                    chunk = await chunks.__anext__()
            except StopAsyncIteration:
                return
            except TimeoutError:
                raise self._counter.limits.deadline_passed() from None
            for out in self._counter.feed(chunk):
                yield out

    async def aclose(self) -> None:
        await self._inner.aclose()


class GuardedTransport(_httpx.AsyncBaseTransport):
    """An httpx async transport around another (aiohttp's or httpx's) that applies `Limits`."""

    def __init__(self, inner: Any, limits: Limits):
        self._inner, self.limits = inner, limits

    async def handle_async_request(self, request: Any) -> Any:
        httpx = _httpx
        limits = self.limits
        deadline = asyncio.get_running_loop().time() + limits.timeout_s
        request.headers["Accept-Encoding"] = ACCEPT_ENCODING
        try:
            async with asyncio.timeout_at(deadline):
                response = await self._follow(request, httpx)
        except TimeoutError:
            raise limits.deadline_passed() from None
        if declared_too_large(limits, response.headers):
            await response.aclose()
            raise limits.too_large(0, "the declared reply (Content-Length) is")
        try:
            counter = Counter(limits, response.headers.get("content-encoding", ""))
        except TransportLimit:
            await response.aclose()
            raise
        return httpx.Response(
            response.status_code,
            headers=decoded_headers(response.headers.multi_items()),
            stream=_LimitedStream(response.stream, counter, deadline),
            extensions=response.extensions,
        )

    async def _follow(self, request: Any, httpx: Any) -> Any:
        """The first answer that is not a redirect to follow (each hop through the inner
        transport); a refused redirect raises."""
        hops = 0
        while True:
            response = await self._inner.handle_async_request(request)
            url = str(request.url)
            target = redirect_target(url, response.status_code, response.headers.get("location"))
            if target is None:
                return response
            await response.aclose()
            if (why := refused_redirect(self.limits, target, hops)) is not None:
                raise why
            hops += 1
            method = next_method(request.method, response.status_code)
            cross = origin(target) != origin(url)
            headers = next_hop_headers(self.limits, request.headers.multi_items(), cross)
            body = request.content if method == request.method else None
            if body is None:
                headers = [(k, v) for k, v in headers if k.lower() != "content-type"]
            request = httpx.Request(
                method, target, headers=headers, content=body, extensions=request.extensions
            )

    async def aclose(self) -> None:
        await self._inner.aclose()


@functools.cache
def guarded_client(base: type) -> type:
    """`base` (an httpx.AsyncClient class) whose transports, proxies' included, are wrapped in
    `GuardedTransport`; constructed with `guard=Limits(...)`, redirects left to the wrapper."""

    class Guarded(base):  # type: ignore[valid-type,misc]
        def __init__(self, *, guard: Limits, **kwargs: Any):
            self._cube_guard = guard
            super().__init__(follow_redirects=False, **kwargs)

        def _init_transport(self, *args: Any, **kwargs: Any) -> Any:
            return GuardedTransport(super()._init_transport(*args, **kwargs), self._cube_guard)

        def _init_proxy_transport(self, *args: Any, **kwargs: Any) -> Any:
            inner = super()._init_proxy_transport(*args, **kwargs)
            return GuardedTransport(inner, self._cube_guard)

    Guarded.__name__ = Guarded.__qualname__ = f"Guarded{base.__name__}"
    return Guarded


# ------------------------------------------------------------------ the sync transport (requests)
def sync_request(
    session: Any, method: str, url: str, limits: Limits, **kwargs: Any
) -> tuple[Any, bytes]:
    """One request through a `requests.Session` under `limits`: (the response, its inflated body).

    Redirects are answered here as in `GuardedTransport`; the body is read raw (`decode_content`
    off) and inflated by `Counter`; every read waits at most until the deadline (the socket's read
    timeout is the time left), and the deadline is checked between reads."""
    t_end = time.monotonic() + limits.timeout_s
    headers = {**dict(kwargs.pop("headers", None) or {}), "Accept-Encoding": ACCEPT_ENCODING}
    hops = 0
    while True:
        left = t_end - time.monotonic()
        if left <= 0:
            raise limits.deadline_passed()
        res = session.request(
            method,
            url,
            headers=headers,
            allow_redirects=False,
            stream=True,
            timeout=(min(left, limits.timeout_s), min(left, limits.timeout_s)),
            **kwargs,
        )
        target = redirect_target(url, res.status_code, res.headers.get("location"))
        if target is None:
            break
        res.close()
        if (why := refused_redirect(limits, target, hops)) is not None:
            raise why
        hops, cross = hops + 1, origin(target) != origin(url)
        headers = dict(next_hop_headers(limits, headers.items(), cross))
        method, url = next_method(method, res.status_code), target
        if method == "GET":
            kwargs.pop("json", None)
    return res, _read_sync(res, limits, t_end)


def _read_sync(res: Any, limits: Limits, t_end: float) -> bytes:
    try:
        if declared_too_large(limits, res.headers):
            raise limits.too_large(0, "the declared reply (Content-Length) is")
        counter, out = Counter(limits, res.headers.get("content-encoding", "")), bytearray()
        while chunk := res.raw.read1(16384, decode_content=False):  # what has come, not 16 KB
            if time.monotonic() > t_end:
                raise limits.deadline_passed()
            for piece in counter.feed(chunk):
                out += piece
        return bytes(out)
    except TimeoutError:
        raise limits.deadline_passed() from None
    finally:
        res.close()


def limit_in(exc: BaseException) -> TransportLimit | None:
    """The TransportLimit `exc` is or was caused by (the openai client wraps it), else None."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, TransportLimit):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None
