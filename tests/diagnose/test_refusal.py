"""The refusal detector (`cube.diagnose.refusal`) on real-world decline phrasings and
non-declines."""

from __future__ import annotations

import math

import pytest

from cube.diagnose.refusal import answer_outcome, is_refusal, refusal_accuracy
from cube.systems.extractive import GENERIC_ANSWER

DECLINES = [
    "抱歉，我无法回答这个问题。",
    "您好，根据现有资料，没有找到关于该事项的相关信息，建议您咨询当地政务服务中心。",
    "对不起，知识库中没有与您问题相关的内容。",
    "我不太清楚这个事项的收费标准，建议拨打12345热线咨询。",
    "很抱歉，暂无该事项的办事指南。",
    "该问题超出了我的服务范围，请咨询相关部门。",
    "未检索到相关信息。",
    "目前无法确定该事项的办理时限。",
    "无法回答该问题，请咨询12345热线。",
    "您好，暂无相关信息。",
    "该事项我无法提供准确答复。",
    "I cannot find any information about this permit.",
    "I don't know the answer to that question.",
    "I'm sorry, but I cannot provide information about this service.",
    "I do not have information about the fees for this permit.",
    "The requested information is not found in the provided documents.",
    "Unfortunately I am unable to find any guidance on that in my knowledge base.",
    "That question is outside the scope of the documents I can access.",
    "There is no mention of a fee in the provided context.",
    GENERIC_ANSWER["zh"],
    GENERIC_ANSWER["en"],
]
NON_DECLINES = [
    "关于“人力资源服务许可”，根据办事指南：\n"
    "办理流程：1. 申请；2. 受理；3. 审查。如无法现场办理，可网上申请。",
    "办理该事项需要提交身份证原件及复印件，承诺时限为5个工作日，不收费。",
    "您可以前往丹江市政务服务中心1楼C区18号窗口办理，工作日上午9:00-12:00。",
    "如您不清楚所需材料，可以先在政务服务网下载材料清单，然后按清单准备。",
    "The permit costs 20 yuan and is issued within 6 working days.",
    'Regarding "Foundation registration", according to the service guide: fee: free of charge.',
    "You need your ID card; if you cannot attend in person, "
    "a proxy with a power of attorney may apply.",
    "申请人需提供没有违法记录的证明",
    "该事项没有收费规定",
    "如无法提供原件，可提供经公证的复印件",
    "I cannot find a cheaper option: the fee is 200 yuan",
    "",
]


@pytest.mark.parametrize("text", DECLINES)
def test_declines_are_detected(text):
    assert is_refusal(text)


@pytest.mark.parametrize("text", NON_DECLINES)
def test_non_declines_are_not(text):
    assert not is_refusal(text)


def test_refusal_accuracy_and_false_refusal_rate():
    out = refusal_accuracy([True, False, True, False, False], [False, False, True, True, True])
    assert out == {
        "refusal_accuracy": 0.5,
        "n_unanswerable": 2,
        "false_refusal_rate": 1 / 3,
        "n_answerable": 3,
        "failed_unanswerable": 0,
        "empty_unanswerable": 0,
        "failed_answerable": 0,
        "empty_answerable": 0,
        "flag": "",
    }
    assert math.isnan(refusal_accuracy([True], [True])["refusal_accuracy"])


def test_a_failed_or_empty_answer_is_neither_a_refusal_nor_a_non_refusal():
    assert [
        answer_outcome("抱歉，我无法回答。"),
        answer_outcome("", "timeout after 3 tries"),
        answer_outcome(None, float("nan")),
        answer_outcome("  "),
        answer_outcome("x", None),
    ] == ["answered", "failed", "empty", "empty", "answered"]
    # unanswerable: 1 declined, 1 answered, 1 failed, 1 empty; answerable: 1 declined, 2 answered, 2
    # failed
    declined = [True, False, False, False, True, False, False, False, False]
    answerable = [False] * 4 + [True] * 5
    outcomes = [
        "answered",
        "answered",
        "failed",
        "empty",
        "answered",
        "answered",
        "answered",
        "failed",
        "failed",
    ]
    out = refusal_accuracy(declined, answerable, outcomes)
    assert out["refusal_accuracy"] == 0.5 and out["n_unanswerable"] == 2
    assert out["false_refusal_rate"] == 1 / 3 and out["n_answerable"] == 3
    assert (
        out["failed_unanswerable"],
        out["empty_unanswerable"],
        out["failed_answerable"],
        out["empty_answerable"],
    ) == (1, 1, 2, 0)
    assert "refusal accuracy leaves out 1 failed and 1 empty" in out["flag"]
    assert "false-refusal rate leaves out 2 failed and 0 empty" in out["flag"]
    every_call_failed = refusal_accuracy([False, False], [False, True], ["failed", "failed"])
    assert math.isnan(every_call_failed["refusal_accuracy"]) and math.isnan(
        every_call_failed["false_refusal_rate"]
    )
