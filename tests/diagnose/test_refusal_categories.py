"""Refusal accuracy and the false-refusal rate by category (`cube.diagnose.refusal_categories`)."""

from __future__ import annotations

import math

import pandas as pd

from cube.config.sections import AnalysisParams
from cube.diagnose.categories import category_report
from cube.diagnose.refusal_categories import NOT_IN_CORPUS, refusal_by_category
from cube.pages.diag_plots import refusal_figure
from tests.factories import make_tables

CORPUS = pd.DataFrame(
    {
        "doc_id": ["d1", "d2"],
        "item_name": ["护照签发", "残疾人证换领"],
        "department": ["公安局", "残联"],
    }
)
DECLINE, ANSWER = "抱歉，我无法回答。", "关于“护照签发”，根据办事指南：收费标准：20元/件"
# refusal questions: two absent items (one declined, one answered), three about 护照签发 (two
# declined, one failed call), one about 残疾人证换领 (answered)
REFUSALS = pd.DataFrame(
    {
        "question_id": ["R1", "R2", "R3", "R4", "R5", "R6"],
        "system": "s",
        "kind": [
            "absent_item",
            "absent_item",
            "other_province",
            "other_province",
            "absent_field",
            "absent_field",
        ],
        "item": [
            "游艇驾驶证核发",
            "太空旅游备案",
            "护照签发",
            "护照签发",
            "护照签发",
            "残疾人证换领",
        ],
        "style": "refusal",
        "answer": [DECLINE, ANSWER, DECLINE, DECLINE, "", ANSWER],
        "error": [None, None, None, None, "HTTP 500", None],
    }
)
# answerable: 公安局 questions Q1-Q4 (one declined), 残联 Q5-Q6 (none declined, one empty)
ANSWERS = pd.DataFrame(
    {
        "question_id": [f"Q{i}" for i in range(1, 7)],
        "system": "s",
        "set": "rag",
        "answer": [DECLINE, ANSWER, ANSWER, ANSWER, ANSWER, ""],
        "error": None,
    }
)
GROUPS = pd.DataFrame(
    {
        "question_id": [f"Q{i}" for i in range(1, 7)],
        "department": ["公安局"] * 4 + ["残联"] * 2,
        "style": ["direct", "situational"] * 3,
    }
)


def test_refusal_accuracy_and_false_refusals_by_department_hand_computed():
    t = refusal_by_category(REFUSALS, ANSWERS, GROUPS, CORPUS, "s", "department").set_index(
        "department"
    )
    assert (
        t.at[NOT_IN_CORPUS, "refusal_accuracy"] == 0.5 and t.at[NOT_IN_CORPUS, "unanswerable"] == 2
    )
    assert (
        math.isnan(t.at[NOT_IN_CORPUS, "false_refusal_rate"])
        and t.at[NOT_IN_CORPUS, "answerable"] == 0
    )
    assert t.at["公安局", "refusal_accuracy"] == 1.0 and t.at["公安局", "unanswerable"] == 2
    assert t.at["公安局", "false_refusal_rate"] == 0.25 and t.at["公安局", "no_answer"] == 1
    assert t.at["残联", "refusal_accuracy"] == 0.0 and t.at["残联", "false_refusal_rate"] == 0.0
    assert t.at["残联", "answerable"] == 1 and t.at["残联", "no_answer"] == 1
    for col in ("refusal", "false_refusal"):
        rate = t[f"{col}_accuracy" if col == "refusal" else "false_refusal_rate"]
        ok = rate.notna()
        assert ((t.loc[ok, f"{col}_lo"] <= rate[ok]) & (rate[ok] <= t.loc[ok, f"{col}_hi"])).all()
        assert t.loc[~ok, f"{col}_lo"].isna().all()
    # every question is counted once: answered ones in a rate, the others in no_answer
    assert t["unanswerable"].sum() + t["answerable"].sum() + t["no_answer"].sum() == len(
        REFUSALS
    ) + len(ANSWERS)


def test_by_kind_and_by_style():
    kind = refusal_by_category(REFUSALS, ANSWERS, GROUPS, CORPUS, "s", "kind").set_index("kind")
    assert kind["refusal_accuracy"].to_dict() == {
        "absent_item": 0.5,
        "other_province": 1.0,
        "absent_field": 0.0,
    }
    assert kind["answerable"].sum() == 0 and kind.at["absent_field", "no_answer"] == 1
    style = refusal_by_category(REFUSALS, ANSWERS, GROUPS, CORPUS, "s", "style").set_index("style")
    assert style.at["refusal", "refusal_accuracy"] == 0.6 and math.isnan(
        style.at["refusal", "false_refusal_rate"]
    )
    assert (
        style.at["direct", "false_refusal_rate"] == 1 / 3
        and style.at["situational", "false_refusal_rate"] == 0.0
    )
    fig = refusal_figure(
        {
            "department": refusal_by_category(REFUSALS, ANSWERS, GROUPS, CORPUS, "s", "department"),
            "kind": kind.reset_index(),
        },
        "s",
    )
    assert len(fig.axes) == 2
    one = refusal_figure(
        {"department": refusal_by_category(REFUSALS, ANSWERS, GROUPS, CORPUS, "s", "department")},
        "s",
        top=1,
    )  # the largest category, and the items no document names
    labels = [t.get_text() for t in one.axes[0].get_yticklabels()]
    assert len(labels) == 2 and any(label.startswith(NOT_IN_CORPUS) for label in labels)


def test_the_category_report_carries_the_refusal_figures_and_still_sums_to_the_whole():
    answers, scores = make_tables(n_questions=40, seed=5)
    qids = sorted(answers["question_id"].unique())
    groups = pd.DataFrame({"question_id": qids, "department": ["公安局"] * 30 + ["残联"] * 10})
    classified = pd.DataFrame({"question_id": qids, "low": False, "primary": ""})
    rag = answers[answers["set"] == "rag"].copy()
    rag["answer"] = [DECLINE if i % 10 == 0 else ANSWER for i in range(len(rag))]
    refusal = refusal_by_category(
        REFUSALS.assign(system="sys"), rag, groups, CORPUS, "sys", "department"
    )
    t = category_report(
        answers,
        scores,
        groups,
        classified,
        "sys",
        8,
        "department",
        AnalysisParams(bootstrap=0),
        refusal=refusal,
    ).set_index("department")
    assert t["questions"].sum() == 40 and t.at[NOT_IN_CORPUS, "questions"] == 0
    assert t.at[NOT_IN_CORPUS, "note"] == "refusal questions only" and math.isnan(
        t.at[NOT_IN_CORPUS, "R@N"]
    )
    assert t.at["公安局", "refusal_accuracy"] == 1.0
    declined = (
        rag.merge(groups, on="question_id")
        .groupby("department")["answer"]
        .apply(lambda s: (s == DECLINE).mean())
    )
    assert t.at["公安局", "false_refusal_rate"] == declined["公安局"]
    assert t.at["残联", "false_refusal_rate"] == declined["残联"]
