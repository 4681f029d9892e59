"""The one-call all-dimensions judge against a local OpenAI-compatible server: its structured reply
parses into one score per dimension; a malformed reply is recorded per dimension with its reason
and the raw reply (never a score), and a failed call is a failed call; the prompt keeps the shared
parts first and the answer last, as the per-dimension prompts do."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from cube.config.fence import fenced_text
from cube.config.params import parse_params
from cube.judges import load_dimensions, make_judges, score_answers
from cube.judges.dimensions import all_dimensions_prompt
from tests.openai_server import OpenAIServer, last_user_message

DIMS = ["relevance", "specificity", "completeness", "quality"]
# what the server replies to each answer (the answer text is the case's name)
REPLIES = {
    "ok": '{"relevance": 8, "specificity": 7, "completeness": 6, "quality": 9}',
    "fenced": 'Here you go:\n```json\n{"scores": {"Relevance": "8/10", "specificity": 7, '
    '"completeness": 6, "quality": 9}}\n```',
    "prose": "The answer is relevant and complete; I would give it a good score.",
    "missing": '{"relevance": 8, "specificity": 7, "completeness": 6}',
    "range": '{"relevance": 12, "specificity": 7, "completeness": 6, "quality": 9}',
    "cut": '{"relevance": 8, "specificity": 7, "compl',
    "empty": "",
}


def _reply(body: dict[str, Any]) -> str:
    return REPLIES[fenced_text(last_user_message(body), "answer") or "empty"]


def _params(url: str) -> Any:
    spec = {"provider": "openai", "model": "j", "base_url": url, "max_attempts": 1}
    return parse_params(
        {
            "run": "t",
            "lang": "en",
            "dimensions": DIMS,
            "judges": [{"name": "one-call", "model": spec, "all_dimensions": True}],
        }
    )


def _tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    answers = pd.DataFrame(
        {
            "question_id": [f"q{i}" for i in range(len(REPLIES) + 1)],
            "doc_id": "d1",
            "system": "s",
            "set": "rag",
            "question": "Is there a fee?",
            "answer": [*REPLIES, "FAILME"],
        }
    )
    corpus = pd.DataFrame({"doc_id": ["d1"], "text": ["Fee: none."], "item_name": ["Permit"]})
    return answers, corpus


@pytest.fixture(scope="module")
def scored() -> pd.DataFrame:
    answers, corpus = _tables()
    with OpenAIServer(reply=_reply) as server:
        server.fail("400", times=None, when=lambda b: "FAILME" in last_user_message(b))
        p = _params(server.url)
        scores = score_answers(
            answers, make_judges(p, cache_path=None), load_dimensions(p), corpus, progress=False
        )
        assert server.requests_total == len(answers)  # one call per answer, not one per dimension
    answer_of = answers.set_index("question_id")["answer"]
    return scores.assign(case=scores["question_id"].map(answer_of)).set_index(["case", "dimension"])


def test_a_structured_reply_gives_one_score_per_dimension(scored: pd.DataFrame) -> None:
    want = {"relevance": 8.0, "specificity": 7.0, "completeness": 6.0, "quality": 9.0}
    for case in ("ok", "fenced"):
        rows = scored.loc[case]
        assert rows["score"].to_dict() == want and (rows["error_kind"] == "").all()
        assert rows["call_id"].nunique() == 1  # four rows, one call


@pytest.mark.parametrize(
    "case, bad, reason",
    [
        ("prose", DIMS, "not a JSON object"),
        ("missing", ["quality"], "no key 'quality'"),
        ("range", ["relevance"], "12"),
        ("cut", DIMS, "not a JSON object"),
        ("empty", DIMS, "empty reply"),
    ],
)
def test_a_malformed_reply_is_recorded_with_its_reason(
    scored: pd.DataFrame, case: str, bad: list[str], reason: str
) -> None:
    rows = scored.loc[case]
    failed = rows.loc[bad]
    assert failed["score"].isna().all() and (failed["error_kind"] == "parse").all()
    assert failed["error"].str.contains(reason, regex=False).all(), failed["error"].tolist()
    assert (rows["raw"] == REPLIES[case]).all()  # the reply is kept as it came
    good = rows.drop(index=bad)
    assert good["score"].notna().all() and (good["error_kind"] == "").all()


def test_a_failed_call_is_a_failed_call_on_every_dimension(scored: pd.DataFrame) -> None:
    rows = scored.loc["FAILME"]
    assert len(rows) == 4 and rows["score"].isna().all()
    assert (rows["error_kind"] == "call").all() and (rows["error"] != "").all()


def test_the_one_call_prompt_puts_the_answer_last() -> None:
    dims = load_dimensions(_params("http://127.0.0.1:9/v1"))
    a, _ = all_dimensions_prompt(dims, "Is there a fee?", "Fee: none.", "ANSWER ONE")
    b, _ = all_dimensions_prompt(dims, "Is there a fee?", "Fee: none.", "another answer")
    # everything before the answer block is shared: rubric, dimensions, question, document
    head = a[: a.index("<answer-")]
    assert b.startswith(head)
    assert head.index("[relevance]") < head.index("<question-") < head.index("<source-")
