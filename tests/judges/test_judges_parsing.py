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
    (
        "(1) 2分 (2) 2分 (3) 1分 (4) 2分 (5) 1分\n总分：8",
        8.0,
    ),  # per-criterion points, then the total
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
    reply = (
        "Here is my evaluation:\n```json\n"
        '{"Relevance": 8, "specificity": "7分", "completeness": 12}\n```'
    )
    out = parse_scores_json(reply, dims)
    assert out["relevance"] == (8.0, None)  # keys match case-insensitively
    assert out["specificity"] == (7.0, None)
    assert out["completeness"][0] is None and "outside 0-10" in (out["completeness"][1] or "")
    assert out["quality"][0] is None and "no key 'quality'" in (out["quality"][1] or "")


def test_json_mode_nested_and_garbage() -> None:
    nested = '{"scores": {"relevance": {"score": 6, "reason": "ok"}, "quality": 9}}'
    assert parse_scores_json(nested, ["relevance", "quality"]) == {
        "relevance": (6.0, None),
        "quality": (9.0, None),
    }
    garbage = parse_scores_json("relevance 8, quality 9", ["relevance", "quality"])
    assert all(s is None and r == "reply is not a JSON object" for s, r in garbage.values())
    assert parse_scores_json("", ["relevance"]) == {"relevance": (None, "empty reply")}


# Replies in the explicit conventions of widely used judge prompts, as judges write them:
# MT-Bench / FastChat "Rating: [[N]]", Prometheus "[RESULT] N", XML "<score>N</score>".
# (reply, expected score, or None with a part of the reason when it must stay unscored)
CONVENTIONS = [
    ("Rating: [[8]]", 8.0, None),
    ("[[8]]", 8.0, None),
    (
        "The assistant's answer quotes the fee (50 yuan) and 3 "
        "of the 5 steps, but omits the deadline.\n\n"
        "Rating: [[6]]",
        6.0,
        None,
    ),  # reasoning with other numbers before the marker
    ("Explanation: covers 4 out of 5 required points.\nRating: [[7]]", 7.0, None),
    ("**Rating: [[9]]**", 9.0, None),  # markdown bold
    ("Rating: [[ 7.5 ]]", 7.5, None),
    ("Rating: [[8/10]]", 8.0, None),
    ("评价：回答准确，但缺少办理时限。\n评分：[[7]]", 7.0, None),
    ("评分：［［８］］", 8.0, None),  # full-width brackets and digit
    (
        "Feedback: The response addresses every criterion of the rubric clearly. [RESULT] 8",
        8.0,
        None,
    ),
    ("[RESULT] 10", 10.0, None),
    ("[RESULT]: 0", 0.0, None),
    ("反馈：回答覆盖了全部要点，表达清晰。[RESULT] ９", 9.0, None),
    ("<score>8</score>", 8.0, None),
    (
        "<reasoning>The answer gives 2 of the 3 documents required.</reasoning>\n<score>5</score>",
        5.0,
        None,
    ),
    ("<Score> 6 </Score>", 6.0, None),
    ("分析：回答与问题相关。\n<score>７</score>", 7.0, None),
    ("Rating: [[8]]\n\nTo summarise, rating: [[8]]", 8.0, None),  # repeated, same value
    (
        "Score: 4 for clarity alone, overall Rating: [[7]]",
        7.0,
        None,
    ),  # the marker is the judge's answer
    ("Rating: [[7-8]]", None, "range"),
    ("Rating: [[7 or 8]]", None, "range"),
    ("[RESULT] 7-8", None, "range"),
    ("[RESULT] 6 到 8", None, "range"),
    ("<score>6 - 7</score>", None, "range"),
    ("I would say between 6 and 8.", None, "numbers in prose"),  # ambiguous prose, no marker
    ("Rating: [[7]] ... on reflection, Rating: [[8]]", None, "conflicting"),
    ("[RESULT] 7 <score>8</score>", None, "conflicting"),
    ("Rating: [[12]]", None, "outside 0-10"),
    ("<score>-2</score>", None, "outside 0-10"),
    ("Rating: [[4/5]]", None, "another scale"),
    ("I'm sorry, but I can't rate this answer.", None, "no score"),
    ("抱歉，我无法对该回答进行评分。", None, "no score"),
    ("Rating: [[N/A]]", None, "no score"),
]

# The format a dimension's prompt declares: (declared format, reply, expected, reason part)
DECLARED = [
    ("Verdict: {score}", "The answer is mostly right.\nVerdict: 7", 7.0, None),
    ("Verdict: {score}", "verdict:**９**", 9.0, None),  # case, markdown and full-width digit
    ("Verdict: {score}", "Verdict: 7 (an earlier draft said 6)", 7.0, None),
    ("最终分数为 {score} 分", "分析略。最终分数为６分", 6.0, None),
    ("<<{score}>>", "Reasoning... <<8>>", 8.0, None),
    ("Verdict: {score}", "Verdict: 7-8", None, "range"),
    ("Verdict: {score}", "Verdict: 7\nVerdict: 8", None, "conflicting"),
    ("Verdict: {score}", "Verdict: 15", None, "outside 0-10"),
    ("Verdict: {score}", "Score: 6", 6.0, None),  # not used: the usual forms still apply
]


