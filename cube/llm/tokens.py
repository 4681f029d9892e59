"""Counting a model's prompt tokens before any call, for `cube plan`.

Where a real tokenizer is known it is used, else a stated estimate (`TokenCount.method` says which):

- a local llama-cpp-python server whose GGUF file is known (`cube.llm.local.served_gguf`: the
  params' model is a GGUF path, `cube serve` noted the port, or the server names the file): the
  model's own tokenizer in this process, loaded vocab-only (`llama_cpp.Llama(vocab_only=True)`,
  a few MB, no weights), the same tokens the server would count and no request at all;
- another local llama.cpp server (every base URL local, `cube.config.model_spec.local_url`): its
  tokenizer through its tokenize route (`POST /extras/tokenize {"input"}` of llama-cpp-python's
  server, `POST /tokenize {"content"}` of llama.cpp's `llama-server`), one request at a time
  (`_ROUTE_LOCK`) and never while this process has calls in flight to that server
  (`cube.llm.breaker.calls_in_flight`; the estimate is used then). Issue 38 saw a
  llama-cpp-python server (0.3.36) die of a segmentation fault after `cube plan`'s tokenize
  requests; measured again, that build (compiled for the machine's own CPU, AVX-512/AMX) died on
  any chat completion of more than one prompt token, and a build without those kernels survived
  30 tokenize requests beside a completion. The route is not documented as safe beside
  generation either, so it is called gently or not at all: never inside `cube run`
  (`IN_RUN_ENV`, set for its stages' kernel: a run's calls are made there, in another process than
  a count, e.g. the sequential driver's plan, so this process's in-flight count cannot see them),
  and each reply bounded like every other (`timeout_s` for the whole request, `max_reply_bytes`,
  no redirects: `cube.llm.transport`'s limits);
- an OpenAI model: `tiktoken` when it is installed and its encoding loads (it downloads the encoding
  file once; offline without it, the estimate is used);
- otherwise `estimate`: one token per CJK character plus one per four other characters (the rule of
  thumb of OpenAI's tokenizer page for English).

A tokenizer that needs a request per text counts at most `SAMPLE` texts and scales the estimate of
the rest by the ratio it measured on them (`method` then says so).

Chat templates add tokens that no tokenize route sees (role markers per message; SmolLM2's template
adds a whole default system prompt when there is none: ~35 tokens on a ~950-token judge prompt).
Given each request's message roles (`roles`) and calls of the model already answered (`observed`:
their messages and the `usage.prompt_tokens` the server reported, e.g. from the cache or `cube plan
--pilot`), a local server's template tokens are measured per role sequence without any new call:
reported minus the contents as tokenized (the median of up to `OBSERVED` calls), and added to each
count. For tiktoken the documented chat format's 3 tokens per message and 3 per call are added.
Otherwise counts are of the contents alone and `method` says so.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import re
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cube.config.model_spec import ModelSpec, local_url
from cube.llm.transport import ACCEPT_ENCODING, Counter, Limits, TransportLimit, declared_too_large

SAMPLE = 200
_CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]")


@dataclass(frozen=True)
class TokenCount:
    counts: list[int]
    method: str  # "server tokenize route", "tiktoken <encoding>", "estimate (...)", or a scaled mix


def prompt_text(request: Any) -> str:
    """A request's messages' contents, joined: the text `count_prompt_tokens` counts for one
    call."""
    return "\n".join(str(m.get("content", "")) for m in request.messages)


def estimate_tokens(text: str) -> int:
    """One token per CJK character plus one per four other characters (at least 1 for a non-empty
    text)."""
    cjk = len(_CJK.findall(text))
    other = len(text) - cjk
    return cjk + -(-other // 4) if text else 0


ESTIMATE = "estimate (1 per CJK character + 1 per 4 other characters)"


# one tokenize request at a time, process-wide (see the module's docstring)
_ROUTE_LOCK = threading.Lock()
# set by `cube run` for its stages: inside a run the server's tokenize route is never used
IN_RUN_ENV = "CUBE_IN_RUN"
IN_RUN = "the server's tokenize route is not used inside `cube run`"


def in_run() -> bool:
    """This process runs a stage of `cube run` (`IN_RUN_ENV` is set)."""
    return bool(os.environ.get(IN_RUN_ENV))


class ServerBusy(RuntimeError):
    """The server is answering this process's calls: its tokenize route is not used beside them."""


