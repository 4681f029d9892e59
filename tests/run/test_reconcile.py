"""The plan and the run's calls reconciled in one line (issue 37): the default run logged "plan:
17920 calls" and ended with "calls: 8679", and nothing said where the other 9241 went.

Hand-made rows check each cause; a run against a local OpenAI-compatible server (an answerer
whose calls fail for a third of the questions, an offline judge) checks the line read from the run
folder: its counts add up to the plan and to the usage the manifest reports."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import pytest
import yaml

from cube.run import pipeline
from cube.run.execute import RunSummary, write_manifest
from cube.run.notebook import open_run
from cube.run.outcome import outcome_lines
from cube.run.plan import build_plan
from cube.run.reconcile import calls_line, read_calls_line
from cube.run.record import PlanRecord, write_part
from tests import ROOT
from tests.openai_server import OpenAIServer, last_user_message

OFFLINE = "offline (no tokens)"


def _plan(role: str, model: str, calls: int, tokens_by: str = "tiktoken") -> dict:
    return {"role": role, "model": model, "calls": calls, "tokens_by": tokens_by}


def _used(role: str, model: str, calls: int, cached: int = 0, failed: int = 0) -> dict:
    return {
        "role": role,
        "model": model,
        "calls": calls,
        "cached_calls": cached,
        "failed_calls": failed,
    }


def test_an_offline_run_says_its_plan_counted_an_upper_bound():
    # the default run's figures: every call an offline algorithm's
    plan = [_plan("answering", "extractive", 2720, OFFLINE), _plan("judging", "r", 15200, OFFLINE)]
    usage = [_used("answering", "extractive", 1200), _used("judging", "r", 7479)]
    assert calls_line(plan, usage) == (
        "calls: 8679 made of 17920 planned (8679 computed offline, 0 from the cache, 0 sent); "
        "9241 not made: an offline algorithm computes equal inputs once (the plan's count is an "
        "upper bound)"
    )


def test_cached_sent_failed_and_not_made_model_calls_are_each_counted():
    plan = [_plan("answering", "gpt", 100), _plan("judging", "judge", 300)]
    usage = [_used("answering", "gpt", 100, cached=40, failed=5), _used("judging", "judge", 285)]
    # no "computed offline" part where the plan has no offline row
    assert calls_line(plan, usage) == (
        "calls: 385 made of 400 planned (40 from the cache, 345 sent, 5 of them failed); 15 not "
        "made: an answer whose call failed is not judged, questions screened out, a judge stopped "
        "at its pilot, or stages not run"
    )


def test_the_early_stop_is_named_with_what_it_saved():
    plan = [_plan("answering", "gpt", 300), _plan("judging", "r", 2400, OFFLINE)]
    usage = [_used("answering", "gpt", 80, cached=10), _used("judging", "r", 600)]
    line = calls_line(plan, usage, saved=1980)
    assert line == (
        "calls: 680 made of 2700 planned (600 computed offline, 10 from the cache, 70 sent); 1980 "
        "not made: saved by the early stop; 40 more not made: an offline algorithm computes equal "
        "inputs once (the plan's count is an upper bound), questions screened out, a judge stopped "
        "at its pilot, or stages not run"
    )


def test_calls_beyond_the_plan_are_said_so():
    plan = [_plan("judging", "judge", 100)]
    usage = [_used("judging", "judge", 112), _used("refusal", "writer", 4)]
    assert calls_line(plan, usage).endswith(
        "; 16 more than planned (re-asks of unscored judgments, calls the plan does not count)"
    )


def test_the_summary_prints_the_line_and_the_cost_after_it():
    decision = {"system": "s", "calls_total": 7, "cost_this_run": 0.5, "cost_total": 1.0}
    decision["currency"] = "USD"
    lines = outcome_lines(decision, "r/index.html", calls="calls: 7 made of 9 planned (...)")
    assert lines[-3:] == [
        "calls: 7 made of 9 planned (...)",
        "Cost this run 0.50 USD (all calls 1.00 USD)",
        "report: r/index.html",
    ]


def test_a_folder_without_a_recorded_plan_gives_no_line(tmp_path: Path):
    (tmp_path / "results.json").write_text(json.dumps({"plan": {"error": "x"}}), "utf-8")
    (tmp_path / "manifest.json").write_text(json.dumps({"usage": []}), "utf-8")
    assert read_calls_line(tmp_path / "results.json", tmp_path / "manifest.json") == ""
    assert read_calls_line(tmp_path / "nothing.json", tmp_path / "manifest.json") == ""


PARAMS = """run: {run}
outputs_dir: {out}
corpus: {{source: demo, n_items: 12, seed: 1}}
questions: {{generator: template, seed: 1}}
models:
  ans: {{provider: openai, model: ans, base_url: "{url}", max_tokens: 64, max_attempts: 1}}
