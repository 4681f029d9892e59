"""The judge pipeline: answers x judges x dimensions (x samples) -> the long scores table.

What a judge sees is the question, the gold (source) document and the answer, for all three
sets (`zero`, `rag`, `full`), so the bounds and the system are measured against the same
material (see `cube.judges.dimensions`). The gold document's text comes from the corpus
(`corpus.set_index("doc_id")["text"]` via `answers.doc_id`).

Every request carries both `messages` (the filled prompt, for LLMs) and `context` (question,
document, answer, dimension, item_name, asked_field, lang: for offline scorers such as the
`rubric` judge), so the pipeline never branches on the kind of judge. All requests of one
judge go to the model in one `Model.complete` call: concurrency, the progress bar and the
cache live there.

Nothing is dropped and nothing is invented: a failed call is a row with score NaN and
`error_kind` "call"; an unparseable reply is a row with score NaN, `error_kind` "parse" and
the raw reply kept; an answer that is missing (its answering call failed) is not judged: a
row with score NaN, `error_kind` "skipped", that reason, and no call (`call_id` "", cost 0.0;
`cube.llm.usage.usage_summary` counts it as skipped, not as a failed call of the judge).
With `retry_unscored: n` (per judge, or the `score_answers` argument) an LLM judge's calls
whose reply did not parse (a transient "I cannot evaluate this.") are asked again with a fresh
sample index, up to n times; the cache keeps every reply (see `_reask_unscored`).

`finish_reason` is the judge model's ('stop', 'length' = the reply was cut at max_tokens, ''
when unknown: offline scorers, skipped rows); a cut reply is scored or fails to parse like
any other, and is counted as `truncated` by `usage_summary`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, NotRequired, TypedDict

import pandas as pd

import cube.llm as llm
from cube.config.params import Params
from cube.config.schema import ACCOUNTING_COLUMNS, SCORE_COLUMNS, SchemaError, require_columns
from cube.judges import rubric  # noqa: F401  (registers the offline rubric judges with cube.llm)
from cube.judges.dimensions import Dimension, all_dimensions_prompt
from cube.judges.heap import young_collections
from cube.judges.parsing import parse_score, parse_scores_json, score_schema
from cube.llm.usage import Accounting, no_call_accounting

SCORES_TABLE_COLUMNS: tuple[str, ...] = (
    *SCORE_COLUMNS[:5],
    "sample",
    "score",
    "raw",
    "error",
    "error_kind",
    "detail",
    "finish_reason",
    *ACCOUNTING_COLUMNS,
)


class ScoreRow(Accounting):
    """One row of the scores table (`SCORES_TABLE_COLUMNS`): one judge's score of one dimension
    of one answer in one sample, with the accounting of the call that produced it."""

    question_id: str
    system: str
    set: str
    judge: str
    dimension: str
    sample: int
    score: float
    raw: str
    error: str
    error_kind: str
    detail: str
    finish_reason: str


class AnswerRecord(TypedDict):
    """One answer row as a judge reads it (`_RECORD_COLUMNS` of `judge_inputs`); `answer` is
    missing (None, NaN) when its answering call failed."""

    question_id: str
    doc_id: str
    system: str
    set: str
    answer: str | float | None
    question: str
    asked_field: NotRequired[str]
    _document: str
    _item_name: str | float | None


class CallContext(TypedDict):
    """What every call of one answer row reads: the base of `llm.Request.context` (each call adds
    its dimension and rubric), which is a plain dict the offline scorers read by key."""

    question: str
    document: str
    answer: str
    item_name: str
    lang: str


class PilotReport(TypedDict):
    """A judge's pilot and its decision (`pilot_decision`), recorded in results.json."""

    judge: str
    pilot_calls: int
    replies: int
    scores: int
    parsed: int
    parsed_share: float
    decision: str
    calls_not_sent: int
    reason: str
    examples: list[str]


