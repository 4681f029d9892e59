"""From a user's raw table to knowledge-base items: field mapping, long format, placeholders,
sampling.

A real export is rarely one row per item. `map_table` turns the raw table (as read by
`cube.kb.corpus.read_table`) into one record per item:

- `columns` maps field keys (`MAPPABLE`, labels in `FIELD_KEY_LABELS`) to the user's columns;
  an unmapped key falls back to a same-named column;
- `group_by` (long format: one row per material) makes one item per distinct combination of
  those columns, in order of first appearance; every other column keeps its distinct non-empty
  values in order: a list field (`LIST_FIELDS`: materials, procedure) becomes a list (rendered
  as numbered lines), any other field with several values joins them with "；" (and a note says so);
- placeholders (`empty_values`: 无, 无情形, 暂无, /, ...) are missing values, everywhere;
- columns no key reads are kept under their own label (`extra_columns: render`) or dropped
  (`drop`), and either way the notes name them;
- without a `doc_id`, ids are derived stably: from the group key, or from the row's content.

It never raises: it returns every problem found (each naming the file, the rows and the column)
with the notes, so `cube validate` can list them all at once and the loader can raise them all.
`sample_items` draws the deterministic stratified sample of `corpus.sample`.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypedDict, cast

import numpy as np
import pandas as pd

from cube.config.phrasing import yes_no
from cube.config.schema import (
    MAPPABLE,
    REQUIRED_FIELDS,
    field_keys_help,
    key_label,
)

LIST_FIELDS: tuple[str, ...] = ("procedure", "application_materials")
_NUMBERING = re.compile(
    r"^\s*(?:\d+\s*[.、．)）](?!\d)|[（(]\d+[)）])\s*"
)  # "1. ", "2、", "（3）", not "1.5"


def strip_numbering(text: str) -> str:
    """`text` without a leading list number ("1. 身份证", "2、户口本", "（3）照片" -> the item)."""
    return _NUMBERING.sub("", str(text), count=1).strip()


FieldValue = str | list[str]  # a list field's merged lines (LIST_FIELDS), else text


class MergedItem(TypedDict, total=False):
    """One item of the user's table while it is mapped (`_merge_records`): the fields its mapping
    names (every key of `MAPPABLE`; `doc_id` derived when not mapped), the unread columns as
    (column, value), where it comes from, and its rows (`_idx`, dropped from the corpus)."""

    doc_id: str
    region: str
    publication_address: str
    item_name: str
    handling_agency: str
    department: str
    consultation_method: str
    requirements: str
    legal_basis: str
    statutory_time_limit: str
    committed_time_limit: str
    service_object: str
    processing_type: str
    online_handling: str
    processing_time: str
    processing_location: str
    fee_standard: str
    procedure: str | list[str]
    application_materials: str | list[str]
    family_id: str
    variant: str
    parent_region: str
    aliases: str
    extras: list[tuple[str, FieldValue]]
    source_rows: str
    _idx: list[int]


DEFAULT_EMPTY_VALUES: tuple[str, ...] = ("无", "无情形", "暂无", "/", "-", "—", "N/A")
JOIN = "；"
_TRUE = {"true", "1", "yes", "y", "是", "t"}


def _cell(value: Any) -> Any:
    """A raw cell as stripped text ("" for missing); lists (JSONL) stay lists of text."""
    if isinstance(value, list | tuple | np.ndarray):
        return [str(v).strip() for v in value if str(v).strip()]
    if value is None or value is pd.NA:
        return ""
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return str(int(value)) if value.is_integer() else str(value)
    return str(value).strip()


ROWS_SHOWN = 5  # a list of rows in a message: the first few, then "and N more"
WARNING = "warning: "  # a note that is a warning: `cube validate` lists it with the warnings
# distinct service names in one grouped document that make it a merged document
SERVICE_MERGE_MIN = 3
# documents whose name is a number, yes/no, phone, sentence or joined list: a wrong name column
NOT_NAMES_SHARE = 0.5
SHARE_MIN_DOCUMENTS = 5  # fewer documents: the share-based name checks stay silent
REGION_NAMES_SHARE = 0.8  # documents whose name holds its own region's name (an office, an address)
_SERVICE_HEADER = re.compile(r"service|item|matter")
_NOT_NAME = re.compile(
    r"^[\d\s.,:：/~～\-–+()（）]*\d[\d\s.,:：/~～\-–+()（）]*"
    r"(?:个?工作日|天|日|working days?|days?)?$"
    r"|\d{7,}|\d{3,4}-\d{6,8}|https?://|www\.|[。！!]|[.;；]\s*$"
    r"|^(?:free of charge|no charge|not charged|不收费|免费|收费)",
    re.IGNORECASE,
)
_REGION_NAME = re.compile(
    r"(?:省|市|区|县|镇|乡|街道|province|city|district|county|town)$", re.IGNORECASE
)
_REGION_UNIT = re.compile(r"[^,，\s省市区县]+(?:省|市|区|县)")  # 明川省瑶台市瑶南区 -> ..., 瑶南区
_IDENTIFIER = re.compile(
    r"\d{3,6}"
)  # a bare 3-6 digit number names a form or a code (1040, 941), not a count
# what is left of a name without its region when it names an office or an agency, not a service
# at its end ("… Window 23", "…3号窗口"): "Recreation Center Membership" is a service
_OFFICE = re.compile(
    r"(?:(?:局|委|办|中心|窗口|大厅|服务站|办事处)|\b(?:bureau|office|department|agency|centre|center"
    r"|commission|committee|window|counter|hall|administration)\b)[\s\d#号,.\-]*$",
    re.IGNORECASE,
)
_FILLER = re.compile(r"[\W_]+")


def _has_letters(value: str) -> bool:
    return any(ch.isalpha() for ch in value)


def _rows(where: Sequence[str], idx: Iterable[int], limit: int | None = ROWS_SHOWN) -> str:
    hits = [where[i] for i in idx]
    shown = hits if limit is None else hits[:limit]
    return ", ".join(shown) + (
        f" and {len(hits) - len(shown)} more" if len(hits) > len(shown) else ""
    )


def _digest(parts: Iterable[Any]) -> str:
    return hashlib.sha1("\x1f".join(map(str, parts)).encode("utf-8")).hexdigest()[:10]


def check_mapping(
    raw_columns: Sequence[str], columns: Mapping[str, str], group_by: Sequence[str], source: str
) -> list[str]:
    """Every problem of the mapping itself: unknown keys, mapped or grouping columns the file
    lacks."""
    found = [str(c) for c in raw_columns]
    problems = []
    unknown = [k for k in columns if k not in MAPPABLE]
    if unknown:
        problems.append(
            f"corpus.columns: unknown field key(s) {unknown}; valid keys: {field_keys_help()}"
        )
    problems += [
        f"{source}: corpus.columns maps '{key}' to column '{col}', which the file does not "
        f"have; columns found: {found}"
        for key, col in _mapped_columns(columns)
        if col not in found
    ]
    problems += [
        f"{source}: corpus.group_by names column '{col}', which the file does not have; "
        f"columns found: {found}"
        for col in group_by
        if col not in found
    ]
    problems += [
        f"{source}: no column for required field '{key}' (add a '{key}' column or map it "
        f"with corpus.columns.{key}: <your column>, e.g. {key_label(key, 'zh')}); columns "
        f"found: {found}"
        for key in _unmapped_required(columns, found)
    ]
    return problems


def _mapped_columns(columns: Mapping[str, str]) -> list[tuple[str, str]]:
    """(field key, column) of each known key of the mapping."""
    return [(key, col) for key, col in columns.items() if key in MAPPABLE]


def _unmapped_required(columns: Mapping[str, str], found: list[str]) -> list[str]:
    """The required fields neither mapped nor present as a column of their own name."""
    return [key for key in REQUIRED_FIELDS if key not in columns and key not in found]


def map_table(
    raw: pd.DataFrame,
    where: Sequence[str],
    columns: Mapping[str, str],
    source: str,
    *,
    group_by: Sequence[str] = (),
    empty_values: Iterable[str] = DEFAULT_EMPTY_VALUES,
    extra_columns: str = "render",
) -> tuple[pd.DataFrame | None, list[str], list[str]]:
    """Map a raw table to one record per item.

    Args:
        raw: the user's table, every column as read; `where` locates each row ("row 3 (line 4)").
        columns: field key -> the user's column. group_by: the columns that identify an item.
        empty_values: placeholders meaning "missing" (compared after stripping, case-insensitive).
        extra_columns: "render" (keep unread columns under their own label) or "drop".

    Returns:
        (records, problems, notes): `records` has `doc_id`, every key of `MAPPABLE`, `synthetic`,
        `extras` (list of (label, value) of unread columns) and `source_rows` (where the item
        comes from); None when a problem prevents mapping. `problems` lists every error, each
        naming the file, rows and column; `notes` says what was done (grouping, derived ids,
        placeholders, joined values, extra columns).
    """
    raw = raw.reset_index(drop=True)
    raw.columns = [str(c) for c in raw.columns]
    problems = check_mapping(list(raw.columns), columns, group_by, source)
    if problems:
        return None, problems, []
    cols, notes = _clean_cells(raw, empty_values)
    src, extra, source_notes = _field_sources(raw, columns, extra_columns)
    notes += source_notes
    group_keys, members, group_notes = _group_rows(raw, cols, group_by)
    notes += group_notes
    records, merge_notes = _merge_records(cols, src, extra, members, where)
    notes += merge_notes
    id_problems, id_notes = _assign_ids(
        records, raw, cols, src, group_by, group_keys, where, source
    )
    problems += id_problems
    notes += id_notes
    out = pd.DataFrame.from_records(records)
    for k in MAPPABLE:
        if k not in out.columns:
            out[k] = ""
    problems += _empty_field_problems(out, records, raw, src, where, columns, group_by, source)
    notes += [
        WARNING + w
        for w in _name_warnings(raw, cols, records, src, group_by, extra, columns, source)
    ]
    problems += _duplicate_id_problems(out, records, where, source)
    out["synthetic"] = _synthetic_flags(raw, records)
    return (None if problems else out.drop(columns="_idx")), problems, notes


def _clean_cells(
    raw: pd.DataFrame, empty_values: Iterable[str]
) -> tuple[dict[str, list[Any]], list[str]]:
    """Every column as a plain list of cleaned cells (placeholders read as ""), and the note
    counting the placeholders found."""
    notes: list[str] = []
    empty = {str(v).strip().lower() for v in empty_values} | {""}
    cells = raw.map(_cell)
    is_placeholder = cells.map(lambda v: isinstance(v, str) and v != "" and v.lower() in empty)
    if is_placeholder.to_numpy().any():
        counts = pd.Series(cells.to_numpy()[is_placeholder.to_numpy()]).value_counts()
        notes.append(
            f"placeholders read as missing: {int(counts.sum())} cells ("
            + ", ".join(f"{v!r} ×{n}" for v, n in counts.items())
            + ")"
        )
        cells = cells.mask(is_placeholder, "")
    cells = cells.map(
        lambda v: [x for x in v if x.lower() not in empty] if isinstance(v, list) else v
    )
    # plain lists: per-cell access stays fast
    return {c: cells[c].tolist() for c in cells.columns}, notes


def _field_sources(
    raw: pd.DataFrame, columns: Mapping[str, str], extra_columns: str
) -> tuple[dict[str, str], list[str], list[str]]:
    """The column each field key reads (`src`), the unread columns to render (`extra`, empty
    when they are dropped), and the notes naming ignored and unread columns."""
    notes: list[str] = []
    src = {k: columns.get(k, k) for k in MAPPABLE if columns.get(k, k) in raw.columns}
    used = set(src.values()) | {"synthetic", "text"}
    if "text" in raw.columns and "text" not in columns.values():
        notes.append("column 'text' ignored: each document is rendered from its fields")
    extra = [c for c in raw.columns if c not in used]
    if extra:
        notes.append(
            f"columns not mapped to a field: {extra}: "
            + (
                "rendered into each document under their own label (corpus.extra_columns: render)"
                if extra_columns == "render"
                else "dropped (corpus.extra_columns: drop)"
            )
        )
    if extra_columns != "render":
        extra = []
    return src, extra, notes


def _group_rows(
    raw: pd.DataFrame, cols: Mapping[str, list[Any]], group_by: Sequence[str]
) -> tuple[list[tuple[str, ...]], list[list[int]], list[str]]:
    """The rows of each item: one per distinct `group_by` key in order of first appearance
    (its keys, its rows, the long-format note), else one item per row (no keys, no note)."""
    if not group_by:
        return [], [[i] for i in range(len(raw))], []
    keys = list(
        zip(
            *([("\n".join(v) if isinstance(v, list) else v) for v in cols[c]] for c in group_by),
            strict=True,
        )
    )
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, k in enumerate(keys):
        groups.setdefault(k, []).append(i)
    members = list(groups.values())
    note = f"long format: {len(raw)} rows grouped by {list(group_by)} into {len(members)} items"
    return list(groups), members, [note]


def _distinct_values(cols: Mapping[str, list[Any]], col: str, idx: list[int]) -> list[str]:
    """The distinct non-empty values of column `col` in rows `idx`, in order (lists flattened)."""
    out: list[str] = []
    for v in (cols[col][i] for i in idx):
        out.extend(v if isinstance(v, list) else [v] if v else [])
    return list(dict.fromkeys(out))


def _merge_field(
    cols: Mapping[str, list[Any]], key: str, col: str, idx: list[int], joined: dict[str, int]
) -> FieldValue:
    """Field `key`'s value from column `col` over rows `idx`: a list field's lines, else the
    distinct values joined with JOIN (counted in `joined` per column when several)."""
    vals = _distinct_values(cols, col, idx)
    if key in LIST_FIELDS:
        if len(idx) == 1:
            return cols[col][idx[0]]
        # one item per line of every row, without the rows' own numbering ("1. 身份证"),
        # which rendering replaces by the merged list's
        lines = [strip_numbering(ln) for v in vals for ln in str(v).splitlines()]
        return list(dict.fromkeys(ln for ln in lines if ln))
    if len(vals) > 1:
        joined[col] = joined.get(col, 0) + 1
    return JOIN.join(vals)


def _merge_records(
    cols: Mapping[str, list[Any]],
    src: Mapping[str, str],
    extra: Sequence[str],
    members: list[list[int]],
    where: Sequence[str],
) -> tuple[list[MergedItem], list[str]]:
    """One record per item (its rows in `_idx`), and the note naming the columns whose
    distinct values were joined."""
    joined: dict[str, int] = {}
    records: list[MergedItem] = []
    for idx in members:
        # the keys are the mapping's, all of MergedItem's fields
        rec = cast(
            MergedItem, {k: _merge_field(cols, k, col, idx, joined) for k, col in src.items()}
        )
        rec["extras"] = [
            (col, v) for col in extra if (v := _merge_field(cols, "", col, idx, joined))
        ]
        rec["source_rows"] = _rows(where, idx, 3)
        rec["_idx"] = idx
        records.append(rec)
    notes = []
    if joined:
        notes.append(
            "several distinct values within one item, joined with '；': "
            + ", ".join(f"column '{c}' in {n} items" for c, n in joined.items())
        )
    return records, notes


def _assign_ids(
    records: list[MergedItem],
    raw: pd.DataFrame,
    cols: Mapping[str, list[Any]],
    src: Mapping[str, str],
    group_by: Sequence[str],
    group_keys: list[tuple[str, ...]],
    where: Sequence[str],
    source: str,
) -> tuple[list[str], list[str]]:
    """Each record's doc_id: the mapped one (a problem when an item holds several), else derived
    from the group key or the row's content; returns (problems, notes)."""
    problems: list[str] = []
    if "doc_id" in src:
        if group_by:
            for rec in records:
                ids = _distinct_values(cols, src["doc_id"], rec["_idx"])
                if len(ids) > 1:
                    problems.append(
                        f"{source}: column '{src['doc_id']}' (doc_id) has several values "
                        f"{ids[:5]} within "
                        f"one item at {_rows(where, rec['_idx'])}; group_by must identify one id"
                    )
        return problems, []
    if group_by:
        for rec, key in zip(records, group_keys, strict=True):
            rec["doc_id"] = "K" + _digest(key)
        return problems, [
            f"doc_id not mapped: ids derived from the group key {list(group_by)} "
            "(K + 10 hex digits of its SHA-1: stable across runs and row order)"
        ]
    seen: dict[str, int] = {}
    for rec in records:
        base = "R" + _digest(cols[c][rec["_idx"][0]] for c in raw.columns)
        seen[base] = seen.get(base, 0) + 1
        rec["doc_id"] = base if seen[base] == 1 else f"{base}-{seen[base]}"
    return problems, [
        "doc_id not mapped: ids derived from each row's content (R + 10 hex digits of its "
        "SHA-1; identical rows get -2, -3, ...)"
    ]


