"""The judgment browser's data: one record per question and system, every judgment in it.

`build_records(answers, scores, questions, corpus, changes, flagged)` returns `(meta, records,
docs)`, plain JSON-able values that `cube.pages.browser` writes as the page's data files. A record
is keyed by short names, as the page's script reads them (`templates/judgments.html`):

- `q` question id, `s` the system's index in `meta["systems"]`, `d` the gold document id, `t` the
  question's text, `st` its style and `dp` its gold document's department (named as the
  per-category report names them, `cube.diagnose.retrieval.question_groups`);
- `rk` the gold document's rank in the rag answer's retrieval (None when retrieval failed), `r`
  the retrieved ids;
- `a` and `e` the zero / rag / full answers and their errors (`SETS` order);
- `j` every judgment, `[set, judge, dimension, score, raw reply, failure reason]`, the first three
  as indexes (into `SETS`, `meta["judges"]`, `meta["dimensions"]`), a missing score None;
- `c` the comparisons where it is a regression or improvement, `g` the screen's flags (only when
  it has some);
- `nm` the sets (indexes into `SETS`) whose answer was not made, only when some was: the zero and
  full answers of a question whose gold document the system missed outside the gate's sample
  (`analysis.bounds_of_missed: sample`, `cube.systems.bounds`), or whose retrieval is unknown (a
  failed system call: no bound is made for it); `nr` then names which (`missed` or `retrieval
  unknown`, `cube.systems.bounds.not_made_reason`), `meta["not_made"]` says what each means, and
  the page shows it in place of the answer (not a failure).

`docs` holds per document id its item name and text. Everything is built from whole columns
(`tolist`, `unique`), not element by element: at the paper's scale (6,111 questions x 3 sets x 4
dimensions x 4 judges) the judgments are most of the report step's time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any, Literal, NotRequired, TypedDict

import pandas as pd

from cube.config.schema import parse_doc_list
from cube.method.tables import not_made_reason

SETS = ("zero", "rag", "full")


def cell_text(v: Any) -> str:
    """A cell as text: missing (None, NaN) as the empty string."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return str(v)


def _categories(
    qi: pd.DataFrame, corpus: pd.DataFrame | None
) -> tuple[dict[Any, str], dict[Any, str]]:
    """Per question id, its style and its gold document's department, named exactly as the
    per-category report names them (`cube.diagnose.retrieval.question_groups`, without its
    near-duplicate family sizes, which cost seconds at paper scale and the browser does not use)."""
    style = (
        (
            qi["style"].fillna("").replace("", "(llm or file)")
            if "style" in qi
            else pd.Series("(none)", index=qi.index)
        )
        .astype(str)
        .to_dict()
    )
    if corpus is None or not len(corpus) or "doc_id" not in corpus or "doc_id" not in qi:
        return style, {}
    gold = qi["doc_id"].astype(str)
    if "department" not in corpus:
        return style, dict.fromkeys(qi.index, "(none)")
    dept = corpus.drop_duplicates("doc_id").set_index(
        corpus.drop_duplicates("doc_id")["doc_id"].astype(str)
    )["department"]
    return style, gold.map(dept).fillna("").replace("", "(none)").astype(str).to_dict()


Judgment = list[Any]  # [set index, judge index, dimension index, score or None, raw, error]
Marks = list[list[Any]]  # a (question, system)'s comparisons or the screen's flags, as shown


class BrowserRecord(TypedDict):
    """One (question, system) of the browser, keyed by the short names the page's script reads
    (see the module docstring)."""

    q: str
    s: int
    d: str
    t: str
    st: str
    dp: str
    rk: int | None
    r: list[str]
    a: list[str]
    e: list[str]
    j: list[Judgment]
    c: NotRequired[Marks]
    g: NotRequired[Marks]
    nm: NotRequired[list[int]]
    nr: NotRequired[str]


class BrowserMeta(TypedDict):
    """The browser's index: the names the records' indexes point into, the filters' choices and
    the counts."""

    systems: list[str]
    judges: list[str]
    dimensions: list[str]
    sets: list[str]
    styles: list[str]
    departments: list[str]
    n_records: int
    n_judgments: int
    not_made: dict[str, str]


_Facts = tuple[dict[Any, Any], dict[Any, Any], dict[Any, Any]]  # text, style, department
_SET_INDEX = {v: i for i, v in enumerate(SETS)}
NOT_MADE = {
    "missed": "not made: the system missed the gold document, and no estimator reads a missed "
    "question's zero and full answers (W and CuBE use the retrieved questions; the judge gate a "
    "seeded sample up to analysis.gate_bounds_questions); analysis.bounds_of_missed: all makes "
    "them",
    "retrieval unknown": "not made: the system's retrieval of this question is unknown (its call "
    "failed or its rank is undetermined), so the question is left out of every estimator and the "
    "gate",
}