@dataclass
class Judge:
    """One judge of the jury.

    Attributes:
        name: The judge's name (the `judge` column of the scores table).
        model: The model that scores (an LLM endpoint or an offline algorithm).
        samples: Repeats per judgment (`Request.sample` = 0..samples-1), for run-to-run variance.
        all_dimensions: Score every dimension in one call with a JSON reply.
        role: Free text shown in reports (e.g. "the system's own model").
        retry_unscored: Times a call whose reply did not parse is asked again (LLM judges).
        pilot: An LLM judge's first calls that decide whether it goes on (0: no pilot).
        pilot_min_parsed: Share of the pilot's replies that must parse for the judge to go on.
        insist: Go on whatever the pilot says.
        pilot_report: Filled by `score_answers`: the pilot's calls, replies, parsed replies,
            decision, calls not sent and example replies (None when no pilot ran).
        pilot_calls: The pilot already ran in this run and stopped the judge (the sequential
            driver, in stage 02; `pilot_report` is its report): the cache keys of its calls, the
            only ones taken again (from the cache, or the run's failed calls); every other
            call is a row 'pilot', not sent. None: the pilot runs here (when `pilot` > 0).
    """

    name: str
    model: llm.Model
    samples: int = 1
    all_dimensions: bool = False
    role: str = ""
    retry_unscored: int = 0
    pilot: int = 0
    pilot_min_parsed: float = 0.5
    insist: bool = False
    pilot_report: PilotReport | None = None
    pilot_calls: frozenset[str] | None = None


def make_judges(
    params: Params, cache_path: Path | None, calls: llm.CallLog | None = None
) -> list[Judge]:
    """The judges of `params.judges`, each with its model built by `cube.llm.make_model` (`calls`:
    the failed calls its LLM records and replays, `cube.llm.CallLog`)."""
    return [
        Judge(
            name=j.name,
            model=llm.make_model(params.model(j.model), cache_path=cache_path, calls=calls),
            samples=j.samples,
            all_dimensions=j.all_dimensions,
            role=j.role,
            retry_unscored=j.retry_unscored,
            pilot=j.pilot,
            pilot_min_parsed=j.pilot_min_parsed,
            insist=j.insist,
        )
        for j in params.judges
    ]


def _accounting(resp: llm.Response) -> Accounting:
    return llm.response_accounting(resp, role="judging")


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


def judge_inputs(
    answers: pd.DataFrame, corpus: pd.DataFrame, questions: pd.DataFrame | None
) -> pd.DataFrame:
    """Answers joined with the question text, gold document text, item name and asked field."""
    require_columns(answers, ("question_id", "doc_id", "system", "set", "answer"), "answers")
    require_columns(corpus, ("doc_id", "text"), "corpus")
    df = answers.reset_index(drop=True).copy()
    if "question" not in df.columns:
        if questions is None:
            raise SchemaError(
                "answers: no 'question' column; pass questions= (the questions table) so judges "
                "see the question"
            )
        require_columns(questions, ("question_id", "question"), "questions")
        # Only the question text: the question generator's `asked_field` is metadata an LLM judge
        # never sees, so the offline rubric must not see it either (judges see question, gold
        # document and answer, nothing else).
        extra = ["question"]
        q = questions.drop_duplicates("question_id").set_index("question_id")[extra]
        df = df.join(q, on="question_id")
        if df["question"].isna().any():
            bad = df.loc[df["question"].isna(), "question_id"].astype(str).unique()[:5].tolist()
            raise SchemaError(f"answers: question_id(s) {bad} not found in the questions table")
    docs = corpus.drop_duplicates("doc_id").set_index("doc_id")
    unknown = sorted(set(df["doc_id"].astype(str)) - set(docs.index.astype(str)))
    if unknown:
        raise SchemaError(
            f"answers: doc_id(s) {unknown[:5]} not found in the corpus (column doc_id)"
        )
    docs.index = docs.index.astype(str)
    keys = df["doc_id"].astype(str)
    df["_document"] = _shared_texts(docs["text"].astype(str), keys)
    df["_item_name"] = keys.map(docs["item_name"]).to_numpy() if "item_name" in docs.columns else ""
    return df


def _shared_texts(texts: pd.Series, keys: pd.Series) -> pd.Categorical:
    """`texts[keys]` as a categorical over the distinct texts, kept as Python strings: each gold
    document is held once (not once per answer row: 18k copies of ~1 KB guides, ~100 MB at the
    paper's scale), and every row's value (`to_dict`, iteration) is that one shared string."""
    codes, uniques = pd.factorize(texts.to_numpy(dtype=object))
    return pd.Categorical.from_codes(
        codes[texts.index.get_indexer(keys)], categories=pd.Index(uniques, dtype=object)
    )


