"""The rubric judge: deterministic, separates generic / near-duplicate / gold-copy answers, presets
differ."""

from __future__ import annotations

import json

import pytest

import cube.judges.rubric as rubric
from cube.config.model_spec import ModelSpec
from cube.llm import Request, make_model

DIMS = ("relevance", "specificity", "completeness", "quality")
ITEM_ZH = "抽水蓄能电站项目核准（新建）"
GOLD_ZH = """事项名称：抽水蓄能电站项目核准（新建）
行政区划：明川省
实施主体：明川省能源局
受理条件：项目已纳入国家抽水蓄能中长期发展规划；项目单位具有独立法人资格。
申请材料：1. 项目核准申请报告；2. 城乡规划选址意见书；3. 用地预审与选址意见书；4. \
环境影响评价批复文件
法定办结时限：20个工作日
承诺办结时限：15个工作日
收费标准：不收费
办理地点：明川市政务服务中心3楼12号窗口
办理流程：1. 网上申报；2. 受理审查；3. 专家评估；4. 作出核准决定
咨询方式：0000-86891234
是否网办：是"""
Q_ZH = "我想办理抽水蓄能电站项目核准（新建），需要准备哪些申请材料？多久能办完？"
GENERIC_ZH = (
    "办理抽水蓄能电站项目核准一般需要准备项目申请报告、身份证明等相关材料，具体材料以当地能源主管部门的要求为准。"
    "办理时间通常为一个月左右，建议您提前咨询当地政务服务中心。"
)
GOLDCOPY_ZH = """抽水蓄能电站项目核准（新建）需要准备以下申请材料：
1. 项目核准申请报告；
2. 城乡规划选址意见书；
3. 用地预审与选址意见书；
4. 环境影响评价批复文件。
法定办结时限为20个工作日，承诺办结时限为15个工作日，不收费。可在明川市政务服务中心3楼12号窗口办理，也可网上申报，咨询电话0000-86891234。"""
# The answer a system gives when it retrieved the (变更) sibling instead of the gold item.
NEARDUP_ZH = """抽水蓄能电站项目核准（变更）需要准备以下申请材料：
1. 项目变更申请报告；
2. 原核准文件；
3. 变更事项的说明材料。
法定办结时限为20个工作日，承诺办结时限为10个工作日，不收费。可在明川市政务服务中心3楼12号窗口办理，咨询电话0000-86891234。"""

ITEM_EN = "Approval for Pumped Storage Power Station Projects (New Construction)"
GOLD_EN = """Item Name: Approval for Pumped Storage Power Station Projects (New Construction)
Administrative Region: Mingchuan Province
Handling Agency: Mingchuan Provincial Energy Bureau
Requirements: The project is included in the national pumped storage development plan; the \
applicant is an independent legal person.
Application Materials: 1. project approval application report; 2. site selection opinion; 3. land \
pre-examination opinion; 4. environmental impact assessment approval
Statutory Processing Time: 20 working days
Committed Processing Time: 15 working days
Fee Standard: No fee
Processing Location: Window 12, 3rd floor, Mingchuan Government Service Center
Processing Procedure: 1. online application; 2. acceptance review; 3. expert assessment; 4. \
approval decision
Consultation Method: 0000-86891234"""
Q_EN = (
    "What materials do I need for the Approval for Pumped Storage Power "
    "Station Projects (New Construction), and how long does it take?"
)
GENERIC_EN = (
    "Generally you may need to prepare an application form, "
    "identity documents and other relevant materials. "
    "Requirements vary by region, so please consult your local "
    "energy authority. It usually takes about a month."
)
GOLDCOPY_EN = """For the Approval for Pumped Storage Power Station Projects (New Construction) you \
need these application materials:
1. project approval application report;
2. site selection opinion;
3. land pre-examination opinion;
4. environmental impact assessment approval.
The statutory processing time is 20 working days and the committed processing time is 15 working \
days. There is no fee. Apply at Window 12, 3rd floor, Mingchuan Government Service Center, or call \
0000-86891234."""
NEARDUP_EN = """For the Approval for Pumped Storage Power Station Projects (Modification) you need \
these application materials:
1. project modification application report;
2. original approval document;
3. explanation of the modified items.
The statutory processing time is 20 working days and the committed processing time is 10 working \
days. There is no fee. Apply at Window 12, 3rd floor, Mingchuan Government Service Center."""

CASES = {
    "zh": (Q_ZH, GOLD_ZH, ITEM_ZH, GENERIC_ZH, NEARDUP_ZH, GOLDCOPY_ZH),
    "en": (Q_EN, GOLD_EN, ITEM_EN, GENERIC_EN, NEARDUP_EN, GOLDCOPY_EN),
}


