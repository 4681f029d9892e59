"""The systems under test behind one small interface, and the three QA sets of a run.

    make_system(system_params, params, cache_path) -> System
    System.name; System.answer(questions, corpus, *, progress=True) -> answers (set 'rag')
    answer_bounds(questions, corpus, answerer, *, lang, progress=True) -> answers ('zero', 'full')
    build_answers(params, corpus, questions, cache_path, *, progress=True) -> all answers

Kinds (`cube.systems.kinds`: each kind's params model, builder, plan, checks and probe in one
place, a user's own kind in one file: docs/how-to/system-kind.md): `builtin` (bm25s retrieval + an
answering model, `cube.systems.builtin`), `ragflow` (a RAGFlow chat assistant through ragflow-sdk,
`cube.systems.ragflow`), `imported` (a user's own QA file, `cube.systems.imported`), `http` (any
JSON endpoint, `cube.systems.http`) and `python` (a user's function, `cube.systems.python_system`,
called with a `Question` and returning a dict or a `SystemAnswer`, both exported here).

The answers table (one row per question, system and set), `ANSWERS_COLUMNS`:
`question_id, doc_id` (gold), `system, set, answer` (None when the call failed),
`retrieved_doc_ids` (list of doc ids in rank order: what that set's answerer saw),
`rank` (1-based position of the gold doc id in the system's list, 0 when absent),
`n_retrieved`, `retrieval_ok` (bool: the system's retrieval outcome is known; False only when
the system call failed so that nothing is known about what it retrieved: a failed RAGFlow
call, an imported row with an `error` and no retrieved list; a builtin system's bm25
retrieval always happened, so True even when its answering call failed), `error` ('' when
fine), `finish_reason` (the model's, e.g. 'stop' or 'length' = cut at max_tokens; '' when
unknown), `answerer` (the model name) and the accounting columns of
`cube.llm.response_accounting(resp, "answering")`. A `rank` of 0 with `retrieval_ok` False is
a system failure, not a retrieval miss: the analysis must not count it as one.

Rank agreement: in `build_answers` the `zero` and `full` rows carry the `rank`,
`n_retrieved` and `retrieval_ok` of the `rag` row of the same (system, question), so the three rows
of a question agree on the system's retrieval outcome (the analysis groups by it), while their
`retrieved_doc_ids` hold what their answerer saw: [] for `zero`, [gold] for `full`.

Bounds not made: under `analysis.bounds_of_missed: sample` (the default) a question whose gold
document the system missed has no `zero` and `full` rows (`cube.systems.bounds.bound_questions`:
no estimator reads them; a seeded sample is made when fewer were retrieved than the judge gate's
floor, `analysis.gate_bounds_questions`); readers treat a question
without them as not made, never as a failed call.
"""

from __future__ import annotations

import inspect
import json
import warnings
from pathlib import Path
from typing import Any

import pandas as pd

from cube.config.params import Params
from cube.config.schema import QUESTION_COLUMNS, require_columns
from cube.config.sections import (
    AnalysisParams,
    BuiltinSystem,
)
from cube.llm import CallLog, make_model
from cube.systems import extractive  # noqa: F401  (registers the offline extractive answerer with cube.llm)
from cube.systems.base import ANSWERS_COLUMNS, System, answers_frame
from cube.systems.bounds import bound_questions
from cube.systems.kinds import SystemKind, all_kinds, kind_of, system_kind
from cube.systems.python_contract import Question, SystemAnswer
from cube.systems.question_system import QuestionSystem
from cube.systems.retrieved import (
    Retrieved,
    RetrievedLists,
    ranked_lists,
    undetermined,
    unmeasured_reasons,
)

__all__ = [
    "ANSWERS_COLUMNS",
    "Question",
    "QuestionSystem",
    "Retrieved",
    "RetrievedLists",
    "System",
    "SystemAnswer",
    "SystemKind",
    "all_kinds",
    "answer_bounds",
    "answers_frame",
    "build_answers",
    "failure_reasons",
    "kind_of",
    "make_system",
    "known_outcomes",
    "ranked_lists",
    "refusal_answers",
    "system_kind",
]


def make_system(
    system_params: Any,
    params: Params,
    cache_path: Path | str | None,
    calls: CallLog | None = None,
) -> System:
    """The runnable system a params entry describes, built by its kind (`cube.systems.kinds`).

    Args:
        system_params: one entry of `params.systems`.
        params: the run params (the answering model and `lang` of builtin systems).
        cache_path: the LLM call cache (`RunPaths.cache`).
        calls: the failed calls its LLM calls record and replay (`cube.llm.CallLog`).
    """
    path = Path(cache_path) if cache_path else None
    kind = kind_of(system_params)
    if "calls" in inspect.signature(kind.build).parameters:  # the package's LLM-calling kinds
        return kind.build(system_params, params, path, calls=calls)
    return kind.build(system_params, params, path)


