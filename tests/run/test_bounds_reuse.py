"""Cheap re-runs by construction (issue 42, item 4): a new version's run that shares the call cache
with its baseline's (same answerer, questions and judges) sends no call for the bound sets, the
plan says how many calls the cache saves and which of them are bounds, and
`data/bounds_reused.json` says which bounds came from the cache (from the baseline's tables).

Counted at a local OpenAI-compatible server: the answerer and an LLM judge are models on it; the
server's answer says how many documents its prompt held (0: a zero answer, 1: a full one, 2 or
more: the system's rag answer), so every request is told apart by what it is for.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from cube.run import pipeline
from cube.run.bounds_reuse import BOUNDS_REUSED, bounds_reuse_of
from cube.run.notebook import open_run
from cube.run.plan import build_plan, plan_text
from tests.openai_server import OpenAIServer, last_user_message

PARAMS = """run: {run}
lang: en
outputs_dir: {out}
cache_path: {cache}
corpus: {{source: demo, n_items: 12, seed: 1}}
questions: {{generator: template, seed: 1}}
models:
  ans: {{provider: openai, model: ans, base_url: "{url}", max_tokens: 64}}
  judge: {{provider: openai, model: judge, base_url: "{url}", max_tokens: 16}}
answerer: ans
systems: [{{kind: builtin, name: bm25, top_n: {top_n}}}]
dimensions: [relevance, completeness]
judges:
  - {{name: paid, model: judge}}
  - {{name: rubric, model: {{provider: offline, model: rubric-strict}}}}
analysis: {{bootstrap: 50, bounds_of_missed: {bounds}}}
audit: {{questions: 0}}
"""


def _documents(body: dict[str, Any]) -> int:
    """How many documents an answering prompt holds (its system message's knowledge block)."""
    return len(re.findall(r' index="\d+"', str(body["messages"][0].get("content", ""))))


def reply(body: dict[str, Any]) -> str:
    text = last_user_message(body)
    if body.get("model") == "judge":
        return f"Score: {3 + len(text) % 5}"
    return f"Answer read from {_documents(body)} documents, {len(text) % 97} days."


def _purpose(body: dict[str, Any]) -> str:
    """'zero', 'full' or 'rag' answer; 'bound judgment' or 'rag judgment'."""
    if body.get("model") == "judge":
        text = last_user_message(body)
        bound = "read from 0 documents" in text or "read from 1 documents" in text
        return "bound judgment" if bound else "rag judgment"
    return {0: "zero", 1: "full"}.get(_documents(body), "rag")


def _run(tmp: Path, url: str, run: str, top_n: int, bounds: str = "all"):
    params = tmp / f"{run}.yaml"
    params.write_text(
        PARAMS.format(
            run=run,
            out=tmp / "out",
            cache=tmp / "cache.sqlite",
            url=url,
            top_n=top_n,
            bounds=bounds,
        ),
        encoding="utf-8",
    )
    r = open_run(params)
    for stage in (
        pipeline.corpus_stage,
        pipeline.questions_stage,
        pipeline.answers_stage,
        pipeline.scores_stage,
    ):
        stage(r)
    return r


def _count(bodies: list[dict[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for b in bodies:
        out[_purpose(b)] = out.get(_purpose(b), 0) + 1
    return out


@pytest.fixture(scope="module")
def versions(tmp_path_factory):
    """v1 (TOP-3) then v2 (TOP-2: a changed system), one cache; v2's plan made before its run."""
    tmp = tmp_path_factory.mktemp("reuse")
    with OpenAIServer(reply=reply) as server:
        v1 = _run(tmp, server.url, "v1", 3)
        sent_v1 = _count(server.bodies)
        server.bodies.clear()
        (tmp / "v2.yaml").write_text(
            PARAMS.format(
                run="v2",
                out=tmp / "out",
                cache=tmp / "cache.sqlite",
                url=server.url,
                top_n=2,
                bounds="all",
            ),
            encoding="utf-8",
        )
        from cube.config.params import load_params

        plan = build_plan(
            load_params(tmp / "v2.yaml"), base_dir=tmp, cache_path=tmp / "cache.sqlite"
        )
        v2 = _run(tmp, server.url, "v2", 2)
        sent_v2 = _count(server.bodies)
    return v1, v2, sent_v1, sent_v2, plan


def test_the_second_version_sends_no_call_for_the_bounds(versions):
    v1, v2, sent_v1, sent_v2, _ = versions
    questions = len(v1.load("questions"))
    assert sent_v1["zero"] == sent_v1["full"] == questions  # the baseline made every bound
    assert sent_v1["bound judgment"] > 0
    # the new version: its own rag answers and their judgments only
    assert "zero" not in sent_v2 and "full" not in sent_v2 and "bound judgment" not in sent_v2
    assert 0 < sent_v2["rag"] <= questions and sent_v2["rag judgment"] > 0
    assert sum(sent_v2.values()) < sum(sent_v1.values())
    # and the bounds are the same answers with the same scores in both runs
    a1, a2 = v1.load("answers"), v2.load("answers")
    b1 = a1[a1["set"] != "rag"].set_index(["question_id", "set"])["answer"].sort_index()
    b2 = a2[a2["set"] != "rag"].set_index(["question_id", "set"])["answer"].sort_index()
    assert b1.equals(b2)


def test_bounds_reused_json_says_which_bounds_came_from_the_cache_and_the_baseline(versions):
    v1, v2, sent_v1, _, _ = versions
    first = json.loads((v1.paths.data / BOUNDS_REUSED).read_text(encoding="utf-8"))
    assert first["answering"]["sent"] == sent_v1["zero"] + sent_v1["full"]
    assert first["answering"]["from_cache"] == 0 and first["judging"]["from_cache"] == 0
    assert first["judging"]["offline"] > 0  # the rubric judge: computed, never sent
    second = json.loads((v2.paths.data / BOUNDS_REUSED).read_text(encoding="utf-8"))
    assert second["answering"]["sent"] == 0 == second["judging"]["sent"]
    assert second["answering"]["from_cache"] == first["answering"]["calls"]
    assert second["judging"]["from_cache"] == first["judging"]["calls"] > 0
    assert second["from_baseline"] is None and second["baseline_unknown"]
    # with the baseline's run folder known, every reused bound is a call of its tables
    named = bounds_reuse_of(v2.params, v2.paths.root, baseline=v1.paths.root)
    assert named["from_baseline"] == second["total"]["from_cache"] > 0
    assert named["answering"]["from_baseline"] == second["answering"]["calls"]


def test_the_plan_counts_the_bounds_the_cache_saves(versions):
    v1, _, sent_v1, sent_v2, plan = versions
    rows = plan.set_index("role")
    # every bound answer and every bound judgment is found in the cache before the run
    assert rows.at["answering", "bounds_cached"] == sent_v1["zero"] + sent_v1["full"]
    judging = plan[plan["role"] == "judging"]
    assert int(judging["bounds_cached"].sum()) == sent_v1["bound judgment"]
    # what is left to send is the new version's rag (and refusal) answers and their judgments:
    # no bound
    questions = len(v1.load("questions"))
    extra = rows.at["answering", "cached_calls"] - rows.at["answering", "bounds_cached"]
    assert extra == questions - sent_v2["rag"]  # the cached others: rag requests v1 made too
    assert int(judging["to_send"].sum()) == 2 * questions  # 2 dimensions of each rag answer
    text = plan_text(plan)
    saved = int(plan["cached_calls"].sum())
    assert f"cache: saves {saved} of the planned calls; " in text
    assert f"{int(plan['bounds_cached'].sum())} of them are the bounds (zero/full" in text
