"""A wire format for any JSON endpoint over HTTP (an HTTP system under test), beside the chat one.

`JsonWire(method, url, headers, check)` sends each request's `payload` as the JSON body (POST,
PUT) or as query parameters (GET) to `url` itself, through the same pooled `openai` clients, retry
table, circuit breaker, adaptive concurrency and call cache as a model's calls (the client's
documented raw route: `post` / `put` / `get` with `cast_to=str`). The reply must be JSON that
`check` accepts (it raises `MalformedReply` with the reason: e.g. a response path that finds
nothing); an unusable reply is retried like an unusable chat answer. The reply body is kept whole
as the call's text (and cache row), so changed response paths re-read stored replies without a
request: whole once read by `cube.llm.replies.ReplyGuard` (nesting bounded, lone surrogates
replaced, the run's secrets redacted, each string capped at `MAX_TEXT_CHARS`, serialised again
when that changed anything), and within the transport limits of `cube.llm.transport`.

Only the request's own headers reach a user's service: `Content-Type`, `Accept`, a `User-Agent`
naming the workbench, the plain headers and the secret ones (`header_env`). The client's others are
left out: its placeholder `Authorization` (unless a secret header sets one), the
`OpenAI-Organization` and `OpenAI-Project` it reads from the environment (an OpenAI account's ids
are no business of another service) and its `X-Stainless-*` platform headers. The cache key
(`key_payload`) holds the method, the URL, the plain headers and the body, and of the secret
headers only a digest of their values (`secret_digest`): two services behind one URL told apart by
their key alone (Dify's apps) never share cached replies, and a changed key sends again, while
the cache holds no key.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import openai

from cube.config.model_spec import ModelSpec
from cube.llm.cache import endpoint_id
from cube.llm.calls import Request
from cube.llm.replies import ReplyGuard
from cube.llm.wire import PLAIN, Reply

USER_AGENT = "cube-workbench"
KEPT = ("accept", "content-type", "user-agent")  # the client's default headers a request keeps
# added by the client per request, outside its default headers
PER_REQUEST = ("X-Stainless-Retry-Count", "X-Stainless-Read-Timeout")


class JsonWire:
    """Any JSON endpoint: `method` to `url` with the request's payload; replies checked by `check`.

    Args:
        method: POST, PUT or GET.
        url: the full URL the requests go to.
        headers: plain (non-secret) headers of every request; they enter the cache key.
        check: raises MalformedReply when a parsed reply is unusable.
        secret_headers: names of the secret headers the pool's clients send (not in the key).
        secret_digest: a digest of the secret headers' values (`secret_digest`), in the key.
    """

    uses_key = False  # the client's placeholder key is not sent (see `send`)

    def __init__(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        check: Callable[[Any], None],
        secret_headers: tuple[str, ...] = (),
        secret_digest: str = "",
    ):
        self.method, self.url, self.headers, self.check = method, url, dict(headers), check
        self.secret_digest = secret_digest
        self._own = {h.lower() for h in (*KEPT, *headers, *secret_headers)}

    def _options(self, client: Any) -> dict[str, Any]:
        """The request options: the client's default headers other than the request's own left
        out (`Omit`), the user agent and the plain headers set."""
        names = [*client.default_headers, "Authorization", *PER_REQUEST]
        omitted = {h: openai.Omit() for h in names if h.lower() not in self._own}
        return {"headers": {**omitted, "User-Agent": USER_AGENT, **self.headers}}

    def send(self, client: Any, spec: ModelSpec, request: Request, form: str) -> Awaitable[str]:
        options = self._options(client)
        if self.method == "GET":
            return client.get(self.url, cast_to=str, options={**options, "params": request.payload})
        verb = client.put if self.method == "PUT" else client.post
        return verb(self.url, body=request.payload, cast_to=str, options=options)

    def read(self, body: str, guard: ReplyGuard = PLAIN) -> Reply:
        data, text, notes = guard.loads(body)
        self.check(data)
        return Reply(text=text, notes=notes or None)

    def key_payload(self, spec: ModelSpec, request: Request) -> dict[str, Any]:
        return {
            "wire": "http",
            "method": self.method,
            "url": endpoint_id(self.url),
            "headers": dict(sorted(self.headers.items())),
            "body": request.payload,
            **({"secrets": self.secret_digest} if self.secret_digest else {}),
        }


def secret_digest(values: dict[str, str]) -> str:
    """A short one-way digest of secret header values (header name -> value): tells keys apart
    in a cache key without storing them (a key is long and random, so 16 hex characters of its
    SHA-256 reveal nothing usable)."""
    import hashlib

    if not values:
        return ""
    text = json.dumps(sorted(values.items()))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