def _empty_field_problems(
    out: pd.DataFrame,
    records: list[MergedItem],
    raw: pd.DataFrame,
    src: Mapping[str, str],
    where: Sequence[str],
    columns: Mapping[str, str],
    group_by: Sequence[str],
    source: str,
) -> list[str]:
    """One problem per required field (and doc_id) that is empty in some items."""
    problems = []
    for key in ("doc_id", *REQUIRED_FIELDS):
        bad = [
            i for i, v in enumerate(out[key]) if not (v if isinstance(v, list) else str(v).strip())
        ]
        if bad:
            rows = [j for i in bad for j in records[i]["_idx"]]
            problems.append(
                _empty_name_problem(
                    key,
                    src.get(key, key),
                    rows,
                    raw,
                    where,
                    columns,
                    group_by,
                    source,
                    placeholders=[raw[src[key]].iloc[j] for j in rows] if key in src else [],
                )
            )
    return problems


def _duplicate_id_problems(
    out: pd.DataFrame, records: list[MergedItem], where: Sequence[str], source: str
) -> list[str]:
    """The problem listing the doc_ids that several items share (the first few, with rows)."""
    ids = out["doc_id"].astype(str)
    dup = ids.duplicated(keep=False) & ids.ne("")
    if not dup.any():
        return []
    parts = []
    dups = list(dict.fromkeys(out.loc[dup, "doc_id"].astype(str)))
    for d in dups[:ROWS_SHOWN]:
        rows = [j for i in np.flatnonzero(ids.eq(d)) for j in records[i]["_idx"]]
        parts.append(f"'{d}' at {_rows(where, rows)}")
    more = f"; and {len(dups) - ROWS_SHOWN} more" if len(dups) > ROWS_SHOWN else ""
    return [f"{source}: duplicate doc_id(s): " + "; ".join(parts) + more]


