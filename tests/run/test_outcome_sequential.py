"""`cube run`'s summary says what a sequential run judged and why it stopped; a fixed-n run's says
nothing more."""

from __future__ import annotations

import json

from cube.run.outcome import outcome_lines, read_questions
from tests.pages.sequential_fixture import build_record

DECISION = {
    "system": "bm25",
    "cube_score": 71.3,
    "cube_ci": [66.6, 75.7],
    "recall_at_k": 0.8167,
    "top_n": 8,
    "verdict": "good",
    "calls_total": 2640,
    "calls_cached": 0,
    "cost_this_run": 1.05,
    "currency": "USD",
}


def test_a_sequential_run_says_how_many_questions_and_why(tmp_path):
    results = tmp_path / "results.json"
    record = build_record()
    results.write_text(json.dumps({"decision": DECISION, "sequential": record}), encoding="utf-8")
    lines = outcome_lines(DECISION, "report/index.html", read_questions(results))
    final = record["final"]["bm25"]
    assert lines[1].startswith(
        f"judged on {record['questions_used']} of 300 questions (stopped early: every system's "
        "interval lies inside one verdict band; after a stop chosen by the data, read the "
        f"sequential interval: bm25 {final['lower']:.1f}-{final['upper']:.1f}"
    )
    assert lines[-1] == "report: report/index.html"


def test_a_fixed_n_run_says_nothing_more(tmp_path):
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"decision": DECISION}), encoding="utf-8")
    assert read_questions(results) == ""
    lines = outcome_lines(DECISION, "report/index.html", read_questions(results))
    assert lines == outcome_lines(DECISION, "report/index.html")
    assert not any(line.startswith("judged") for line in lines)