def answer_bounds(*args: Any, **kwargs: Any) -> pd.DataFrame:
    """See `cube.systems.bounds.answer_bounds` (the `zero` and `full` sets)."""
    from cube.systems.bounds import answer_bounds as _answer_bounds

    return _answer_bounds(*args, **kwargs)


def _spec_key(params: Params, ref: Any) -> str:
    return json.dumps(params.model(ref).model_dump(mode="json"), sort_keys=True)


def _sweep_retrievals(
    params: Params, corpus: pd.DataFrame, questions: pd.DataFrame, cache_path: Path | str | None
) -> dict[str, tuple[list[list[str]], dict[str, int]]]:
    """Per `top_n_sweep` (builtin systems sharing `sweep_of`): the ranked lists retrieved once at
    the sweep's largest TOP-N, and the region-filter counts of that retrieval."""
    groups: dict[str, list[BuiltinSystem]] = {}
    for sp in params.systems:
        if isinstance(sp, BuiltinSystem) and sp.sweep_of:
            groups.setdefault(sp.sweep_of, []).append(sp)
    out = {}
    for sweep, members in groups.items():
        widest = make_system(max(members, key=lambda m: m.top_n), params, cache_path)
        lists = widest.retrieve(questions, corpus)  # type: ignore[attr-defined]
        out[sweep] = (lists, dict(getattr(widest, "region_counts", {})))
    return out


def build_answers(
    params: Params,
    corpus: pd.DataFrame,
    questions: pd.DataFrame,
    cache_path: Path | str | None,
    *,
    progress: bool = True,
    calls: CallLog | None = None,
    missed_bounds: bool = True,
) -> pd.DataFrame:
    """All three QA sets for every system of `params.systems` (`calls`: the failed LLM calls to
    record and to replay, `cube.llm.CallLog`: the sequential driver's, `cube.run.sequential`;
    `missed_bounds=False`: no missed question's bounds, not even the gate's sample, which the
    driver draws once on the questions it reached rather than per batch).

    Runs each system (`rag`), then the bounds ONCE per distinct answering model
    (`params.system_answerer(s)`, compared by its full spec; a python system's `bounds` function
    stands for one model per function and version) and replicates those rows to
    every system that uses that model, filling `system`. Bound rows of a question the system
    dropped (an imported file with `on_invalid: drop`) are dropped too, so the sets stay
    paired. `zero`/`full` rows take the `rag` row's `rank`, `n_retrieved` and `retrieval_ok`
    (module docstring). The bounds are made after every rag answer, and only for the questions
    an estimator or the gate reads (`cube.systems.bounds.bound_questions`: under
    `analysis.bounds_of_missed: sample`, the retrieved ones, and a seeded sample of missed ones
    when fewer were retrieved than the judge gate's floor, `analysis.gate_bounds_questions`); the
    others have no `zero`/`full` row (not made, not a failure).

    Returns:
        The answers table; `attrs['dropped']` maps system name -> questions dropped, and
        `attrs['unmapped']` system name -> retrieved chunks that named no corpus document,
        `attrs['retrieval']` system name -> its passages and ids read and those that did not map
        (`cube.systems.retrieved.RetrievedLists.summary`), `attrs['unmeasured']` system name ->
        why its retrieval was not measured (more than `analysis.max_unmapped_share` did not map:
        its `retrieval_ok` is False on every row), `attrs['failures']` the failed calls per
        system (`failure_reasons`), and
        `attrs['region_filter']` system name -> {filtered, unfiltered} question counts of the
        builtin systems with `region_filter: question`, `attrs['bounds_not_made']` system name ->
        questions whose bounds were not made (missed ones: no estimator reads them; those of
        unknown retrieval).
    """
    require_columns(questions, QUESTION_COLUMNS[:3], "questions")
    rag_parts: dict[str, pd.DataFrame] = {}
    dropped: dict[str, int] = {}
    unmapped: dict[str, int] = {}
    retrieval: dict[str, dict[str, int]] = {}
    unmeasured: dict[str, list[str]] = {}
    region_filter: dict[str, dict[str, int]] = {}
    not_made: dict[str, int] = {}
    kw: dict[str, Any] = {"progress": progress, "calls": calls}
    shared = _sweep_retrievals(params, corpus, questions, cache_path)
    systems: dict[str, System] = {}
    for sp in params.systems:
        system = systems[sp.name] = make_system(sp, params, cache_path, calls)
        sweep = getattr(sp, "sweep_of", None)
        if (
            sweep in shared
        ):  # one retrieval per question at the sweep's largest TOP-N, cut per member
            df = system.answer(questions, corpus, progress=progress, retrieved=shared[sweep][0])
            if shared[sweep][1]:
                df.attrs["region_filter"] = dict(shared[sweep][1])
        else:
            df = system.answer(questions, corpus, progress=progress)
        dropped[sp.name] = int(df.attrs.get("dropped", 0))
        unmapped[sp.name] = int(df.attrs.get("unmapped", 0))
        _measured(df, sp.name, params.analysis, retrieval, unmeasured)
        if "region_filter" in df.attrs:
            region_filter[sp.name] = dict(df.attrs["region_filter"])
        rag_parts[sp.name] = df

    needed = {
        sp.name: bound_questions(rag_parts[sp.name], params.analysis, missed=missed_bounds)
        for sp in params.systems
    }
    bounds_by_model = _bounds_by_model(params, corpus, questions, cache_path, systems, needed, **kw)
    parts: list[pd.DataFrame] = []
    for sp in params.systems:
        rag = rag_parts[sp.name]
        bounds = bounds_by_model[_spec_key(params, params.system_answerer(sp))]
        bounds = bounds[bounds["question_id"].isin(set(needed[sp.name]))].copy()
        bounds["system"] = sp.name
        outcome = rag.set_index("question_id")[["rank", "n_retrieved", "retrieval_ok"]]
        for col, dtype in (("rank", "int64"), ("n_retrieved", "int64"), ("retrieval_ok", bool)):
            bounds[col] = bounds["question_id"].map(outcome[col]).astype(dtype)
        parts += [rag, bounds]
        not_made[sp.name] = len(rag) - len(set(needed[sp.name]))
    out = pd.concat(parts, ignore_index=True)[list(ANSWERS_COLUMNS)]
    order = {"zero": 0, "rag": 1, "full": 2}
    out = out.sort_values(
        ["system", "question_id", "set"],
        key=lambda s: s.map(order) if s.name == "set" else s,
        kind="stable",
    ).reset_index(drop=True)
    out.attrs["dropped"] = dropped
    out.attrs["unmapped"] = unmapped
    out.attrs["retrieval"] = retrieval
    out.attrs["unmeasured"] = unmeasured
    out.attrs["failures"] = failure_reasons(out)
    out.attrs["region_filter"] = region_filter
    out.attrs["bounds_not_made"] = {k: v for k, v in not_made.items() if v}
    return out