def _server_counter(spec: ModelSpec, timeout_s: float = 10.0) -> Callable[[str], int] | None:
    """A function counting a text's tokens with the local server's tokenizer, or None when no
    tokenize route answers (or the server is busy with this process's calls). Each request is
    sent alone (`_ROUTE_LOCK`) and raises `ServerBusy` while calls are in flight to it."""
    from cube.llm.breaker import calls_in_flight
    from cube.llm.http import httpx_module

    httpx = httpx_module()
    base = (spec.endpoints()[0] or "").rstrip("/")
    root = base[:-3] if base.endswith("/v1") else base
    routes = (
        (f"{root}/extras/tokenize", lambda t: {"input": t, "model": spec.model}),
        (f"{root}/tokenize", lambda t: {"content": t}),
    )
    urls = [u for u in spec.endpoints() if u]
    limits = Limits(timeout_s=timeout_s, max_reply_bytes=spec.max_reply_bytes)
    client = httpx.Client(timeout=timeout_s, follow_redirects=False)

    def post(url: str, body: dict) -> tuple[int, Any]:
        with _ROUTE_LOCK:
            if calls_in_flight(urls):
                raise ServerBusy(base)
            return _bounded_post(client, url, body, limits)

    for url, body in routes:
        try:
            status, got = post(url, body("probe"))
            if status == 200 and isinstance(got.get("tokens"), list):

                def count(text: str, url: str = url, body: Callable = body) -> int:
                    status, got = post(url, body(text))
                    if status != 200:
                        raise ValueError(f"the tokenize route answered HTTP {status}")
                    return len(got["tokens"])

                return count
        except ServerBusy:
            break
        except (httpx.HTTPError, TransportLimit, ValueError, AttributeError):
            continue
    client.close()
    return None


def _bounded_post(client: Any, url: str, body: dict, limits: Limits) -> tuple[int, Any]:
    """(status, JSON body) of one POST under `limits`: the whole request within `timeout_s`, the
    reply (on the wire and inflated) within `max_reply_bytes`, read as it streams (raises
    TransportLimit past either)."""
    t_end = time.monotonic() + limits.timeout_s
    with client.stream("POST", url, json=body, headers={"Accept-Encoding": ACCEPT_ENCODING}) as r:
        if declared_too_large(limits, r.headers):
            raise limits.too_large(0, "the declared reply (Content-Length) is")
        counter, out = Counter(limits, r.headers.get("content-encoding", "")), bytearray()
        for chunk in r.iter_raw():
            if time.monotonic() > t_end:
                raise limits.deadline_passed()
            for piece in counter.feed(chunk):
                out += piece
        return r.status_code, json.loads(out) if out else {}


@functools.lru_cache(maxsize=4)
def _gguf_vocab(path: str) -> Any:
    """The GGUF's tokenizer alone (`vocab_only`: no weights, no context), loaded once."""
    from llama_cpp import Llama  # the extra cube[local]

    vocab = Llama(model_path=path, vocab_only=True, verbose=False)
    # closed before the interpreter tears llama_cpp's module down: its __del__ at exit otherwise
    # prints a TypeError traceback ('NoneType' object is not callable) after every such process
    atexit.register(vocab.close)
    return vocab


def _local_counter(spec: ModelSpec) -> tuple[Callable[[str], int], str] | None:
    """The served GGUF's own tokenizer in this process (no request), or None when the file is not
    known or llama-cpp-python is not installed. It counts as the server's tokenize route does
    (`special=True`, the BOS token included)."""
    from cube.llm.local import served_gguf

    urls = [u for u in spec.endpoints() if u]
    path: Path | None = served_gguf(urls[0], spec.model) if urls else None
    if path is None:
        return None
    try:
        vocab = _gguf_vocab(str(path))
    except Exception:  # noqa: BLE001  not installed, or a file llama.cpp cannot read: the route or the estimate
        return None
    return (
        lambda t: len(vocab.tokenize(t.encode("utf-8"), special=True)),
        f"the model's own tokenizer ({path.name}, loaded here vocab-only)",
    )


OBSERVED = 5  # answered calls per role sequence that measure a chat template's tokens


def template_tokens(
    count: Callable[[str], int], observed: Sequence[tuple[Sequence[dict[str, Any]], int]]
) -> dict[tuple[str, ...], int]:
    """Per role sequence: the median of (reported prompt tokens - the messages' contents counted)
    over up to `OBSERVED` answered calls (see the module's docstring)."""
    seen: dict[tuple[str, ...], list[int]] = {}
    for messages, reported in observed:
        roles = tuple(str(m.get("role", "")) for m in messages)
        got = seen.setdefault(roles, [])
        if len(got) < OBSERVED and reported:
            got.append(int(reported) - sum(count(str(m.get("content", ""))) for m in messages))
    return {r: max(0, round(statistics.median(v))) for r, v in seen.items() if v}


def _tiktoken_counter(model: str) -> tuple[Callable[[str], int], str] | None:
    try:
        import tiktoken  # optional: not a dependency of cube

        enc = tiktoken.encoding_for_model(model)
        return (lambda t: len(enc.encode(t, disallowed_special=()))), f"tiktoken {enc.name}"
    except Exception:  # noqa: BLE001  not installed, unknown model, or the encoding file cannot be fetched
        return None


