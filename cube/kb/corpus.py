"""The knowledge base: loading a user's own, rendering each item as one document, statistics.

A knowledge base is a table of service items (paper 3.2): `doc_id` plus the 18 fields of
`cube.config.schema.CORPUS_FIELDS`. Each item is rendered as ONE document of key-value lines
("label：value", labels from `cube.config.schema.FIELD_LABELS` in the corpus language) and indexed
as one chunk, as the paper decided (3.3). Sources:

- the synthetic demo corpus (`cube.kb.demo.generate_demo_corpus`, a fictional province);
- a user's file: CSV, JSONL, Parquet, Excel, or a folder of TXT files holding one item each
  in the paper's key-value format (file name = doc_id). `corpus.columns` maps field keys
  (`cube.kb.mapping.MAPPABLE`) to the user's column names (or TXT labels); an unmapped key
  falls back to a same-named column, else stays empty. `item_name` is required; `doc_id` is
  derived when absent. Long format (`corpus.group_by`), placeholders (`corpus.empty_values`)
  and unmapped columns (`corpus.extra_columns`) are handled by `cube.kb.mapping`.

Every problem with a user's file is a `CorpusError` that names the file, the row (or line,
or TXT file) and what was expected.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cube.config.params import Params
from cube.config.schema import CORPUS_FIELDS, MAPPABLE
from cube.kb.demo import generate_demo_corpus
from cube.kb.document import (
    CORPUS_COLUMNS,
    CorpusError,
    field_text,
    parse_document,
    render_document,
)
from cube.kb.mapping import DEFAULT_EMPTY_VALUES, JOIN, SERVICE_MERGE_MIN, map_table, sample_items

# Columns a loaded file adds after CORPUS_COLUMNS. `aliases`: optional colloquial names of an item
# (newline-separated), used only by the template question generator's colloquial style; never
# rendered into the document. `parent_region`: the region's parent (a district's city), rendered.
FILE_EXTRA_COLUMNS: tuple[str, ...] = ("aliases", "parent_region")
FORMATS: dict[str, str] = {
    ".csv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".xlsx": "excel",
    ".xlsm": "excel",
    ".xls": "excel",
    ".txt": "txt",
}


# --------------------------------------------------------------------------- readers
def _decode(data: bytes, path: Path, encoding: str, key: str = "corpus.encoding") -> str:
    """The file's text; `key` is the params key that sets `encoding`, named by the error."""
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise CorpusError(
            f"{path}: line {line}: cannot decode as {encoding} ({err.reason}); "
            f"set {key} to the file's encoding (e.g. gbk)"
        ) from None
    except LookupError:
        raise CorpusError(f"{path}: unknown encoding {encoding!r} ({key})") from None


def _read_csv(path: Path, encoding: str, key: str) -> tuple[pd.DataFrame, list[str]]:
    text = _decode(path.read_bytes(), path, encoding, key)
    try:
        df = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        raise CorpusError(
            f"{path}: the file is empty (expected a header row and one row per item)"
        ) from None
    except pd.errors.ParserError as err:
        raise CorpusError(f"{path}: not valid CSV: {err}") from None
    lines = _csv_record_lines(text)
    if len(lines) != len(df):  # the two parsers disagree on the records: say only the row
        return df, [f"row {i + 1}" for i in range(len(df))]
    return df, [f"row {i + 1} (line {n})" for i, n in enumerate(lines)]


def _csv_record_lines(text: str) -> list[int]:
    """The file line on which each data record starts (a quoted cell may span several lines,
    so a record's line is not its index + 2); blank lines, which pandas skips, are skipped."""
    import csv

    reader, starts, end = csv.reader(io.StringIO(text)), [], 0
    try:
        for record in reader:
            if record:
                starts.append(end + 1)
            end = reader.line_num
    except csv.Error:
        return []
    return starts[1:]  # the first record is the header


