"""The accuracy grade (1 / 0.5 / 0 as 10 / 5 / 0): packaged prompts and the rubric-judge
equivalent."""

from __future__ import annotations

import pytest

import cube.judges.rubric as rubric
from cube.config.model_spec import ModelSpec
from cube.config.params import Params
from cube.config.sections import JudgeParams
from cube.judges.dimensions import load_dimensions
from tests.judges.test_judges_rubric import CASES, ctx


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_accuracy_is_a_packaged_dimension_with_five_checks(lang):
    params = Params(
        run="t",
        lang=lang,
        dimensions=["relevance", "accuracy"],
        judges=[JudgeParams(name="j", model=ModelSpec(provider="offline", model="rubric"))],
    )
    dims = {d.name: d for d in load_dimensions(params)}
    acc = dims["accuracy"]
    assert len(acc.criteria) == 5 and acc.description and "{answer}" in acc.template
    assert "10 / 5 / 0" in acc.template


@pytest.mark.parametrize("lang", ["zh", "en"])
@pytest.mark.parametrize("preset", ["lenient", "strict"])
def test_rubric_grades_gold_copy_near_duplicate_and_generic(lang, preset):
    _, _, _, generic, neardup, gold = CASES[lang]
    p = rubric.PRESETS[preset]
    grade = {
        name: rubric.judge(ctx(lang, a), p, "accuracy")
        for name, a in (("gold", gold), ("neardup", neardup), ("generic", generic), ("empty", ""))
    }
    assert grade["gold"][0] == 10 and all(grade["gold"][1].values())
    assert grade["neardup"][0] in (0, 5) and grade["neardup"][1]["right_item"] == 0
    assert grade["generic"][0] == 0 and grade["empty"] == (
        0,
        dict.fromkeys(rubric.RULES["accuracy"].criteria, 0),
    )
    for _, (score, _points) in grade.items():
        assert score in (0, 5, 10)


def test_half_grade_when_a_number_is_wrong_but_the_item_and_aspect_are_right():
    q, _, _, _, _, gold = CASES["zh"]
    wrong = gold.replace("承诺办结时限为15个工作日", "承诺办结时限为25个工作日")
    score, points = rubric.judge(ctx("zh", wrong), rubric.PRESETS["lenient"], "accuracy")
    assert points["numbers_agree"] == 0 and score == 5


def test_accuracy_is_scored_in_the_jury_like_the_other_dimensions():
    from cube.judges import make_judges, score_answers
    from cube.kb.demo import generate_demo_corpus
    from cube.kb.questions import build_questions
    from cube.systems import build_answers

    params = Params(
        run="t",
        dimensions=["relevance", "accuracy"],
        systems=[{"kind": "builtin", "name": "b"}],
        judges=[JudgeParams(name="j", model=ModelSpec(provider="offline", model="rubric-lenient"))],
    )
    corpus = generate_demo_corpus(30, "zh")
    questions = build_questions(params, corpus)
    answers = build_answers(params, corpus, questions, None, progress=False)
    scores = score_answers(
        answers, make_judges(params, None), load_dimensions(params), corpus, questions=questions
    )
    acc = scores[scores["dimension"] == "accuracy"]
    assert len(acc) == len(answers) and set(acc["score"].dropna()) <= {0.0, 5.0, 10.0}
    means = acc.groupby("set")["score"].mean()
    assert means["zero"] < means["full"]
