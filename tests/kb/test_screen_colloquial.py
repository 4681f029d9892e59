"""The question screen lets a citizen's own words through (issue 23: 29 % of colloquial Chinese
questions were rejected as naming no service) and still rejects another service's question."""

from __future__ import annotations

import pandas as pd
import pytest

from cube.config.params import parse_params
from cube.kb.corpus import build_corpus
from cube.kb.questions import build_questions, question_prompt_template
from cube.kb.screen import screen_questions

JUDGES = [{"name": "r", "model": {"provider": "offline", "model": "rubric"}}]


@pytest.mark.parametrize("lang", ["zh", "en"])
@pytest.mark.parametrize("aliases", [True, False])
def test_colloquial_questions_pass_and_moved_ones_do_not(lang: str, aliases: bool):
    params = parse_params(
        {
            "run": "t",
            "lang": lang,
            "corpus": {"n_items": 120, "seed": 7},
            "judges": JUDGES,
            "questions": {"styles": {"colloquial": 1.0}, "seed": 7},
        }
    )
    corpus = build_corpus(params)
    questions = build_questions(params, corpus)
    colloquial = questions[questions["style"] == "colloquial"].reset_index(drop=True)
    assert len(colloquial) >= 30
    seen = (
        corpus if aliases else corpus.drop(columns="aliases")
    )  # most knowledge bases have no aliases
    got = screen_questions(colloquial, seen, question_prompt_template(lang))
    assert got.ne("").mean() < 0.05, got[
        got.ne("")
    ].value_counts()  # was 0.29-0.42 as names_no_service
    # each question put on the gold document of a question 37 places on, of another service (no
    # shared name word): a citizen's own words are harder to place than an official name, so fewer
    # are caught
    name = dict(zip(corpus["doc_id"], corpus["item_name"].str[:4], strict=True))
    moved = colloquial.assign(
        gold=colloquial["doc_id"], doc_id=colloquial["doc_id"].shift(-37)
    ).dropna()
    moved = moved[[name[a] != name[b] for a, b in zip(moved["gold"], moved["doc_id"], strict=True)]]
    got = screen_questions(moved.reset_index(drop=True), seen, question_prompt_template(lang))
    assert got.ne("").mean() > 0.15, (
        got.value_counts()
    )  # a weaker catch than for official names (docs/measurements.md)


def test_a_question_about_nothing_in_particular_is_rejected():
    corpus = build_corpus(
        parse_params(
            {"run": "t", "lang": "zh", "corpus": {"n_items": 40, "seed": 1}, "judges": JUDGES}
        )
    )
    q = pd.DataFrame(
        {
            "question": ["请问这个怎么办理？", "我想开网咖，要准备哪些材料？"],
            "doc_id": corpus["doc_id"][:2].tolist(),
        }
    )
    got = screen_questions(q, corpus.drop(columns="aliases"), question_prompt_template("zh"))
    assert got.tolist()[0] == "names_no_service"
