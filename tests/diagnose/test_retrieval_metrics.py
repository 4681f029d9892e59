"""Retrieval metrics from ranks (`cube.diagnose.retrieval`), on hand-computed cases."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cube.diagnose import retrieval as rm


def test_hand_computed_case():
    # ranks 1, 3, 0, 2 with TOP-N 4: hits at 1, 2, 3; one miss
    m = rm.metrics_from_ranks([1, 3, 0, 2], top_n=4, ks=(1, 3))
    assert m["n"] == 4 and m["top_n"] == 4
    assert m["curve"] == [0.25, 0.5, 0.75, 0.75]
    assert m["r_at_k"] == {1: 0.25, 3: 0.75, 4: 0.75}
    assert m["p_at_k"] == {1: 0.25, 3: 0.25, 4: 0.1875}
    assert m["mrr"] == pytest.approx((1 + 1 / 3 + 0 + 1 / 2) / 4)
    assert m["ndcg_at_k"][1] == pytest.approx(1 / 4)
    assert m["ndcg_at_k"][3] == pytest.approx((1 + 1 / math.log2(4) + 1 / math.log2(3)) / 4)
    assert m["hit_rate"] == 0.75


def test_no_questions_is_nan_not_zero_and_bad_ranks_are_refused():
    m = rm.metrics_from_ranks([], top_n=3)
    assert (
        all(math.isnan(v) for v in m["curve"])
        and math.isnan(m["mrr"])
        and math.isnan(m["r_at_k"][1])
    )
    with pytest.raises(ValueError, match="exceeds top_n 2"):
        rm.metrics_from_ranks([3], top_n=2)
    with pytest.raises(ValueError, match="whole numbers >= 0"):
        rm.metrics_from_ranks([-1], top_n=2)


@given(
    st.integers(1, 12).flatmap(
        lambda n: st.tuples(st.just(n), st.lists(st.integers(0, n), max_size=40))
    )
)
def test_curve_is_monotone_and_ends_at_r_at_top_n(case):
    n, ranks = case
    m = rm.metrics_from_ranks(ranks, n)
    curve = m["curve"]
    assert len(curve) == n
    if ranks:
        assert all(a <= b for a, b in zip(curve, curve[1:], strict=False))
        assert (
            curve[-1] == m["r_at_k"][n] == m["hit_rate"] == sum(r > 0 for r in ranks) / len(ranks)
        )
        assert 0 <= m["mrr"] <= curve[-1] and m["ndcg_at_k"][n] <= curve[-1] + 1e-12


def _answers(
    ranks: dict[str, int], system: str = "s", failed: tuple[str, ...] = ()
) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "question_id": list(ranks),
            "doc_id": [f"d{q}" for q in ranks],
            "system": system,
            "set": "rag",
            "answer": "x",
            "rank": list(ranks.values()),
            "n_retrieved": 4,
            "retrieval_ok": [q not in failed for q in ranks],
        }
    )


def test_system_metrics_leave_failed_calls_out_and_groups_sum_to_the_whole():
    answers = _answers({"q1": 1, "q2": 0, "q3": 2, "q4": 0}, failed=("q4",))
    m = rm.system_metrics(answers, 4)
    assert m["n"] == 3 and m["unknown"] == 1 and m["hit_rate"] == pytest.approx(2 / 3)
    corpus = pd.DataFrame(
        {
            "doc_id": ["dq1", "dq2", "dq3", "dq4"],
            "item_name": ["甲", "甲", "乙", "丙"],
            "department": ["A", "A", "B", "B"],
            "region": ["r1", "r2", "r1", "r1"],
        }
    )
    questions = pd.DataFrame(
        {
            "question_id": ["q1", "q2", "q3", "q4"],
            "doc_id": ["dq1", "dq2", "dq3", "dq4"],
            "style": ["named", "colloquial", "named", "named"],
        }
    )
    groups = rm.question_groups(questions, corpus)
    assert groups.set_index("question_id")["family_size"].to_dict() == {
        "q1": "2-3",
        "q2": "2-3",
        "q3": "1 (unique)",
        "q4": "1 (unique)",
    }
    for by in ("style", "department", "region", "family_size"):
        t = rm.by_group(answers, groups, by, {"s": 4})
        assert t["questions"].sum() == 3
        assert ((t["R@N_lo"] <= t["R@N"]) & (t["R@N"] <= t["R@N_hi"])).all()
    dept = rm.by_group(answers, groups, "department", {"s": 4}).set_index("department")
    assert dept.at["A", "R@N"] == 0.5 and dept.at["B", "R@N"] == 1.0 and dept.at["B", "MRR"] == 0.5


def test_results_form_and_sentence():
    m = rm.metrics_from_ranks([1, 0], 2)
    out = rm.for_results({"s": m})
    assert out["s"]["r_at_k"] == {"1": 0.5, "2": 0.5} and out["s"]["curve"] == [0.5, 0.5]
    assert rm.for_results(rm.metrics_from_ranks([], 2))["mrr"] is None
    assert "R@1 = 50.0%" in rm.curve_sentence("s", m)
    table = rm.metrics_table({"s": m})
    assert table.loc[0, "R@2"] == 0.5 and table.loc[0, "P@2"] == 0.25


def test_the_curve_sentence_names_each_k_once_and_its_word_comes_from_the_counts():
    # 8 questions, TOP-N 2: 6 gold documents at rank 1, 1 at rank 2, 1 missed. The old sentence
    # said "R@1 = 75.0%, R@2 = 87.5%, R@2 = 87.5%" and "half of the gold documents found are first
    # in the list" (6 of 7 are).
    m = rm.metrics_from_ranks([1, 1, 1, 1, 1, 1, 2, 0], 2)
    text = rm.curve_sentence("bm25", m)
    assert text.count("R@2") == 1 and "R@1 = 75.0%, R@2 = 87.5% (MRR 0.81)" in text
    assert "6 of the 7 gold documents found (most) are first in the list." in text
    assert "half of" not in text
    # all, half and fewer than half, from the counts
    assert "all 4 gold documents found are first" in rm.curve_sentence(
        "s", rm.metrics_from_ranks([1, 1, 1, 1, 0], 8)
    )
    half = rm.curve_sentence("s", rm.metrics_from_ranks([1, 1, 3, 4], 8))
    assert "2 of the 4 gold documents found (half) are first in the list." in half
    few = rm.curve_sentence("s", rm.metrics_from_ranks([1, 5, 5, 6, 0], 8))
    assert "1 of the 4 gold documents found (fewer than half) are first in the list" in few
    assert "half are within the top 5." in few and few.count("R@8") == 1 and "R@3 = 20.0%" in few
    assert "no gold document is in any list" in rm.curve_sentence(
        "s", rm.metrics_from_ranks([0, 0], 4)
    )
    assert [rm.share_word(p, 7) for p in (0, 3, 4, 7)] == [
        "none",
        "fewer than half",
        "most",
        "all",
    ]