def score_answers(
    answers: pd.DataFrame,
    judges: list[Judge],
    dimensions: list[Dimension],
    corpus: pd.DataFrame,
    *,
    questions: pd.DataFrame | None = None,
    progress: bool = True,
    retry_unscored: int | None = None,
) -> pd.DataFrame:
    """Score every answer with every judge on every dimension.

    Args:
        answers: The answers table (`question_id, doc_id, system, set, answer`, and `question`
            unless `questions` is given; an `asked_field` column is passed on when present).
        judges: The jury (see `make_judges`).
        dimensions: The dimensions (see `load_dimensions`).
        corpus: The corpus (`doc_id`, `text`, optionally `item_name`).
        questions: The questions table, when `answers` has no `question` column.
        progress: Show a progress bar per judge.
        retry_unscored: Re-ask an LLM judge's calls whose reply did not parse up to this many
            times (default: each judge's own `retry_unscored`); see `_reask_unscored`.

    Returns:
        The long scores table, one row per (answer, judge, dimension, sample), columns
        `SCORES_TABLE_COLUMNS`: score (float 0-10, NaN = unscored), raw reply, error,
        error_kind ('' | 'call' | 'parse' | 'skipped' | 'pilot': not sent, its judge stopped by
        its pilot), detail (JSON of an offline scorer's per-criterion points, else ''),
        finish_reason, and the call accounting columns (role 'judging').
    """
    if not dimensions:
        raise ValueError("score_answers: no dimensions given")
    df = judge_inputs(answers, corpus, questions)
    # Only what a judge reads becomes Python objects, each gold document's text one shared string
    # (`_shared_texts`).
    records = df[[c for c in _RECORD_COLUMNS if c in df.columns]].to_dict("records")
    del df
    # Built a slice at a time: 293k row dicts at once were the paper scale's peak. Offline judges
    # score the same slice of answers one after the other, then the slice's text analyses are
    # released (`release_caches`): an answer's three sets are adjacent rows, so each document and
    # answer is still analysed once, and the caches never hold more than one slice's texts.
    frames: dict[int, list[pd.DataFrame]] = {id(j): [] for j in judges}
    skipped_rows: dict[int, list[ScoreRow]] = {id(j): [] for j in judges}
    with young_collections() as checkpoint:  # the collector's traversals were ~3 s (`heap`)
        _score_offline(judges, records, dimensions, progress, frames, skipped_rows, checkpoint)
    # an LLM judge's calls go to the model together (concurrency, retries of the unscored)
    for judge in (j for j in judges if not j.model.offline):
        rounds = judge.retry_unscored if retry_unscored is None else retry_unscored
        desc = f"judging: {judge.name}"
        pair = (frames[id(judge)], skipped_rows[id(judge)])
        _score_slice(judge, records, dimensions, desc, progress, rounds, *pair)
    # the answer records (14k dicts at the paper's scale, ~10 MB) go before the table is
    # assembled: the frames and their concatenation are this function's peak
    del records
    return _typed_scores(_assembled(judges, frames, skipped_rows))


def _score_offline(
    judges: list[Judge],
    records: list[AnswerRecord],
    dimensions: list[Dimension],
    progress: bool,
    frames: dict[int, list[pd.DataFrame]],
    skipped_rows: dict[int, list[ScoreRow]],
    checkpoint: Callable[[], None] = lambda: None,
) -> None:
    """The offline judges' rows, a slice of OFFLINE_SLICE records at a time, each judge's into
    its `frames` and `skipped_rows`; after each slice the models release its text analyses and
    `checkpoint` runs (`cube.judges.heap.young_collections`: the slice's cyclic garbage freed)."""
    offline = [j for j in judges if j.model.offline]
    n_slices = -(-len(records) // OFFLINE_SLICE)
    for k, start in enumerate(range(0, len(records), OFFLINE_SLICE)):
        for judge in offline:
            desc = f"judging: {judge.name}" + (f" ({k + 1}/{n_slices})" if n_slices > 1 else "")
            part = records[start : start + OFFLINE_SLICE]
            pair = (frames[id(judge)], skipped_rows[id(judge)])
            _score_slice(judge, part, dimensions, desc, progress, 0, *pair)
        _release_caches(offline)
        checkpoint()


def _release_caches(judges: list[Judge]) -> None:
    """Each distinct model's `release_caches`, where it has one."""
    for model in {id(j.model): j.model for j in judges}.values():
        release = getattr(model, "release_caches", None)
        if release is not None:
            release()


def _assembled(
    judges: list[Judge],
    frames: dict[int, list[pd.DataFrame]],
    skipped_rows: dict[int, list[ScoreRow]],
) -> pd.DataFrame:
    """One table of every judge's rows, in the jury's order, a judge's skipped rows after its
    judged ones (each part released from the dicts as it is taken)."""
    parts: list[pd.DataFrame] = []
    for judge in judges:
        parts += frames.pop(id(judge))
        skipped = skipped_rows.pop(id(judge))
        if skipped:
            parts.append(pd.DataFrame(skipped, columns=list(SCORES_TABLE_COLUMNS)))
    if not parts:
        return pd.DataFrame([], columns=list(SCORES_TABLE_COLUMNS))
    return pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]


