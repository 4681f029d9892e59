"""A system whose calls all failed: its failures counted by reason (stage 02), printed by
`cube run`, and left out of notebook 09's comparisons with a line saying why."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pandas as pd

from cube.run.compare import _comparable
from cube.run.outcome import failure_lines
from cube.systems import failure_reasons


def _answers() -> pd.DataFrame:
    rows = []
    for q in range(4):
        rows.append(
            {
                "system": "good",
                "set": "rag",
                "question_id": f"q{q}",
                "error": "",
                "retrieval_ok": True,
            }
        )
        rows.append(
            {
                "system": "down",
                "set": "rag",
                "question_id": f"q{q}",
                "error": "HTTP 422 (not retried):  {'detail':\n [...]}"
                if q
                else "connection refused",
                "retrieval_ok": False,
            }
        )
        rows.append(
            {
                "system": "down",
                "set": "zero",
                "question_id": f"q{q}",
                "error": "",
                "retrieval_ok": False,
            }
        )
    return pd.DataFrame(rows)


def test_failures_are_counted_by_reason_most_frequent_first():
    out = failure_reasons(_answers())
    assert list(out) == ["down"]  # the good system failed nothing; bound rows are not its calls
    assert out["down"]["failed"] == 4 and out["down"]["calls"] == 4
    assert out["down"]["reasons"] == [
        {"reason": "HTTP 422 (not retried): {'detail': [...]}", "count": 3},
        {"reason": "connection refused", "count": 1},
    ]


def test_cube_run_prints_each_systems_failures(tmp_path):
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"answers_failures": failure_reasons(_answers())}), "utf-8")
    assert failure_lines(results) == [
        "down: 4 of 4 calls to the system failed",
        "  3 x HTTP 422 (not retried): {'detail': [...]}",
        "  1 x connection refused",
    ]
    assert failure_lines(tmp_path / "absent.json") == []


def test_a_system_without_known_retrieval_is_not_compared(capsys):
    run = SimpleNamespace(load=lambda name: _answers())
    assert _comparable(run, ["good", "down"]) == ["good"]
    assert "down: not compared: no question of known retrieval" in capsys.readouterr().out
    assert _comparable(run, ["down", "good"]) == []  # without the primary, nothing is compared
