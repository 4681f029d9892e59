"""The summary `cube run` prints at its end (`cube.run.outcome`), from a run's results.json."""

from __future__ import annotations

import json

from cube.run.outcome import REASON_CHARS, outcome_lines, read_decision, withheld


def _entry(name: str, **extra) -> dict:
    return {
        "system": name,
        "cube_score": 71.333,
        "cube_ci": [66.64, 75.66],
        "recall_at_k": 0.8167,
        "top_n": 8,
        "verdict": "good",
        "verdict_label": "good",
        "withheld_reasons": [],
        **extra,
    }


def test_one_line_per_system_then_calls_cost_and_the_report():
    decision = {
        **_entry("bm25-top8"),
        "systems": [
            _entry("bm25-top8"),
            _entry("bm25-top2", top_n=2, recall_at_k=0.6567, verdict_label="fair to good"),
            _entry("mine", provisional=True, provisional_reason="only 12 questions"),
        ],
        "calls_total": 7695,
        "calls_cached": 100,
        "cost_this_run": 0.5,
        "cost_total": 1.25,
        "currency": "USD",
    }
    lines = outcome_lines(decision, "outputs/default/report/index.html")
    assert lines[0] == (
        "bm25-top8  CuBE 71.3 [66.6, 75.7]  R@8 81.7 %  good   <- the decision is about this system"
    )
    assert lines[1] == "bm25-top2  CuBE 71.3 [66.6, 75.7]  R@2 65.7 %  fair to good"
    assert lines[2].endswith("good (provisional: only 12 questions)")
    assert lines[3] == (
        "calls: 7695 (100 from the cache), cost this run 0.50 USD (all calls 1.25 USD)"
    )
    assert lines[4] == "report: outputs/default/report/index.html" and len(lines) == 5
    assert not withheld(decision)


def test_a_withheld_verdict_shows_its_first_reason_and_no_score(tmp_path):
    long = "no judge passed the validity gate " + "x" * 400
    decision = _entry(
        "mine",
        verdict="withheld",
        cube_score=float("nan"),
        cube_ci=None,  # an undefined interval, as the decision writes it
        recall_at_k=0.375,
        withheld_reasons=[long, "second"],
    )
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"decision": decision}), encoding="utf-8")  # NaN as JSON writes it
    read = read_decision(path)
    line = outcome_lines(read, "r/index.html")[0]
    assert line.startswith("mine  CuBE n/a [n/a, n/a]  R@8 37.5 %  WITHHELD: no judge passed")
    assert line.endswith("…") and len(line.split("WITHHELD: ")[1]) == REASON_CHARS
    assert "second" not in line and withheld(read)
    assert withheld({"verdict": "good", "judging_failed": True})


def test_no_decision_prints_nothing(tmp_path):
    assert read_decision(tmp_path / "absent.json") is None
    assert outcome_lines({}, "x") == []
