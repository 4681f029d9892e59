"""Issue 29 item 6: the plan line counts what will be sent. A default (offline) run logged
"17600 calls, 17600 to send" though an offline algorithm sends nothing; calls in the cache are not
to send either (`tests/run/test_plan.py` checks the cached count against a local server)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from cube.config.params import parse_params
from cube.run.plan import build_plan, plan_line

OFFLINE = {"provider": "offline", "model": "rubric-lenient"}


def test_an_offline_run_plans_its_calls_and_nothing_to_send(tmp_path: Path):
    params = parse_params(
        {
            "run": "t",
            "corpus": {"source": "demo", "n_items": 8, "seed": 1},
            "questions": {"generator": "template", "seed": 1},
            "systems": [{"kind": "builtin", "name": "bm25", "top_n": 4}],
            "judges": [{"name": "lenient", "model": OFFLINE}],
        }
    )
    plan = build_plan(params, base_dir=tmp_path, cache_path=tmp_path / "cache.sqlite")
    calls = int(plan["calls"].sum())
    assert calls > 0 and int(plan["to_send"].sum()) == 0  # was equal to the calls
    assert plan_line(plan) == f"{calls} calls, 0 to send ({calls} computed offline)"


def test_the_line_says_what_is_cached_and_what_is_left_to_send():
    plan = pd.DataFrame(
        [
            {"calls": 10, "cached_calls": 6, "to_send": 4, "tokens_by": "tiktoken"},
            {"calls": 5, "cached_calls": 0, "to_send": 0, "tokens_by": "offline (no tokens)"},
        ]
    )
    assert plan_line(plan) == "15 calls, 4 to send (6 in the cache, 5 computed offline)"
    fresh = plan.iloc[:1].assign(cached_calls=0, to_send=10)
    assert plan_line(fresh) == "10 calls, 10 to send"