def _bounds_by_model(
    params: Params,
    corpus: pd.DataFrame,
    questions: pd.DataFrame,
    cache_path: Path | str | None,
    systems: dict[str, System],
    needed: dict[str, list[Any]],
    *,
    progress: bool,
    calls: CallLog | None,
) -> dict[str, pd.DataFrame]:
    """The `zero` and `full` answers per distinct answering model (`_spec_key`), made after every
    system's rag answers (which carry the retrieval), for the questions some system of that model
    needs (`cube.systems.bounds.bound_questions`), in the question set's order."""
    wanted: dict[str, set[Any]] = {}
    first: dict[str, Any] = {}
    for sp in params.systems:
        key = _spec_key(params, params.system_answerer(sp))
        wanted.setdefault(key, set()).update(needed[sp.name])
        first.setdefault(key, sp)
    out: dict[str, pd.DataFrame] = {}
    for key, sp in first.items():
        asked = questions[questions["question_id"].isin(wanted[key])]
        if getattr(sp, "bounds", None):
            # a python system's own bounds function writes them (`PythonRAG.bounds`)
            out[key] = systems[sp.name].bounds(asked, corpus, progress=progress)
            continue
        ref = params.system_answerer(sp)
        model = make_model(
            params.model(ref), cache_path=Path(cache_path) if cache_path else None, calls=calls
        )
        out[key] = answer_bounds(asked, corpus, model, lang=params.lang, progress=progress)
    return out


def known_outcomes(
    system_params: Any, params: Params, corpus: pd.DataFrame, questions: pd.DataFrame
) -> pd.DataFrame | None:
    """A system's retrieval outcome per question (`question_id, rank, retrieval_ok`) when it costs
    no call to know before the run: its kind's `free_outcomes` (`cube.systems.kinds`; a builtin
    system's BM25 retrieval, an imported file's rows, a user kind that registers one), checked as
    `build_answers` checks a run's rows (too much unmapped or undetermined: `retrieval_ok` False);
    None for a system whose retrieval comes with its answer (a service, a Python function). The
    one source of free retrieval: `cube plan` counts the bounds `cube.systems.bounds.
    bound_questions` will make from it, and the sequential driver's `recall: all` takes R@k of the
    whole set from it (`cube.run.sequential_design.free_hits`)."""
    free = kind_of(system_params).free_outcomes
    if free is None:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the run says them; the plan and the driver count
        df = free(system_params, params, corpus, questions)
        if df is None:
            return None
        _measured(df, system_params.name, params.analysis, {}, {})
    require_columns(
        df, ("question_id", "rank", "retrieval_ok"), f"system {system_params.name}: free_outcomes"
    )
    return df[["question_id", "rank", "retrieval_ok"]]


