"""`cube plan` estimates the share of a judge's prompt text a prefix cache could serve (issue 40.4):
the judge's calls go in prompt-text order, so the answers of one question share everything up to
the answer; roles sent in another order (answering, question writing) have no estimate."""

from __future__ import annotations

import math
from pathlib import Path

from cube.llm.usage import prefix_share
from cube.run.plan import build_plan, plan_text
from tests.openai_server import OpenAIServer
from tests.run.test_plan import _good_reply, _params


def test_plan_estimates_the_judges_shareable_prefix(tmp_path: Path) -> None:
    with OpenAIServer(reply=_good_reply, tokenize=True) as server:
        params = _params(server.url, tmp_path, audit={"questions": 0})
        plan = build_plan(params, base_dir=tmp_path, cache_path=None)
        assert server.requests_total == 0  # planning sends no call
    rows = plan.set_index(["role", "model"])
    judging = rows.loc[("judging", "m"), "prefix_share"]
    # zero, rag and full answers of a question share their prompt up to the answer block
    assert 0.3 < judging < 1.0
    assert math.isnan(rows.loc[("answering", "m"), "prefix_share"])
    assert math.isnan(rows.loc[("judging", "rubric-lenient"), "prefix_share"])  # offline
    assert f"(prefix ~{judging:.0%} shareable)" in plan_text(plan)


def test_the_estimate_follows_the_layout() -> None:
    head = "rubric " * 50
    answers = [f"{head}<question>q</question><answer>{a}</answer>" for a in ("x", "y", "z")]
    last_first = [f"<answer>{a}</answer>{head}<question>q</question>" for a in ("x", "y", "z")]
    # answer last: all but the first prompt reuse the head; answer first: only "<answer>"
    assert prefix_share(answers) > 0.6 > 0.02 > prefix_share(last_first)