def _synthetic_flags(raw: pd.DataFrame, records: list[MergedItem]) -> list[bool]:
    """Each item's `synthetic` flag, read from its first row (False without the column)."""
    first = [r["_idx"][0] for r in records]
    flags = (
        raw["synthetic"].iloc[first].tolist()
        if "synthetic" in raw.columns
        else [False] * len(records)
    )
    return [v if isinstance(v, bool | np.bool_) else str(v).strip().lower() in _TRUE for v in flags]


def _names_service(header: str) -> bool:
    """A column header that names services or items (主项名称, 事项名称, 业务办理项名称,
    service_name, item)."""
    h = header.casefold()
    return ("名称" in h and ("项" in h or "服务" in h)) or bool(_SERVICE_HEADER.search(h))


def _service_column(
    raw: pd.DataFrame, columns: Mapping[str, str], name_col: str, rows: Sequence[int]
) -> str | None:
    """The column that names the service of the rows whose item name is missing: the one mapped to
    `family_id`, else the column (not mapped to another field) with a text value in every one of
    those rows that each named item belongs to one value of (sub-item -> service), the most distinct
    values among those (a service, not its department), a header naming services first; codes
    ("110001000") are not names."""
    fam = columns.get("family_id")
    if fam in raw.columns and fam != name_col:
        return fam
    text = raw.astype(str).apply(lambda s: s.str.strip())
    named = _named_rows(text, name_col) if name_col in raw.columns else None
    ranked = [
        (_names_service(str(col)), text[col].nunique(), str(col))
        for col in _unmapped_columns(raw, columns, name_col)
        if _may_name_the_service(text, rows, named, name_col, col)
    ]
    return max(ranked)[2] if ranked else None