def count_prompt_tokens(
    spec: ModelSpec,
    texts: Sequence[str],
    roles: Sequence[tuple[str, ...]] | None = None,
    observed: Sequence[tuple[Sequence[dict[str, Any]], int]] = (),
) -> TokenCount:
    """Tokens of each text (a call's messages joined, `prompt_text`) under the model's tokenizer, or
    the estimate; with `roles` (each call's message roles) the chat template's tokens are added
    where they are known (the module's docstring)."""
    texts = list(texts)
    counted = _count_contents(spec, texts)
    if roles is None or not texts or counted.method.startswith(("offline", "estimate")):
        return counted
    roles = [tuple(r) for r in roles]
    if counted.method.startswith("tiktoken"):
        return _with_chat_format(counted, roles)
    return _with_template(counted, roles, _measured_template_tokens(spec, counted.method, observed))


def _with_chat_format(counted: TokenCount, roles: list[tuple[str, ...]]) -> TokenCount:
    """tiktoken's counts with OpenAI's chat format added: 3 tokens per message and 3 per call."""
    return TokenCount(
        [c + 3 * len(r) + 3 for c, r in zip(counted.counts, roles, strict=True)],
        counted.method + " + 3 tokens per message and 3 per call (the chat format)",
    )


def _with_template(
    counted: TokenCount, roles: list[tuple[str, ...]], extra: dict[tuple[str, ...], int]
) -> TokenCount:
    """The counts with the chat template's measured tokens added, when they are known for every
    call's role sequence; else the counts, saying the template's tokens are not counted."""
    if any(r not in extra for r in roles):
        return TokenCount(
            counted.counts,
            counted.method + "; the chat template's tokens not counted (no answered "
            "call of this model to measure them: cube plan --pilot N)",
        )
    shown = ", ".join(f"{extra[r]} for {'+'.join(r)}" for r in sorted(set(roles)))
    return TokenCount(
        [c + extra[r] for c, r in zip(counted.counts, roles, strict=True)],
        f"{counted.method} + the chat template's tokens per call ({shown}; measured on "
        "answered calls)",
    )


def _measured_template_tokens(
    spec: ModelSpec, method: str, observed: Sequence[tuple[Sequence[dict[str, Any]], int]]
) -> dict[tuple[str, ...], int]:
    """The chat template's tokens per role sequence, measured on the answered calls `observed`
    by the counter that counted the contents; empty when there is none to measure with."""
    counter = _measuring_counter(spec, method) if observed else None
    if counter is None:
        return {}
    try:
        return template_tokens(counter, observed)
    except Exception:  # noqa: BLE001  the route stopped answering or the server got busy
        return {}


def _measuring_counter(spec: ModelSpec, method: str) -> Callable[[str], int] | None:
    """The counter that counted the contents (`method`), to measure the template's tokens with."""
    if method.startswith("the model's own tokenizer"):
        found = _local_counter(spec)
        return found[0] if found else None
    if method.startswith("server tokenize route") and not in_run():
        return _server_counter(spec)
    return None


def _all_local(spec: ModelSpec) -> bool:
    """Whether the model has base URLs and every one is local (a llama.cpp server, say)."""
    urls = [u for u in spec.endpoints() if u]
    return bool(urls) and all(local_url(u) for u in urls)


def _count_by_route(
    counter: Callable[[str], int], texts: list[str], estimates: list[int]
) -> TokenCount:
    """The texts counted by a server's tokenize route: each of up to `SAMPLE` texts, else a sample
    of `SAMPLE` and the estimates of all scaled by the ratio measured on it."""
    if len(texts) <= SAMPLE:
        return TokenCount([counter(t) for t in texts], "server tokenize route")
    step = len(texts) / SAMPLE
    picked = [int(i * step) for i in range(SAMPLE)]
    measured = sum(counter(texts[i]) for i in picked)
    ratio = measured / max(1, sum(estimates[i] for i in picked))
    return TokenCount(
        [round(e * ratio) for e in estimates],
        f"server tokenize route on {SAMPLE} of {len(texts)} prompts, the rest scaled "
        f"(x{ratio:.2f} the estimate)",
    )


def _count_on_local_server(
    spec: ModelSpec, texts: list[str], estimates: list[int]
) -> TokenCount | None:
    """The texts counted by the model's own tokenizer, else (outside `cube run`) by the server's
    tokenize route; None when neither is available or the route stopped answering."""
    local = _local_counter(spec)
    if local is not None:
        count, name = local
        return TokenCount([count(t) for t in texts], name)
    counter = None if in_run() else _server_counter(spec)
    if counter is None:
        return None
    try:
        return _count_by_route(counter, texts, estimates)
    except Exception:  # noqa: BLE001  the route stopped answering: fall back to the estimate
        return None


def _count_contents(spec: ModelSpec, texts: list[str]) -> TokenCount:
    if spec.provider == "offline":
        return TokenCount([0] * len(texts), "offline (no tokens)")
    estimates = [estimate_tokens(t) for t in texts]
    local = _all_local(spec)
    counted = _count_on_local_server(spec, texts, estimates) if local else None
    if counted is not None:
        return counted
    found = _tiktoken_counter(spec.model)
    if found is not None:
        counter, name = found
        return TokenCount([counter(t) for t in texts], name)
    return TokenCount(estimates, f"{ESTIMATE}; {IN_RUN}" if local and in_run() else ESTIMATE)