def _typed_scores(out: pd.DataFrame) -> pd.DataFrame:
    """The scores table's columns in their types (an empty table's too)."""
    out["score"] = out["score"].astype("float64")
    out["sample"] = out["sample"].astype("int64")
    for c in ("input_tokens", "output_tokens", "cached_input_tokens"):
        out[c] = out[c].astype("int64")
    for c in ("cost", "latency_s", "queue_s"):
        out[c] = out[c].astype("float64")
    out["cached"] = out["cached"].astype(bool)
    return out


def _score_slice(
    judge: Judge,
    records: list[AnswerRecord],
    dimensions: list[Dimension],
    desc: str,
    progress: bool,
    rounds: int,
    frames: list[pd.DataFrame],
    skipped_rows: list[ScoreRow],
) -> None:
    """Score `records` with one judge: its rows as one frame appended to `frames`, the rows of
    missing answers (not judged) to `skipped_rows`."""
    units, requests, skipped = judge_requests(judge, records, dimensions)
    units, requests, n_pilot, decided = _pilot_calls(judge, units, requests)
    responses = _sent(judge, requests[:n_pilot], f"{desc} (pilot)", progress)
    unit_rows = [
        _rows_for(judge, *unit, resp) for unit, resp in zip(units, responses, strict=False)
    ]
    _record_pilot(judge, unit_rows, n_pilot, decided, len(requests) - n_pilot)
    if _stopped_by_pilot(judge, n_pilot, decided):  # the rest is never sent: rows 'pilot'
        reason = judge.pilot_report["reason"]  # the gate excludes the judge, naming it
        skipped += _not_sent(units[n_pilot:], reason)
        units, requests = units[:n_pilot], requests[:n_pilot]
    elif len(requests) > n_pilot:
        rest = _sent(judge, requests[n_pilot:], desc, progress)
        unit_rows += [
            _rows_for(judge, *unit, resp) for unit, resp in zip(units[n_pilot:], rest, strict=True)
        ]
        del rest
    if rounds and not judge.model.offline:  # an offline scorer is deterministic: asking again
        _reask_unscored(judge, units, requests, unit_rows, rounds, progress)  # changes nothing
    del requests, responses
    if unit_rows:
        frames.append(_frame_of(unit_rows))
    del unit_rows
    # not judged: no call was made, so none failed and nothing was spent
    skipped_rows += [_skipped_row(judge, rec, d, s, why) for rec, d, s, *why in skipped]


def _not_sent(units: list, reason: str) -> list[tuple]:
    """The skipped entries (record, dimension, sample, reason, "pilot") of units not sent."""
    return [(rec, d, s, reason, "pilot") for rec, dims, s in units for d in dims]


def _frame_of(unit_rows: list[list[ScoreRow]]) -> pd.DataFrame:
    """The units' rows as one scores frame."""
    return pd.DataFrame([r for rs in unit_rows for r in rs], columns=list(SCORES_TABLE_COLUMNS))


def _sent(
    judge: Judge, requests: list[llm.Request], desc: str, progress: bool
) -> list[llm.Response]:
    """The responses to `requests` (none sent when there are none); a model that returns another
    number of responses than requests is an error naming the judge."""
    if not requests:
        return []
    responses = _complete_prefix_order(judge, requests, desc, progress)
    if len(responses) != len(requests):
        raise RuntimeError(
            f"judge {judge.name!r}: model returned {len(responses)} responses for "
            f"{len(requests)} requests"
        )
    return responses


