"""The `python` system: a user's own RAG pipeline (LangChain, LlamaIndex, plain code) as a function.

Params (`cube.config.sections.PythonSystem`): `callable: package.module:function` (imported with
the project root first on `sys.path`) or `path/to/file.py:function` (read relative to the params
file's folder, like every relative path of a params file: the loader makes it absolute; its
folder goes first on `sys.path`, as for a script), `top_n`, `answerer` or `bounds`, `version`,
`max_concurrency`.

The contract (docs/how-to/python-system.md):

- the function gets one `Question` (`text`, `question_id`, `lang`, `top_n`) and returns a dict
  with `answer` (str) and `retrieved_ids` (corpus doc ids in rank order) and/or
  `retrieved_passages` (the retrieved texts in rank order, mapped to corpus documents by
  `cube.systems.passages.map_passages`), or a `SystemAnswer`; ids win when both are given
  (its passages when its id list is empty);
- sync or async (`async def`): at most `max_concurrency` questions at a time, sync functions in a
  thread pool of that size, async ones on one event loop under a semaphore;
- an exception is that question's failure, its type and message in `error` (answer None,
  `retrieval_ok` False: nothing is known about what it retrieved), never a crash of the run; so is
  a reply of the wrong shape, naming what was expected; an empty answer is a failure whose
  retrieval is known;
- the reply's ids or passages become ranked doc ids by the policy of every kind
  (`cube.systems.retrieved.ranked_lists`): misses keep their rank as `unmapped:...` and are
  counted in `attrs['unmapped']` (apart in `attrs['retrieved']`); a document listed again keeps
  its first rank; lists are cut at `top_n` (counted in `attrs['truncated']`, with a warning);
- every successful call is stored in the run's call cache (`cube.llm.CallCache`) under the sha256
  of the function's name, the bytes of the file defining it (`source_digest`), the params'
  `version` and the question: a re-run calls nothing; an edit of that file, or a new `version`
  (for what the file cannot show: another module, a model, an index), calls again. Failures are
  never stored.

The bound sets: with `bounds: module:function` the function answers each question twice, with
no document (`zero`) and with the gold document's text as the corpus renders it for the builtin
answerer (`full`), cached the same way; otherwise `answerer` names the model that writes them
(`cube.systems.bounds`).

Accounting: each question is one call of model `python:<name>` (`bounds:<function>` for the bound
sets), its `call_id` the cache key, its cost unknown (NaN: the function may pay for calls the
workbench cannot see).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd

from cube.config.model_spec import ModelSpec
from cube.config.params import Params
from cube.config.schema import require_columns
from cube.config.sections import PythonSystem, split_target
from cube.systems.base import System, answers_frame
from cube.systems.kinds import (
    PlanContext,
    Planned,
    SystemKind,
    SystemProbe,
    probe_by_answer,
    register,
)
from cube.systems.python_calls import CachedCaller
from cube.systems.python_contract import (
    Question,
    ShapeError,
    SystemAnswer,
    parse_answer,
    parse_bound,
)
from cube.systems.python_loader import (
    PythonSystemError,
    load_callable,
    load_problems,
    source_digest,
    source_files,
    target_files,
)
from cube.systems.question_system import answers_from_outcomes, questions_of

__all__ = [
    "PythonRAG",
    "PythonSystemError",
    "Question",
    "ShapeError",
    "SystemAnswer",
    "load_callable",
    "load_problems",
    "parse_answer",
    "parse_bound",
    "source_digest",
    "source_files",
    "target_files",
]


def _digest_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# --------------------------------------------------------------------------- the system
class PythonRAG(System):
    """A user's Python function as the system under test (module docstring).

    Args:
        spec: the params entry.
        lang: the run's language (passed in each `Question`).
        cache_path: the call cache (`RunPaths.cache`); None: no cache.
        answerer: the `answerer` column of its rag rows (the model it answers with, when named).
        base_dir: where relative paths and modules are found (default: the project root).
    """

    kind = "python"

    def __init__(
        self,
        spec: PythonSystem,
        *,
        lang: str,
        cache_path: str | Path | None,
        answerer: str = "",
        base_dir: str | Path | None = None,
    ):
        super().__init__(spec.name)
        self.spec, self.lang = spec, lang
        self.answerer = answerer or f"python:{spec.callable}"
        cache = Path(cache_path) if cache_path else None
        self.system = self._caller(
            spec.callable, f"python:{spec.name}", parse_answer, cache, base_dir
        )
        self.bounds_caller = (
            self._caller(spec.bounds, f"bounds:{spec.bounds}", parse_bound, cache, base_dir)
            if spec.bounds
            else None
        )

    def _caller(
        self,
        target: str,
        label: str,
        parse: Callable[[Any], dict[str, Any]],
        cache: Path | None,
        base_dir: str | Path | None,
    ) -> CachedCaller:
        fn = load_callable(target, base_dir)
        identity = {
            "python_function": split_target(target)[1],
            "source": source_digest(fn),
            "version": self.spec.version,
        }
        return CachedCaller(
            fn,
            label=label,
            identity=identity,
            parse=parse,
            cache_path=cache,
            limit=self.spec.max_concurrency,
        )

    def _questions(self, questions: pd.DataFrame) -> list[Question]:
        return questions_of(questions, self.lang, self.spec.top_n)

    def answer(
        self, questions: pd.DataFrame, corpus: pd.DataFrame, *, progress: bool = True
    ) -> pd.DataFrame:
        """The `rag` answers: one call per question (or its cached reply)."""
        qs = self._questions(questions)
        outcomes = self.system.run(
            [(q,) for q in qs], [asdict(q) for q in qs], f"{self.name}: python", progress
        )
        df = answers_from_outcomes(
            self, questions, corpus, outcomes, top_n=self.spec.top_n, answerer=self.answerer
        )
        df.attrs["calls"] = self.system.calls
        return df

    def bounds(
        self, questions: pd.DataFrame, corpus: pd.DataFrame, *, progress: bool = True
    ) -> pd.DataFrame:
        """The `zero` and `full` sets written by the `bounds` function: each question answered
        with no document, and with the gold document's text (as `cube.systems.bounds` hands it
        to the builtin answerer). Rows as `cube.systems.bounds.answer_bounds` returns them."""
        if self.bounds_caller is None:
            raise ValueError(f"system {self.name!r} has no `bounds` function")
        require_columns(questions, ("question_id", "doc_id", "question"), "questions")
        texts = dict(
            zip(corpus["doc_id"].astype(str), corpus["text"].fillna("").astype(str), strict=True)
        )
        golds = questions["doc_id"].astype(str).tolist()
        missing = [g for g in golds if g not in texts]
        if missing:
            raise ValueError(f"questions: gold doc_id(s) not in the corpus, e.g. {missing[:5]}")
        qs = self._questions(questions)
        docs = [[]] * len(qs) + [[texts[g]] for g in golds]
        calls = [(q, d) for q, d in zip(qs + qs, docs, strict=True)]
        payloads = [{**asdict(q), "documents": [_digest_text(t) for t in d]} for q, d in calls]
        out = self.bounds_caller.run(calls, payloads, f"{self.name}: bounds", progress)
        n = len(qs)
        return pd.concat(
            [
                answers_frame(
                    questions,
                    system="",
                    set_name=set_name,
                    responses=[o.response for o in part],
                    retrieved=retrieved,
                    answerer=self.bounds_caller.label,
                )
                for set_name, part, retrieved in (
                    ("zero", out[:n], [[] for _ in golds]),
                    ("full", out[n:], [[g] for g in golds]),
                )
            ],
            ignore_index=True,
        )


# --------------------------------------------------------------------------- the kind
def _build(entry: PythonSystem, params: Params, cache_path: Path | None) -> PythonRAG:
    named = entry.answerer is not None or "answerer" in params.model_fields_set
    return PythonRAG(
        entry,
        lang=params.lang,
        cache_path=cache_path,
        answerer=params.model_name(params.system_answerer(entry)) if named else "",
    )


def _plan(ctx: PlanContext, entry: PythonSystem) -> Planned:
    """A python system's calls of its function, one per question (the model calls it makes itself
    are not seen: tokens and cost unknown); with a `bounds` function, its two calls per question too
    (then no spec is returned: no answering model writes the bound sets)."""
    n, params = len(ctx.questions), ctx.params
    system = ModelSpec(provider="offline", model=f"python:{entry.name}")
    ctx.add("answering", system, [], calls=n).notes.append(
        "a Python function: the model calls it makes are not seen (their tokens and cost unknown)"
    )
    rows = [ctx.answers_to_come(entry.name, entry.name)]
    if entry.bounds is None:
        return params.model(params.system_answerer(entry)), rows
    bounds = params.model(params.system_answerer(entry))
    ctx.add("answering", bounds, [], calls=2 * n).notes.append(
        f"the bound sets by the bounds function {entry.bounds}"
    )
    key = bounds.model_dump_json()
    rows += [
        ctx.questions.assign(system=entry.name, set=s, answer="", source=key)
        for s in ("zero", "full")
    ]
    return None, rows


def _probe(
    entry: PythonSystem, params: Params, q: pd.DataFrame, corpus: pd.DataFrame
) -> SystemProbe:
    """The function called once (no cache): its answer or failure, and what it retrieved."""
    return probe_by_answer(entry, params, q, corpus, asked=f"called {entry.callable} once")


KIND = register(
    SystemKind(
        "python",
        PythonSystem,
        _build,
        "your RAG pipeline as a Python function",
        plan=_plan,
        check=lambda entry, base_dir: load_problems(entry, base_dir),
        probe=_probe,
        sources=source_files,
    )
)