def ctx(
    lang: str, answer: str, dimension: str | None = "relevance", **extra: object
) -> dict[str, object]:
    q, doc, item, *_ = CASES[lang]
    return {
        "question": q,
        "document": doc,
        "answer": answer,
        "item_name": item,
        "lang": lang,
        "dimension": dimension,
        **extra,
    }


def total(lang: str, answer: str, preset: str, dims: tuple[str, ...] = DIMS) -> int:
    return sum(rubric.judge(ctx(lang, answer), rubric.PRESETS[preset], d)[0] for d in dims)


@pytest.mark.parametrize("lang", ["zh", "en"])
@pytest.mark.parametrize("preset", ["lenient", "strict"])
def test_generic_below_near_duplicate_below_gold_copy(lang: str, preset: str) -> None:
    _, _, _, generic, neardup, gold = CASES[lang]
    content = ("relevance", "specificity", "completeness")
    assert (
        total(lang, generic, preset, content)
        < total(lang, neardup, preset, content)
        < total(lang, gold, preset, content)
    )
    # and dimension by dimension, the gold copy is never below the generic answer
    for d in DIMS:
        p = rubric.PRESETS[preset]
        assert rubric.judge(ctx(lang, gold), p, d)[0] >= rubric.judge(ctx(lang, generic), p, d)[0]


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_near_duplicate_loses_the_right_item_criterion(lang: str) -> None:
    _, _, _, _, neardup, gold = CASES[lang]
    p = rubric.PRESETS["strict"]
    assert rubric.judge(ctx(lang, gold), p, "specificity")[1]["right_item"] == 2
    assert rubric.judge(ctx(lang, neardup), p, "specificity")[1]["right_item"] == 0
    assert rubric.judge(ctx(lang, neardup), p, "relevance")[1]["no_distortion"] == 0


def test_item_match_levels() -> None:
    toks = frozenset()
    assert rubric.item_match("办理抽水蓄能电站项目核准（新建）需要…", ITEM_ZH, toks, "zh") == 1.0
    assert rubric.item_match("办理抽水蓄能电站项目核准需要…", ITEM_ZH, toks, "zh") == 0.4
    assert (
        rubric.item_match("抽水蓄能电站项目核准(变更)需要…", ITEM_ZH, toks, "zh") == 0.0
    )  # half-width brackets too


@pytest.mark.parametrize(
    ("lang", "right", "wrong"),
    [
        ("zh", "不收费", "收费标准为200元"),
        ("en", "There is no fee.", "The fee is 200 yuan."),
    ],
)
def test_a_wrong_fee_lowers_the_numbers_criteria(lang: str, right: str, wrong: str) -> None:
    gold = CASES[lang][5]
    bad = gold.replace("不收费" if lang == "zh" else "There is no fee.", wrong)
    assert bad != gold
    good = gold if right in gold else gold + right
    for preset in ("lenient", "strict"):
        p = rubric.PRESETS[preset]
        ok_pts = rubric.judge(ctx(lang, good), p, "relevance")[1]
        bad_pts = rubric.judge(ctx(lang, bad), p, "relevance")[1]
        assert bad_pts["reasoning_supported"] < ok_pts["reasoning_supported"]
        assert (
            rubric.judge(ctx(lang, bad), p, "completeness")[0]
            <= rubric.judge(ctx(lang, good), p, "completeness")[0]
        )


def test_a_wrong_time_limit_lowers_integrity_of_details() -> None:
    bad = GOLDCOPY_ZH.replace("承诺办结时限为15个工作日", "承诺办结时限为30个工作日")
    p = rubric.PRESETS["strict"]
    assert (
        rubric.judge(ctx("zh", bad), p, "completeness")[1]["integrity_of_details"]
        < rubric.judge(ctx("zh", GOLDCOPY_ZH), p, "completeness")[1]["integrity_of_details"]
    )


def test_structure_and_repetition_move_quality() -> None:
    p = rubric.PRESETS["strict"]
    flat = GOLDCOPY_ZH.replace("\n", "")
    repeated = GOLDCOPY_ZH + "\n" + GOLDCOPY_ZH
    q_struct = rubric.judge(ctx("zh", GOLDCOPY_ZH), p, "quality")[1]
    assert q_struct["organisation"] == 2
    assert rubric.judge(ctx("zh", flat), p, "quality")[1]["organisation"] < 2
    assert (
        rubric.judge(ctx("zh", repeated), p, "quality")[1]["no_repetition"]
        < q_struct["no_repetition"]
    )


