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

An LLM reads `Request.messages`; an offline algorithm reads the structured
`Request.context` (question, documents, answer, dimension, ...). Callers always fill both,
so no pipeline branches on "offline".
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cube.config import ModelSpec


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

    @property
    def ok(self) -> bool:
        return self.error is None and self.text is not None


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

    def _one(self, request: Request) -> Response:
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
        return r

    async def acomplete(self, requests: Sequence[Request], *, role: str) -> list[Response]:
        return [self._one(r) for r in requests]

    def complete(
        self, requests: Sequence[Request], *, role: str, desc: str | None = None, progress: bool = True
    ) -> list[Response]:
        from tqdm.auto import tqdm

        return [self._one(r) for r in tqdm(requests, desc=desc or self.name, disable=not progress)]


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


class OpenAIModel(Model):  # implemented by the LLM-access work (cache, retries, concurrency)
    def __init__(self, spec: ModelSpec, cache_path: Path | None = None):
        super().__init__(spec)
        self.cache_path = cache_path