def _unmapped_columns(raw: pd.DataFrame, columns: Mapping[str, str], name_col: str) -> list:
    """The file's columns other than the name column and those mapped to another field."""
    mapped = {v for k, v in columns.items() if k not in ("item_name", "family_id")}
    return [col for col in raw.columns if col != name_col and col not in mapped]


def _may_name_the_service(
    text: pd.DataFrame, rows: Sequence[int], named: pd.Series | None, name_col: str, col: str
) -> bool:
    """Column `col` names something in every row of `rows`, one value per named item, and
    several values in all."""
    if not _names_every_row(text[col].iloc[list(rows)]):
        return False
    if _varies_within_an_item(text, named, name_col, col):
        return False
    return bool(text[col].nunique() > 1)


def _named_rows(text: pd.DataFrame, name_col: str) -> pd.Series:
    """The rows whose item name is neither empty nor a placeholder."""
    return text[name_col].ne("") & ~text[name_col].isin(DEFAULT_EMPTY_VALUES)


def _names_every_row(vals: pd.Series) -> bool:
    """Every value is a text with letters: no empty cell, no placeholder, no code."""
    if not vals.ne("").all() or vals.isin(DEFAULT_EMPTY_VALUES).any():
        return False
    return bool(vals.map(_has_letters).all())


