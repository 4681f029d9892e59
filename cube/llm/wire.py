"""The wire format of a call: the request it sends and how the reply is read.

`ChatCompletions` is OpenAI's chat completions (`POST <base_url>/chat/completions`): the body of
one call (`request_body`, also written to batch files), and the reading of its reply
(`parse_completion`: text, token counts, finish reason, served model). A 200 reply that cannot
be used (not JSON, no choices, no message content) raises `MalformedReply`, which the caller treats
as a transient fault (`cube.llm.retry`). `Endpoints` and `OpenAIModel` send through a wire
object, so another JSON protocol (`cube.llm.json_wire`: an HTTP system's) reuses the same retries,
breaker, pool, concurrency and cache. A wire object has `send(client, spec, request, form)`,
`read(body, guard) -> Reply` (the body read through `cube.llm.replies.ReplyGuard`),
`key_payload(spec, request)` and `uses_key` (whether the API key is sent).

Structured output (`structured_output: auto | on` and a request with a `schema`): the request asks
for JSON the schema constrains, first as OpenAI's `response_format` `json_schema` (OpenAI, vLLM),
and where the endpoint refuses that type (an HTTP 4xx/5xx whose message names `response_format` or
`json_schema`; llama-cpp-python answers 500 "Input should be 'text' or 'json_object'") as
llama.cpp's `{"type": "json_object", "schema": ...}`, then (auto) as free text, which the caller
parses as before. `FormatFallback` holds the form sent now: a refusal moves the whole batch to the
next form at once. `on` fails the calls instead of sending free text.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from cube.config.model_spec import ModelSpec
from cube.llm.cache import key_payload
from cube.llm.calls import Request
from cube.llm.replies import MalformedReply as MalformedReply
from cube.llm.replies import ReplyGuard

log = logging.getLogger("cube.llm")
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


def cached_prompt_tokens(usage: dict, timings: Any = None) -> int:
    """Prompt tokens the provider served from its prompt cache, in each provider's shape:

    - OpenAI's `usage.prompt_tokens_details.cached_tokens` (vLLM, SGLang and recent llama.cpp
      `llama-server` builds report it the same way);
    - DeepSeek's `usage.prompt_cache_hit_tokens`;
    - llama.cpp `llama-server`'s `timings.cache_n` (the body's top-level `timings`: the tokens of
      the prompt taken from the slot's KV cache), for builds that report no
      `prompt_tokens_details`.

    0 when none is reported (llama-cpp-python's server, 0.3.x, reports none: its reuse shows only
    in its log, "Llama.generate: N prefix-match hit"; see benchmarks/local_llm_prefix_cache.py).
    An unreadable or negative value counts as 0 (a count is never invented)."""
    details = usage.get("prompt_tokens_details") or {}
    value = details.get("cached_tokens") if isinstance(details, dict) else None
    if value is None:
        value = usage.get("prompt_cache_hit_tokens")
    if value is None and isinstance(timings, dict):
        value = timings.get("cache_n")
    if isinstance(value, bool):
        return 0
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError):
        return 0


PLAIN = ReplyGuard()  # no secrets to redact; decodes defensively and caps


def parse_completion(
    body: str, guard: ReplyGuard = PLAIN
) -> tuple[str, int, int, str | None, str | None, int]:
    """(text, prompt tokens, completion tokens, finish reason, served model, cached prompt
    tokens), the body read by `guard` (`cube.llm.replies`: bounded nesting, surrogates replaced,
    secrets redacted, strings capped)."""
    return _completion(body, guard)[0]


def _completion(
    body: str, guard: ReplyGuard
) -> tuple[tuple[str, int, int, str | None, str | None, int], dict[str, int]]:
    data, _, notes = guard.loads(body)
    _require_choices(data)
    choice, content = _first_choice(data)
    usage = data.get("usage") or {}
    n_in, n_out = _token_counts(usage)
    return (
        content,
        n_in,
        n_out,
        choice.get("finish_reason"),
        data.get("model"),
        cached_prompt_tokens(usage, data.get("timings")),
    ), notes


def _require_choices(data: Any) -> None:
    """Raise `MalformedReply` when the answer has no choices (naming its error, if it gives one)."""
    if isinstance(data, dict) and data.get("choices"):
        return
    err = data.get("error") if isinstance(data, dict) else None
    raise MalformedReply(f"no choices in the answer{f' (error: {err})' if err else ''}")


def _first_choice(data: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The first choice and its message's text (`MalformedReply` when it has none)."""
    choice = data["choices"][0] if isinstance(data["choices"], list) else None
    content = (choice.get("message") or {}).get("content") if isinstance(choice, dict) else None
    if not isinstance(content, str):
        raise MalformedReply("the first choice has no message content")
    return choice, content


def _token_counts(usage: Any) -> tuple[int, int]:
    """The prompt and completion tokens of `usage` (0 when not given)."""
    try:
        return int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    except (AttributeError, TypeError, ValueError):
        raise MalformedReply(f"unreadable usage {usage!r}") from None


@dataclass
class Reply:
    """What a wire format reads from a usable answer."""

    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    finish_reason: str | None = None
    served_model: str | None = None
    cached_input_tokens: int = 0
    notes: dict[str, int] | None = None  # what reading changed ({"truncated": n strings cut})


class ChatCompletions:
    """OpenAI's chat completions on the wire: `POST <base_url>/chat/completions`.

    `send` posts through the documented raw route of the openai client (`post`, cast_to=str): the
    same HTTP call as `chat.completions.create` without its per-call param transform and model
    parsing, which cost more CPU than the rest of a call; `read` parses the body."""

    uses_key = True  # the client sends `Authorization: Bearer <key>` (NO_KEY when there is none)

    def send(self, client: Any, spec: ModelSpec, request: Request, form: str) -> Awaitable[str]:
        return client.post("/chat/completions", body=request_body(spec, request, form), cast_to=str)

    def read(self, body: str, guard: ReplyGuard = PLAIN) -> Reply:
        (text, n_in, n_out, finish, served, n_cached), notes = _completion(body, guard)
        return Reply(text, n_in, n_out, finish, served, n_cached, notes or None)

    def key_payload(self, spec: ModelSpec, request: Request) -> dict[str, Any]:
        """What identifies the call in the cache (`cube.llm.cache.key_payload`)."""
        return key_payload(spec, request)


CHAT = ChatCompletions()


class FormatFallback:
    """The structured-output form a batch sends now (`FORMATS`), and the forms the endpoint
    refused -> why. `form(request)` is "text" for a request without a schema, and "refused" once
    `structured_output: on` has no form left."""

    def __init__(self, spec: ModelSpec, scrub: Callable[[str], str]):
        self.spec, self._scrub = spec, scrub
        self.format = FORMATS[0] if spec.structured_output != "off" else "text"
        self.refused: dict[str, str] = {}

    def form(self, request: Request) -> str:
        return self.format if request.schema is not None else "text"

    def refuse(self, form: str, detail: str) -> None:
        """The endpoint refused `form`: later requests use the next form (once, however many calls
        saw the refusal at the same time)."""
        if form == self.format and form != "text":
            self.refused[form] = self._scrub(detail)[:200]
            self.format = FORMATS[FORMATS.index(form) + 1]
            if self.format == "text" and self.spec.structured_output == "on":
                self.format = "refused"
            log.warning(
                "%s: the endpoint refused response_format %s (%s); next: %s",
                self.spec.model,
                form,
                self.refused[form][:80],
                self.format,
            )
