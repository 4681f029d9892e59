"""The TOP-N sweep: one retrieval per question, shared bound sets, and the hypothesis reading."""

from __future__ import annotations

import pandas as pd
import pytest

import cube.systems as systems
import cube.systems.bounds as bounds_mod
from cube.config.model_spec import ModelSpec
from cube.config.params import Params, ParamsError, parse_params
from cube.config.sections import BuiltinSystem, JudgeParams, QuestionParams
from cube.diagnose import topn_sweep as sweep
from cube.kb.demo import generate_demo_corpus
from cube.kb.questions import build_questions
from cube.systems.retrieval import BM25Index

JUDGE = JudgeParams(name="j", model=ModelSpec(provider="offline", model="rubric"))


def _params(**kw) -> Params:
    return Params(run="t", judges=[JUDGE], **kw)


def test_sweep_expands_into_one_system_per_top_n_with_the_base_first():
    p = _params(systems=[BuiltinSystem(name="bm25", top_n=8, top_n_sweep=[16, 2, 8, 4])])
    assert [(s.name, s.top_n, s.sweep_of) for s in p.systems] == [
        ("bm25", 8, "bm25"),
        ("bm25@top2", 2, "bm25"),
        ("bm25@top4", 4, "bm25"),
        ("bm25@top16", 16, "bm25"),
    ]
    assert sweep.sweeps(p) == {
        "bm25": [("bm25@top2", 2), ("bm25@top4", 4), ("bm25", 8), ("bm25@top16", 16)]
    }
    again = Params.model_validate(p.model_dump(mode="json"))
    assert [s.name for s in again.systems] == [s.name for s in p.systems]
    with pytest.raises(ParamsError, match="top_n_sweep"):
        parse_params(
            {
                "run": "t",
                "judges": [JUDGE.model_dump()],
                "systems": [{"kind": "builtin", "name": "b", "top_n_sweep": [4, 4]}],
            }
        )


def test_a_sweep_makes_one_index_call_per_question_and_shares_the_bound_sets(monkeypatch):
    corpus = generate_demo_corpus(60, "zh")
    questions = build_questions(_params(questions=QuestionParams(seed=1)), corpus)
    searched: list[tuple[int, int]] = []
    real_search, real_bounds = BM25Index.search, bounds_mod.answer_bounds
    bound_calls: list[int] = []

    def counting_search(self, queries, top_n, plan=None):
        searched.append((len(queries), top_n))
        return real_search(self, queries, top_n, plan)

    def counting_bounds(*a, **kw):
        bound_calls.append(1)
        return real_bounds(*a, **kw)

    monkeypatch.setattr(BM25Index, "search", counting_search)
    monkeypatch.setattr(bounds_mod, "answer_bounds", counting_bounds)
    p = _params(systems=[BuiltinSystem(name="bm25", top_n=8, top_n_sweep=[2, 4, 8, 16])])
    answers = systems.build_answers(p, corpus, questions, None, progress=False)
    assert searched == [
        (len(questions), 16)
    ]  # one search, every question once, at the largest TOP-N
    assert len(bound_calls) == 1  # zero and full written once, shared by the four members
    rag = answers[answers["set"] == "rag"].set_index(["system", "question_id"])["retrieved_doc_ids"]
    for name, n in (("bm25@top2", 2), ("bm25@top4", 4), ("bm25", 8)):
        for q in questions["question_id"]:
            wide = list(rag[("bm25@top16", q)])
            assert list(rag[(name, q)]) == wide[:n]
    full = answers[answers["set"] == "full"].pivot(
        index="question_id", columns="system", values="answer"
    )
    assert (full.nunique(axis=1) == 1).all()
    separate = systems.build_answers(
        _params(systems=[BuiltinSystem(name="b4", top_n=4)]),
        corpus,
        questions,
        None,
        progress=False,
    )
    ranks = answers[(answers["set"] == "rag") & (answers["system"] == "bm25@top4")].set_index(
        "question_id"
    )["rank"]
    assert (
        ranks.to_dict()
        == separate[separate["set"] == "rag"].set_index("question_id")["rank"].to_dict()
    )


def _table(rn, w, w_lo) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "system": ["a", "b", "c"],
            "top_n": [2, 8, 4],
            "questions": 100,
            "R@N": rn,
            "R@N_lo": [x - 0.05 for x in rn],
            "R@N_hi": [x + 0.05 for x in rn],
            "W": w,
            "W_lo": w_lo,
            "W_hi": [x + 3 for x in w],
            "CuBE": [60, 70, 65],
            "CuBE_lo": 0,
            "CuBE_hi": 100,
        }
    )


def test_hypothesis_reading_holds_fails_or_is_undetermined():
    holds = sweep.hypothesis(_table([0.6, 0.9, 0.8], [80, 79, 80], [77, 76, 77]))
    assert holds["verdict"] == "holds" and "from TOP-N 2 to 8" in holds["sentence"]
    hurt = sweep.hypothesis(_table([0.6, 0.9, 0.8], [80, 70, 80], [77, 67, 77]))
    assert (
        hurt["verdict"] == "does not hold"
        and "W falls below" in hurt["sentence"]
        and "TOP-N 8" in hurt["sentence"]
    )
    flat = sweep.hypothesis(_table([0.6, 0.62, 0.61], [80, 80, 80], [77, 77, 77]))
    assert flat["verdict"] == "does not hold" and "recall does not rise" in flat["sentence"]
    nan = sweep.hypothesis(_table([0.6, 0.9, 0.8], [float("nan"), 80, 80], [77, 77, 77]))
    assert nan["verdict"] == "undetermined"
    assert (
        sweep.hypothesis(_table([0.6, 0.9, 0.8], [80, 80, 80], [77, 77, 77]).head(1))["verdict"]
        == "undetermined"
    )
