"""The per-category report (`cube.diagnose.categories`)."""

from __future__ import annotations

import math

import pandas as pd

from cube.config.sections import AnalysisParams
from cube.diagnose.categories import category_report
from cube.method.evaluation import evaluate
from tests.factories import make_tables


def test_categories_sum_to_the_whole_small_ones_say_why_and_one_category_equals_the_whole():
    answers, scores = make_tables(n_questions=60, seed=3)
    qids = sorted(answers["question_id"].unique())
    groups = pd.DataFrame({"question_id": qids, "department": ["A"] * 50 + ["B"] * 10, "all": "x"})
    classified = pd.DataFrame(
        {
            "question_id": qids,
            "low": [i % 7 == 0 for i in range(60)],
            "primary": ["retrieval_miss" if i % 7 == 0 else "" for i in range(60)],
        }
    )
    ap = AnalysisParams(bootstrap=50)
    t = category_report(answers, scores, groups, classified, "sys", 8, "department", ap).set_index(
        "department"
    )
    assert t["questions"].sum() == 60 and t["low"].sum() == int(classified["low"].sum())
    assert t.at["A", "W_lo"] <= t.at["A", "W"] <= t.at["A", "W_hi"]
    assert t.at["A", "R@N_lo"] <= t.at["A", "R@N"] <= t.at["A", "R@N_hi"]
    assert math.isnan(t.at["B", "CuBE"]) and "fewer than 20" in t.at["B", "note"]
    assert t.at["A", "top_pattern"] == "retrieval_miss"
    whole = category_report(
        answers, scores, groups, classified, "sys", 8, "all", ap.model_copy(update={"bootstrap": 0})
    )
    direct = evaluate(answers, scores, ap.model_copy(update={"bootstrap": 0}), 8)
    assert whole.loc[0, "CuBE"] == direct.jury_cube() and whole.loc[0, "R@N"] == direct.recall_at_k