def test_presets_differ_on_the_same_answers() -> None:
    answers = [a for lang in CASES for a in CASES[lang][3:]]
    langs = [lang for lang in CASES for _ in range(3)]
    lenient = [total(lg, a, "lenient") for lg, a in zip(langs, answers, strict=True)]
    strict = [total(lg, a, "strict") for lg, a in zip(langs, answers, strict=True)]
    assert all(s <= v for s, v in zip(strict, lenient, strict=True))
    assert sum(lenient) > sum(strict) + 10
    # the lenient floor: a poor but non-empty answer never scores below 3, and says so
    s, pts = rubric.judge(ctx("zh", "不清楚。"), rubric.PRESETS["lenient"], "completeness")
    assert s == 3 and pts["lenient_floor"] == 3 - sum(
        v for k, v in pts.items() if k != "lenient_floor"
    )
    assert rubric.judge(ctx("zh", "不清楚。"), rubric.PRESETS["strict"], "completeness")[0] < 3
    # strict never gives 2 length points to a short answer
    short = "需要项目核准申请报告等四项材料，20个工作日办结。"
    assert (
        rubric.judge(ctx("zh", short), rubric.PRESETS["strict"], "quality")[1]["appropriate_length"]
        < 2
    )


def test_empty_answer_scores_zero_without_floor() -> None:
    for preset in rubric.PRESETS.values():
        for d in DIMS:
            s, pts = rubric.judge(ctx("zh", ""), preset, d)
            assert s == 0 and set(pts) == set(rubric.RULES[d].criteria)


def test_deterministic_and_cache_independent() -> None:
    first = [
        rubric.judge(ctx(lang, a), rubric.PRESETS[p], d)
        for lang in CASES
        for a in CASES[lang][3:]
        for p in rubric.PRESETS
        for d in DIMS
    ]
    rubric.clear_caches()
    second = [
        rubric.judge(ctx(lang, a), rubric.PRESETS[p], d)
        for lang in CASES
        for a in CASES[lang][3:]
        for p in rubric.PRESETS
        for d in DIMS
    ]
    assert first == second


def test_registered_models_and_responses() -> None:
    lenient = make_model(ModelSpec(provider="offline", model="rubric-lenient"))
    strict = make_model(ModelSpec(provider="offline", model="rubric-strict"))
    by_option = make_model(
        ModelSpec(provider="offline", model="rubric", options={"preset": "strict"})
    )
    assert lenient.offline and lenient.name == "rubric-lenient"
    reqs = [Request(messages=(), context=ctx("zh", a, d)) for a in CASES["zh"][3:] for d in DIMS]
    r_strict = strict.complete(reqs, role="judging", progress=False)
    assert [r.text for r in r_strict] == [
        r.text for r in by_option.complete(reqs, role="judging", progress=False)
    ]
    r_len = lenient.complete(reqs, role="judging", progress=False)
    for r in r_strict + r_len:
        assert r.ok and r.text is not None and r.text.isdigit() and 0 <= int(r.text) <= 10
        assert r.detail is not None and int(r.text) == sum(r.detail.values()) and r.cost == 0.0
    with pytest.raises(ValueError, match="preset"):
        make_model(ModelSpec(provider="offline", model="rubric", options={"preset": "harsh"}))


def test_all_dimensions_reply_and_unknown_dimension() -> None:
    model = make_model(ModelSpec(provider="offline", model="rubric-strict"))
    all_dims = Request(messages=(), context=ctx("en", GOLDCOPY_EN, None, dimensions=list(DIMS)))
    unknown = Request(messages=(), context=ctx("en", GOLDCOPY_EN, "politeness"))
    r_all, r_unknown = model.complete([all_dims, unknown], role="judging", progress=False)
    scores = json.loads(r_all.text or "")
    assert set(scores) == set(DIMS) and set(r_all.detail or {}) == set(DIMS)
    assert not r_unknown.ok and "politeness" in (
        r_unknown.error or ""
    )  # a failure, never a made-up score


def test_docstring_says_it_is_not_an_llm() -> None:
    doc = rubric.__doc__ or ""
    assert "NOT an LLM" in doc and "cannot see" in doc


# issue 23: a correct one-line answer identical to the gold field scored 4.6 of 10 (mean of the four
# dimensions and two presets); the asked field's content, said alone or after the item name and the
# field's label, is the top of the scale.
@pytest.mark.parametrize(
    "question, answer",
    [
        ("抽水蓄能电站项目核准（新建）收费吗？", "不收费"),
        (
            "抽水蓄能电站项目核准（新建）收费吗？",
            "抽水蓄能电站项目核准（新建）的收费标准：不收费。",
        ),
        ("抽水蓄能电站项目核准（新建）在哪里办理？", "办理地点：明川市政务服务中心3楼12号窗口"),
    ],
)
@pytest.mark.parametrize("preset", sorted(rubric.PRESETS))
def test_an_answer_equal_to_the_asked_field_scores_the_top_of_the_scale(question, answer, preset):
    ctx = {
        "answer": answer,
        "document": GOLD_ZH,
        "question": question,
        "item_name": ITEM_ZH,
        "lang": "zh",
    }
    assert {d: rubric.judge(ctx, rubric.PRESETS[preset], d)[0] for d in DIMS} == dict.fromkeys(
        DIMS, 10
    )
    assert rubric.judge(ctx, rubric.PRESETS[preset], "accuracy")[0] == 10


