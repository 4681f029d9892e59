"""The `zero` and `full` QA sets (paper 4.4): the answering model's lower and upper bounds.

- `zero`: the same answering prompt with NO documents (the reference block says so), so the
  answer shows what the model knows without the knowledge base.
- `full`: the same prompt with the gold document alone in place of the N retrieved ones:
  perfect retrieval.

Both depend only on the answering model, the prompt and the questions, not on the system,
so `build_answers` computes them once per distinct answering model and shares them.

**Only the bounds an estimator reads** (issue 40, `bound_questions`): CuBE's trimmed means, W,
the bootstrap and the per-category tables read the `zero` and `full` answers of the questions
whose gold document the system retrieved (`analysis.subset: retrieved`); those of a missed
question are read by the judge gate alone: its bounds test (full > zero, on every question with
both answers: `cube.method.gate.bounds_test`), its failure rate (rule e, over the items made) and
the audit's probes (drawn among the full answers made, `cube.run.audit`). So with
`analysis.bounds_of_missed: sample` (the default) the bounds are made for every retrieved question
and, when those are fewer than the **gate floor** (`gate_floor`: `analysis.gate_bounds_questions`,
default 30, and never below the `bounds_sample_size` the test needs to decide at all), for a
seeded sample of missed ones that makes up the floor (every missed one when the set is smaller);
the other missed questions get no `zero`/`full` row, are not judged, and are no failure (they were
not asked). `bounds_of_missed: all` makes every bound, as before.

What stays and what may move. Given the same jury, W, CuBE, their intervals and the per-category
tables are identical (they read retrieved questions only; tests/run/test_unread_bounds.py). The
gate's bounds test, its failure-rate denominator and the audit's sample read fewer items than
under `all`, so they can decide differently, and an exclusion changes the jury (and so the jury
CuBE and the verdict). The floor keeps that rare: the bounds test sees at least 30 questions,
where one contrary difference among 6 retrieved (p 0.22 against 0.03) could exclude a judge the
whole set passes. It can still happen when few questions were retrieved and the missed ones of
the sample differ from the rest, or a judge's failure rate sits at `gate_max_failure_rate`; the
compare page says when two runs' gate samples differ (`cube.method.compare`). A missed question
outside the sample costs a third of the calls it cost before (its rag answer and judgments only):
figures in `benchmarks/unread_calls.py` (the floor lowers the saving where R@k x questions < 30).

The sample is the missed questions of smallest seeded hash (`analysis.seed` and the question id),
not a draw over the call's questions, and it is drawn on the questions the run keeps. The
sequential driver (`cube.run.sequential`) answers batch by batch with `missed_bounds=False`
(retrieved questions only: each batch drawing its own floor would make up to 30 per batch), then
once on the questions it reached makes the sample with `build_answers` and judges it, so stage 02
after it, drawing the same sample on the same set, finds every call in the cache.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

import pandas as pd

from cube.config.schema import require_columns
from cube.llm import Model
from cube.systems.base import answers_frame
from cube.systems.builtin import answer_request

GATE_BOUNDS_QUESTIONS = 30  # analysis.gate_bounds_questions's default (`gate_floor`)


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


def bounds_sample_size(alpha: float) -> int:
    """The fewest questions on which the gate's one-sided Wilcoxon bounds test can reach p < alpha
    (its smallest attainable p is 2^-n): `cube.method.gate.min_questions`, computed here because
    the systems layer does not import the method layer (a test asserts both agree)."""
    n = 1
    while not 0.5**n < alpha:
        n += 1
    return n


def _seeded_hash(seed: int, question_id: Any) -> str:
    return hashlib.sha256(f"{seed}\x1f{question_id}".encode()).hexdigest()


def missed_sample(missed: Iterable[Any], size: int, seed: int) -> list[Any]:
    """The `size` missed question ids of smallest seeded hash (all when fewer): the same choice
    whatever else is in the call, so a subset's sample holds every sampled id it contains."""
    return sorted(missed, key=lambda q: _seeded_hash(seed, q))[: max(size, 0)]


def gate_floor(analysis: Any) -> int:
    """The fewest questions the judge gate's bounds test reads under `bounds_of_missed: sample`:
    `analysis.gate_bounds_questions`, never below `bounds_sample_size(gate_alpha)` (module
    docstring)."""
    return max(
        int(getattr(analysis, "gate_bounds_questions", GATE_BOUNDS_QUESTIONS)),
        bounds_sample_size(analysis.gate_alpha),
    )


def bound_questions(rag: pd.DataFrame, analysis: Any, *, missed: bool = True) -> list[Any]:
    """The question ids of one system's `rag` rows whose `zero` and `full` answers are made: every
    one under `analysis.bounds_of_missed: all`; else the retrieved ones (`retrieval_ok` and a
    `rank` > 0) and, when they are fewer than the gate floor (`gate_floor`), the seeded sample of
    missed ones (`retrieval_ok`, `rank` 0) that makes up the floor (module docstring); with
    `missed=False` the retrieved ones alone (the sequential driver's batches, whose sample is drawn
    once on the questions reached). A question of unknown retrieval (a failed system call, an
    undetermined rank) is left out of every estimator and the gate: it gets none."""
    if getattr(analysis, "bounds_of_missed", "all") == "all":
        return rag["question_id"].tolist()
    known = rag["retrieval_ok"].astype(bool)
    hit = known & (rag["rank"].fillna(0).astype(int) > 0)
    short = (gate_floor(analysis) - int(hit.sum())) * int(missed)
    chosen = set(rag.loc[hit, "question_id"])
    chosen |= set(missed_sample(rag.loc[known & ~hit, "question_id"], short, analysis.seed))
    return [q for q in rag["question_id"] if q in chosen]