def _varies_within_an_item(
    text: pd.DataFrame, named: pd.Series | None, name_col: str, col: str
) -> bool:
    """Column `col` takes several values within one named item: a material, a remark, not the
    service."""
    if named is None or not named.any():
        return False
    return bool(text.loc[named].groupby(name_col)[col].nunique().max() > 1)


def _empty_name_problem(
    key: str,
    col: str,
    rows: list[int],
    raw: pd.DataFrame,
    where: Sequence[str],
    columns: Mapping[str, str],
    group_by: Sequence[str],
    source: str,
    placeholders: list[Any],
) -> str:
    """One line for a required field that is empty in some rows; when its cells hold a placeholder
    (无: the service has no sub-item), the count and the mapping that fits such an export."""
    head = (
        f"{source}: empty '{key}' (column '{col}') at {_rows(where, rows)} ({len(rows)} of "
        f"{len(raw)} rows)"
    )
    held = pd.Series([_cell(v) for v in placeholders], dtype=object)
    held = held[held.ne("")]
    if key != "item_name" or held.empty:
        return head + f" (every item needs a {key})"
    counts = ", ".join(f"'{v}' ×{n}" for v, n in held.value_counts().items())
    line = (
        f"{head}. These cells hold the placeholder {counts} (corpus.empty_values): the rows' "
        f"service has no sub-item, so '{col}' names a sub-item, not the service"
    )
    service = _service_column(raw, columns, col, rows)
    if service is None:
        return line + f"; map the column naming the service as item_name and '{col}' as variant"
    grouping = _suggested_grouping(group_by, service, col)
    was = columns.get("variant")
    kept = (
        f" ('{was}', now mapped as variant, stays in group_by and is rendered under its own label)"
        if was and was != col
        else ""
    )
    return (
        line + f". Suggested mapping: corpus.columns item_name: {service}, variant: "
        f"{col}{grouping}{kept} (one document per service and sub-item; "
        "docs/tutorials/own-knowledge-base.md: 'One row per material, sub-items 无')"
    )


