"""The LLM layer: one interface for every model (OpenAI-compatible endpoints and offline
algorithms), its cache, accounting, adaptive concurrency, batch judging and pre-flight checks.

Modules:
    models       Model, OfflineModel, OpenAIModel, make_model, register_offline (the interface)
    calls        Request, Response
    endpoints    one call to OpenAI-compatible endpoints with its retries, and its cost
    wire         the wire format: chat-completions request body, reply reading, structured output
    retry        retry classification as a table (status / exception -> retry, reason), backoff
    breaker      the circuit breaker (stops, cool-downs, trials), owning its state
    pool         pooled clients per endpoint, least-busy choice
    json_wire    JsonWire: any JSON endpoint over HTTP (an HTTP system) with the same machinery
    concurrency  AdaptiveLimit (AIMD on 429s and timeouts)
    cache        CallCache (SQLite, one row per call; claims between processes), cache_key
    usage        response_accounting, usage_summary (calls, tokens, cost per role and model)
    batch        write given calls as OpenAI Batch JSONL / store results in the cache (the calls
                 themselves are built by the judges: `cube.run.batch`)
    batch_remote submit/status/fetch through OpenAI's Batch API
    preflight    API keys present and endpoints answering before a run starts

The public names other modules use are re-exported here (`from cube.llm import Request,
make_model`). This layer knows requests, not judges, questions or runs: it imports only
`cube.config`. The names are re-exported lazily (`__getattr__`): importing the package imports
none of its modules.
"""

from __future__ import annotations

import importlib
from typing import Any

# name re-exported -> the module defining it, imported on first use (`__getattr__`)
_LAZY = {
    name: module
    for module, names in {
        "cube.llm.cache": ("CacheError", "CallCache", "cache_key", "key_payload"),
        "cube.llm.calls": ("Request", "Response"),
        "cube.llm.endpoints": ("Endpoints", "call_cost"),
        "cube.llm.json_wire": ("JsonWire",),
        "cube.llm.wire": ("NO_KEY", "MalformedReply"),
        "cube.llm.models": (
            "CallLog",
            "LLMConfigError",
            "Model",
            "OfflineModel",
            "OpenAIModel",
            "make_model",
            "offline_names",
            "progress_bar",
            "register_offline",
            "run_sync",
            "warn_truncated",
        ),
        "cube.llm.tokens": ("prompt_text",),
        "cube.llm.usage": ("no_call_accounting", "response_accounting", "usage_summary"),
    }.items()
    for name in names
}

__all__ = [
    "NO_KEY",
    "CacheError",
    "CallCache",
    "CallLog",
    "Endpoints",
    "JsonWire",
    "LLMConfigError",
    "MalformedReply",
    "Model",
    "OfflineModel",
    "OpenAIModel",
    "Request",
    "Response",
    "cache_key",
    "call_cost",
    "key_payload",
    "make_model",
    "no_call_accounting",
    "offline_names",
    "progress_bar",
    "prompt_text",
    "register_offline",
    "response_accounting",
    "run_sync",
    "usage_summary",
    "warn_truncated",
]


def __getattr__(name: str) -> Any:
    """PEP 562: a re-exported name is imported from its module on first use, so importing one
    module of the package (`cube.llm.local`, by `cube serve --help`) loads neither openai nor
    pandas."""
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
