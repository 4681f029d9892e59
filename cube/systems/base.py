"""What every system under test shares: the `System` interface and the answers table it returns.

`rank_of` turns a system's retrieved list into the 1-based rank of the gold document (0 when
absent): the only place a rank is made; `cube.method` reads the `rank` column it fills.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from cube.config.schema import ACCOUNTING_COLUMNS, ANSWER_COLUMNS
from cube.llm import Response, response_accounting


def rank_of(gold_doc_id: Any, retrieved_doc_ids: Sequence[Any] | None) -> int:
    """1-based position of the gold document in the retrieved list; 0 when absent."""
    if retrieved_doc_ids is None:
        return 0
    for i, doc in enumerate(list(retrieved_doc_ids), start=1):
        if doc == gold_doc_id:
            return i
    return 0


ANSWERS_COLUMNS: tuple[str, ...] = (
    *ANSWER_COLUMNS,
    "n_retrieved",
    "retrieval_ok",
    "error",
    "finish_reason",
    "answerer",
    *ACCOUNTING_COLUMNS,
)


class System:
    """A system under test: answers a question set, recording what it retrieved."""

    kind: str = ""

    def __init__(self, name: str):
        self.name = name

    def answer(
        self, questions: pd.DataFrame, corpus: pd.DataFrame, *, progress: bool = True
    ) -> pd.DataFrame:
        """The `rag` answers table (`ANSWERS_COLUMNS`) for every question, failures included."""
        raise NotImplementedError


def _failure(resp: Response) -> str:
    """Why a call gave no answer: its error, else an empty response."""
    return resp.error or "empty response"


def _finish_reason(resp: Response) -> str:
    """The provider's finish reason ("stop", "length"...), "" when not reported."""
    return str((resp.detail or {}).get("finish_reason") or "")


def answers_frame(
    questions: pd.DataFrame,
    *,
    system: str,
    set_name: str,
    responses: Sequence[Response],
    retrieved: Sequence[Sequence[str]],
    answerer: str,
    retrieval_ok: Sequence[bool] | None = None,
) -> pd.DataFrame:
    """Assemble answers rows from aligned questions, responses and retrieved lists.

    Args:
        questions: question rows (`question_id`, `doc_id`), aligned with the other sequences.
        system: the system name ('' for bound rows not yet assigned to a system).
        set_name: `zero`, `rag` or `full`.
        responses: one `cube.llm.Response` per question (a failed one keeps its error).
        retrieved: one ranked doc id list per question.
        answerer: the answering model's name.
        retrieval_ok: per question, whether the retrieval outcome is known (module docstring);
            None: known for every question.
    """
    if retrieval_ok is None:
        retrieval_ok = [True] * len(questions)
    if not (len(questions) == len(responses) == len(retrieved) == len(retrieval_ok)):
        raise ValueError(
            f"answers_frame: {len(questions)} questions, {len(responses)} responses, "
            f"{len(retrieved)} retrieved lists, {len(retrieval_ok)} retrieval_ok flags"
        )
    rows: list[dict[str, Any]] = []
    for (qid, gold), resp, docs, known in zip(
        questions[["question_id", "doc_id"]].itertuples(index=False),
        responses,
        retrieved,
        retrieval_ok,
        strict=True,
    ):
        docs = [str(d) for d in docs]
        ok = resp.error is None and resp.text is not None
        rows.append(
            {
                "question_id": str(qid),
                "doc_id": str(gold),
                "system": system,
                "set": set_name,
                "answer": resp.text if ok else None,
                "retrieved_doc_ids": docs,
                "rank": rank_of(str(gold), docs),
                "n_retrieved": len(docs),
                "retrieval_ok": bool(known),
                "error": "" if ok else _failure(resp),
                "finish_reason": _finish_reason(resp),
                "answerer": answerer,
                **response_accounting(resp, "answering"),
            }
        )
    df = pd.DataFrame(rows, columns=list(ANSWERS_COLUMNS))
    return df.astype({"rank": "int64", "n_retrieved": "int64", "retrieval_ok": bool})