def _measured(
    df: pd.DataFrame,
    name: str,
    analysis: AnalysisParams,
    retrieval: dict[str, dict[str, int]],
    unmeasured: dict[str, list[str]],
) -> None:
    """A system's retrieval counts into `retrieval`; when too much of it did not map
    (`cube.systems.retrieved.unmeasured_reasons`), or too many questions' R@k cannot be told
    (a tie among near-duplicates that may be the gold document: `undetermined`; more than
    `analysis.max_undetermined_share`), its reasons into `unmeasured` and every row's
    `retrieval_ok` False: its R@k is not measured (undefined), never a row of misses. Below that
    share, only the undetermined questions' `retrieval_ok` is False (left out of R@k and the
    analysis, counted in `retrieval`: R@k on the rest, which leaves out questions whose gold may
    have been retrieved, so it errs low, never high)."""
    max_share = analysis.max_unmapped_share
    lists = df.attrs.pop("retrieved", None)  # not JSON: the table's attrs go to Parquet
    if lists is None:
        return
    retrieval[name] = lists.summary()
    reasons = unmeasured_reasons(lists, max_share)
    known = df["retrieval_ok"].astype(bool)
    unsure = known & pd.Series(
        [
            undetermined(str(g), d)
            for g, d in zip(df["doc_id"], df["retrieved_doc_ids"], strict=True)
        ],
        index=df.index,
    )
    retrieval[name]["undetermined_questions"] = int(unsure.sum())
    if unsure.any():
        df.loc[unsure, "retrieval_ok"] = False
        asked = int(known.sum())
        share = f"{int(unsure.sum())} of {asked} questions"
        if unsure.sum() / max(asked, 1) > analysis.max_undetermined_share:
            reasons.append(
                f"R@k undetermined for {share}: a retrieved passage that near-duplicate documents "
                "(the gold one among them) hold equally does not say which was retrieved "
                "(more than analysis.max_undetermined_share = "
                f"{analysis.max_undetermined_share:.0%}; give the system's "
                "document ids, or passages that name what sets the documents apart, such as the "
                "region; docs/explanation/passage-mapping.md)"
            )
        else:
            warnings.warn(
                f"system {name!r}: R@k undetermined for {share} (a passage near-duplicate "
                "documents hold equally, the gold one among them): left out of R@k and the "
                "analysis, not counted as misses",
                stacklevel=3,
            )
    if reasons:
        unmeasured[name] = reasons
        df["retrieval_ok"] = False
        warnings.warn(f"system {name!r}: {'; '.join(reasons)}", stacklevel=3)


FAILURE_CHARS = 200  # a failure reason as grouped and shown (status and the body's start)


def failure_reasons(answers: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Per system whose `rag` calls failed: how many of how many, and each distinct reason (its
    first `FAILURE_CHARS` characters: the status and a short excerpt of the body) with its count,
    most frequent first. Systems without failures are left out."""
    rag = answers[answers["set"] == "rag"] if "set" in answers else answers
    out: dict[str, dict[str, Any]] = {}
    for system, rows in rag.groupby("system", sort=False):
        errors = rows["error"].fillna("").astype(str)
        failed = errors[errors != ""].map(lambda e: " ".join(e.split())[:FAILURE_CHARS])
        if len(failed):
            counts = failed.value_counts()
            out[str(system)] = {
                "failed": int(len(failed)),
                "calls": int(len(rows)),
                "reasons": [{"reason": str(r), "count": int(n)} for r, n in counts.items()],
            }
    return out


def refusal_answers(
    params, corpus: pd.DataFrame, questions: pd.DataFrame, cache_path
) -> pd.DataFrame:
    """Every builtin system's `rag` answers to the refusal questions, with their `kind`; whether
    each declined is for `cube.diagnose.refusal.mark_declined` to say."""
    parts = []
    for sp in params.systems:
        if not isinstance(sp, BuiltinSystem):
            # an imported file holds no answers to these questions; a RAGFlow call is left to
            # the user
            continue
        df = make_system(sp, params, cache_path).answer(questions, corpus, progress=False)
        keep = [
            c
            for c in ("question_id", "question", "kind", "style", "item", "generator")
            if c in questions
        ]
        parts.append(df.merge(questions[keep], on="question_id", how="left"))
    if not parts:
        return pd.DataFrame(columns=["question_id", "system", "answer", "kind", "error"])
    return pd.concat(parts, ignore_index=True)
