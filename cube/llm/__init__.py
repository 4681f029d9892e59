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
`cube.config`.
"""

from cube.llm.cache import CacheError, CallCache, cache_key, key_payload
from cube.llm.calls import Request, Response
from cube.llm.endpoints import Endpoints, call_cost
from cube.llm.json_wire import JsonWire
from cube.llm.models import (
    LLMConfigError,
    Model,
    OfflineModel,
    OpenAIModel,
    make_model,
    offline_names,
    progress_bar,
    register_offline,
    run_sync,
    warn_truncated,
)
from cube.llm.tokens import prompt_text
from cube.llm.usage import no_call_accounting, response_accounting, usage_summary
from cube.llm.wire import NO_KEY, MalformedReply

__all__ = [
    "NO_KEY",
    "CacheError",
    "CallCache",
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