def _suggested_grouping(group_by: Sequence[str], service: str, col: str) -> str:
    """The group_by of the suggested mapping ("" without one): the service then the sub-item
    column in place of the sub-item column, else both appended."""
    if not group_by:
        return ""
    keys = []
    for g in group_by:
        if g == col:
            keys += [service, col]
        elif g != service:
            keys.append(g)
    return f", group_by: {keys if col in group_by else [*keys, service, col]}"


def _name_warnings(
    raw: pd.DataFrame,
    cols: Mapping[str, list[Any]],
    records: list[MergedItem],
    src: Mapping[str, str],
    group_by: Sequence[str],
    extra: Sequence[str],
    columns: Mapping[str, str],
    source: str,
) -> list[str]:
    """Signs of a mapping that runs but is wrong: documents named by a placeholder (无 kept as a
    name); grouped documents that merge several services (>= SERVICE_MERGE_MIN distinct values of
    the family_id column, of the item_name column, or of an unmapped column whose header names
    services, e.g. 主项名称 or service_name, in one document); and an item_name column that names no
    service (`_name_column_warnings`). Measured on known-truth mappings:
    benchmarks/mapping_warnings.py."""
    names = [str(r.get("item_name", "")).strip() for r in records]
    out = _placeholder_name_warnings(names, src, source)
    out += _name_column_warnings(names, records, cols, src, columns, source)
    if not group_by:
        return out
    for col in _service_columns(cols, src, extra):
        counts = [_distinct_count(cols, col, r["_idx"]) for r in records]
        merged = [i for i, n in enumerate(counts) if n >= SERVICE_MERGE_MIN]
        if merged:
            out.append(
                _merged_services_warning(col, merged, counts, names, records, group_by, source)
            )
            break  # one line: the first column that shows it
    return out


