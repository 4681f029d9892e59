"""Refusal questions, the extractive answerer's decline, and the refusal figures."""

from __future__ import annotations

import math

import pandas as pd

from cube.config.model_spec import ModelSpec
from cube.config.params import Params
from cube.config.sections import BuiltinSystem, JudgeParams
from cube.diagnose.refusal import is_refusal, mark_declined, refusal_report, refusal_sentence
from cube.kb.demo import generate_demo_corpus
from cube.kb.refusal_questions import KINDS, build_refusal_questions
from cube.systems import refusal_answers
from cube.systems.extractive import extractive_answer, named_item

CORPUS = generate_demo_corpus(60, "zh")


def test_refusal_questions_name_nothing_the_corpus_has_and_cover_every_kind():
    q = build_refusal_questions(CORPUS, "zh", n=9)
    assert len(q) == 9 and set(q["kind"]) == set(KINDS) and (q["doc_id"] == "").all()
    assert q["question_id"].is_unique and (q["style"] == "refusal").all()
    names = set(CORPUS["item_name"])
    for text in q.loc[q["kind"] == "absent_item", "question"]:
        assert named_item(text, "zh") not in names
    assert build_refusal_questions(CORPUS, "zh", n=0).empty
    assert len(build_refusal_questions(generate_demo_corpus(30, "en"), "en", n=6)) == 6


def test_extractive_declines_when_no_retrieved_document_names_the_item_or_province():
    doc = CORPUS["text"].iloc[0]
    item = CORPUS["item_name"].iloc[0]
    answer, detail = extractive_answer("游艇驾驶证核发需要什么材料？", [doc], "zh")
    assert is_refusal(answer) and detail["declined"] == "游艇驾驶证核发"
    answer, detail = extractive_answer(f"我在海南省，{item}在哪里办理？", [doc], "zh")
    assert is_refusal(answer) and detail["declined"] == "海南省"
    answer, detail = extractive_answer(f"{item}需要什么材料？", [doc], "zh")
    assert not is_refusal(answer) and "declined" not in detail
    answer, _ = extractive_answer(
        "我想开个小店，该怎么办？", [doc], "zh"
    )  # names no item: answered
    assert not is_refusal(answer)


def test_refusal_answers_and_report_beside_cube():
    params = Params(
        run="t",
        judges=[JudgeParams(name="j", model=ModelSpec(provider="offline", model="rubric"))],
        systems=[BuiltinSystem(name="b", top_n=4)],
    )
    q = build_refusal_questions(CORPUS, "zh", n=6)
    out = mark_declined(refusal_answers(params, CORPUS, q, None))
    assert (
        len(out) == 6
        and out["declined"].dtype == "boolean"
        and (out["outcome"] == "answered").all()
    )
    by_kind = out.groupby("kind")["declined"].mean()
    assert by_kind["absent_item"] == 1.0 and by_kind["other_province"] == 1.0
    ordinary = pd.DataFrame(
        {
            "system": "b",
            "set": ["rag", "rag", "zero"],
            "answer": [
                "关于“x”，根据办事指南：收费标准：不收费",
                "抱歉，我无法回答。",
                "抱歉，我无法回答。",
            ],
        }
    )
    rep = refusal_report(out, ordinary)["b"]
    assert (
        rep["n_unanswerable"] == 6 and rep["n_answerable"] == 2 and rep["false_refusal_rate"] == 0.5
    )
    assert rep["refusal_accuracy"] == out["declined"].astype(bool).mean() and rep["flag"] == ""
    assert rep["false_refusal_ci"][0] < 0.5 < rep["false_refusal_ci"][1]
    assert rep["refusal_ci"][0] <= rep["refusal_accuracy"] <= rep["refusal_ci"][1]
    lo, hi = rep["false_refusal_ci"]
    assert f"wrongly declined 50.0% [{lo:.1%}, {hi:.1%}] of 2 answerable" in refusal_sentence(
        "b", rep
    )
    assert "undefined" in refusal_sentence("b", {"refusal_accuracy": math.nan})


def test_a_citizens_own_words_name_no_item_so_the_answer_is_not_a_decline():
    assert named_item("要是想给装好的锅炉登记，有什么条件要求吗？", "zh") is None
    assert named_item("我想给装好的锅炉登记，什么情况下才能办？", "zh") is None
    assert named_item("游艇驾驶证核发需要什么材料？", "zh") == "游艇驾驶证核发"
    answer, _ = extractive_answer(
        "要是想给装好的锅炉登记，有什么条件要求吗？", [CORPUS["text"].iloc[0]], "zh"
    )
    assert not is_refusal(answer)


def test_failed_answering_calls_are_left_out_of_both_refusal_rates_and_flagged():
    refusals = pd.DataFrame(
        {
            "question_id": ["R1", "R2", "R3", "R4"],
            "system": "b",
            "kind": "absent_item",
            "answer": ["抱歉，我无法回答。", "", "", "关于“x”，根据办事指南：收费标准：不收费"],
            "error": [None, "HTTP 500: server error", None, None],
        }
    )
    ordinary = pd.DataFrame(
        {
            "question_id": ["Q1", "Q2", "Q3"],
            "system": "b",
            "set": "rag",
            "answer": ["关于“x”，根据办事指南：收费标准：不收费", "", "抱歉，我无法回答。"],
            "error": [None, "timeout", None],
        }
    )
    rep = refusal_report(refusals, ordinary)["b"]
    # before: the failed/empty refusal questions counted as "not declined" (1/4) and the failed
    # answerable call as "not wrongly declined" (1/3)
    assert rep["refusal_accuracy"] == 0.5 and rep["n_unanswerable"] == 2
    assert rep["false_refusal_rate"] == 0.5 and rep["n_answerable"] == 2
    assert (rep["failed_unanswerable"], rep["empty_unanswerable"], rep["failed_answerable"]) == (
        1,
        1,
        1,
    )
    assert rep["by_kind"] == {"absent_item": 0.5}
    sentence = refusal_sentence("b", rep)
    assert "Caution: refusal accuracy leaves out 1 failed and 1 empty" in sentence
    marked = mark_declined(refusals)
    assert marked["declined"].isna().tolist() == [False, True, True, False]
