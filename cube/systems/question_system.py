"""A system that answers one question at a time, in Python: the base of a user's own kind.

A kind of the user's (docs/how-to/system-kind.md) subclasses `QuestionSystem` and writes `ask`:
one `Question` in, a `SystemAnswer` (or the dict a python system returns) out. Everything else is
the python kind's machinery, shared: at most `max_concurrency` questions at a time, each reply in
the run's call cache (keyed by the kind, its params entry, the source of the file defining the
class, and the question: a re-run calls nothing, an edit of that file calls again), an exception
or a reply of the wrong shape that question's failure, and the reply's ids or passages turned into
ranked doc ids by the policy of every kind (`answers_from_outcomes`, through
`cube.systems.retrieved.ranked_lists`).
"""

from __future__ import annotations

import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd

from cube.config.schema import require_columns
from cube.systems.base import System, answers_frame
from cube.systems.python_calls import CachedCaller, Outcome
from cube.systems.python_contract import Question, SystemAnswer, parse_answer
from cube.systems.python_loader import source_digest
from cube.systems.retrieved import Retrieved, ranked_lists


def answers_from_outcomes(
    system: System,
    questions: pd.DataFrame,
    corpus: pd.DataFrame,
    outcomes: list[Outcome],
    *,
    top_n: int,
    answerer: str,
) -> pd.DataFrame:
    """The `rag` answers table of one call per question: each reply's ids or passages as ranked
    doc ids (`ranked_lists`: misses kept as `unmapped:...`, lists cut at `top_n`, both warned
    about), a failed call or a reply of the wrong shape saying nothing about the retrieval."""
    retrieved = ranked_lists(
        [
            None
            if r is None
            else Retrieved(ids=r["retrieved_ids"], passages=r["retrieved_passages"])
            for r in (o.reply for o in outcomes)
        ],
        corpus,
        top_n,
    )
    if retrieved.unmapped:
        warnings.warn(
            f"system {system.name!r}: {retrieved.unmapped} retrieved id(s) or passage(s) matched "
            "no knowledge-base document (ids kept as 'unmapped:<id>'; they count as misses)",
            stacklevel=3,
        )
    if retrieved.truncated:
        warnings.warn(
            f"system {system.name!r}: {retrieved.truncated} retrieved list(s) longer than "
            f"top_n={top_n} were cut at top_n",
            stacklevel=3,
        )
    df = answers_frame(
        questions,
        system=system.name,
        set_name="rag",
        responses=[o.response for o in outcomes],
        retrieved=retrieved.lists,
        answerer=answerer,
        retrieval_ok=[o.reply is not None for o in outcomes],
    )
    df.attrs.update(unmapped=retrieved.unmapped, truncated=retrieved.truncated, retrieved=retrieved)
    return df


def questions_of(questions: pd.DataFrame, lang: str, top_n: int) -> list[Question]:
    """The question rows as the `Question`s a function receives."""
    require_columns(questions, ("question_id", "doc_id", "question"), "questions")
    return [
        Question(text=str(t), question_id=str(q), lang=lang, top_n=top_n)
        for q, t in zip(questions["question_id"], questions["question"], strict=True)
    ]


class QuestionSystem(System):
    """A user kind's system: subclass it and write `ask` (module docstring).

    Args:
        spec: the kind's params entry (a `cube.config.system_kinds.KindParams`).
        lang: the run's language (passed in each `Question`).
        cache_path: the call cache (`RunPaths.cache`); None: no cache.
        answerer: the `answerer` column of its rows (default `<kind>:<name>`).
        max_concurrency: questions asked at the same time (`ask` in a thread pool of that size, or
            on one event loop when it is `async def`).
    """

    def __init__(
        self,
        spec: Any,
        *,
        lang: str,
        cache_path: str | Path | None,
        answerer: str = "",
        max_concurrency: int = 1,
    ):
        super().__init__(spec.name)
        self.spec, self.lang, self.kind = spec, lang, spec.kind
        self.answerer = answerer or f"{spec.kind}:{spec.name}"
        self.caller = CachedCaller(
            self.ask,
            label=f"{spec.kind}:{spec.name}",
            identity={
                "system_kind": spec.kind,
                "params": spec.model_dump(mode="json"),
                "source": source_digest(type(self)),
            },
            parse=parse_answer,
            cache_path=Path(cache_path) if cache_path else None,
            limit=max_concurrency,
        )

    def ask(self, question: Question) -> SystemAnswer | dict[str, Any]:
        """One question's answer and what was retrieved for it, in rank order."""
        raise NotImplementedError

    def answer(
        self, questions: pd.DataFrame, corpus: pd.DataFrame, *, progress: bool = True
    ) -> pd.DataFrame:
        """The `rag` answers: one `ask` per question (or its cached reply)."""
        qs = questions_of(questions, self.lang, self.spec.top_n)
        outcomes = self.caller.run(
            [(q,) for q in qs], [asdict(q) for q in qs], f"{self.name}: {self.kind}", progress
        )
        df = answers_from_outcomes(
            self, questions, corpus, outcomes, top_n=self.spec.top_n, answerer=self.answerer
        )
        df.attrs["calls"] = self.caller.calls
        return df
