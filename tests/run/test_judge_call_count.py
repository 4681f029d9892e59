"""Stage 03's count of its judge calls (`stage_judge_calls`, which caps the audit) equals
`judge_calls` of every request (`stage_requests`), whichever way it is counted: from the offline
judges' call ids in the scores table, or from the requests built a slice of answers at a time."""

from __future__ import annotations

import json
import math

import pytest

from cube.config.params import parse_params
from cube.judges import load_dimensions, make_judges, score_answers
from cube.kb.corpus import build_corpus
from cube.kb.questions import build_questions
from cube.run import audit
from cube.run.audit import _frozen, judge_calls, stage_judge_calls, stage_requests
from cube.systems import build_answers


@pytest.fixture(scope="module")
def demo():
    params = parse_params(
        {
            "run": "count",
            "corpus": {"source": "demo", "n_items": 40, "seed": 3},
            "questions": {"generator": "template", "seed": 3},
            "answerer": {"provider": "offline", "model": "extractive"},
            "systems": [{"kind": "builtin", "name": "bm25", "top_n": 3}],
            "judges": [
                {"name": "lenient", "model": {"provider": "offline", "model": "rubric-lenient"}},
                {
                    "name": "strict",
                    "model": {"provider": "offline", "model": "rubric-strict"},
                    "samples": 2,
                },
            ],
        }
    )
    corpus = build_corpus(params)
    questions = build_questions(params, corpus, None)
    answers = build_answers(params, corpus, questions, None, progress=False)
    judges, dims = make_judges(params, None), load_dimensions(params)
    return judges, dims, corpus, questions, answers


def test_the_stage_count_equals_the_count_of_every_request(demo, monkeypatch):
    judges, dims, corpus, questions, answers = demo
    answers = answers.copy()
    # identical answers to one question in two sets are one call of each judge; a missing answer
    # is no call
    zero = answers.index[answers["set"] == "zero"]
    full = answers.index[answers["set"] == "full"]
    answers.loc[zero[:5], "answer"] = answers.loc[full[:5], "answer"].to_numpy()
    answers.loc[zero[5], "answer"] = None
    requests = stage_requests(judges, answers, corpus, questions, dims)
    expected = judge_calls(judges, requests)
    n_requests = sum(len(r) for r in requests.values())
    assert expected < n_requests  # the duplicates are counted once
    scores = score_answers(answers, judges, dims, corpus, questions=questions, progress=False)
    assert stage_judge_calls(judges, answers, corpus, questions, dims, scores) == expected
    monkeypatch.setattr(audit, "CALLS_SLICE", 7)  # duplicates in different slices: still once
    assert stage_judge_calls(judges, answers, corpus, questions, dims) == expected


@pytest.mark.parametrize(
    "a, b",
    [
        ({"x": [1, "a"]}, {"x": ("1", "a")}),
        ({"x": 1}, {"x": 1.0}),
        ({"x": 1}, {"x": True}),
        ({"x": None}, {"x": "None"}),
        ({1: "a"}, {"2": "a"}),
    ],
)
def test_frozen_values_differ_where_their_json_differs(a, b):
    assert json.dumps(a, sort_keys=True, default=str) != json.dumps(b, sort_keys=True, default=str)
    assert _frozen(a) != _frozen(b)


@pytest.mark.parametrize(
    "a, b",
    [
        ({"x": [1, "a"]}, {"x": (1, "a")}),
        ({"x": math.nan}, {"x": float("nan")}),
        ({"b": 1, "a": {"d": None, "c": 2.5}}, {"a": {"c": 2.5, "d": None}, "b": 1}),
        ({1: "a"}, {"1": "a"}),
        ({"x": object.__new__(type("T", (), {"__str__": lambda s: "t"}))}, {"x": "t"}),
    ],
)
def test_frozen_values_are_equal_where_their_json_is(a, b):
    assert json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)
    assert _frozen(a) == _frozen(b)