def _record_pilot(
    judge: Judge,
    unit_rows: list[list[ScoreRow]],
    n_pilot: int,
    decided: bool,
    not_sent: int,
) -> None:
    """The judge's `pilot_report`: the decision on the pilot's rows when the pilot ran here; when
    it was decided before, that decision as it was taken, with the calls not sent counted here."""
    if decided:
        judge.pilot_report = {**(judge.pilot_report or {}), "calls_not_sent": not_sent}
    elif n_pilot:
        judge.pilot_report = pilot_decision(judge, unit_rows, not_sent)


def _stopped_by_pilot(judge: Judge, n_pilot: int, decided: bool) -> bool:
    """Whether the judge's calls after its pilot are not sent: a pilot decided before (only its
    calls are taken again) or one that stopped the judge here."""
    if decided:
        return True
    return bool(n_pilot) and judge.pilot_report["decision"] == "stopped"


def _skipped_row(judge: Judge, rec: AnswerRecord, d: Dimension, s: int, why: list[str]) -> ScoreRow:
    """The row of a call not made: the answer is missing, or `why` = (reason, error kind)."""
    return _row(
        judge,
        rec,
        d.name,
        s,
        None,
        "",
        why[0] if why else "answer is missing (no answer to judge)",
        why[1] if len(why) > 1 else "skipped",
        "",
        no_call_accounting(judge.model.name, "judging"),
    )


def _pilot_calls(
    judge: Judge, units: list, requests: list[llm.Request]
) -> tuple[list, list[llm.Request], int, bool]:
    """The judge's units and requests with its pilot's first, the pilot's size, and whether the
    pilot was decided before (`Judge.pilot_calls`: only those calls are taken again; when none of
    them is among these requests, e.g. the judge's prompts changed since, the pilot runs here)."""
    if judge.model.offline:
        return units, requests, 0, False
    known = judge.pilot_calls
    if known is None:
        return units, requests, min(judge.pilot, len(requests)), False
    key = judge.model.call_key  # type: ignore[attr-defined]  # an LLM's cache key of a call
    first = [i for i, r in enumerate(requests) if key(r) in known]
    if not first:
        return units, requests, min(judge.pilot, len(requests)), False
    chosen = set(first)
    order = first + [i for i in range(len(requests)) if i not in chosen]
    return [units[i] for i in order], [requests[i] for i in order], len(first), True


def _complete_prefix_order(
    judge: Judge, requests: list[llm.Request], desc: str, progress: bool
) -> list[llm.Response]:
    """The judge's calls (its pilot's, then the rest) sent in the order of their prompt texts, the
    responses returned in the requests' order. A judge prompt puts its fixed part first
    (instructions, then question and source, the answer last), so in text order the calls of one
    dimension follow each other and the answers of one question share everything up to the
    answer: a server's prefix cache (llama.cpp reuses the last prompt's) then serves most prompt
    tokens (measured on SmolLM2: 57 % of them, against 11 % in the per-answer order;
    benchmarks/local_llm_prefix_cache.py)."""
    order = sorted(range(len(requests)), key=lambda i: _prefix_key(requests[i]))
    sent = judge.model.complete(
        [requests[i] for i in order], role="judging", desc=desc, progress=progress
    )
    if len(sent) != len(requests):
        return sent  # the caller names the mismatch
    out: list[llm.Response] = [sent[0]] * len(requests)
    for k, i in enumerate(order):
        out[i] = sent[k]
    return out


def _prefix_key(request: llm.Request) -> tuple[str, ...]:
    """A call's sort key for `_complete_prefix_order`: its message contents as a tuple of the
    strings themselves (`str` of a str is that str), in the order of their joined text wherever
    no content holds a character below a newline; joining them built a new string per call
    (150-300 MB at paper scale)."""
    return tuple(str(m.get("content", "")) for m in request.messages)


PILOT_EXAMPLES = 3


