"""The judgment browser: `report/judgments.html`, every judgment of a run (issue 13 item 5).

A static, self-contained page (no server, no CDN): the page itself holds only the layout and a
small hand-written script; the data sit next to it in `report/judgments/`, as JavaScript files
(`index.js`, then `chunk-0000.js`, ...) loaded one after the other with `<script>` tags, which
work from `file://` where `fetch` of a JSON file does not. The first chunk is rendered as soon
as it arrives, so the page is usable before the whole run (at paper scale 6,111 questions x 3
sets x 4 dimensions x 4 judges) has loaded; filters then apply to everything loaded.

One record per question and system: question, style, gold document (id, item name, text),
rank and retrieved list, the zero / rag / full answers, and every judgment
`[set, judge, dimension, score, raw reply, failure reason]`. All text is inserted with
`textContent`, never as HTML, so a `<script>` in an answer stays text; the data files are
JSON, with `<`, `>` and `&` escaped as `\\u003c` ... so no string can close a script tag.

Filters (also readable from the URL hash, e.g. `#judge=rubric-strict&min=3&max=6`): system,
set, judge, dimension, style, department, retrieved or not, failed judgments only, score range,
text and exact question ids (`q`, repeatable); sort by question, rank or the lowest / highest
matching score. Style and department are the categories of the per-category report
(`cube.diagnose.retrieval.question_groups`), so a category row links to exactly its questions.

`link(**filters)` builds a link into the browser (filters in the hash, percent-encoded; escape
the link when writing it into HTML). Links are relative, for the folder the linking page is in:
`FROM_PAGES` (`../report/judgments.html`) works from the executed notebooks (`notebooks/`), and
their HTML exports (`report/`, `report/code/`) rebase it (`rebase_links`, called by
`cube.pages.publish.export_html`) to stay inside the report folder; `FROM_INDEX` from
`report/index.html`, `FROM_RUN_COMPARE` from a run's comparison pages (`compare/<a>__vs__<b>/`);
`href_from(folder, run_root)` computes one for any other folder (e.g. `outputs/compare/...` to each
side's run). `linked_questions` and `linked_categories` display a table with its question ids or
category values linked (the CSV keeps the raw values).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pandas as pd

from cube.config.runpaths import RunPaths
from cube.config.schema import parse_doc_list
from cube.config.sheets import read_guarded_csv

CHUNK = 100  # records per data file (the first one is all the first render waits for)
SETS = ("zero", "rag", "full")
PAGE = "judgments.html"
FROM_PAGES = f"../report/{PAGE}"  # notebooks/*.ipynb, report/*.html and report/code/*.html alike
FROM_INDEX = PAGE
FROM_RUN_COMPARE = f"../../report/{PAGE}"
# The hash keys the page reads (see the template's fromHash); `q` may repeat.
FILTERS = (
    "system",
    "set",
    "judge",
    "dimension",
    "style",
    "department",
    "retrieved",
    "change",
    "grader",
    "failed",
    "min",
    "max",
    "text",
    "sort",
    "q",
)


def link(target: str = FROM_PAGES, **filters: Any) -> str:
    """`target#key=value&...` opening the browser with these filters (keys: `FILTERS`; a list
    value repeats its key; None is left out). Values are percent-encoded; escape the result
    when writing it into HTML."""
    unknown = sorted(set(filters) - set(FILTERS))
    if unknown:
        raise ValueError(
            f"browser link: unknown filter(s) {unknown}; expected some of {list(FILTERS)}"
        )
    parts = []
    for key in FILTERS:
        value = filters.get(key)
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if v is not None:
                parts.append(f"{key}={quote(str(v), safe='')}")
    return f"{target}#{'&'.join(parts)}" if parts else target


def rebase_links(page_html: str, up: str) -> str:
    """A notebook's HTML export with its run-relative links (`../report/...`, `../compare/...`:
    right for `notebooks/`) rebased for a page `up` below `report/` ("" for `report/*.html`,
    "../" for `report/code/*.html`): links into the report stay inside the report folder."""
    return re.sub(
        r'href="\.\./(report/)?',
        lambda m: f'href="{up}' if m.group(1) else f'href="{up}../',
        page_html,
    )


def href_from(folder: str | Path, run_root: str | Path) -> str:
    """The relative link from a page in `folder` to the browser of the run at `run_root`."""
    rel = os.path.relpath(Path(run_root).resolve() / "report" / PAGE, Path(folder).resolve())
    return Path(rel).as_posix()


def linked_questions(
    table: pd.DataFrame,
    system: str | None = None,
    *,
    column: str = "question_id",
    sep: str | None = None,
    target: str = FROM_PAGES,
    set_: str | None = "rag",
) -> Any:
    """`table` displayed with the question ids of `column` linked to their records in the browser
    (of `system`, on the `set_` judgments); `sep`: the cell holds several ids joined by it (as
    `cube.diagnose.failures.pattern_table`'s `examples`, sep ", ")."""
    from cube.pages.display import table as shown

    def ids(row: dict[str, Any]) -> list[tuple[str, str]]:
        v = _text(row.get(column))
        qs = [x.strip() for x in v.split(sep.strip() or sep)] if sep else [v]
        return [(q, link(target, system=system, set=set_, q=q)) for q in qs if q]

    return shown(table, getattr(table, "_cube_digits", 2) or 2, links={column: ids})


def linked_categories(
    table: pd.DataFrame, by: str, system: str | None = None, *, target: str = FROM_PAGES
) -> Any:
    """A per-category table (`cube.diagnose.categories.category_report`, `by` = style or department)
    displayed with each category linked to its questions' rag judgments in the browser. A row with
    0 `questions` (a category only refusal questions have: "(not in corpus)", the "refusal" style)
    has no rag judgment to show: its category is not linked."""
    from cube.pages.display import table as shown

    if by not in ("style", "department"):
        raise ValueError(
            f"linked_categories: the browser filters by style or department, not {by!r}"
        )

    def href(row: dict[str, Any]) -> str | None:
        n = pd.to_numeric(pd.Series([row.get("questions")]), errors="coerce").iloc[0]
        if "questions" in row and not (n > 0):
            return None
        return link(target, system=system, set="rag", **{by: _text(row.get(by))})

    return shown(table, getattr(table, "_cube_digits", 2) or 2, links={by: href})


def _js(obj: Any) -> str:
    s = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (
        s.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _text(v: Any) -> str:
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


_Facts = tuple[dict[Any, Any], dict[Any, Any], dict[Any, Any]]  # text, style, department
_SET_INDEX = {v: i for i, v in enumerate(SETS)}


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


def _documents(corpus: pd.DataFrame | None) -> dict[str, Any]:
    """Per document id `[item name, text]` (empty without a corpus of ids)."""
    if corpus is None or not len(corpus) or "doc_id" not in corpus:
        return {}
    ci = corpus.drop_duplicates("doc_id").set_index("doc_id")
    names = _column_or_blank(ci, "item_name").tolist()
    texts = _column_or_blank(ci, "text").tolist()
    return {str(k): [_text(n), _text(t)] for k, n, t in zip(ci.index, names, texts, strict=True)}


def _score_or_none(v: float) -> float | None:
    """A score, or None for NaN (JSON has no NaN)."""
    return None if v != v else v


def _judgments(
    sc: pd.DataFrame, judges: list[str], dims: list[str]
) -> dict[tuple[str, str], list[list[Any]]]:
    """Per (question, system) its judgments `[set, judge, dimension, score, raw, error]`, the
    first three as indexes into `SETS`, `judges` and `dims` (set -1 when not one of `SETS`)."""
    jidx, didx, sidx = ({v: i for i, v in enumerate(x)} for x in (judges, dims, SETS))
    lists = [
        sc[c].astype(str).tolist() for c in ("question_id", "system", "set", "judge", "dimension")
    ]
    # plain lists (a string column's own `tolist`, not element by element through `object`)
    lists += [sc["score"].astype(float).tolist()]
    lists += [_column_or_blank(sc, c).tolist() for c in ("raw", "error")]
    judg: dict[tuple[str, str], list[list[Any]]] = {}
    for q, s, set_, j, d, v, raw, err in zip(*lists, strict=True):
        judg.setdefault((q, s), []).append(
            [sidx.get(set_, -1), jidx[j], didx[d], _score_or_none(v), _text(raw), _text(err)]
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
    judgments: dict[tuple[str, str], list[list[Any]]],
    facts: _Facts,
) -> dict[str, Any]:
    """The record of the answer row's (question, system), its answers still empty."""
    qtext, qstyle, qdept = facts
    qid = row.question_id
    return {
        "q": key[0],
        "s": systems.index(key[1]),
        "d": _text(getattr(row, "doc_id", "")),
        "t": _text(qtext.get(qid, "")),
        # as the category report names a question it cannot place
        "st": _text(qstyle.get(qid, "(unknown)" if qstyle else "")),
        "dp": _text(qdept.get(qid, "(unknown)" if qdept else "")),
        "rk": None,
        "r": [],
        "a": ["", "", ""],
        "e": ["", "", ""],
        "j": judgments.get(key, []),
    }


def _add_answer(rec: dict[str, Any], row: Any) -> None:
    """The answer row's text and error into its set's place; the rag set's retrieval too."""
    i = _SET_INDEX.get(str(row.set))
    if i is None:
        return
    rec["a"][i] = _text(getattr(row, "answer", ""))
    rec["e"][i] = _text(getattr(row, "error", ""))
    if row.set == "rag":
        rec["rk"] = _retrieved_rank(row)
        rec["r"] = parse_doc_list(getattr(row, "retrieved_doc_ids", None))


def _records(
    answers: pd.DataFrame,
    systems: list[str],
    judgments: dict[tuple[str, str], list[list[Any]]],
    facts: _Facts,
) -> dict[tuple[str, str], dict[str, Any]]:
    """One record per (question, system) of the answers, holding its three sets' answers."""
    recs: dict[tuple[str, str], dict[str, Any]] = {}
    for row in answers.itertuples(index=False):
        key = (str(row.question_id), str(row.system))
        if key not in recs:
            recs[key] = _new_record(row, key, systems, judgments, facts)
        _add_answer(recs[key], row)
    return recs


def _mark(
    recs: dict[tuple[str, str], dict[str, Any]],
    field: str,
    marks: dict[tuple[str, str], list[list[Any]]] | None,
    shown: Callable[[list[list[Any]]], list[list[Any]]],
) -> None:
    """Set `field` of the records `marks` names to `shown(their marks)` (marks of no record are
    left out)."""
    for key, m in (marks or {}).items():
        if key in recs:
            recs[key][field] = shown(m)


def _flag_marks(marks: list[list[Any]]) -> list[list[Any]]:
    """The screen's flags `[set, kinds, spans]` with the set as an index into `SETS`."""
    return [[_SET_INDEX.get(m[0], -1), _text(m[1]), _text(m[2])] for m in marks]


def _present(records: list[dict[str, Any]], field: str) -> list[str]:
    """The records' distinct non-empty values of `field`, sorted (the filter's choices)."""
    return sorted({r[field] for r in records if r[field]})


def build_records(
    answers: pd.DataFrame,
    scores: pd.DataFrame,
    questions: pd.DataFrame | None = None,
    corpus: pd.DataFrame | None = None,
    changes: dict[tuple[str, str], list[list[Any]]] | None = None,
    flagged: dict[tuple[str, str], list[list[Any]]] | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    """(meta, records, docs): the browser's data, plain JSON-able values. `changes`: per
    (question, system) the comparisons where it is a regression or improvement (`run_changes`);
    `flagged`: per (question, system) its answers holding text addressed to a grader, `[set,
    kinds, spans]` (`screen_flags`)."""
    systems = _names(answers["system"])
    judges = sorted(scores["judge"].astype(str).unique()) if len(scores) else []
    dims = _names(scores["dimension"]) if len(scores) else []
    sc = scores.assign(score=pd.to_numeric(scores["score"], errors="coerce"))
    facts = _question_facts(questions, corpus)
    recs = _records(answers, systems, _judgments(sc, judges, dims), facts)
    _mark(recs, "c", changes, lambda m: m)
    _mark(recs, "g", flagged, _flag_marks)
    records = sorted(recs.values(), key=lambda r: (r["q"], r["s"]))
    meta = {
        "systems": systems,
        "judges": judges,
        "dimensions": dims,
        "sets": list(SETS),
        "styles": _present(records, "st"),
        "departments": _present(records, "dp"),
        "n_records": len(records),
        "n_judgments": int(len(sc)),
    }
    return meta, records, _documents(corpus)


def run_changes(root: Path) -> dict[tuple[str, str], list[list[Any]]]:
    """Regressions and improvements of the run's comparisons (`compare/*/`, notebook 09), per
    (question, system B): `[[label, 'regression' | 'improvement', jury score change], ...]`."""
    from cube.diagnose.regressions import ranked

    out: dict[tuple[str, str], list[list[Any]]] = {}
    for f in sorted(root.glob("compare/*/tables/question_changes.csv")):
        head = json.loads((f.parent.parent / "comparison.json").read_text(encoding="utf-8"))
        ch = read_guarded_csv(f, dtype={"question_id": str, "retrieval_change": str})
        for kind in ("regression", "improvement"):
            for _, r in ranked(ch, f"{kind}s", None).iterrows():
                d = None if pd.isna(r["delta"]) else round(float(r["delta"]), 3)
                out.setdefault((str(r["question_id"]), str(head["b"])), []).append(
                    [f"vs {head['a']}", kind, d, str(r["retrieval_change"])]
                )
    return out


def screen_flags(root: Path) -> dict[tuple[str, str], list[list[Any]]]:
    """The answers stage 03's screen flagged (`results.json` → `screen.flagged_answers`, issue 38),
    per (question, system): `[[set, kinds, spans], ...]`; empty before stage 03."""
    path = root / "results.json"
    if not path.exists():
        return {}
    rows = (json.loads(path.read_text(encoding="utf-8")).get("screen") or {}).get(
        "flagged_answers"
    ) or []
    out: dict[tuple[str, str], list[list[Any]]] = {}
    for r in rows:
        out.setdefault((str(r["question_id"]), str(r["system"])), []).append(
            [str(r["set"]), str(r["kinds"]), str(r["spans"])]
        )
    return out


# What `build_records` reads of the answers and scores tables: the call accounting, models, details
# and ids (14 of the scores' 22 columns) were most of the report step's memory at the paper's scale
SCORE_COLUMNS = ("question_id", "system", "set", "judge", "dimension", "score", "raw", "error")
ANSWER_COLUMNS = (
    "question_id",
    "system",
    "set",
    "doc_id",
    "answer",
    "error",
    "rank",
    "retrieval_ok",
    "retrieved_doc_ids",
)


def _read_columns(path: Path, columns: tuple[str, ...] | None) -> pd.DataFrame:
    """The parquet file's `columns` that it has (all of them: None)."""
    if columns is None:
        return pd.read_parquet(path)
    import pyarrow.parquet as pq

    have = set(pq.read_schema(path).names)
    return pd.read_parquet(path, columns=[c for c in columns if c in have])


def _chunk_docs(part: list[dict[str, Any]], docs: dict[str, Any]) -> dict[str, Any]:
    """The documents a chunk's records name: a gold one's name and text (shown), a retrieved
    one's name only."""
    gold = {r["d"] for r in part}
    used = gold | {d for r in part for d in r["r"]}
    return {d: (docs[d] if d in gold else [docs[d][0], ""]) for d in used if d in docs}


def _write_chunks(folder: Path, records: list[dict[str, Any]], docs: dict[str, Any]) -> list[str]:
    """Write the records `CHUNK` at a time (at least one file, even for none), replacing the
    chunks of an earlier run; their file names, in order."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("chunk-*.js"):
        old.unlink()
    chunks = []
    for i in range(0, max(len(records), 1), CHUNK):
        part = records[i : i + CHUNK]
        name = f"chunk-{len(chunks):04d}.js"
        (folder / name).write_text(
            f"CUBE_CHUNK({len(chunks)},{_js({'rows': part, 'docs': _chunk_docs(part, docs)})});\n",
            encoding="utf-8",
        )
        chunks.append(name)
    return chunks


def write_browser(run_paths: RunPaths) -> Path | None:
    """Write `report/judgments.html` and its data files; None when the run has no scores yet."""
    paths = run_paths
    if not (paths.data_file("answers").exists() and paths.data_file("scores").exists()):
        return None

    def load(name: str, columns: tuple[str, ...] | None = None) -> pd.DataFrame | None:
        path = paths.data_file(name)
        return _read_columns(path, columns) if path.exists() else None

    meta, records, docs = build_records(
        load("answers", ANSWER_COLUMNS),
        load("scores", SCORE_COLUMNS),
        load("questions"),
        load("corpus"),
        run_changes(paths.root),
        screen_flags(paths.root),
    )
    folder = paths.report / "judgments"
    chunks = _write_chunks(folder, records, docs)
    (folder / "index.js").write_text(
        f"CUBE_INDEX({_js({**meta, 'chunks': chunks})});\n", encoding="utf-8"
    )
    page = paths.report / "judgments.html"
    page.write_text(
        (Path(__file__).parent / "templates" / "judgments.html").read_text(encoding="utf-8"),
        encoding="utf-8",
    )
    return page


def page_size(report_dir: Path) -> dict[str, int]:
    """Bytes of the page, of its first data chunk and of everything (page + data)."""
    folder = report_dir / "judgments"
    data = sorted(folder.glob("*.js"))
    return {
        "page": (report_dir / "judgments.html").stat().st_size,
        "first_chunk": (folder / "chunk-0000.js").stat().st_size
        if (folder / "chunk-0000.js").exists()
        else 0,
        "index": (folder / "index.js").stat().st_size,
        "total": (report_dir / "judgments.html").stat().st_size
        + sum(p.stat().st_size for p in data),
        "chunks": len(data) - 1,
    }