answerer: ans
systems: [{{kind: builtin, name: bm25, top_n: 4}}]
dimensions: [relevance, completeness]
judges:
  - {{name: rubric, model: {{provider: offline, model: rubric-strict}}}}
analysis: {{bootstrap: 20}}
"""

NUMBER = re.compile(r"(\d+) (made|planned|computed offline|from the cache|sent|of them failed)")
NOT_MADE = re.compile(r"(\d+) (?:more )?not made")


def _run_line(params: Path) -> tuple[str, list[dict], list[dict]]:
    run = open_run(params)
    plan = build_plan(run.params, base_dir=run.base_dir, cache_path=run.paths.cache)
    rows = json.loads(plan.to_json(orient="records"))
    write_part(run.paths, PlanRecord(plan=rows))  # as `cube run` records it before its first call
    for stage in (
        pipeline.corpus_stage,
        pipeline.questions_stage,
        pipeline.answers_stage,
        pipeline.scores_stage,
    ):
        stage(run)
    write_manifest(run.params, run.paths, RunSummary(paths=run.paths), dt.datetime.now(dt.UTC))
    usage = json.loads(run.paths.manifest.read_text(encoding="utf-8"))["usage"]
    return read_calls_line(run.paths.results, run.paths.manifest), rows, usage


@pytest.mark.filterwarnings("ignore")
def test_a_run_with_failing_calls_then_its_rerun_from_the_cache_add_up(tmp_path: Path):
    def fails(body: dict) -> bool:
        return len(last_user_message(body)) % 3 == 0

    with OpenAIServer(reply=lambda body: "需要5个工作日。") as server:
        server.fail("400", times=None, when=fails)
        lines = []
        for name in ("first", "again"):
            params = tmp_path / f"{name}.yaml"
            params.write_text(
                PARAMS.format(run=name, out=tmp_path / "out", url=server.url), encoding="utf-8"
            )
            lines.append(_run_line(params))
    for line, plan, usage in lines:
        n = {what: int(v) for v, what in NUMBER.findall(line)}
        assert n["planned"] == sum(r["calls"] for r in plan)
        assert n["made"] == sum(u["calls"] for u in usage)
        assert n["made"] == n["computed offline"] + n["from the cache"] + n["sent"]
        assert n["of them failed"] == sum(u["failed_calls"] for u in usage) > 0
        assert n["made"] + sum(int(v) for v in NOT_MADE.findall(line)) == n["planned"]
    first, again = (dict((w, int(v)) for v, w in NUMBER.findall(line)) for line, _, _ in lines)
    # the second run is served from the cache but the failed calls, which are sent again
    assert (
        first["from the cache"] == 0
        and again["from the cache"] == first["sent"] - (first["of them failed"])
    )
    assert again["sent"] == again["of them failed"] == first["of them failed"]


@pytest.mark.filterwarnings("ignore")
def test_a_sequential_run_names_what_its_early_stop_saved(tmp_path: Path):
    data = yaml.safe_load((ROOT / "params" / "default.yaml").read_text(encoding="utf-8"))
    data.update(
        {
            "run": "seq",
            "outputs_dir": str(tmp_path / "out"),
            "corpus": {"source": "demo", "n_items": 100, "family_share": 0.33, "seed": 7},
            "systems": [{"kind": "builtin", "name": "bm25-top8", "top_n": 8}],
            "audit": {"questions": 8, "min_pairs": 3},
            "analysis": {
                **data["analysis"],
                "weights": "equal",
                "max_interval_width": 90,
                "sequential": {"stop": "width", "batch": 10, "min_questions": 20},
            },
        }
    )
    params = tmp_path / "seq.yaml"
    params.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    line, plan, usage = _run_line(params)
    results = json.loads((tmp_path / "out" / "seq" / "results.json").read_text(encoding="utf-8"))
    saved = results["sequential"]["calls"]["saved"]
    assert saved > 0 and f"; {saved} not made: saved by the early stop" in line
    made, planned = sum(u["calls"] for u in usage), sum(r["calls"] for r in plan)
    assert line.startswith(f"calls: {made} made of {planned} planned ({made} computed offline")
    assert made + sum(int(v) for v in NOT_MADE.findall(line)) == planned
    assert "a judge stopped at its pilot" not in line  # the plan has no model call