def pilot_decision(judge: Judge, pilot_rows: list[list[ScoreRow]], remaining: int) -> PilotReport:
    """Whether an LLM judge goes on after its pilot: the share of the dimension scores (score rows)
    of the pilot's replies (calls that answered) that parsed, against `judge.pilot_min_parsed`. The
    unit is the row, as in the gate's failure rate: an all-dimensions reply missing one of four
    scores counts 3 of 4, not 0. Calls that failed are not replies (the retries and the breaker deal
    with them); a pilot without any reply decides nothing ("continued"). `insist` sends the rest
    whatever the share."""
    replies = [rows for rows in pilot_rows if _is_reply(rows)]
    scores = sum(len(rows) for rows in replies)
    parsed = scores - sum(_n_parse(rows) for rows in replies)
    share = parsed / scores if scores else float("nan")
    low = bool(scores) and share < judge.pilot_min_parsed
    examples = [rows[0]["raw"][:200] for rows in replies if _n_parse(rows)][:PILOT_EXAMPLES]
    reason = (
        f"not sent: judge {judge.name!r} was stopped by its pilot ({parsed} of {scores} dimension "
        f"scores in {len(replies)} replies parsed, under {judge.pilot_min_parsed:.0%})"
    )
    decision = _pilot_verdict(low, judge.insist)
    return {
        "judge": judge.name,
        "pilot_calls": len(pilot_rows),
        "replies": len(replies),
        "scores": scores,
        "parsed": parsed,
        "parsed_share": share,
        "decision": decision,
        "calls_not_sent": remaining if decision == "stopped" else 0,
        "reason": reason,
        "examples": examples,
    }


def _is_reply(rows: list[ScoreRow]) -> bool:
    """A call's rows come from a reply: the call did not fail."""
    return bool(rows) and rows[0]["error_kind"] != "call"


def _pilot_verdict(low: bool, insist: bool) -> str:
    """Stopped when too few scores parsed, unless the judge insists."""
    if not low:
        return "continued"
    return "continued (insist)" if insist else "stopped"


_RECORD_COLUMNS = (
    "question_id",
    "doc_id",
    "system",
    "set",
    "answer",
    "question",
    "asked_field",
    "_document",
    "_item_name",
)
# Answers the offline judges score at a time (x dimensions x samples calls); a slice's requests,
# replies, rows and rubric analyses are what stage 03 holds on top of its tables (4096: +60 MB).
OFFLINE_SLICE = 1024

Unit = tuple[AnswerRecord, list[Dimension], int]  # (answer row, dimensions of one call, sample)


def judge_requests(
    judge: Judge, records: list[AnswerRecord], dimensions: list[Dimension]
) -> tuple[list[Unit], list[llm.Request], list[tuple[AnswerRecord, Dimension, int]]]:
    """One judge's calls over the answer rows of `judge_inputs(...)`: (units, requests, skipped).

    `units[i]` is the (answer row, dimensions, sample) of `requests[i]`; `skipped` lists the
    (row, dimension, sample) not judged because the answer is missing. `cube.llm.batch` exports the
    same requests, so a batch reply lands on the cache key the run looks up."""
    calls = _CallBuilder(judge, dimensions)
    units: list[Unit] = []
    requests: list[llm.Request] = []
    skipped: list[tuple[AnswerRecord, Dimension, int]] = []
    for rec in records:
        if _missing(rec["answer"]):
            skipped += [(rec, d, s) for s in range(judge.samples) for d in dimensions]
            continue
        base_ctx = calls.context(rec)
        for s in range(judge.samples):
            for unit, request in calls.calls(rec, base_ctx, s):
                units.append(unit)
                requests.append(request)
    return units, requests, skipped


class _CallBuilder:
    """A judge's calls of one answer row: one call for all dimensions or one per dimension. An
    offline scorer reads `context` only: its prompt text is never built (no messages) and no
    schema is sent; an LLM gets the score schema where structured_output allows."""

    def __init__(self, judge: Judge, dimensions: list[Dimension]) -> None:
        self.judge = judge
        self.dimensions = dimensions
        self.offline = judge.model.offline
        self.names = [d.name for d in dimensions]
        self.rubrics = {d.name: d.rubric for d in dimensions}  # the rubric judge's rule of each
        self.all_version = all_dimensions_prompt(dimensions, "", "", "")[1]
        self.one_schema, self.all_schema = score_schema(), score_schema(self.names)

    def context(self, rec: AnswerRecord) -> CallContext:
        """What every call of the row reads (a missing item name as "")."""
        item = rec["_item_name"]
        return {
            "question": str(rec["question"]),
            "document": rec["_document"],
            "answer": str(rec["answer"]),
            "item_name": "" if _missing(item) else str(item),
            "lang": self.dimensions[0].lang,
        }

    def calls(self, rec: AnswerRecord, ctx: CallContext, s: int) -> list[tuple[Unit, llm.Request]]:
        """The (unit, request) pairs of sample `s` of the row."""
        if self.judge.all_dimensions:
            return [((rec, self.dimensions, s), self._all_request(ctx, s))]
        return [((rec, [d], s), self._one_request(d, ctx, s)) for d in self.dimensions]

    def _messages(self, content: Callable[[], str]) -> tuple[dict[str, str], ...]:
        return () if self.offline else ({"role": "user", "content": content()},)

    def _all_request(self, ctx: CallContext, s: int) -> llm.Request:
        messages = self._messages(
            lambda: all_dimensions_prompt(
                self.dimensions, ctx["question"], ctx["document"], ctx["answer"]
            )[0]
        )
        full = {**ctx, "dimension": None, "dimensions": self.names, "rubrics": self.rubrics}
        schema = None if self.offline else self.all_schema
        return llm.Request(messages, full, self.all_version, s, schema=schema)

    def _one_request(self, d: Dimension, ctx: CallContext, s: int) -> llm.Request:
        messages = self._messages(lambda: d.fill(ctx["question"], ctx["document"], ctx["answer"]))
        full = {**ctx, "dimension": d.name, "rubric": d.rubric}
        schema = None if self.offline else self.one_schema
        return llm.Request(messages, full, d.template_version, s, schema=schema)