def _names(column: pd.Series) -> list[str]:
    """The column's distinct values as text, in order of first appearance (`unique`, without a
    Python loop over every judgment)."""
    return [str(v) for v in column.astype(str).unique()]


def _question_facts(questions: pd.DataFrame | None, corpus: pd.DataFrame | None) -> _Facts:
    """Per question id its text, style and gold department (empty maps without questions)."""
    if questions is None or not len(questions):
        return {}, {}, {}
    qi = questions.drop_duplicates("question_id").set_index("question_id")
    qtext = qi["question"].to_dict() if "question" in qi else {}
    return (qtext, *_categories(qi, corpus))


def _column_or_blank(table: pd.DataFrame, column: str) -> pd.Series:
    """The table's `column`, or empty text on its index when it has none."""
    return table[column] if column in table else pd.Series("", index=table.index)


def _documents(corpus: pd.DataFrame | None) -> dict[str, list[str]]:
    """Per document id `[item name, text]` (empty without a corpus of ids)."""
    if corpus is None or not len(corpus) or "doc_id" not in corpus:
        return {}
    ci = corpus.drop_duplicates("doc_id").set_index("doc_id")
    names = _column_or_blank(ci, "item_name").tolist()
    texts = _column_or_blank(ci, "text").tolist()
    return {
        str(k): [cell_text(n), cell_text(t)] for k, n, t in zip(ci.index, names, texts, strict=True)
    }


def _score_or_none(v: float) -> float | None:
    """A score, or None for NaN (JSON has no NaN)."""
    return None if v != v else v


def _judgments(
    sc: pd.DataFrame, judges: list[str], dims: list[str]
) -> dict[tuple[str, str], list[Judgment]]:
    """Per (question, system) its judgments `[set, judge, dimension, score, raw, error]`, the
    first three as indexes into `SETS`, `judges` and `dims` (set -1 when not one of `SETS`)."""
    jidx, didx, sidx = ({v: i for i, v in enumerate(x)} for x in (judges, dims, SETS))
    lists = [
        sc[c].astype(str).tolist() for c in ("question_id", "system", "set", "judge", "dimension")
    ]
    # plain lists (a string column's own `tolist`, not element by element through `object`)
    lists += [sc["score"].astype(float).tolist()]
    lists += [_column_or_blank(sc, c).tolist() for c in ("raw", "error")]
    judg: dict[tuple[str, str], list[Judgment]] = {}
    for q, s, set_, j, d, v, raw, err in zip(*lists, strict=True):
        judg.setdefault((q, s), []).append(
            [
                sidx.get(set_, -1),
                jidx[j],
                didx[d],
                _score_or_none(v),
                cell_text(raw),
                cell_text(err),
            ]
        )
    return judg


def _retrieved_rank(row: Any) -> int | None:
    """The rag answer's rank of its gold document; None when retrieval failed (or is unknown)."""
    ok = getattr(row, "retrieval_ok", True)
    return int(row.rank) if not pd.isna(ok) and bool(ok) else None


def _new_record(
    row: Any,
    key: tuple[str, str],
    systems: list[str],
    judgments: dict[tuple[str, str], list[Judgment]],
    facts: _Facts,
) -> BrowserRecord:
    """The record of the answer row's (question, system), its answers still empty."""
    qtext, qstyle, qdept = facts
    qid = row.question_id
    return {
        "q": key[0],
        "s": systems.index(key[1]),
        "d": cell_text(getattr(row, "doc_id", "")),
        "t": cell_text(qtext.get(qid, "")),
        # as the category report names a question it cannot place
        "st": cell_text(qstyle.get(qid, "(unknown)" if qstyle else "")),
        "dp": cell_text(qdept.get(qid, "(unknown)" if qdept else "")),
        "rk": None,
        "r": [],
        "a": ["", "", ""],
        "e": ["", "", ""],
        "j": judgments.get(key, []),
    }


def _add_answer(rec: BrowserRecord, row: Any) -> None:
    """The answer row's text and error into its set's place; the rag set's retrieval too."""
    i = _SET_INDEX.get(str(row.set))
    if i is None:
        return
    rec["a"][i] = cell_text(getattr(row, "answer", ""))
    rec["e"][i] = cell_text(getattr(row, "error", ""))
    if row.set == "rag":
        rec["rk"] = _retrieved_rank(row)
        rec["r"] = parse_doc_list(getattr(row, "retrieved_doc_ids", None))