def _placeholder_name_warnings(names: list[str], src: Mapping[str, str], source: str) -> list[str]:
    """Documents named by a placeholder (无 kept as a name), in one line."""
    placeholders = {p.casefold() for p in DEFAULT_EMPTY_VALUES}
    placeholder_named = [n for n in names if n.casefold() in placeholders]
    if not placeholder_named:
        return []
    return [
        f"{source}: {len(placeholder_named)} document(s) are named by a placeholder "
        f"({', '.join(repr(v) for v in dict.fromkeys(placeholder_named))}, column "
        f"'{src.get('item_name', 'item_name')}'): a placeholder names no service; keep it in "
        "corpus.empty_values and map the service column as item_name (the placeholder "
        "column as variant)"
    ]


def _service_columns(
    cols: Mapping[str, list[Any]], src: Mapping[str, str], extra: Sequence[str]
) -> list[str]:
    """The columns that may name a service, once each: the family_id and item_name columns, and an
    unmapped column whose header names services."""
    mapped = (src.get("family_id"), src.get("item_name"))
    return list(
        dict.fromkeys(
            c for c in (*mapped, *extra) if c and c in cols and (c in mapped or _names_service(c))
        )
    )


def _values_of(cell: Any) -> list[Any]:
    """A cell's values: a list field's items, else the cell itself."""
    return cell if isinstance(cell, list) else [cell]


def _distinct_count(cols: Mapping[str, list[Any]], col: str, idx: Iterable[int]) -> int:
    """How many distinct non-empty values column `col` holds in rows `idx` (lists flattened)."""
    return len({v for i in idx for v in _values_of(cols[col][i]) if v})


def _merged_services_warning(
    col: str,
    merged: list[int],
    counts: list[int],
    names: list[str],
    records: list[MergedItem],
    group_by: Sequence[str],
    source: str,
) -> str:
    """The line for documents that each merge SERVICE_MERGE_MIN or more services of `col`."""
    worst = max(merged, key=lambda i: counts[i])
    name = (names[worst] or "(no name)")[:60]
    return (
        f"{source}: {len(merged)} of {len(records)} documents each merge "
        f"{SERVICE_MERGE_MIN} or more services (distinct values of column '{col}'; up to "
        f"{counts[worst]} in the document named '{name}' at "
        f"{records[worst]['source_rows']}): group_by {list(group_by)} does not separate "
        "services, so retrieval and every score built on these documents mean little; map "
        "the column naming the service as item_name and add it to group_by"
    )


def _name_column_warnings(
    names: list[str],
    records: list[MergedItem],
    cols: Mapping[str, list[Any]],
    src: Mapping[str, str],
    columns: Mapping[str, str],
    source: str,
) -> list[str]:
    """An item_name column that names no service: the column is also mapped to a field that is no
    name (region, fee, address, ...); or NOT_NAMES_SHARE or more of the documents are named by a
    number (a count, an amount, a time limit; a bare 3-6 digit number is a form or code number, not
    counted), a yes/no value, a phone number, a web address, a sentence (ending with 。/!/./;, not a
    question: FAQ titles are names) or several values joined; or REGION_NAMES_SHARE or more are
    named by a region or by their own region plus an office or agency word (`_office_of`; "<city>
    <service>" is a name); the two shares only from SHARE_MIN_DOCUMENTS documents on."""
    col = src.get("item_name")
    if not col or not records:
        return []
    fix = "map the column that names each service (主项名称, 事项名称, service name) as item_name"
    also = _also_mapped(col, columns)
    if also:
        return [
            f"{source}: column '{col}' is mapped both as item_name and as {also}: a document's "
            f"name must name its service, not its {key_label(also[0], 'en')}; {fix}"
        ]
    if len(records) < SHARE_MIN_DOCUMENTS:
        return []  # a share of 2 documents says nothing about a column
    odd = _odd_names(names, records, cols, col)
    if len(odd) >= NOT_NAMES_SHARE * len(records):
        return [
            f"{source}: {len(odd)} of {len(records)} documents are named by a number, yes/no "
            f"value, phone number, sentence or several values of column '{col}' (e.g. "
            f"{odd[0][:40]!r}): item_name names no service; {fix}"
        ]
    regional = _regional_names(names, records)
    if len(set(regional)) > 1 and len(regional) >= REGION_NAMES_SHARE * len(records):
        return [
            f"{source}: {len(regional)} of {len(records)} documents are named by a region or hold "
            f"their own region's name (column '{col}', e.g. {regional[0][:40]!r}): an office or a "
            f"region names no service; {fix}"
        ]
    return []


# the fields a name column may also be mapped to without ceasing to be a name
_NAME_LIKE_FIELDS = ("item_name", "family_id", "doc_id", "variant", "aliases")