def _row(
    judge: Judge,
    rec: AnswerRecord,
    dim: str,
    sample: int,
    score: float | None,
    raw: str,
    error: str,
    kind: str,
    detail: str,
    acc: Accounting,
    finish_reason: str = "",
) -> ScoreRow:
    return {
        "question_id": rec["question_id"],
        "system": rec["system"],
        "set": rec["set"],
        "judge": judge.name,
        "dimension": dim,
        "sample": sample,
        "score": math.nan if score is None else score,
        "raw": raw,
        "error": error,
        "error_kind": kind,
        "detail": detail,
        "finish_reason": finish_reason,
        **acc,
    }


def _rows_for(
    judge: Judge, rec: AnswerRecord, dims: list[Dimension], sample: int, resp: llm.Response
) -> list[ScoreRow]:
    # Every row of an all-dimensions call carries that call's accounting and call_id;
    # cube.llm.usage.usage_summary counts the call once.
    acc = _accounting(resp)
    finish = _finish_reason(resp)
    if not resp.ok:
        reason = resp.error or "no text in the response"
        raw = resp.text or ""
        return [
            _row(judge, rec, d.name, sample, None, raw, reason, "call", "", acc, finish)
            for d in dims
        ]
    text = resp.text or ""
    parsed, details = _parsed_reply(judge, dims, text, resp.detail)
    rows = []
    for d in dims:
        score, reason = parsed[d.name]
        detail = _offline_detail(judge, details, d.name)
        kind = "parse" if reason else ""
        rows.append(
            _row(judge, rec, d.name, sample, score, text, reason or "", kind, detail, acc, finish)
        )
    return rows


def _finish_reason(resp: llm.Response) -> str:
    return str((resp.detail or {}).get("finish_reason") or "")


def _parsed_reply(
    judge: Judge, dims: list[Dimension], text: str, detail: Any
) -> tuple[dict[str, tuple[float | None, str | None]], dict[str, Any]]:
    """Each dimension's (score, parse error) in a reply, and the reply's detail per dimension: a
    one-dimension call's reads its score format, an all-dimensions call's is JSON."""
    if len(dims) == 1 and not judge.all_dimensions:
        return {dims[0].name: _parse_score(text, dims[0].score_format)}, {dims[0].name: detail}
    parsed = parse_scores_json(text, [d.name for d in dims])
    return parsed, detail if isinstance(detail, dict) else {}


def _offline_detail(judge: Judge, details: dict[str, Any], name: str) -> str:
    """A dimension's detail as JSON: only an offline scorer's is criterion points (an LLM's holds
    e.g. its cache key), so an LLM's rows get ""."""
    detail = details.get(name) if judge.model.offline else None
    return _detail_json(detail) if detail else ""


def _detail_json(detail: Any) -> str:
    """`json.dumps(detail, ensure_ascii=False)`, memoised for a flat mapping of plain values: an
    offline scorer's criterion points are a few dozen distinct mappings over 293k rows at the
    paper's scale. The values' types are part of the key (1, 1.0 and True are equal as keys but
    not as JSON). Only text keys and int, bool, text or None values are memoised: a float key
    would take 0.0 for -0.0 and a non-text key 1 for True; anything else is written directly.
    The types are tested by set containment (in C), not a generator per row."""
    if isinstance(detail, dict):
        keys, values = tuple(detail), tuple(detail.values())
        types = tuple(map(type, values))
        if _TEXT_ONLY.issuperset(map(type, keys)) and _MEMO_TYPES.issuperset(types):
            return _flat_json(keys, values, types)
    return json.dumps(detail, ensure_ascii=False)