def _records(
    answers: pd.DataFrame,
    systems: list[str],
    judgments: dict[tuple[str, str], list[Judgment]],
    facts: _Facts,
) -> dict[tuple[str, str], BrowserRecord]:
    """One record per (question, system) of the answers, holding its three sets' answers."""
    recs: dict[tuple[str, str], BrowserRecord] = {}
    for row in answers.itertuples(index=False):
        key = (str(row.question_id), str(row.system))
        if key not in recs:
            recs[key] = _new_record(row, key, systems, judgments, facts)
        _add_answer(recs[key], row)
    _mark_not_made(recs, answers)
    return recs


def _mark_not_made(recs: dict[tuple[str, str], BrowserRecord], answers: pd.DataFrame) -> None:
    """`nm` and `nr` of the records with a bound not made: a missed question's outside the gate's
    sample, or one of unknown retrieval (`not_made_reason` of its rag row)."""
    rag = answers[answers["set"] == "rag"]
    ok = dict(
        zip(
            zip(rag["question_id"].astype(str), rag["system"].astype(str), strict=True),
            rag["retrieval_ok"] if "retrieval_ok" in rag else [True] * len(rag),
            strict=True,
        )
    )
    made = set(
        zip(
            answers["question_id"].astype(str),
            answers["system"].astype(str),
            answers["set"],
            strict=True,
        )
    )
    for key, rec in recs.items():
        missing = [i for i, s in enumerate(SETS) if s != "rag" and (*key, s) not in made]
        if missing:
            rec["nm"] = missing
            rec["nr"] = not_made_reason(ok.get(key, False))


def _mark(
    recs: dict[tuple[str, str], BrowserRecord],
    field: Literal["c", "g"],
    marks: dict[tuple[str, str], Marks] | None,
    shown: Callable[[list[list[Any]]], list[list[Any]]],
) -> None:
    """Set `field` of the records `marks` names to `shown(their marks)` (marks of no record are
    left out)."""
    for key, m in (marks or {}).items():
        if key in recs:
            recs[key][field] = shown(m)


def _flag_marks(marks: list[list[Any]]) -> list[list[Any]]:
    """The screen's flags `[set, kinds, spans]` with the set as an index into `SETS`."""
    return [[_SET_INDEX.get(m[0], -1), cell_text(m[1]), cell_text(m[2])] for m in marks]


def _present(records: list[BrowserRecord], field: Literal["st", "dp"]) -> list[str]:
    """The records' distinct non-empty values of `field`, sorted (the filter's choices)."""
    return sorted({r[field] for r in records if r[field]})


def _frame(
    answers: pd.DataFrame,
    scores: pd.DataFrame,
    questions: pd.DataFrame | None,
    corpus: pd.DataFrame | None,
    changes: dict[tuple[str, str], Marks] | None,
    flagged: dict[tuple[str, str], Marks] | None,
    with_judgments: bool = False,
) -> tuple[BrowserMeta, list[BrowserRecord], dict[str, list[str]]]:
    """(meta, records, docs); every record's judgments empty (`j` is []) unless `with_judgments`
    (the whole-table build, `build_records`; the chunked one fills them a chunk at a time)."""
    systems = _names(answers["system"])
    judges = sorted(scores["judge"].astype(str).unique()) if len(scores) else []
    dims = _names(scores["dimension"]) if len(scores) else []
    judgments = {}
    if with_judgments:
        sc = scores.assign(score=pd.to_numeric(scores["score"], errors="coerce"))
        judgments = _judgments(sc, judges, dims)
    recs = _records(answers, systems, judgments, _question_facts(questions, corpus))
    _mark(recs, "c", changes, lambda m: m)
    _mark(recs, "g", flagged, _flag_marks)
    records = sorted(recs.values(), key=lambda r: (r["q"], r["s"]))
    meta: BrowserMeta = {
        "systems": systems,
        "judges": judges,
        "dimensions": dims,
        "sets": list(SETS),
        "styles": _present(records, "st"),
        "departments": _present(records, "dp"),
        "n_records": len(records),
        "n_judgments": int(len(scores)),
        "not_made": NOT_MADE,
    }
    return meta, records, _documents(corpus)


def _codes(column: pd.Series) -> tuple[Any, pd.Index]:
    """The column's values as integer codes (-1 for a missing one) and the text each stands for:
    a category column's own codes, another's `factorize`."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return column.cat.codes.to_numpy(), pd.Index(column.cat.categories.astype(str))
    codes, values = pd.factorize(column.astype(str))
    return codes, pd.Index(values)


def _record_of_rows(scores: pd.DataFrame, records: list[BrowserRecord], systems: list[str]) -> Any:
    """Per score row the position of its (question, system) in `records` (-1: no record), from
    the columns' codes (`factorize`), without a Python value per row."""
    import numpy as np

    qcode, qs = _codes(scores["question_id"])
    scode, ss = _codes(scores["system"])
    lut = np.full((len(qs) + 1, len(ss) + 1), -1, dtype=np.int64)  # the last row/column: absent
    qi = qs.get_indexer([r["q"] for r in records])
    si = ss.get_indexer([systems[r["s"]] for r in records])
    lut[qi, si] = np.arange(len(records))  # a record without score rows lands in the last row
    lut[-1, :] = lut[:, -1] = -1
    return lut[qcode, scode]


