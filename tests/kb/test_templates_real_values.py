"""Template questions and extractive answers on real-export values: placeholders, yes/no fees,
bare time limits, variants with nested brackets (`cube.config.phrasing`, `cube.kb.questions`)."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cube.config.phrasing import PLACEHOLDERS, base_name, is_missing, phrase_value, strip_variant
from cube.kb.questions import (
    TEMPLATES,
    _template_rows,
    assign_styles,
    plan_questions,
    template_question,
)
from cube.systems.extractive import extractive_answer

# Names are drawn from characters that are never part of a placeholder, so a placeholder
# character in a question can only have come from a placeholder value; variants and regions
# from characters no template uses, so counting them in a question counts how often they were said.
_CHARS = "残疾人证换领补办户籍地损新申请变更注销食品经营许可护照签发"
word = st.text(alphabet=_CHARS, min_size=1, max_size=6)
vword = st.text(alphabet="甲乙丙丁戊己庚辛壬癸", min_size=1, max_size=4)
rword = st.text(alphabet="鹤岭桐梧", min_size=2, max_size=4)
placeholder = st.sampled_from([*PLACEHOLDERS, "", " 无 ", "n/a"])


@st.composite
def bracketed(draw, depth: int = 2) -> str:
    """A variant, possibly holding nested brackets: 残损换新（户籍地（补办））, mixed widths."""
    inner = draw(vword)
    for _ in range(draw(st.integers(0, depth))):
        o, c = draw(st.sampled_from([("（", "）"), ("(", ")")]))
        inner = f"{draw(vword)}{o}{inner}{c}"
    return inner


@given(base=word, variant=bracketed(), wide=st.booleans())
def test_base_name_strips_a_trailing_variant_with_nested_brackets(base, variant, wide):
    assume(not base.startswith(variant))
    o, c = ("（", "）") if wide else ("(", ")")
    name = f"{base}{o}{variant}{c}"
    assert base_name(name) == base
    assert strip_variant(name, variant) == base
    assert strip_variant(base, variant) == base  # a name without its variant is the base already
    assert base_name(base) == base


def test_issue_examples():
    assert base_name("残疾人证换领（残损换新（户籍地））") == "残疾人证换领"
    assert phrase_value("fee_standard", "是", "zh") == "需要收费"
    assert phrase_value("fee_standard", "否", "zh") == "不收费"
    assert phrase_value("fee_standard", "200元/件", "zh") == "200元/件"
    assert phrase_value("committed_time_limit", "10", "zh") == "10个工作日"
    assert phrase_value("committed_time_limit", "１０", "zh") == "10个工作日"  # full-width digits
    assert phrase_value("statutory_time_limit", "20个工作日", "zh") == "20个工作日"
    assert phrase_value("statutory_time_limit", "0", "zh") == "即办（0个工作日）"
    assert phrase_value("committed_time_limit", "1", "en") == "1 working day"
    assert phrase_value("online_handling", "是", "zh") == "可以网上办理"
    assert (
        phrase_value("processing_location", "10", "zh") == "10"
    )  # a number outside a time field is kept
    assert all(is_missing(p) and phrase_value("fee_standard", p, "zh") == "" for p in PLACEHOLDERS)


def _record(name: str, variant: str, region: str, fee: str, time: str, aliases: str = "") -> dict:
    return {
        "doc_id": "D1",
        "item_name": name,
        "variant": variant,
        "region": region,
        "aliases": aliases,
        "fee_standard": fee,
        "committed_time_limit": time,
        "processing_location": "无",
        "application_materials": "1. 身份证",
    }


@settings(max_examples=150, deadline=None)
@given(
    base=word,
    variant=st.one_of(bracketed(), placeholder),
    in_name=st.booleans(),
    region=st.one_of(rword, placeholder),
    alias=st.one_of(word, placeholder),
    fee=st.one_of(placeholder, st.sampled_from(["是", "否"])),
    lang=st.sampled_from(["zh", "en"]),
    style=st.sampled_from(["named", "ambiguous", "colloquial"]),
    seed=st.integers(0, 50),
    k=st.integers(0, 3),
    name_region=st.booleans(),
)
def test_template_questions_never_say_a_placeholder_or_a_variant_twice(
    base, variant, in_name, region, alias, fee, lang, style, seed, k, name_region
):
    real_variant = not is_missing(variant)
    name = f"{base}（{variant.strip()}）" if in_name and real_variant else base
    rec = _record(name, variant, region, fee, "10", aliases=alias)
    if style == "colloquial" and is_missing(alias):
        style = "named"
    fields = [
        f
        for f in TEMPLATES
        if f in ("", "fee_standard", "application_materials", "committed_time_limit")
    ]
    for field in fields:
        q = template_question(rec, field, lang, seed, k, style=style, name_region=name_region)
        for p in ("无", "暂无", "N/A", "n/a", "—", "/"):
            assert p not in q, (q, rec)
        if not is_missing(region) and name_region and style != "colloquial":
            assert q.count(region) == 1, q
        if real_variant:
            assert q.count(variant.strip()) <= 1, q
            if style == "ambiguous":
                assert variant.strip() not in q, q
        assert ("（）" not in q) and ("()" not in q), q


def test_placeholder_fields_are_never_asked_about_and_a_yes_no_fee_is_asked_whether():
    rec = _record("残疾人证换领（残损换新（户籍地））", "残损换新（户籍地）", "绿园区", "是", "10")
    corpus = pd.DataFrame([rec, {**rec, "doc_id": "D2", "region": "朝阳区"}])
    slots = plan_questions(corpus, 12, None, 0)
    styles = dict(
        zip(slots["question_id"], assign_styles(corpus, slots, {"named": 1.0}, 0), strict=True)
    )
    rows = _template_rows(corpus, slots, styles, "zh", 0)
    asked = {r["asked_field"] for r in rows}
    assert "processing_location" not in asked  # its value is 无
    assert "fee_standard" in asked
    for r in rows:
        assert "无" not in r["question"] and "多少钱" not in r["question"], r["question"]
        assert r["question"].count("残损换新") == 1
        assert ("绿园区" in r["question"]) != (
            "朝阳区" in r["question"]
        )  # the region is said: two regions offer it


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("残疾人证换领要收费吗？", "收费标准：需要收费"),
        ("残疾人证换领多久能办好？", "承诺办结时限：10个工作日"),
        ("残疾人证换领在哪里办理？", "办理地点：指南中未载明"),
    ],
)
def test_extractive_answers_phrase_values_like_the_questions(question, expected):
    doc = (
        "事项名称：残疾人证换领（残损换新（户籍地））\n承诺办结时限：10\n收费标准：是\n办理地点：无"
    )
    answer, _ = extractive_answer(question, [doc], "zh")
    assert expected in answer.splitlines()
    assert "：是" not in answer and "：无" not in answer


def test_a_placeholder_variant_or_alias_does_not_make_an_ambiguous_or_colloquial_slot():
    corpus = pd.DataFrame(
        {
            "doc_id": ["D1", "D2", "D3"],
            "variant": ["无", "变更", ""],
            "aliases": ["/", "", "开饭馆"],
        }
    )
    slots = plan_questions(corpus, 1, None, 0)
    with pytest.warns(UserWarning, match="slots are"):
        styles = assign_styles(corpus, slots, {"ambiguous": 0.5, "colloquial": 0.5}, 0)
    assert styles == ["named", "ambiguous", "colloquial"]
