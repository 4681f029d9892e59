"""The knowledge base: loading a user's own, rendering each item as one document, statistics.

A knowledge base is a table of service items (paper 3.2): `doc_id` plus the 18 fields of
`cube.schema.CORPUS_FIELDS`. Each item is rendered as ONE document of key-value lines
("label：value", labels from `cube.schema.FIELD_LABELS` in the corpus language) and indexed
as one chunk, as the paper decided (3.3). Sources:

- the synthetic demo corpus (`cube.demo_corpus.generate_demo_corpus`, a fictional province);
- a user's file: CSV, JSONL, Parquet, Excel, or a folder of TXT files holding one item each
  in the paper's key-value format (file name = doc_id). `corpus.columns` maps canonical
  fields to the user's column names (or TXT labels); an unmapped field falls back to a
  same-named column, else stays empty. `doc_id` and `item_name` are required.

Every problem with a user's file is a `CorpusError` that names the file, the row (or line,
or TXT file) and what was expected.
"""

from __future__ import annotations

import io
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cube.config import Params
from cube.schema import CORPUS_FIELDS, FIELD_LABELS

CORPUS_COLUMNS: tuple[str, ...] = ("doc_id", *CORPUS_FIELDS, "family_id", "variant", "synthetic", "text")
LIST_FIELDS: tuple[str, ...] = ("procedure", "application_materials")
REQUIRED_FIELDS: tuple[str, ...] = ("doc_id", "item_name")
# `aliases`: optional colloquial names of an item (newline-separated), used only by the template
# question generator's colloquial style; never rendered into the document.
MAPPABLE: tuple[str, ...] = ("doc_id", *CORPUS_FIELDS, "family_id", "variant", "aliases")
FORMATS: dict[str, str] = {
    ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet", ".pq": "parquet",
    ".xlsx": "excel", ".xlsm": "excel", ".xls": "excel", ".txt": "txt",
}
_NUMBERED = re.compile(r"^\s*\d+\s*[.、．)）]")
_TRUE = {"true", "1", "yes", "y", "是", "t"}


class CorpusError(ValueError):
    """A knowledge base that cannot be used: the message names the file, the row and the problem."""


# --------------------------------------------------------------------------- values and rendering
def _numbered(items: Iterable[Any]) -> str:
    parts = [str(x).strip() for x in items if str(x).strip()]
    return "\n".join(f"{i}. {p}" for i, p in enumerate(parts, 1))