@pytest.mark.parametrize(
    "answer",
    [
        "需要收费",
        "不收费，办理地点：明川市政务服务中心3楼12号窗口",
        "收费标准：不收费，另需缴纳工本费",
    ],
)
def test_a_wrong_or_longer_answer_does_not_take_the_equal_field_rule(answer):
    # the opposite value, or the field plus something more, is judged by the usual evidence
    ctx = {
        "answer": answer,
        "document": GOLD_ZH,
        "question": "抽水蓄能电站项目核准（新建）收费吗？",
        "item_name": ITEM_ZH,
    }
    assert rubric.judge(ctx, rubric.PRESETS["strict"], "accuracy")[0] < 10
    assert sum(rubric.judge(ctx, rubric.PRESETS["strict"], d)[0] for d in DIMS) < 40


def test_numeric_claims_carry_their_unit_and_a_text_without_digits_has_none() -> None:
    rubric.clear_caches()
    assert rubric._numbers("不收费") == frozenset()
    assert rubric._numbers("承诺办结时限：15个工作日，收费200元") == {"15|wd", "200|yuan"}
    assert rubric._numbers("1. 网上申报；2. 受理审查") == frozenset()  # list markers are no claims
    assert rubric._numbers.cache_info().currsize == 3
    rubric.clear_caches()
    assert rubric._numbers.cache_info().currsize == 0


def test_releasing_the_judge_s_caches_drops_the_slice_s_segmentations() -> None:
    from cube.kb import text

    model = make_model(ModelSpec(provider="offline", model="rubric"))
    rubric.judge(
        {"answer": GOLDCOPY_ZH, "document": GOLD_ZH, "question": Q_ZH},
        rubric.PRESETS["lenient"],
        "quality",
    )
    assert text.segment.cache_info().currsize > 0 and rubric.tokenize.cache_info().currsize > 0
    model.release_caches()
    assert text.segment.cache_info().currsize == 0 and text._cut_block.cache_info().currsize == 0
    assert rubric.tokenize.cache_info().currsize == 0


def test_a_reply_is_the_total_s_text() -> None:
    """The shared reply strings are `str(int(total))`, for every total and beyond the scale."""
    import numpy as np

    for total in (*range(11), -1, 11, 40, np.int64(7), True):
        assert rubric._score_text(total) == str(int(total))
    assert rubric._score_text(10) is rubric._score_text(5 + 5)


def test_a_repeated_judgment_is_the_first_one_and_its_detail_its_own() -> None:
    """Two judges of one preset (two model names) and a second sample answer from one memo: the
    same text and points as judging afresh, each response with its own detail mapping; a rule
    registered anew under a dimension's name is used at once (the memo is emptied)."""
    rubric.clear_caches()
    by_name = make_model(ModelSpec(provider="offline", model="rubric-strict"))
    by_option = make_model(
        ModelSpec(provider="offline", model="rubric", options={"preset": "strict"})
    )
    reqs = [
        Request(messages=(), context=ctx(lg, a, d))
        for lg in CASES
        for a in CASES[lg][3:]
        for d in DIMS
    ]
    fresh = [
        rubric.judge(r.context, rubric.PRESETS["strict"], r.context["dimension"]) for r in reqs
    ]
    first = by_name.complete(reqs, role="judging", progress=False)
    again = by_option.complete(reqs, role="judging", progress=False)
    for (total, points), a, b in zip(fresh, first, again, strict=True):
        assert a.text == b.text == str(total) and a.detail == b.detail == points
        assert list(a.detail) == list(points) and a.detail is not b.detail
    first[0].detail["mutated"] = 1
    assert "mutated" not in by_name.complete(reqs[:1], role="judging", progress=False)[0].detail
    rule_ = rubric.RULES["quality"]
    try:
        rubric.rule("quality", rule_.criteria)(lambda x, p, lang: (0,) * len(rule_.criteria))
        q = Request(messages=(), context=ctx("en", GOLDCOPY_EN, "quality"))
        assert by_name.complete([q], role="judging", progress=False)[0].text == str(
            rubric.PRESETS["strict"].floor
        )
    finally:
        rubric.RULES["quality"] = rule_
        rubric.clear_caches()