def _also_mapped(col: str, columns: Mapping[str, str]) -> list[str]:
    """The fields other than name-like ones that column `col` is also mapped to."""
    return [k for k, v in columns.items() if v == col and k not in _NAME_LIKE_FIELDS]


def _odd_names(
    names: list[str], records: list[MergedItem], cols: Mapping[str, list[Any]], col: str
) -> list[str]:
    """The names that name no service: several values joined in one document, or `_not_a_name`."""
    return [
        n
        for n, r in zip(names, records, strict=True)
        if n and (_distinct_count(cols, col, r["_idx"]) > 1 or _not_a_name(n))
    ]


def _not_a_name(name: str) -> bool:
    """A yes/no value, over 80 characters, or a number, phone number, web address or sentence
    (`_NOT_NAME`) that is not a form or code number (`_IDENTIFIER`)."""
    if yes_no(name) is not None or len(name) > 80:
        return True
    return bool(_NOT_NAME.search(name)) and not _IDENTIFIER.fullmatch(name)


def _region_units(region: str) -> list[str]:
    """A region's units, the smallest last: "Yaonan District, Yaotai City, ..." reversed;
    "明川省瑶台市瑶南区" -> [..., 瑶南区]."""
    if "," in region:
        return [u.strip() for u in region.split(",")][::-1]
    return _REGION_UNIT.findall(region) or [region]


def _regional_names(names: list[str], records: list[MergedItem]) -> list[str]:
    """The names that are a region (at most 12 characters) or, when the documents are of several
    regions (a single region may prefix every name), their own region's office or agency."""
    several = len({str(r.get("region", "")) for r in records}) > 1
    regional = []
    for n, r in zip(names, records, strict=True):
        if not n:
            continue
        units = _region_units(str(r.get("region", "")).strip())
        if (_REGION_NAME.search(n) and len(n) <= 12) or (several and _office_of(n, units)):
            regional.append(n)
    return regional


def _office_of(name: str, units: Sequence[str]) -> bool:
    """`name` holds its region's smallest unit (`units[-1]`) and, without its region's units, is
    empty or an office or an agency ("瑶南区政务服务中心3号窗口", "Meiling County Housing Bureau");
    "Springfield Dog Licence" is a service. A unit of fewer than 2 letters (a district coded "1") is
    no evidence; a Latin unit matches whole words."""

    def pattern(unit: str) -> str:
        return re.escape(unit) if not unit.isascii() else rf"(?<!\w){re.escape(unit)}(?!\w)"

    units = [u for u in units if sum(ch.isalpha() for ch in u) >= 2]
    if not units or not re.search(pattern(units[-1]), name, flags=re.IGNORECASE):
        return False
    rest = name
    for unit in sorted(units, key=len, reverse=True):
        rest = re.sub(pattern(unit), " ", rest, flags=re.IGNORECASE)
    return not _FILLER.sub("", rest) or bool(_OFFICE.search(rest.strip()))


def sample_items(corpus: pd.DataFrame, n: int, seed: int = 0, by: str = "region") -> pd.DataFrame:
    """A deterministic sample of `n` items stratified by `by` (proportional, largest remainders).

    Strata are the values of `by` (falling back to `department`, then to no strata, when the
    column is empty); within a stratum items are drawn at random with `seed`. The sample keeps
    the corpus order. All items when `n` >= the corpus size.
    """
    if n >= len(corpus):
        return corpus.reset_index(drop=True)
    col = next(
        (
            c
            for c in (by, "department")
            if c in corpus and corpus[c].astype(str).str.strip().ne("").any()
        ),
        None,
    )
    strata = corpus[col].astype(str) if col else pd.Series("", index=corpus.index)
    sizes = strata.value_counts(sort=False)
    quota = sizes / len(corpus) * n
    take = np.floor(quota).astype(int)
    rest = (quota - take).sort_values(ascending=False, kind="stable")
    for s in rest.index[: n - int(take.sum())]:
        take[s] += 1
    rng = np.random.default_rng(seed)
    chosen: list[int] = []
    for s in sizes.index:
        pos = np.flatnonzero(strata.to_numpy() == s)
        chosen.extend(rng.choice(pos, size=int(take[s]), replace=False).tolist())
    return corpus.iloc[sorted(chosen)].reset_index(drop=True)
