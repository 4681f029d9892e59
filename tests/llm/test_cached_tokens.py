"""Cached prompt tokens read from a local server's usage in each provider's shape, and priced.

The server is `tests.openai_server.OpenAIServer` on 127.0.0.1, its usage rewritten into the shape
each provider sends (the field names come from their API references and sources, not from cube):

- OpenAI (and vLLM, SGLang, recent llama.cpp `llama-server`):
  `usage.prompt_tokens_details.cached_tokens`;
- DeepSeek: `usage.prompt_cache_hit_tokens` (with `prompt_cache_miss_tokens`);
- llama.cpp `llama-server` builds without `prompt_tokens_details`: the body's `timings.cache_n`;
- llama-cpp-python's server (0.3.36, checked on a real one): no count at all.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from cube.config.model_spec import ModelSpec
from cube.llm import Request, make_model, response_accounting, usage_summary
from cube.llm.usage import prefix_share
from cube.llm.wire import cached_prompt_tokens
from tests.openai_server import OpenAIServer

CACHED = 3
URL = "http://127.0.0.1:9/v1"  # never contacted: pricing only


def _openai(usage: dict[str, Any], body: dict[str, Any]) -> None:
    usage["prompt_tokens_details"] = {"cached_tokens": CACHED}


def _deepseek(usage: dict[str, Any], body: dict[str, Any]) -> None:
    usage["prompt_cache_hit_tokens"] = CACHED
    usage["prompt_cache_miss_tokens"] = usage["prompt_tokens"] - CACHED


def _llama_server(usage: dict[str, Any], body: dict[str, Any]) -> None:
    n = usage["prompt_tokens"]
    body["timings"] = {"cache_n": CACHED, "prompt_n": n - CACHED, "predicted_n": 1}


def _llama_cpp_python(usage: dict[str, Any], body: dict[str, Any]) -> None:
    """Nothing: llama-cpp-python's usage holds prompt, completion and total tokens only."""


class ShapedServer(OpenAIServer):
    """The local server with its usage in one provider's shape."""

    def __init__(self, shape: Any, **kw: Any) -> None:
        super().__init__(**kw)
        self.shape = shape

    def _completion(self, body: dict[str, Any], text: str) -> dict[str, Any]:
        out = super()._completion(body, text)
        self.shape(out["usage"], out)
        return out


SHAPES = {
    "openai": (_openai, CACHED),
    "deepseek": (_deepseek, CACHED),
    "llama-server": (_llama_server, CACHED),
    "llama-cpp-python": (_llama_cpp_python, 0),
}
PROMPT = "one two three four five six seven eight nine ten"  # 10 prompt tokens at the server


@pytest.mark.parametrize("shape", list(SHAPES))
def test_cached_tokens_read_in_each_providers_shape_and_priced(shape: str, tmp_path: Path):
    reshape, expected = SHAPES[shape]
    with ShapedServer(reshape, reply=lambda body: "7") as server:
        spec = ModelSpec(
            model="m",
            base_url=server.url,
            price_input_per_m=1.0,
            price_cached_input_per_m=0.25,
            price_output_per_m=2.0,
        )
        model = make_model(spec, tmp_path / "c.sqlite")
        req = Request(({"role": "user", "content": PROMPT},))
        resp = model.complete([req], role="judging", progress=False)[0]
        replay = model.complete([req], role="judging", progress=False)[0]
    assert resp.ok and resp.input_tokens == 10 and resp.output_tokens == 1
    assert resp.cached_input_tokens == expected
    # 10 input tokens of which `expected` at the cached price, 1 output token
    price = (1.0 * (10 - expected) + 0.25 * expected + 2.0 * 1) / 1e6
    assert resp.cost == pytest.approx(price)
    # the call cache keeps the count and the price (a replay is what the call cost)
    assert replay.cached and replay.cached_input_tokens == expected
    assert replay.cost == pytest.approx(price)
    row = response_accounting(resp, role="judging")
    summary = usage_summary([pd.DataFrame([row])]).iloc[0]
    assert summary["cached_input_tokens"] == expected
    assert summary["cached_input_share"] == pytest.approx(expected / 10)


