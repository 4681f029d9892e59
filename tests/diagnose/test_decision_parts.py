"""The decision's seven diagnostics are typed parts (`cube.diagnose.decision_parts`): the JSON
keeps the keys and values its diagnostics wrote, readers get attributes, and an older or broken
decision is read or refused by name.

tests/fixtures/decision_default_run.json is `results.json` `decision` of a default run
(`cube run params/default.yaml`, main at 646ec5a, before the parts were typed): four systems of a
TOP-N sweep, refusal figures, failure patterns, the families' design effect."""

from __future__ import annotations

import json

import pytest

from cube.diagnose.decision_parts import (
    DesignEffect,
    FailurePatterns,
    RetrievalQuality,
    SelfPreference,
    TopNSweep,
)
from cube.diagnose.decision_record import Decision
from cube.pages.decision import decision_markdown, retrieval_line, self_preference_text
from tests import ROOT

FIXTURE = ROOT / "tests" / "fixtures" / "decision_default_run.json"


def _default() -> dict:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


def test_the_default_runs_decision_reads_back_to_the_same_json_text():
    written = _default()
    again = Decision.read(written).as_json()
    # the same keys in the same order and the same values, nested parts included
    assert json.dumps(again, ensure_ascii=False) == json.dumps(written, ensure_ascii=False)


def test_every_part_is_a_model_read_by_attribute():
    d = Decision.read(_default())
    assert isinstance(d.failure_patterns, FailurePatterns)
    assert d.failure_patterns.top[0].pattern == "retrieval_miss"
    assert isinstance(d.top_n_sweep, TopNSweep) and d.top_n_sweep.verdict == "does not hold"
    row = d.top_n_sweep.table[0]  # the sweep table's JSON keys (`R@N`) as attribute names
    assert (row.top_n, row.recall) == (2, d.top_n_sweep.table[0].model_dump()["R@N"])
    assert d.retrieval is not None and d.retrieval.r_at_k["8"] == d.retrieval.hit_rate
    assert d.refusal is not None and d.refusal.n_unanswerable == 30
    assert isinstance(d.retrieval_quality, RetrievalQuality)
    assert d.retrieval_quality.near_duplicate_confusion.count == 61
    assert isinstance(d.design, DesignEffect) and d.design.unit == "family"
    assert not hasattr(Decision, "__getitem__") and not hasattr(Decision, "get")


def test_a_part_writes_only_the_keys_its_diagnostic_wrote():
    # a run without a corpus: R@1 only; a result without a design: {}
    d = Decision(retrieval_quality={"r_at_1": float("nan")}, design={})
    out = d.as_json()
    assert out["retrieval_quality"] == {"r_at_1": None} and out["design"] == {}
    assert Decision.read(out).as_json() == out
    assert retrieval_line(d) == ""  # R@1 undefined: no line, never "nan %"


def test_an_older_decision_without_the_parts_still_reads():
    old = {"system": "bm25", "verdict": "good", "cube_score": 71.5, "retrieval_quality": {}}
    d = Decision.read(old)
    assert d.verdict == "good" and d.failure_patterns is None and d.self_preference == {}
    assert "What to do next" in decision_markdown(d)


def test_a_decision_of_another_shape_is_refused_naming_every_field_at_fault():
    broken = {**_default(), "failure_patterns": {"top": "retrieval_miss"}, "cube_score": "high"}
    with pytest.raises(ValueError) as err:
        Decision.read(broken)
    said = str(err.value)
    assert "results.json decision is not a decision record" in said
    assert "failure_patterns.top" in said and "cube_score" in said and "run stage 06 again" in said


def test_self_preference_is_typed_and_said_as_before():
    # as `results.json` `audit` holds it: pandas' JSON, counts as floats, a null note
    measured = {
        "self_preference": 0.42,
        "self_preference_lo": -0.1,
        "self_preference_hi": 0.9,
        "self_preference_items": 12.0,
        "self_preference_control_items": 30.0,
        "self_preference_note": None,
    }
    d = Decision(self_preference={"judge-a": measured, "judge-b": {"self_preference_note": "n/a"}})
    assert isinstance(d.self_preference["judge-a"], SelfPreference)
    assert d.as_json()["self_preference"]["judge-a"] == measured  # 12.0 stays 12.0
    assert d.as_json()["self_preference"]["judge-b"] == {"self_preference_note": "n/a"}
    assert self_preference_text(d.self_preference["judge-a"]) == self_preference_text(measured)
    assert self_preference_text(d.self_preference["judge-a"]).startswith(
        "+0.42 points [-0.10, +0.90]"
    )
    assert "- self-preference of judge-b: n/a" in decision_markdown(
        d.model_copy(update={"n_judges": 1})
    )


def test_the_index_template_reads_the_typed_record_as_it_reads_the_json():
    # report/index.html is rendered from results.json's dict today; a RunRecord hands it the
    # typed record: the page must be the same, parts included (patterns, retrieval, systems)
    import jinja2

    from cube.pages.publish import page_environment

    env = page_environment(undefined=jinja2.ChainableUndefined)
    context = {
        "params": None,
        "results": {},
        "human_line": "",
        "questions": "",
        "manifest": {},
        "pages": [],
        "attempt": None,
        "last_run": "",
        "groups": [],
        "missing": [],
        "decision_stale": "",
        "browser": "judgments.html",
    }
    written = _default()
    from_json = env.get_template("index.html.j2").render(decision=written, **context)
    typed = env.get_template("index.html.j2").render(decision=Decision.read(written), **context)
    assert typed == from_json
    assert "near-duplicate confusion 20.3 %" in typed and 'id="pattern-examples"' in typed
