"""Score parsing on a table of real-world judge replies (zh and en), and the JSON mode."""

from __future__ import annotations

import pytest

from cube.judges.parsing import parse_score, parse_scores_json

# (reply as judges write it, expected score or None when it must stay unscored)
SCORED = [
    ("8", 8.0),
    ("8\n", 8.0),
    ("8.", 8.0),
    ("8。", 8.0),
    ("8分", 8.0),
    ("8 分", 8.0),
    ("Score: 8", 8.0),
    ("score:8", 8.0),
    ("评分：8", 8.0),
    ("评分：8分", 8.0),
    ("得分为7", 7.0),
    ("８", 8.0),  # full-width digit
    ("评分：１０", 10.0),
    ("8/10", 8.0),
    ("8 / 10", 8.0),
    ("Rating: 8/10", 8.0),
    ("8 out of 10", 8.0),
    ('{"score": 8}', 8.0),
    ('```json\n{"score": 6}\n```', 6.0),
    ('{"评分": "9分"}', 9.0),
    ("**8**", 8.0),
    ("Score: **9**", 9.0),
    ("`7`", 7.0),
    ("最终得分：9分（满分10分）", 9.0),
    ("综合考虑，该回答得分为8分。", 8.0),
    ("我给出的评分是：7", 7.0),
    ("The answer quotes the fee and the time limit correctly.\nScore: 8", 8.0),
    ("(1) 2分 (2) 2分 (3) 1分 (4) 2分 (5) 1分\n总分：8", 8.0),  # per-criterion points, then the total
    ("Final score: 7 (relevance 2 points, clarity 1 point)", 7.0),
    ("10", 10.0),
    ("0", 0.0),
    ("0分", 0.0),
    ("7.5", 7.5),  # decimals are kept as given (see the module docstring)
    ("评分：7.5分", 7.5),
    ("Score: 8\nScore: 8", 8.0),  # repeated, same value
]

UNSCORED = [
    ("", "empty"),
    ("   ", "empty"),
    ("The answer is good and relevant.", "no score"),
    ("回答较好，基本符合要求。", "no score"),
    ("7 or 8", "numbers in prose"),
    ("7或8分", "range"),
    ("7-8分", "range"),
    ("Score: 7-8", "range"),
    ("4/5", "another scale"),
    ("3 out of 5", "another scale"),
    ("满分5分，得4分", "another scale"),
    ("Score: 11", "outside 0-10"),
    ("12分", "outside 0-10"),
    ("-1", "outside 0-10"),
    ('{"score": 15}', "outside 0-10"),
    ('{"score": true}', "boolean"),
    ('{"verdict": "good"}', "without a score key"),
    ("Score: 7\nScore: 8", "conflicting"),
    ("总分：8，最终得分：9", "conflicting"),
    ("The answer covers 3 of the 5 criteria.", "numbers in prose"),
    ("I cannot evaluate this answer.", "no score"),
]


@pytest.mark.parametrize(("reply", "expected"), SCORED)
def test_scored_replies(reply: str, expected: float) -> None:
    assert parse_score(reply) == (expected, None)


@pytest.mark.parametrize(("reply", "reason_part"), UNSCORED)
def test_unscored_replies_have_a_reason(reply: str, reason_part: str) -> None:
    score, reason = parse_score(reply)
    assert score is None
    assert reason is not None and reason_part in reason


def test_the_table_is_large_and_bilingual() -> None:
    replies = [r for r, _ in SCORED + UNSCORED]
    assert len(replies) >= 25
    assert sum(any("\u4e00" <= ch <= "\u9fff" for ch in r) for r in replies) >= 8


def test_json_mode_all_dimensions() -> None:
    dims = ["relevance", "specificity", "completeness", "quality"]
    reply = 'Here is my evaluation:\n```json\n{"Relevance": 8, "specificity": "7分", "completeness": 12}\n```'
    out = parse_scores_json(reply, dims)
    assert out["relevance"] == (8.0, None)  # keys match case-insensitively
    assert out["specificity"] == (7.0, None)
    assert out["completeness"][0] is None and "outside 0-10" in (out["completeness"][1] or "")
    assert out["quality"][0] is None and "no key 'quality'" in (out["quality"][1] or "")


def test_json_mode_nested_and_garbage() -> None:
    nested = '{"scores": {"relevance": {"score": 6, "reason": "ok"}, "quality": 9}}'
    assert parse_scores_json(nested, ["relevance", "quality"]) == {"relevance": (6.0, None), "quality": (9.0, None)}
    garbage = parse_scores_json("relevance 8, quality 9", ["relevance", "quality"])
    assert all(s is None and r == "reply is not a JSON object" for s, r in garbage.values())
    assert parse_scores_json("", ["relevance"]) == {"relevance": (None, "empty reply")}
