"""The two values every model call exchanges: a `Request` and its `Response`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Request:
    """One chat call. `messages` for LLMs; `context` (structured inputs) for offline models.

    `template_version` and `sample` enter the cache key: a changed prompt template or a
    repeated judgment (`samples: n`) is a different call. `context` does not (it is derived
    from the same inputs as the messages). `schema`: the JSON schema the reply should follow,
    sent as a constrained `response_format` where the model's `structured_output` allows it
    (`cube.llm.wire`); it enters the cache key then.
    """

    messages: tuple[dict[str, str], ...]
    context: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    template_version: str = ""
    sample: int = 0
    schema: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    # the JSON body of a call that is not a chat (an HTTP system's, `cube.llm.json_wire`): it is
    # what that wire sends and keys the cache by
    payload: Any = field(default=None, compare=False, hash=False)


@dataclass
class Response:
    """The outcome of one call: `text` on success, `error` (with its reason) on failure."""

    text: str | None
    error: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = (
        0  # of input_tokens, those the provider served from its prompt cache (when reported)
    )
    cost: float | None = None
    latency_s: float = 0.0  # time holding a concurrency slot (the requests), not waiting for one
    queue_s: float = 0.0  # time waiting for a concurrency slot
    cached: bool = False
    attempts: int = 0
    model: str = ""
    endpoint: str = ""
    detail: dict[str, Any] | None = None
    call_id: str = ""  # identifies the call: the cache key (LLM) or a hash of the inputs (offline)

    @property
    def ok(self) -> bool:
        return self.error is None and self.text is not None
