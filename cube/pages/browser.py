"""The judgment browser: `report/judgments.html`, every judgment of a run (issue 13 item 5).

A static, self-contained page (no server, no CDN): the page itself holds only the layout and a
small hand-written script; the data sit next to it in `report/judgments/`, as JavaScript files
(`index.js`, then `chunk-0000.js`, ...) loaded one after the other with `<script>` tags, which
work from `file://` where `fetch` of a JSON file does not. The first chunk is rendered as soon
as it arrives, so the page is usable before the whole run (at paper scale 6,111 questions x 3
sets x 4 dimensions x 4 judges) has loaded; filters then apply to everything loaded.

One record per question and system (built by `cube.pages.browser_records`): question, style,
gold document (id, item name, text), rank and retrieved list, the zero / rag / full answers, and
every judgment `[set, judge, dimension, score, raw reply, failure reason]`. All text is inserted
with `textContent`, never as HTML, so a `<script>` in an answer stays text; the data files are
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
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pandas as pd

from cube.config.runpaths import RunPaths
from cube.config.sheets import read_guarded_csv
from cube.pages.browser_records import cell_text, record_chunks

CHUNK = 100  # records per data file (the first one is all the first render waits for)
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
        v = cell_text(row.get(column))
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
        return link(target, system=system, set="rag", **{by: cell_text(row.get(by))})

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
# of the questions and the corpus, what the records and the documents show (the corpus' other
# columns, e.g. its source fields, are not shown)
QUESTION_COLUMNS = ("question_id", "question", "style", "doc_id")
CORPUS_COLUMNS = ("doc_id", "item_name", "text", "department")


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
    # sorted: a set's order changes with each process's string hashing, and so did the files' bytes
    return {d: (docs[d] if d in gold else [docs[d][0], ""]) for d in sorted(used) if d in docs}


def _write_chunks(
    folder: Path, chunks: Iterable[list[dict[str, Any]]], docs: dict[str, Any]
) -> list[str]:
    """Write each chunk of records as one data file as it comes (at least one file, even for
    none), replacing the chunks of an earlier run; their file names, in order."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("chunk-*.js"):
        old.unlink()
    names: list[str] = []
    for part in chunks:
        name = f"chunk-{len(names):04d}.js"
        (folder / name).write_text(
            f"CUBE_CHUNK({len(names)},{_js({'rows': part, 'docs': _chunk_docs(part, docs)})});\n",
            encoding="utf-8",
        )
        names.append(name)
    if not names:
        (folder / "chunk-0000.js").write_text(
            f"CUBE_CHUNK(0,{_js({'rows': [], 'docs': {}})});\n", encoding="utf-8"
        )
        names.append("chunk-0000.js")
    return names


def _read_scores(path: Path) -> pd.DataFrame:
    """The scores' `SCORE_COLUMNS` (those it has), the repeated names as categories: a Python
    string per judgment is made only for the chunk being written (`record_chunks`)."""
    import pyarrow.parquet as pq

    have = set(pq.read_schema(path).names)
    cols = [c for c in SCORE_COLUMNS if c in have]
    keys = [c for c in ("question_id", "system", "set", "judge", "dimension") if c in have]
    return pq.read_table(path, columns=cols, read_dictionary=keys).to_pandas()


def write_browser(run_paths: RunPaths) -> Path | None:
    """Write `report/judgments.html` and its data files; None when the run has no scores yet.
    The records are built and written `CHUNK` at a time (`record_chunks`)."""
    paths = run_paths
    if not (paths.data_file("answers").exists() and paths.data_file("scores").exists()):
        return None

    def load(name: str, columns: tuple[str, ...] | None = None) -> pd.DataFrame | None:
        path = paths.data_file(name)
        return _read_columns(path, columns) if path.exists() else None

    meta, chunks, docs = record_chunks(
        load("answers", ANSWER_COLUMNS),
        _read_scores(paths.data_file("scores")),
        load("questions", QUESTION_COLUMNS),
        load("corpus", CORPUS_COLUMNS),
        run_changes(paths.root),
        screen_flags(paths.root),
        size=CHUNK,
    )
    folder = paths.report / "judgments"
    names = _write_chunks(folder, chunks, docs)
    (folder / "index.js").write_text(
        f"CUBE_INDEX({_js({**meta, 'chunks': names})});\n", encoding="utf-8"
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