def test_no_cached_price_means_the_input_price() -> None:
    from cube.llm.endpoints import call_cost

    spec = ModelSpec(model="m", base_url=URL, price_input_per_m=1.0, price_output_per_m=0.0)
    assert call_cost(spec, 10, 0, 3) == pytest.approx(10 / 1e6)
    # a count above the prompt (a confused server) is capped at the prompt
    cheap = ModelSpec(model="m", base_url=URL, price_input_per_m=1.0, price_cached_input_per_m=0.0)
    assert call_cost(cheap, 10, 0, 99) == 0.0


@pytest.mark.parametrize(
    "usage, timings",
    [
        ({"prompt_tokens_details": {"cached_tokens": "x"}}, None),
        ({"prompt_tokens_details": {"cached_tokens": -4}}, None),
        ({"prompt_cache_hit_tokens": True}, None),
        ({}, {"cache_n": None}),
        ({}, "not a dict"),
        ({"prompt_tokens_details": None}, None),
    ],
)
def test_an_unreadable_count_is_zero_never_invented(usage: dict, timings: Any) -> None:
    assert cached_prompt_tokens(usage, timings) == 0


def test_the_openai_field_wins_over_the_timings() -> None:
    usage = {"prompt_tokens_details": {"cached_tokens": 5}}
    assert cached_prompt_tokens(usage, {"cache_n": 9}) == 5
    assert cached_prompt_tokens({}, {"cache_n": 9}) == 9


def test_the_share_is_nan_without_input_tokens() -> None:
    row = {
        "model": "offline",
        "role": "judging",
        "input_tokens": 0,
        "output_tokens": 0,
        "cached_input_tokens": 0,
        "cost": 0.0,
        "latency_s": 0.0,
        "queue_s": 0.0,
        "cached": False,
        "call_id": "c1",
    }
    share = usage_summary([pd.DataFrame([row])]).iloc[0]["cached_input_share"]
    assert math.isnan(share)


def test_prefix_share_of_a_layout() -> None:
    # three prompts sharing a 6-character head: in sorted order the 2nd and 3rd reuse it
    prompts = ["head: c", "head: a", "head: b"]
    assert prefix_share(prompts) == pytest.approx(12 / 21)
    assert prefix_share(["abc", "xyz"]) == 0.0
    assert prefix_share(["same", "same"]) == pytest.approx(4 / 8)
    assert math.isnan(prefix_share([])) and math.isnan(prefix_share([""]))


def test_a_cached_count_above_the_input_tokens_is_clipped_where_the_row_is_recorded(
    tmp_path: Path,
) -> None:
    """A llama-server build whose `usage.prompt_tokens` counts only the tokens it processed
    reports `timings.cache_n` beside them: 25 cached of 10 prompt tokens. The usage row keeps at
    most the call's input tokens, so the usage table's cached share never reads above 100 %."""

    def _beside(usage: dict[str, Any], body: dict[str, Any]) -> None:
        body["timings"] = {"cache_n": 25, "prompt_n": usage["prompt_tokens"], "predicted_n": 1}

    with ShapedServer(_beside, reply=lambda body: "7") as server:
        spec = ModelSpec(model="m", base_url=server.url)
        model = make_model(spec, tmp_path / "c.sqlite")
        req = Request(({"role": "user", "content": PROMPT},))
        resp = model.complete([req], role="judging", progress=False)[0]
    assert resp.ok and resp.input_tokens == 10 and resp.cached_input_tokens == 25  # as sent
    row = response_accounting(resp, role="judging")
    assert row["cached_input_tokens"] == 10
    summary = usage_summary([pd.DataFrame([row, {**row, "call_id": "other"}])]).iloc[0]
    assert summary["cached_input_tokens"] == 20
    assert summary["cached_input_share"] == pytest.approx(1.0)