def _read_jsonl(path: Path, encoding: str, key: str) -> tuple[pd.DataFrame, list[str]]:
    records, where = [], []
    for n, line in enumerate(_decode(path.read_bytes(), path, encoding, key).splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            raise CorpusError(f"{path}: line {n}: not valid JSON ({err.msg})") from None
        if not isinstance(obj, dict):
            raise CorpusError(
                f"{path}: line {n}: expected a JSON object per line, got {type(obj).__name__}"
            )
        records.append(obj)
        where.append(f"line {n}")
    return pd.DataFrame.from_records(records), where


def _read_txt(
    path: Path, encoding: str, extra_labels: Sequence[str]
) -> tuple[pd.DataFrame, list[str]]:
    files = (
        [path]
        if path.is_file()
        else sorted(p for p in path.iterdir() if p.suffix.lower() == ".txt")
    )
    records, where = [], []
    for f in files:
        text = _decode(f.read_bytes(), f, encoding)
        if not text.strip():
            raise CorpusError(f"{f}: the file is empty (expected one item as 'label：value' lines)")
        rec = parse_document(text, str(f), extra_labels)
        records.append({"doc_id": f.stem, **rec})  # a doc_id line in the file wins over the name
        where.append(f"file {f.name}")
    return pd.DataFrame.from_records(records), where


def read_table(
    path: Path,
    fmt: str = "auto",
    *,
    sheet: str | int | None = None,
    encoding: str = "utf-8",
    labels: Sequence[str] = (),
    what: str = "knowledge-base",
    encoding_key: str = "corpus.encoding",
) -> tuple[pd.DataFrame, list[str]]:
    """Read a user's table as raw columns, with a locator ("row 3 (line 4)") per row.

    `what` names the kind of file in error messages ("knowledge-base", "question-set"),
    `encoding_key` the params key an encoding error tells to set ("questions.encoding").
    """
    fmt = _checked_format(path, fmt, what)
    if fmt == "csv":
        df, where = _read_csv(path, encoding, encoding_key)
    elif fmt == "jsonl":
        df, where = _read_jsonl(path, encoding, encoding_key)
    elif fmt == "txt":
        df, where = _read_txt(path, encoding, labels)
    else:
        df, where = _read_binary(path, fmt, sheet)
    if df.empty:
        raise CorpusError(
            f"{path}: the {what} file is empty (expected one row, line or .txt file per item)"
        )
    return df, where


def _sheet_or_first(sheet: str | int | None) -> str | int:
    return 0 if sheet is None else sheet


def _checked_format(path: Path, fmt: str, what: str) -> str:
    """The format to read `path` as (`auto`: by its suffix; a folder is `txt`), or a clear error:
    no such file, an unknown format, a folder in any format but `txt`."""
    if not path.exists():
        raise CorpusError(f"{path}: {what} file or folder not found")
    if fmt == "auto":
        fmt = "txt" if path.is_dir() else FORMATS.get(path.suffix.lower(), "")
        if not fmt:
            raise CorpusError(
                f"{path}: unknown {what} format {path.suffix!r}; expected one of "
                f"{sorted(FORMATS)} or a folder of .txt files (or set corpus.format)"
            )
    if fmt not in set(FORMATS.values()):
        raise CorpusError(
            f"{path}: unknown format {fmt!r}; expected one of {sorted(set(FORMATS.values()))}"
        )
    if path.is_dir() and fmt != "txt":
        raise CorpusError(f"{path}: is a folder; only format 'txt' reads a folder")
    return fmt


def _read_binary(path: Path, fmt: str, sheet: str | int | None) -> tuple[pd.DataFrame, list[str]]:
    """A parquet or Excel file (the sheet given, else the first) and its rows' locators (Excel's:
    the sheet row, under the header)."""
    excel = fmt == "excel"
    if excel and sheet is not None:
        _check_sheet(path, sheet)
    try:
        if fmt == "parquet":
            df = pd.read_parquet(path)
        else:
            df = pd.read_excel(path, sheet_name=_sheet_or_first(sheet), dtype=str)
    except Exception as err:  # pyarrow/openpyxl raise many types; all mean "unreadable"
        at = f" (sheet {sheet!r})" if excel and sheet is not None else ""
        raise CorpusError(
            f"{path}: cannot read as {fmt}{at}: {type(err).__name__}: {err}"
        ) from None
    if excel:
        return df, [f"row {i + 1} (sheet row {i + 2})" for i in range(len(df))]
    return df, [f"row {i + 1}" for i in range(len(df))]


# The largest knowledge-base cell `cube validate` lets pass without a warning: 100,000 characters
# (a long guide is a few thousand; a judge's context window holds far less than this). A larger one
# works, but the run reads, renders, fences and stores it whole in every step: one 50 MB cell took a
# run 469 s and 3.67 GB (issue 38).
CELL_MAX_CHARS = 100_000


def oversized_cells(
    raw: pd.DataFrame, where: Sequence[str], source: str, limit: int = CELL_MAX_CHARS
) -> list[str]:
    """One warning per cell of `raw` (a table as `read_table` returns it, `where` its rows'
    locators) longer than `limit` characters, naming its row and column."""
    out = []
    for col in raw.columns:
        sizes = raw[col].map(lambda v: len(v) if isinstance(v, str | bytes) else 0)
        for i in sizes.index[sizes.to_numpy() > limit]:
            pos = raw.index.get_loc(i)
            out.append(
                f"{source}: {where[pos]}, column {str(col)!r}: a cell of {int(sizes[i]):,} "
                f"characters (over {limit:,}); a run reads, renders and stores it whole in every "
                "step (slow, and memory-hungry): a file pasted by mistake? Trim it or split it "
                "into items"
            )
    return out


class SheetError(CorpusError):
    """`corpus.sheet` names a sheet the workbook does not have (the message lists the ones it
    has)."""


def _check_sheet(path: Path, sheet: str | int) -> None:
    try:
        names = [str(n) for n in pd.ExcelFile(path).sheet_names]
    except Exception:  # unreadable: said by the reader below, with its own cause
        return
    if (isinstance(sheet, int) and not 0 <= sheet < len(names)) or (
        isinstance(sheet, str) and sheet not in names
    ):
        raise SheetError(
            f"{path}: no sheet {sheet!r} (corpus.sheet); the file has {len(names)} sheet(s): "
            + ", ".join(repr(n) for n in names)
            + " (corpus.sheet takes a sheet's name or its number, 0 for the first)"
        )


# --------------------------------------------------------------------------- mapping and loading
def map_columns(
    raw: pd.DataFrame,
    where: Sequence[str],
    columns: Mapping[str, str],
    source: str,
    *,
    group_by: Sequence[str] = (),
    empty_values: Iterable[str] = DEFAULT_EMPTY_VALUES,
    extra_columns: str = "render",
) -> tuple[pd.DataFrame, list[str]]:
    """Apply the mapping (`cube.kb.mapping.map_table`); returns (records, notes).

    Raises:
        CorpusError: every problem found, one per line (file, rows and column named).
    """
    out, problems, notes = map_table(
        raw,
        where,
        columns,
        source,
        group_by=group_by,
        empty_values=empty_values,
        extra_columns=extra_columns,
    )
    if problems or out is None:
        head = (
            f"{source}: {len(problems)} problem(s) with the knowledge base:\n  - "
            if len(problems) > 1
            else ""
        )
        raise CorpusError(head + "\n  - ".join(problems))
    for c in MAPPABLE:  # lists (JSONL cells, grouped materials) become numbered text
        out[c] = [field_text(c, v) for v in out[c]]
    return out, notes


def load_corpus_report(
    path: str | Path,
    *,
    format: str = "auto",
    columns: Mapping[str, str] | None = None,
    sheet: str | int | None = None,
    encoding: str = "utf-8",
    lang: str = "zh",
    group_by: Sequence[str] = (),
    empty_values: Iterable[str] = DEFAULT_EMPTY_VALUES,
    extra_columns: str = "render",
) -> tuple[pd.DataFrame, list[str]]:
    """`load_corpus_file` plus its load notes (grouping, derived ids, placeholders, extra
    columns)."""
    path, columns = Path(path), dict(columns or {})
    raw, where = read_table(
        path, format, sheet=sheet, encoding=encoding, labels=list(columns.values())
    )
    df, notes = map_columns(
        raw,
        where,
        columns,
        str(path),
        group_by=group_by,
        empty_values=empty_values,
        extra_columns=extra_columns,
    )
    df["text"] = [render_document(r, lang, r["extras"]) for r in df.to_dict("records")]
    return df[[*CORPUS_COLUMNS, *FILE_EXTRA_COLUMNS]].copy(), notes


def load_corpus_file(path: str | Path, **options: Any) -> pd.DataFrame:
    """Load a user's knowledge base into the corpus table (`CORPUS_COLUMNS` + `FILE_EXTRA_COLUMNS`).

    Options: `format`, `columns`, `sheet`, `encoding`, `lang` (of the rendered `text`),
    `group_by`, `empty_values`, `extra_columns` (see `load_corpus_report`, `cube.kb.mapping`).

    Raises:
        CorpusError: missing file, unknown format, empty file, undecodable text, unknown field
            keys, missing mapped, grouping or required columns, empty or duplicate doc_ids
            (every mapping problem at once, each naming file and rows).
    """
    return load_corpus_report(path, **options)[0]


def build_corpus(params: Params, base_dir: Path = Path(".")) -> pd.DataFrame:
    """The run's knowledge base: the demo generator or the user's file, then `sample` or `limit`.

    A relative `corpus.path` is resolved against `base_dir` (the params file's folder, say).
    The load notes (and the sampling) are in `df.attrs["load_notes"]`.
    """
    c = params.corpus
    notes: list[str] = []
    if c.source == "demo":
        df = generate_demo_corpus(c.n_items, params.lang, c.family_share, c.seed)
    else:
        path = Path(str(c.path)).expanduser()
        df, notes = load_corpus_report(
            path if path.is_absolute() else Path(base_dir) / path,
            format=c.format,
            columns=c.columns,
            sheet=c.sheet,
            encoding=c.encoding,
            lang=params.lang,
            group_by=c.group_by,
            empty_values=c.empty_values,
            extra_columns=c.extra_columns,
        )
    if c.sample is not None and c.sample < len(df):
        notes.append(
            f"corpus.sample: {c.sample} of {len(df)} items, stratified by {c.sample_by} "
            f"(seed {c.seed})"
        )
        df = sample_items(df, c.sample, c.seed, c.sample_by)
    if c.limit is not None and c.limit < len(df):
        notes.append(f"corpus.limit: the first {c.limit} of {len(df)} items")
        df = df.head(c.limit)
    df = df.reset_index(drop=True)
    df.attrs["load_notes"] = notes
    return df


def export_txt_folder(corpus: pd.DataFrame, folder: str | Path) -> list[Path]:
    """Write each document's `text` to `<folder>/<doc_id>.txt` (the paper's one-file-per-item
    format)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for doc_id, text in zip(corpus["doc_id"], corpus["text"], strict=True):
        p = folder / f"{doc_id}.txt"
        p.write_text(str(text) + "\n", encoding="utf-8")
        paths.append(p)
    return paths


# --------------------------------------------------------------------------- statistics
def corpus_stats(corpus: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Descriptive tables of a knowledge base (for the corpus notebook).

    Returns:
        `overview` (one row: items, families, share_in_families, mean_document_chars,
        synthetic), `by_region` and `by_department` (items per value, most first),
        `field_coverage` (share of non-empty values per field), `field_lengths` (chars:
        mean/median/max over non-empty values), `family_sizes` (families and items by size).
    """
    fields = list(CORPUS_FIELDS)
    filled = corpus[fields].astype(str).apply(lambda s: s.str.strip().ne(""))
    lengths = corpus[fields].astype(str).apply(lambda s: s.str.len()).where(filled)
    fam = corpus.get("family_id", pd.Series("", index=corpus.index)).fillna("").astype(str)
    sizes = fam[fam.ne("")].value_counts()
    synthetic = corpus.get("synthetic", pd.Series(False, index=corpus.index)).astype(bool)
    overview = pd.DataFrame(
        [
            {
                "items": len(corpus),
                "families": int(sizes.size),
                "share_in_families": float(fam.ne("").mean()) if len(corpus) else 0.0,
                "mean_document_chars": float(corpus["text"].astype(str).str.len().mean())
                if len(corpus)
                else 0.0,
                "synthetic": "yes"
                if synthetic.all()
                else "no"
                if not synthetic.any()
                else "partly",
            }
        ]
    )

    def per(col: str) -> pd.DataFrame:
        return corpus[col].astype(str).value_counts().rename_axis(col).reset_index(name="items")

    family_sizes = (
        sizes.value_counts().sort_index().rename_axis("size").reset_index(name="families")
    )
    family_sizes["items"] = family_sizes["size"] * family_sizes["families"]
    return {
        "overview": overview,
        "by_region": per("region"),
        "by_department": per("department"),
        "field_coverage": pd.DataFrame(
            {"field": fields, "non_empty_share": filled.mean().to_numpy()}
        ),
        "field_lengths": pd.DataFrame(
            {
                "field": fields,
                "mean": lengths.mean().to_numpy(),
                "median": lengths.median().to_numpy(),
                "max": lengths.max().to_numpy(),
            }
        ),
        "family_sizes": family_sizes,
    }


def duplicate_table(corpus: pd.DataFrame) -> pd.DataFrame:
    """Groups of documents whose `text` is identical: one row per group (`documents`, `doc_ids`,
    `item_name`).

    Retrieval cannot tell such documents apart: a long-format file loaded without
    `corpus.group_by`, or the same guide published twice.
    """
    text = corpus["text"].astype(str)
    dup = text.duplicated(keep=False)
    rows = [
        {
            "documents": int(text.eq(t).sum()),
            "doc_ids": ", ".join(corpus.loc[text.eq(t), "doc_id"].astype(str)),
            "item_name": str(corpus.loc[text.eq(t), "item_name"].iloc[0]),
        }
        for t in dict.fromkeys(text[dup])
    ]
    return pd.DataFrame(rows, columns=["documents", "doc_ids", "item_name"])


def corpus_structure(corpus: pd.DataFrame) -> dict[str, Any]:
    """Exact duplicates and family structure of a knowledge base, for page 01 and `results.json`.

    Returns:
        `documents`; `duplicate_texts` (documents identical to an earlier one) and
        `duplicate_groups`; `families` (distinct non-empty `family_id`), `documents_in_families`,
        `family_size_min/median/max` (None without families), `families_across_regions` (members in
        more than one region: the same item offered by several regions) and `families_with_variants`
        (more than one item name or variant within one region); signs of a wrong mapping
        (`cube.kb.mapping`'s warnings, computed from the corpus itself so the decision page can show
        them): `documents_merging_services` (a `family_id` or an `item_name` joining
        SERVICE_MERGE_MIN or more services: group_by did not separate them) and
        `documents_named_placeholder` (an item named 无, /, ...).
    """
    text = corpus["text"].astype(str)
    fam = corpus.get("family_id", pd.Series("", index=corpus.index)).fillna("").astype(str)
    members = corpus[fam.ne("")].assign(_fam=fam[fam.ne("")])
    sizes = members["_fam"].value_counts()
    variant = members.get("variant", pd.Series("", index=members.index)).fillna("").astype(str)
    per_region = members.assign(_v=members["item_name"].astype(str) + "\x1f" + variant).groupby(
        ["_fam", "region"]
    )["_v"]
    return {
        "documents": len(corpus),
        "duplicate_texts": int(text.duplicated(keep="first").sum()),
        "duplicate_groups": int(text[text.duplicated(keep=False)].nunique()),
        "families": int(sizes.size),
        "documents_in_families": int(sizes.sum()),
        "family_size_min": int(sizes.min()) if sizes.size else None,
        "family_size_median": float(sizes.median()) if sizes.size else None,
        "family_size_max": int(sizes.max()) if sizes.size else None,
        "families_across_regions": int((members.groupby("_fam")["region"].nunique() > 1).sum())
        if sizes.size
        else 0,
        "families_with_variants": int((per_region.nunique() > 1).groupby(level=0).any().sum())
        if sizes.size
        else 0,
        "documents_merging_services": int(
            (
                fam.str.split(JOIN).map(len).ge(SERVICE_MERGE_MIN)
                | corpus["item_name"].astype(str).str.split(JOIN).map(len).ge(SERVICE_MERGE_MIN)
            ).sum()
        ),
        "documents_named_placeholder": int(
            corpus["item_name"]
            .astype(str)
            .str.strip()
            .str.casefold()
            .isin({v.casefold() for v in DEFAULT_EMPTY_VALUES})
            .sum()
        ),
    }


def load_notes(corpus: pd.DataFrame) -> str:
    """What loading did to the user's file (`build_corpus` notes), one per line."""
    notes = corpus.attrs.get("load_notes") or []
    return "\n".join(notes) if notes else "(no notes: the corpus was used as generated or as read)"


def family_comparison(corpus: pd.DataFrame, family_id: str | None = None) -> pd.DataFrame:
    """For one family of near-duplicates, the fields in which its members differ, side by side.

    Args:
        corpus: the corpus table (needs `family_id`).
        family_id: the family to show; default the first of the largest families.

    Returns:
        One row per differing field (`field`), one column per member (its doc_id); empty
        (only a `field` column) when the corpus has no families.
    """
    fam = corpus.get("family_id", pd.Series("", index=corpus.index)).fillna("").astype(str)
    if family_id is None:
        sizes = fam[fam.ne("")].value_counts(sort=False)
        if sizes.empty:
            return pd.DataFrame(columns=["field"])
        family_id = str(sizes.index[int(np.argmax(sizes.to_numpy()))])
    members = corpus[fam.eq(family_id)]
    if members.empty:
        raise CorpusError(f"family_comparison: no family {family_id!r} in the corpus")
    differing = [f for f in CORPUS_FIELDS if members[f].astype(str).nunique() > 1]
    table = members.set_index("doc_id")[differing].T.rename_axis("field").reset_index()
    table.columns.name = None
    return table