def record_chunks(
    answers: pd.DataFrame,
    scores: pd.DataFrame,
    questions: pd.DataFrame | None = None,
    corpus: pd.DataFrame | None = None,
    changes: dict[tuple[str, str], Marks] | None = None,
    flagged: dict[tuple[str, str], Marks] | None = None,
    *,
    size: int = 100,
) -> tuple[BrowserMeta, Iterator[list[BrowserRecord]], dict[str, list[str]]]:
    """`build_records`' data with the records `size` at a time, each chunk's judgments made
    only when it is reached and emptied again when the next one is asked for: the judgments are
    never all Python values at once (at the paper's scale they were most of the report step's
    memory). The same meta and docs as `build_records`, and its records in the same order with
    the same judgments in the same order (the score rows' order within a record)."""
    import numpy as np

    meta, records, docs = _frame(answers, scores, questions, corpus, changes, flagged)
    sidx = {v: i for i, v in enumerate(SETS)}
    jidx = {v: i for i, v in enumerate(meta["judges"])}
    didx = {v: i for i, v in enumerate(meta["dimensions"])}
    pos = _record_of_rows(scores, records, meta["systems"]) if len(scores) else np.zeros(0, int)
    order = np.argsort(pos, kind="stable")  # rows grouped by record, each in the rows' order
    order = order[pos[order] >= 0]
    starts = np.searchsorted(pos[order], np.arange(len(records) + 1))
    score = (
        pd.to_numeric(scores["score"], errors="coerce")
        if len(scores)
        else pd.Series([], dtype=float)
    )
    # every row's set, judge and dimension as its index, and its score, once for the table (a few
    # MB of numbers): per chunk, text columns taken and looked up row by row were half the
    # browser's CPU at the paper's scale (293k judgments)
    set_at = _indices(scores["set"], sidx, -1) if len(scores) else np.zeros(0, int)
    judge_at = _indices(scores["judge"], jidx) if len(scores) else np.zeros(0, int)
    dim_at = _indices(scores["dimension"], didx) if len(scores) else np.zeros(0, int)
    score_at = score.astype(float).to_numpy()

    def chunks() -> Iterator[list[BrowserRecord]]:
        for i in range(0, len(records), size):
            part = records[i : i + size]
            rows = order[starts[i] : starts[min(i + size, len(records))]]
            cols = [a[rows].tolist() for a in (pos, set_at, judge_at, dim_at, score_at)]
            cols += [_column_or_blank(scores, c).take(rows).tolist() for c in ("raw", "error")]
            for p, set_, j, d, v, raw, err in zip(*cols, strict=True):
                records[p]["j"].append(
                    [set_, j, d, None if v != v else v, cell_text(raw), cell_text(err)]
                )
            yield part
            for r in part:
                r["j"] = []

    return meta, chunks(), docs


def _indices(column: pd.Series, index: dict[str, int], missing: int | None = None) -> Any:
    """Each value's index (as text, `astype(str)`, in `index`): `missing` for one not there, or
    KeyError when `missing` is None. The distinct values are looked up, not every row's text (293k
    strings at the paper's scale: +30 MB at the runner's peak)."""
    import numpy as np

    codes, uniques = pd.factorize(column, use_na_sentinel=False)
    found = []
    for name in pd.Series(uniques, dtype=column.dtype).astype(str).tolist():
        at = index.get(name, missing)
        if at is None:
            raise KeyError(name)
        found.append(at)
    return np.asarray(found, dtype=np.int32)[codes]  # a few judges: 1 MB, not every text


def build_records(
    answers: pd.DataFrame,
    scores: pd.DataFrame,
    questions: pd.DataFrame | None = None,
    corpus: pd.DataFrame | None = None,
    changes: dict[tuple[str, str], Marks] | None = None,
    flagged: dict[tuple[str, str], Marks] | None = None,
) -> tuple[BrowserMeta, list[BrowserRecord], dict[str, list[str]]]:
    """(meta, records, docs): the browser's data, plain JSON-able values. `changes`: per
    (question, system) the comparisons where it is a regression or improvement (`run_changes`);
    `flagged`: per (question, system) its answers holding text addressed to a grader, `[set,
    kinds, spans]` (`screen_flags`)."""
    return _frame(answers, scores, questions, corpus, changes, flagged, with_judgments=True)