def field_text(field: str, value: Any) -> str:
    """A field value as text: lists become numbered lines; NaN/None become ""."""
    if value is None:
        return ""
    if isinstance(value, list | tuple | np.ndarray):
        return _numbered(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return str(int(value)) if value.is_integer() else str(value)
    if value is pd.NA:
        return ""
    text = str(value).strip()
    if field in LIST_FIELDS and "\n" in text:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        if not all(_NUMBERED.match(ln) for ln in lines):  # unnumbered step lists get numbers
            return _numbered(lines)
    return text


def render_document(record: Mapping[str, Any], lang: str) -> str:
    """Render one item as the paper's key-value document ("label：value" per line).

    Empty fields are left out; multi-line values (procedure steps, materials) start on the
    line after their label. `parse_document` reads the result back.

    Args:
        record: a mapping holding some of the 18 canonical fields.
        lang: "zh" (labels 事项名称..., full-width colon) or "en" (Item Name...).
    """
    if lang not in FIELD_LABELS:
        raise ValueError(f"render_document: lang must be one of {sorted(FIELD_LABELS)}, got {lang!r}")
    labels, colon = FIELD_LABELS[lang], "：" if lang == "zh" else ": "
    lines: list[str] = []
    for f in CORPUS_FIELDS:
        text = field_text(f, record.get(f))
        if not text:
            continue
        if "\n" in text:
            lines.append(f"{labels[f]}{colon}".rstrip())
            lines.extend(text.splitlines())
        else:
            lines.append(f"{labels[f]}{colon}{text}")
    return "\n".join(lines)


def _label_pattern(extra_labels: Iterable[str]) -> tuple[re.Pattern[str], dict[str, str]]:
    keys = {label: f for lang in FIELD_LABELS.values() for f, label in lang.items()}
    keys["doc_id"] = "doc_id"
    keys.update({lab: lab for lab in extra_labels if lab not in keys})
    alternatives = "|".join(re.escape(k) for k in sorted(keys, key=len, reverse=True))
    # A label may carry list or bold markup ("- **事项名称**：..."), as chunks returned by a RAG
    # system sometimes do.
    return re.compile(rf"^\s*(?:[-*]\s*)?(?:\*\*)?({alternatives})(?:\*\*)?\s*[:：]\s?(.*)$"), keys


def parse_document(text: str, source: str = "<text>", extra_labels: Iterable[str] = (),
                   strict: bool = True) -> dict[str, str]:
    """Read one key-value document back into fields (zh or en labels; ":" or "：").

    A line starting with a known label opens a field; other lines continue the previous one
    (multi-line procedure and materials). `extra_labels` are a user's own labels (the values
    of `corpus.columns`), kept under their own name. `strict=False` reads whatever it can
    (documents a system retrieved): text before the first label is ignored and a repeated
    label replaces the earlier value.

    Raises:
        CorpusError: (strict) text before the first label, or a label given twice (names
            `source` and line).
    """
    pattern, keys = _label_pattern(extra_labels)
    out: dict[str, list[str]] = {}
    current: str | None = None
    for n, line in enumerate(str(text).splitlines(), 1):
        m = pattern.match(line)
        if m:
            current = keys[m.group(1)]
            if current in out and strict:
                raise CorpusError(f"{source}: line {n}: label '{m.group(1)}' appears a second time (one item per file)")
            out[current] = [m.group(2)]
        elif current is not None:
            out[current].append(line)
        elif line.strip() and strict:
            raise CorpusError(f"{source}: line {n}: expected 'label：value' with a known label "
                              f"(e.g. {FIELD_LABELS['zh']['item_name']}： or {FIELD_LABELS['en']['item_name']}:), "
                              f"got {line.strip()[:60]!r}")
    return {k: "\n".join(v).strip() for k, v in out.items()}


# --------------------------------------------------------------------------- readers
def _decode(data: bytes, path: Path, encoding: str) -> str:
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise CorpusError(f"{path}: line {line}: cannot decode as {encoding} ({err.reason}); "
                          "set corpus.encoding to the file's encoding (e.g. gbk)") from None
    except LookupError:
        raise CorpusError(f"{path}: unknown encoding {encoding!r} (corpus.encoding)") from None


def _read_csv(path: Path, encoding: str) -> tuple[pd.DataFrame, list[str]]:
    text = _decode(path.read_bytes(), path, encoding)
    try:
        df = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        raise CorpusError(f"{path}: the file is empty (expected a header row and one row per item)") from None
    except pd.errors.ParserError as err:
        raise CorpusError(f"{path}: not valid CSV: {err}") from None
    return df, [f"row {i + 1} (line {i + 2})" for i in range(len(df))]


def _read_jsonl(path: Path, encoding: str) -> tuple[pd.DataFrame, list[str]]:
    records, where = [], []
    for n, line in enumerate(_decode(path.read_bytes(), path, encoding).splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            raise CorpusError(f"{path}: line {n}: not valid JSON ({err.msg})") from None
        if not isinstance(obj, dict):
            raise CorpusError(f"{path}: line {n}: expected a JSON object per line, got {type(obj).__name__}")
        records.append(obj)
        where.append(f"line {n}")
    return pd.DataFrame.from_records(records), where


def _read_txt(path: Path, encoding: str, extra_labels: Sequence[str]) -> tuple[pd.DataFrame, list[str]]:
    files = [path] if path.is_file() else sorted(p for p in path.iterdir() if p.suffix.lower() == ".txt")
    records, where = [], []
    for f in files:
        text = _decode(f.read_bytes(), f, encoding)
        if not text.strip():
            raise CorpusError(f"{f}: the file is empty (expected one item as 'label：value' lines)")
        rec = parse_document(text, str(f), extra_labels)
        records.append({"doc_id": f.stem, **rec})  # a doc_id line in the file wins over the name
        where.append(f"file {f.name}")
    return pd.DataFrame.from_records(records), where


def read_table(path: Path, fmt: str = "auto", *, sheet: str | int | None = None, encoding: str = "utf-8",
               labels: Sequence[str] = (), what: str = "knowledge-base") -> tuple[pd.DataFrame, list[str]]:
    """Read a user's table as raw columns, with a locator ("row 3 (line 4)") per row.

    `what` names the kind of file in error messages ("knowledge-base", "question-set").
    """
    if not path.exists():
        raise CorpusError(f"{path}: {what} file or folder not found")
    if fmt == "auto":
        fmt = "txt" if path.is_dir() else FORMATS.get(path.suffix.lower(), "")
        if not fmt:
            raise CorpusError(f"{path}: unknown {what} format {path.suffix!r}; expected one of "
                              f"{sorted(FORMATS)} or a folder of .txt files (or set corpus.format)")
    if fmt not in set(FORMATS.values()):
        raise CorpusError(f"{path}: unknown format {fmt!r}; expected one of {sorted(set(FORMATS.values()))}")
    if path.is_dir() and fmt != "txt":
        raise CorpusError(f"{path}: is a folder; only format 'txt' reads a folder")
    if fmt == "csv":
        df, where = _read_csv(path, encoding)
    elif fmt == "jsonl":
        df, where = _read_jsonl(path, encoding)
    elif fmt == "txt":
        df, where = _read_txt(path, encoding, labels)
    else:
        try:
            if fmt == "parquet":
                df = pd.read_parquet(path)
            else:
                df = pd.read_excel(path, sheet_name=0 if sheet is None else sheet, dtype=str)
        except Exception as err:  # pyarrow/openpyxl raise many types; all mean "unreadable"
            at = f" (sheet {sheet!r})" if fmt == "excel" and sheet is not None else ""
            raise CorpusError(f"{path}: cannot read as {fmt}{at}: {type(err).__name__}: {err}") from None
        offset = 2 if fmt == "excel" else 1
        where = [f"row {i + 1}" + (f" (sheet row {i + offset})" if fmt == "excel" else "") for i in range(len(df))]
    if df.empty:
        raise CorpusError(f"{path}: the {what} file is empty (expected one row, line or .txt file per item)")
    return df, where


# --------------------------------------------------------------------------- mapping and loading
def _rows(where: Sequence[str], mask: Iterable[bool], limit: int = 10) -> str:
    hits = [w for w, m in zip(where, mask, strict=True) if m]
    return ", ".join(hits[:limit]) + (f" and {len(hits) - limit} more" if len(hits) > limit else "")


def map_columns(raw: pd.DataFrame, where: Sequence[str], columns: Mapping[str, str], source: str) -> pd.DataFrame:
    """Apply the column mapping: canonical field -> the user's column (default: the same name)."""
    unknown = sorted(set(columns) - set(MAPPABLE))
    if unknown:
        raise CorpusError(f"corpus.columns: unknown field(s) {unknown}; expected keys among {list(MAPPABLE)}")
    out = pd.DataFrame(index=range(len(raw)))
    raw = raw.reset_index(drop=True)
    for c in MAPPABLE:
        src = columns.get(c, c)
        if c in columns and src not in raw.columns:
            raise CorpusError(f"{source}: corpus.columns maps '{c}' to column '{src}', which the file does not have; "
                              f"columns found: {[str(x) for x in raw.columns]}")
        if src in raw.columns:
            out[c] = [field_text(c, v) for v in raw[src].tolist()]
        elif c in REQUIRED_FIELDS:
            raise CorpusError(f"{source}: no column for required field '{c}' (add a '{c}' column or map it with "
                              f"corpus.columns.{c}: <your column>); columns found: {[str(x) for x in raw.columns]}")
        else:
            out[c] = ""
    for c in REQUIRED_FIELDS:
        empty = out[c].eq("")
        if empty.any():
            raise CorpusError(f"{source}: empty '{c}' at {_rows(where, empty)} (every item needs a {c})")
    dup = out["doc_id"].duplicated(keep=False)
    if dup.any():
        groups = [f"'{d}' at {_rows(where, out['doc_id'].eq(d), 5)}" for d in dict.fromkeys(out.loc[dup, "doc_id"])]
        raise CorpusError(f"{source}: duplicate doc_id(s): " + "; ".join(groups[:10])
                          + (f"; and {len(groups) - 10} more" if len(groups) > 10 else ""))
    synthetic = raw["synthetic"] if "synthetic" in raw.columns else pd.Series(False, index=raw.index)
    out["synthetic"] = [v if isinstance(v, bool | np.bool_) else str(v).strip().lower() in _TRUE for v in synthetic]
    return out


def load_corpus_file(path: str | Path, *, format: str = "auto", columns: Mapping[str, str] | None = None,
                     sheet: str | int | None = None, encoding: str = "utf-8", lang: str = "zh") -> pd.DataFrame:
    """Load a user's knowledge base into the corpus table (`CORPUS_COLUMNS`, `text` rendered in `lang`).

    Raises:
        CorpusError: missing file, unknown format, empty file, undecodable text, a missing
            mapped or required column, empty or duplicate doc_ids (each names file and rows).
    """
    path, columns = Path(path), dict(columns or {})
    raw, where = read_table(path, format, sheet=sheet, encoding=encoding, labels=list(columns.values()))
    df = map_columns(raw, where, columns, str(path))
    df["text"] = [render_document(r, lang) for r in df.to_dict("records")]
    return df[[*CORPUS_COLUMNS, "aliases"]]


def build_corpus(params: Params, base_dir: Path = Path(".")) -> pd.DataFrame:
    """The run's knowledge base: the demo generator or the user's file, first `corpus.limit` items.

    A relative `corpus.path` is resolved against `base_dir` (the params file's folder, say).
    """
    c = params.corpus
    if c.source == "demo":
        from cube.demo_corpus import generate_demo_corpus

        df = generate_demo_corpus(c.n_items, params.lang, c.family_share, c.seed)
    else:
        path = Path(str(c.path))
        df = load_corpus_file(path if path.is_absolute() else Path(base_dir) / path, format=c.format,
                              columns=c.columns, sheet=c.sheet, encoding=c.encoding, lang=params.lang)
    if c.limit is not None:
        df = df.head(c.limit)
    return df.reset_index(drop=True)


def export_txt_folder(corpus: pd.DataFrame, folder: str | Path) -> list[Path]:
    """Write each document's `text` to `<folder>/<doc_id>.txt` (the paper's one-file-per-item format)."""
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
    overview = pd.DataFrame([{
        "items": len(corpus), "families": int(sizes.size),
        "share_in_families": float(fam.ne("").mean()) if len(corpus) else 0.0,
        "mean_document_chars": float(corpus["text"].astype(str).str.len().mean()) if len(corpus) else 0.0,
        "synthetic": "yes" if synthetic.all() else "no" if not synthetic.any() else "partly",
    }])

    def per(col: str) -> pd.DataFrame:
        return corpus[col].astype(str).value_counts().rename_axis(col).reset_index(name="items")

    family_sizes = sizes.value_counts().sort_index().rename_axis("size").reset_index(name="families")
    family_sizes["items"] = family_sizes["size"] * family_sizes["families"]
    return {
        "overview": overview,
        "by_region": per("region"),
        "by_department": per("department"),
        "field_coverage": pd.DataFrame({"field": fields, "non_empty_share": filled.mean().to_numpy()}),
        "field_lengths": pd.DataFrame({"field": fields, "mean": lengths.mean().to_numpy(),
                                       "median": lengths.median().to_numpy(), "max": lengths.max().to_numpy()}),
        "family_sizes": family_sizes,
    }


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
