"""The `zero` and `full` QA sets (paper 4.4): the answering model's lower and upper bounds.

- `zero`: the same answering prompt with NO documents (the reference block says so), so the
  answer shows what the model knows without the knowledge base.
- `full`: the same prompt with the gold document alone in place of the N retrieved ones:
  perfect retrieval.

Both depend only on the answering model, the prompt and the questions, not on the system,
so `build_answers` computes them once per distinct answering model and shares them.
"""

from __future__ import annotations

import pandas as pd

from cube.config.schema import require_columns
from cube.llm import Model
from cube.systems.base import answers_frame
from cube.systems.builtin import answer_request


def answer_bounds(
    questions: pd.DataFrame,
    corpus: pd.DataFrame,
    answerer: Model,
    *,
    lang: str,
    progress: bool = True,
) -> pd.DataFrame:
    """The `zero` and `full` answers of `answerer` for every question.

    Args:
        questions: `question_id, doc_id, question`.
        corpus: `doc_id, text` (the gold documents).
        answerer: the answering model (LLM or offline).
        lang: prompt language (`zh`/`en`).
        progress: show progress bars.

    Returns:
        Answers rows (`cube.systems.ANSWERS_COLUMNS`) with `system` = '' (filled by
        `build_answers`). `retrieved_doc_ids` is what the answerer saw ([] for zero, [gold]
        for full) and `rank`/`n_retrieved` are computed on it (0/0 and 1/1), `retrieval_ok`
        True, until `build_answers` replaces them with the system's rag outcome.

    Raises:
        ValueError: a question's gold `doc_id` is not in the corpus (named).
    """
    require_columns(questions, ("question_id", "doc_id", "question"), "questions")
    require_columns(corpus, ("doc_id", "text"), "corpus")
    texts = dict(
        zip(corpus["doc_id"].astype(str), corpus["text"].fillna("").astype(str), strict=True)
    )
    golds = questions["doc_id"].astype(str).tolist()
    missing = [
        (q, g) for q, g in zip(questions["question_id"], golds, strict=True) if g not in texts
    ]
    if missing:
        raise ValueError(
            f"questions: {len(missing)} gold doc_id(s) not in the corpus, e.g. (question_id, "
            f"doc_id) {missing[:5]}"
        )
    qtexts = questions["question"].astype(str).tolist()
    zero = answerer.complete(
        [answer_request(q, [], lang, offline=answerer.offline) for q in qtexts],
        role="answering",
        desc="zero answers",
        progress=progress,
    )
    full = answerer.complete(
        [
            answer_request(q, [texts[g]], lang, offline=answerer.offline)
            for q, g in zip(qtexts, golds, strict=True)
        ],
        role="answering",
        desc="full answers",
        progress=progress,
    )
    return pd.concat(
        [
            answers_frame(
                questions,
                system="",
                set_name="zero",
                responses=zero,
                retrieved=[[] for _ in golds],
                answerer=answerer.name,
            ),
            answers_frame(
                questions,
                system="",
                set_name="full",
                responses=full,
                retrieved=[[g] for g in golds],
                answerer=answerer.name,
            ),
        ],
        ignore_index=True,
    )