_TEXT_ONLY = frozenset({str})
_MEMO_TYPES = frozenset({int, bool, str, type(None)})


@lru_cache(maxsize=4096)
def _flat_json(keys: tuple[Any, ...], values: tuple[Any, ...], _types: tuple[type, ...]) -> str:
    return json.dumps(dict(zip(keys, values, strict=True)), ensure_ascii=False)


@lru_cache(maxsize=1024)
def _parse_score(text: str, score_format: str | None) -> tuple[float | None, str | None]:
    """`parse_score`, memoised: an offline judge's replies are the same few texts ("0" to "10"),
    parsed once each instead of once per row (293k rows at the paper's scale)."""
    return parse_score(text, score_format)


def _n_parse(rows: list[ScoreRow]) -> int:
    return sum(r["error_kind"] == "parse" for r in rows)


def _reask_unscored(
    judge: Judge,
    units: list[Unit],
    requests: list[llm.Request],
    unit_rows: list[list[ScoreRow]],
    rounds: int,
    progress: bool,
) -> None:
    """Ask again, up to `rounds` times, the calls whose reply did not parse (in place).

    A re-ask is the same prompt with a fresh sample index (`sample + k * judge.samples`, never
    one of the judge's own samples), so the cache keeps both replies and a re-run replays the
    same choice. The new reply replaces the old one only when fewer of its dimensions fail to
    parse; the row keeps its `sample` and records the first reply and call in `detail`
    ({"reasked": k, "first_reply", "first_call_id"}). A re-ask whose call fails, or whose reply is
    no better, leaves the rows as they were. Either way every call made is accounted: the rows
    add up the tokens, cost and latency of all the calls of their unit, and `detail` says how
    many calls that is (`"calls"`) and how many of the re-asks failed (`"failed_calls"`), which
    `cube.llm.usage.usage_summary` counts (offline judges are never asked again).
    """
    for k in range(1, rounds + 1):
        redo = [i for i, rows in enumerate(unit_rows) if _n_parse(rows)]
        if not redo:
            return
        again = [replace(requests[i], sample=requests[i].sample + k * judge.samples) for i in redo]
        responses = judge.model.complete(
            again,
            role="judging",
            progress=progress,
            desc=f"judging: {judge.name} (asking {len(redo)} unscored again)",
        )
        for i, resp in zip(redo, responses, strict=True):
            rec, dims, s = units[i]
            new = _rows_for(judge, rec, dims, s, resp)
            unit_rows[i] = _better_of(unit_rows[i], new, resp.ok, k)


_SUMMED = ("input_tokens", "output_tokens", "cached_input_tokens", "latency_s", "queue_s")


def _better_of(old_rows: list[ScoreRow], new: list[ScoreRow], ok: bool, k: int) -> list[ScoreRow]:
    """A unit's rows after re-ask `k`: the new reply's when its call answered and fewer of its
    dimensions fail to parse (recording the first reply and call), else the old ones; either
    way with both calls' accounting added up and counted in `detail`."""
    old = old_rows[0]
    first = json.loads(old["detail"]) if old["detail"] else {}
    tally = {
        "calls": first.get("calls", 1) + 1,
        "failed_calls": first.get("failed_calls", 0) + (not ok),
    }
    if not ok or _n_parse(new) >= _n_parse(old_rows):
        # the re-ask is no better: keep the rows, add its call
        kept, extra, record = old_rows, new[0], {**first, **tally}
    else:
        kept, extra = new, old
        record = {
            "reasked": k,
            "first_reply": first.get("first_reply", old["raw"]),
            "first_call_id": first.get("first_call_id", old["call_id"]),
            **tally,
        }
    for row in kept:
        row["detail"] = json.dumps(record, ensure_ascii=False)
        for c in _SUMMED:
            row[c] = row[c] + extra[c]
        row["cost"] = row["cost"] + extra["cost"]  # NaN (unknown price) stays NaN
        row["cached"] = bool(row["cached"] and extra["cached"])
    return kept
