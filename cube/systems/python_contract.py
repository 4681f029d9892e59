"""What a python system's function receives and may return, and how its reply is read.

The function gets one `Question` and returns a dict with `answer` and `retrieved_ids` and/or
`retrieved_passages`, or a `SystemAnswer` (`parse_answer`); a bounds function returns the answer
(`parse_bound`). A reply of another shape is a `ShapeError` naming what was expected: that
question's failure (`cube.systems.python_calls`), never the run's. `cube.systems.kinds` reuses the
contract for a user's own kind (`QuestionSystem.ask` returns a `SystemAnswer`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Required, TypedDict

ANSWER_KEYS = ("answer", "retrieved_ids", "retrieved_passages")
EXPECTED = (
    "a dict with 'answer' (str) and 'retrieved_ids' and/or 'retrieved_passages' (lists of str), "
    "or a cube.systems.SystemAnswer"
)


@dataclass(frozen=True)
class Question:
    """One question as a python system receives it."""

    text: str
    question_id: str
    lang: str
    top_n: int


@dataclass(frozen=True)
class SystemAnswer:
    """What a python system may return instead of a dict: the answer and what it retrieved, in
    rank order (ids of corpus documents, or the retrieved texts)."""

    answer: str
    retrieved_ids: Sequence[str] | None = None
    retrieved_passages: Sequence[str] | None = None


class Reply(TypedDict, total=False):
    """A function's reply once parsed: the answer (always) and, from a system function, what it
    retrieved in rank order (None when it did not say)."""

    answer: Required[str]
    retrieved_ids: list[str] | None
    retrieved_passages: list[str] | None


class ShapeError(ValueError):
    """A function's reply that is not of the expected shape."""


def _str_list(value: Any, key: str) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ShapeError(f"{key!r} must be a list of str in rank order, got {type(value).__name__}")
    bad = [type(v).__name__ for v in value if not isinstance(v, str | int) or isinstance(v, bool)]
    if bad:
        raise ShapeError(f"{key!r} must hold str, got {bad[0]}")
    return [str(v) for v in value]


def parse_answer(value: Any) -> Reply:
    """A system function's reply as `{answer, retrieved_ids, retrieved_passages}`.

    Raises:
        ShapeError: naming what was expected and what came.
    """
    if isinstance(value, SystemAnswer):
        value = asdict(value)
    if not isinstance(value, dict):
        raise ShapeError(f"expected {EXPECTED}; got {type(value).__name__}")
    unknown = sorted(str(k) for k in value if k not in ANSWER_KEYS)
    if unknown:
        raise ShapeError(f"unknown key(s) {unknown}; expected {EXPECTED}")
    if not isinstance(value.get("answer"), str):
        raise ShapeError(f"'answer' must be a str, got {type(value.get('answer')).__name__}")
    ids = _str_list(value.get("retrieved_ids"), "retrieved_ids")
    passages = _str_list(value.get("retrieved_passages"), "retrieved_passages")
    if ids is None and passages is None:
        raise ShapeError(f"no 'retrieved_ids' and no 'retrieved_passages'; expected {EXPECTED}")
    return {"answer": value["answer"], "retrieved_ids": ids, "retrieved_passages": passages}


def parse_bound(value: Any) -> Reply:
    """A bounds function's reply (a str, a dict with 'answer', or a `SystemAnswer`) as
    `{answer}`."""
    if isinstance(value, SystemAnswer):
        value = value.answer
    elif isinstance(value, dict) and "answer" in value:
        value = value["answer"]
    if not isinstance(value, str):
        raise ShapeError(
            "expected the answer as a str (or a dict with 'answer', or a "
            f"cube.systems.SystemAnswer); got {type(value).__name__}"
        )
    return {"answer": value}
