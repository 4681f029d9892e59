"""R@N's interval per group allows for the families of near-duplicates (issue 30, a review
finding): the groups' Wilson intervals treated questions as independent while a family shares
its retrieval."""

from __future__ import annotations

import numpy as np
import pandas as pd

from cube.diagnose.retrieval import by_group, family_wilson, question_groups, wilson


def test_singleton_families_give_the_plain_wilson_interval():
    hit = np.array([1, 0, 1, 1, 0, 1, 1, 0, 1, 1], bool)
    fam = np.array([f"q{i}" for i in range(10)])
    assert family_wilson(hit, fam, 0.9) == wilson(7, 10)
    assert family_wilson(hit, None, 0.9) == wilson(7, 10)


def test_families_sharing_retrieval_widen_the_interval_and_none_narrow_it():
    hit = np.repeat([1, 0, 1, 1, 0, 1, 1, 0], 5).astype(bool)  # 8 families of 5, all alike
    fam = np.repeat([f"f{i}" for i in range(8)], 5)
    plain, fam_ci = wilson(int(hit.sum()), len(hit)), family_wilson(hit, fam, 1.0)
    assert fam_ci[0] < plain[0] and fam_ci[1] > plain[1]
    assert family_wilson(hit, fam, 0.0)[1] - family_wilson(hit, fam, 0.0)[0] >= plain[1] - plain[0]


def test_question_groups_name_each_question_s_family_and_by_group_uses_it():
    corpus = pd.DataFrame(
        {
            "doc_id": ["d1", "d2", "d3", "d4"],
            "family_id": ["A", "A", "", None],
            "department": ["x", "x", "y", "y"],
        }
    )
    docs = ["d1", "d2", "d3", "d4"] * 3
    qids = [f"q{i:02d}" for i in range(12)]
    groups = question_groups(pd.DataFrame({"question_id": qids, "doc_id": docs}), corpus)
    assert list(groups["family"][:4]) == ["family:A", "family:A", "doc:d3", "doc:d4"]
    answers = pd.DataFrame(
        {
            "question_id": qids,
            "doc_id": docs,
            "system": "s",
            "set": "rag",
            "answer": "x",
            "rank": [0 if d == "d3" else 1 for d in docs],  # retrieval shared within a family
            "n_retrieved": 4,
            "retrieval_ok": True,
        }
    )
    fam = by_group(answers, groups, "department", {"s": 4}).set_index("department")
    plain = by_group(answers, groups, "department", {"s": 4}, cluster="question")
    plain = plain.set_index("department")
    assert fam.at["x", "R@N"] == plain.at["x", "R@N"] == 1.0
    # department x's six questions are one family: they count as fewer than six
    assert fam.at["x", "R@N_lo"] < plain.at["x", "R@N_lo"]


def test_a_rate_of_0_or_1_stays_inside_its_interval():
    # CI caught it: at p = 1 rounding put the upper bound 1e-16 below 1 (p = 0: the lower one above
    # 0) and matplotlib refused the R@N-by-group figure's negative error bar, failing stage 02
    from cube.method.design import wilson_effective

    for n in (0.8, 1.3, 2.2, 7.5, 31.0):
        for units in (None, 3, 5):
            for p in (0.0, 1.0):
                lo, hi = wilson_effective(p, n, 0.95, units)
                assert lo <= p <= hi
