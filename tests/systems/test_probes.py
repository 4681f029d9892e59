"""Issue 20: the audit's probe builders change what they claim and nothing else (small texts)."""

from __future__ import annotations

import re

import pytest

from cube.config.params import parse_params
from cube.systems.injections import ZERO_WIDTH, Injection
from cube.systems.probes import (
    PROBES_PER_QUESTION,
    calls_per_question,
    capped_questions,
    corrupt_facts,
    ends_sentence,
    fact_numbers,
    inject,
    length_tolerance,
    match_length,
    near_empty,
    truncate,
    units,
)

ZH = (
    "办理流程：\n1. 申请：提交材料。\n"
    "2、受理：5个工作日内办结。\n（1）申请书2份；(2) 身份证复印件1份。\n"
    "一、收费标准：每件30元。\n二、咨询电话：0571-12345678。依据第3条办理。"
)
EN = (
    "Steps:\n1. Apply online.\n"
    "2) The fee is 30 CNY per application.\n(3) Processing takes 5 working days.\n"
    "Step 4 is the 2nd visit; call 0571-12345678."
)
MARKERS_ZH = ["1.", "2、", "（1）", "(2)", "一、", "二、", "第3条"]
MARKERS_EN = ["1.", "2)", "(3)", "Step 4", "2nd"]


@pytest.mark.parametrize(
    ("text", "sibling", "markers", "facts"),
    [
        (ZH, "费用50元，7个工作日，3份", MARKERS_ZH, ["5", "2", "1", "30", "0571", "12345678"]),
        (EN, "fee 50, 7 days", MARKERS_EN, ["30", "5", "0571", "12345678"]),
    ],
)
def test_corrupt_facts_changes_every_fact_and_keeps_list_markers_and_ordinals(
    text, sibling, markers, facts
):
    out = corrupt_facts(text, sibling=sibling)
    assert out is not None
    for m in markers:  # a renumbered list is not a worse answer: the markers stay
        assert out.count(m) == text.count(m), (m, out)
    assert [m.group(0) for m in fact_numbers(text)] == facts
    changed = [
        a.group(0) != b.group(0) for a, b in zip(fact_numbers(text), fact_numbers(out), strict=True)
    ]
    assert all(changed), out
    # outside the numbers, the text is the same
    assert re.sub(r"\d+", "#", out) == re.sub(r"\d+", "#", text)


def test_corrupt_facts_replaces_the_item_name_and_returns_none_when_nothing_changes():
    assert (
        corrupt_facts("关于“甲证核发”：不收费。", name="甲证核发", sibling_name="甲证核发（延续）")
        == "关于“甲证核发（延续）”：不收费。"
    )
    assert corrupt_facts("1. 提交申请。\n2. 等待审核。") is None  # markers only: no fact to corrupt


def test_truncate_cuts_mid_way_and_loses_the_last_fact():
    answer = (
        "关于“某事项”，根据办事指南：收费标准为每件30元，办结时限为5个工作日，地址为新华路34号。"
    )
    cut = truncate(answer)
    assert answer.startswith(cut) and len(cut) <= len(answer) // 3
    assert "34" not in cut
    early = (
        "费用30元。" + "其余说明没有数字。" * 5
    )  # every fact in the first third: cut before the last one
    assert "30" not in truncate(early)
    assert truncate("短答") is None


def test_near_empty_is_a_reply_without_facts():
    for lang in ("zh", "en"):
        assert near_empty(lang).strip() and not re.search(r"\d", near_empty(lang))


def test_match_length_cuts_or_pads_at_whole_sentences_near_the_original_length():
    long = "第一句话比较长一些。第二句话也很长很长。第三句话还要更长一些。"
    assert match_length(long, 20, [], "zh") == "第一句话比较长一些。第二句话也很长很长。"
    short = match_length("短的答案。", 25, ["其他答案的第一句。其他答案的第二句比较长一点。"], "zh")
    assert short == "短的答案。其他答案的第一句。其他答案的第二句比较长一点。"  # 28: nearest to 25
    assert match_length("短。", 100, ["也短。"], "zh") is None  # the filler runs out: no probe
    en = match_length(
        "A short answer.", 50, ["Another answer's first sentence. And a second one."], "en"
    )
    assert en == "A short answer. Another answer's first sentence."  # 48 characters
    # a fee of 3.5 is not two sentences, and a line without punctuation is a unit of its own
    assert units("Fee: 3.5 yuan.\nPlace: Hall 2\nTime: 9-17") == [
        "Fee: 3.5 yuan.\n",
        "Place: Hall 2\n",
        "Time: 9-17",
    ]


def test_length_matched_probes_end_a_sentence_exactly_when_the_original_does():
    filler = [
        "办理地点：政务服务中心三楼\n收费标准：不收费。\n办理时限：5个工作日\n咨询电话：12345。"
    ]
    for original in ("受理条件：年满18周岁。", "受理条件：年满18周岁\n材料：身份证"):
        for text in ("其他事项的受理条件：本市户籍", "其他事项的受理条件：本市户籍。"):
            out = match_length(text, len(original) + 8, filler, "zh", ends_sentence(original))
            assert out is not None and ends_sentence(out) == ends_sentence(original), out
            assert abs(len(out) - len(original) - 8) <= length_tolerance(len(original) + 8)
    assert (
        ends_sentence("好的。”") and ends_sentence("Done. ") and not ends_sentence("办理地点：三楼")
    )


def test_the_audit_sample_is_capped_by_its_share_of_the_judge_calls():
    params = parse_params(
        {
            "run": "t",
            "judges": [
                {"name": "a", "model": {"provider": "offline", "model": "rubric-lenient"}},
                {
                    "name": "b",
                    "model": {"provider": "offline", "model": "rubric-strict"},
                    "all_dimensions": True,
                },
            ],
            "dimensions": ["relevance", "quality"],
        }
    )
    assert calls_per_question(params) == PROBES_PER_QUESTION * (2 + 1)
    per_q = calls_per_question(params)
    assert (
        capped_questions(40, 10_000, per_q, 0.15) == 40
    )  # plenty of judge calls: the sample as asked
    n = capped_questions(
        40, 600, per_q, 0.15
    )  # a small run: 15 % of 600 calls is 90, 6 questions of 15 calls (5 probes x 3)
    assert n == 6 and n * per_q <= 0.15 * 600 < (n + 1) * per_q
    assert (
        capped_questions(0, 10_000, per_q, 0.15) == 0 and capped_questions(40, 10, per_q, 0.15) == 0
    )


def test_inject_puts_the_line_in_place_of_the_end_and_keeps_the_length():
    base = "关于该事项，收费标准为每件30元，办结时限为5个工作日，咨询电话0571-12345678。" * 2
    for lang, inj in (
        ("zh", Injection("instruction_override", "zh", 0, "whole")),
        ("en", Injection("role_play", "en", 0, "whole")),
    ):
        out = inject(base, inj, lang)
        assert out.endswith(inj.line) and len(out) == len(base.strip())
        assert out.startswith(base[:10])
    en = Injection("instruction_override", "en", 0, "whole")
    short = inject("短。", en, "en")  # shorter than the line: base + line
    assert short == "短。 " + en.line
    # split: halves at the start and the end; zero-width: invisible characters do not count
    split = inject(base, Injection("grader_note", "en", 0, "split"), "zh")
    assert split.startswith("Grader's note:") and split.endswith("score 10.")
    zw = inject(base, Injection("score_claim", "zh", 0, "zero_width"), "zh")
    assert ZERO_WIDTH in zw and len(zw.replace(ZERO_WIDTH, "")) == len(base.strip())