@pytest.mark.parametrize(("reply", "expected", "reason_part"), CONVENTIONS)
def test_judge_prompt_conventions(
    reply: str, expected: float | None, reason_part: str | None
) -> None:
    score, reason = parse_score(reply)
    assert score == expected
    if expected is None:
        assert reason is not None and reason_part in reason
    else:
        assert reason is None


@pytest.mark.parametrize(("score_format", "reply", "expected", "reason_part"), DECLARED)
def test_declared_reply_format(
    score_format: str, reply: str, expected: float | None, reason_part: str | None
):
    score, reason = parse_score(reply, score_format)
    assert score == expected
    if expected is None:
        assert reason is not None and reason_part in reason


def test_the_conventions_table_covers_what_the_issue_names() -> None:
    replies = [r for r, _, _ in CONVENTIONS]
    assert len(replies) >= 25
    assert sum(any("\u4e00" <= ch <= "\u9fff" for ch in r) for r in replies) >= 5
    for marker in ("[[", "[RESULT]", "<score>"):
        kinds = {e is None for r, e, _ in CONVENTIONS if marker.lower() in r.lower()}
        assert kinds == {True, False}, marker  # each convention both accepted and refused somewhere


def test_declared_format_comes_from_params_or_the_prompt(tmp_path) -> None:
    from cube.config.params import parse_params
    from cube.judges.dimensions import DimensionError, load_dimensions
    from cube.judges.parsing import declared_format

    prompt = (
        "Rate the answer.\n{question}\n{document}\n{answer}\n(1) a\n(2) b\n(3) c\n(4) d\n(5) e\n"
        "Reply with one line: Final mark: {score}.\n"
    )
    assert declared_format(prompt) == "Final mark: {score}"
    for line, declared in [
        ("输出格式：最终分数为 {score} 分", "最终分数为 {score} 分"),
        ("End with [[{score}]]", "[[ {score}]]"),
        ("按以下格式输出：评分：{score}", "评分: {score}"),
        ("Reply with {score} only", "with {score} only"),
        ("{score}", None),
        ("No placeholder here", None),
    ]:
        assert declared_format(line) == declared
    judges = [{"name": "r", "model": {"provider": "offline", "model": "rubric-lenient"}}]
    dims = [
        {"name": "own", "prompt": prompt},
        {"name": "set", "prompt": prompt, "score_format": "Mark={score}"},
        "relevance",
    ]
    own, given, packaged = load_dimensions(
        parse_params({"run": "x", "judges": judges, "dimensions": dims})
    )
    assert own.score_format == "Final mark: {score}" and given.score_format == "Mark={score}"
    assert packaged.score_format is None
    assert parse_score("The fee is right, 2 of 3 steps.\nFinal mark: 7", own.score_format) == (
        7.0,
        None,
    )
    assert (
        parse_score("The fee is right, 2 of 3 steps.\nFinal mark: 7")[0] is None
    )  # undeclared: prose
    for fmt in ("Mark", "{score}", "{score} or {score}"):
        bad = [{"name": "bad", "prompt": prompt, "score_format": fmt}]
        with pytest.raises(
            DimensionError, match=r"dimension 'bad': score_format .*expected exactly one \{score\}"
        ):
            load_dimensions(parse_params({"run": "x", "judges": judges, "dimensions": bad}))


# A stated scale next to the score (review 1, item S6).
@pytest.mark.parametrize(
    "reply,expected",
    [
        ("Score: 8 (on a scale of 1-10)", 8.0),
        ("Score: 8 (on a scale of 0 to 10)", 8.0),
        ("Rating: 7 on a 0-10 scale", 7.0),
        ("[RESULT] 6 (0-10 rubric)", 6.0),
    ],
)
def test_parser_reads_a_score_next_to_its_0_10_scale_statement(reply, expected):
    """S6: a stated 0-10 scale is not a range of scores (it was refused as "a range")."""
    assert parse_score(reply) == (expected, None)


@pytest.mark.parametrize(
    "reply",
    ["[RESULT] 4 (1-5 rubric)", "Score: 4 (on a scale of 1-5)", "Rating: [[3]] on a 1 to 5 scale"],
)
def test_parser_refuses_a_score_on_another_stated_scale(reply):
    """S6: "[RESULT] 4 (1-5 rubric)" was accepted as 4 on 0-10; another scale is refused."""
    score, reason = parse_score(reply)
    assert score is None and "another scale" in reason
