"""Human ratings: importing filled rating sheets (paper 5.6), and the paper's Table 7. The sample
and the sheet are `cube.judges.annotation`.

Humans are one more judge. A rater scores an answer on each dimension with five 2-point
criteria (the wording of `cube.judges.dimension_criteria`, e.g. the paper's Table 7 for
completeness), the total 0-10 being their sum; a rater may also give only the total.

The sheet is blind: its columns are `item_id, question, gold_document, answer, rater`, then per
dimension `<dimension>.c1 .. <dimension>.c5` (0-2) and `<dimension>.total` (0-10). Raters never see
the system nor the answer set (zero/rag/full): `item_id` is an opaque id (`A001`, `A002`, ... in the
shuffled order of the sample), and a separate key file (`annotation_key.csv` next to
`annotation_sheet.csv`, kept by the organiser) maps it to `question_id, system, set`.
`import_ratings` maps a filled sheet back through the key; sheets written before blinding (item
ids `"<question_id>::<system>::<set>"`) are still accepted. Import rules:

- the score of a (row, dimension) is the criteria sum when all five criteria are filled
  (a filled total must then equal it), else the filled total (a partial criteria sum may
  not exceed it), else NaN with `error="missing"`: a blank is reported, never guessed;
- the rater id is the row's `rater` cell, else the file's stem (one file per rater);
- errors (unknown item, value out of range or not a number, total != criteria sum, the same
  rater rating an item twice) are collected over all files and raised together as one
  `RatingsError` whose lines name the file, the spreadsheet row (header = row 1) and column.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
import pandas as pd

from cube.config.schema import (
    ACCOUNTING_COLUMNS,
    HUMAN,
    SCORE_COLUMNS,
    require_columns,
)
from cube.config.sheets import read_guarded_csv
from cube.judges.annotation import (
    CRITERIA,
    CRITERION_MAX,
    KEY_COLUMNS,
    TOTAL_MAX,
    RatingsError,
    item_id,
    key_path,
    rating_columns,
)
from cube.judges.dimensions import dimension_criteria
from cube.llm.usage import no_call_accounting


class CellPlace(TypedDict):
    """Where a rating is in the sheets: file, spreadsheet row, rater, item and dimension."""

    file: str
    row: int
    rater: str
    item_id: str
    dimension: str


class DimensionRecord(TypedDict):
    """One dimension's rating in a row: its score (NaN when it has none), criterion points and
    total (None when blank)."""

    score: float
    criteria: dict[str, int | float | None]
    total: int | float | None


class RatingRecord(CellPlace, DimensionRecord):
    """One rater's rating of one dimension of one answer."""


class MissingCells(CellPlace):
    """A rating without a score, with its blank columns."""

    columns: list[str]


class RatingsReport(TypedDict):
    """What `import_ratings` read (see its Returns)."""

    files: list[str]
    rows: int
    raters: list[str]
    items: int
    raters_per_item: dict[int, int]
    items_with_several_raters: int
    missing: dict[str, int]
    missing_rows: list[MissingCells]
    key: str | None


def _collect_files(paths: Path | list[Path]) -> tuple[list[Path], list[Path]]:
    """Rating files (the given files, or every CSV/XLSX of a folder except criteria and key
    files), and the key files found in the given folders."""
    items = [Path(p) for p in ([paths] if isinstance(paths, str | Path) else paths)]
    files: list[Path] = []
    keys: list[Path] = []
    for p in items:
        if p.is_dir():
            keys += sorted(f for f in p.iterdir() if _is_key_file(f))
            files += _folder_rating_files(p)
        elif p.is_file():
            files.append(p)
        else:
            raise RatingsError([f"{p}: no such file or folder"])
    if not files:
        raise RatingsError([f"{[str(p) for p in items]}: no .csv or .xlsx rating file found"])
    return files, keys


def _is_key_file(f: Path) -> bool:
    return f.suffix.lower() == ".csv" and f.stem.endswith("_key")


def _is_rating_file(f: Path) -> bool:
    """A CSV or XLSX that is neither a criteria nor a key file nor an Excel lock file."""
    if f.suffix.lower() not in (".csv", ".xlsx"):
        return False
    return not f.stem.endswith(("_criteria", "_key")) and not f.name.startswith("~$")


def _folder_rating_files(folder: Path) -> list[Path]:
    """A folder's rating files; one sheet saved both as CSV and XLSX is an error (which one?)."""
    found = sorted(f for f in folder.iterdir() if _is_rating_file(f))
    stems: dict[str, Path] = {}
    for f in found:
        if f.stem in stems:
            both = f"both {stems[f.stem].name} and {f.name} found"
            raise RatingsError([f"{folder}: {both}; keep only the filled one"])
        stems[f.stem] = f
    return found


def read_key(path: Path, answers_known: dict[str, tuple], errors: list[str]) -> dict[str, str]:
    """The key file as `{opaque id: internal item id}`; rows that name no answer are errors."""
    path = Path(path)
    if not path.is_file():
        errors.append(
            f"{path}: key file not found; it is written next to the sheet as "
            f"{key_path(Path('annotation_sheet')).name}"
        )
        return {}
    df = read_guarded_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    missing = [c for c in KEY_COLUMNS if c not in df.columns]
    if missing:
        errors.append(f"{path}: missing column(s) {missing}; expected {list(KEY_COLUMNS)}")
        return {}
    mapping: dict[str, str] = {}
    for i, row in enumerate(df.to_dict("records")):
        where = f"{path}, row {i + 2}"
        internal = item_id(row["question_id"], row["system"], row["set"])
        if internal not in answers_known:
            errors.append(
                f"{where}: ({row['question_id']}, {row['system']}, {row['set']}) is not in the "
                "answers"
            )
        elif row["item_id"] in mapping:
            errors.append(f"{where}: item id {row['item_id']!r} appears twice in the key")
        else:
            mapping[row["item_id"]] = internal
    return mapping


def _read_sheet(file: Path) -> pd.DataFrame:
    if file.suffix.lower() == ".xlsx":
        with pd.ExcelFile(file, engine="openpyxl") as book:
            sheet = "ratings" if "ratings" in book.sheet_names else book.sheet_names[0]
            return pd.read_excel(book, sheet_name=sheet, dtype=object)
    if file.suffix.lower() == ".csv":
        # the quote the sheet's writer put before a text beginning with = + - @ is removed
        return read_guarded_csv(file, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    raise RatingsError([f"{file}: unsupported file type {file.suffix!r}; expected .csv or .xlsx"])


def _blank(value: Any) -> bool:
    """None, NaN (an empty Excel cell) or whitespace (an empty CSV cell)."""
    nan = isinstance(value, float) and math.isnan(value)
    return value is None or nan or (isinstance(value, str) and not value.strip())


def _text(value: Any) -> str:
    if _blank(value):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def _number(value: Any, maximum: float, where: str, errors: list[str]) -> float:
    """A cell as a float in [0, maximum]; NaN for blank; an error message otherwise."""
    if _blank(value):
        return float("nan")
    try:
        x = float(str(value).strip()) if isinstance(value, str) else float(value)
    except (TypeError, ValueError):
        errors.append(f"{where}: {value!r} is not a number; expected 0-{maximum:g} or blank")
        return float("nan")
    if not (0 <= x <= maximum):
        errors.append(f"{where}: value {value!r} is outside 0-{maximum:g}")
        return float("nan")
    return x


def _points(x: float) -> int | float | None:
    if math.isnan(x):
        return None
    return int(x) if float(x).is_integer() else x


def _dimension_score(crit: list[float], total: float, where: str, errors: list[str]) -> float:
    """Criteria sum if all five are filled (the total must agree), else the total, else NaN."""
    filled = [x for x in crit if not math.isnan(x)]
    if len(filled) == len(CRITERIA):
        if not math.isnan(total) and abs(total - sum(filled)) > 1e-9:
            errors.append(
                f"{where}: total {total:g} disagrees with the criteria sum {sum(filled):g}"
            )
        return float(sum(filled))
    if not math.isnan(total) and sum(filled) > total + 1e-9:
        errors.append(
            f"{where}: total {total:g} is below the sum {sum(filled):g} of the filled criteria"
        )
    return total


def _parse_file(
    file: Path,
    dimensions: list[str],
    known: dict[str, tuple],
    key: dict[str, str],
    key_name: str | None,
    errors: list[str],
) -> tuple[list[RatingRecord], list[MissingCells]]:
    """Per-rater rating records of one file, and its missing-cell reports."""
    df = _read_sheet(file)
    columns = [str(c).strip() for c in df.columns]
    df.columns = columns
    if not _has_columns(file, columns, dimensions, errors):
        return [], []
    records: list[RatingRecord] = []
    missing: list[MissingCells] = []
    for i, row in enumerate(df.to_dict("records")):
        line = i + 2  # spreadsheet row: the header is row 1
        if all(_blank(v) for v in row.values()):
            continue  # trailing empty rows of a spreadsheet
        iid = _known_item(row, file, line, known, key, key_name, errors)
        if iid is None:
            continue
        rater = _text(row.get("rater")) or file.stem
        for d in dimensions:
            base: CellPlace = {
                "file": str(file),
                "row": line,
                "rater": rater,
                "item_id": iid,
                "dimension": d,
            }
            record, blank = _dimension_record(row, d, f"{file}, row {line}, column", errors)
            records.append({**base, **record})
            if blank:
                missing.append({**base, "columns": blank})
    return records, missing


def _has_columns(file: Path, columns: list[str], dimensions: list[str], errors: list[str]) -> bool:
    """Whether the sheet has an `item_id` column (else nothing can be read); a dimension without
    any column is an error too."""
    if "item_id" not in columns:
        errors.append(f"{file}: no 'item_id' column; columns are {columns}")
        return False
    for d in dimensions:
        if not any(c in columns for c in rating_columns([d])):
            errors.append(f"{file}: no column for dimension {d!r}; expected {rating_columns([d])}")
    return True


def _known_item(
    row: dict[str, Any],
    file: Path,
    line: int,
    known: dict[str, tuple],
    key: dict[str, str],
    key_name: str | None,
    errors: list[str],
) -> str | None:
    """The row's internal item id (an opaque id through the key; a pre-blinding id as it is), or
    None with an error when it names no answer."""
    cell = _text(row.get("item_id"))
    iid = key.get(cell, cell)
    if iid in known:
        return iid
    where = (
        f"not in the key {key_name}" if key_name else "no key file given, and not in the answers"
    )
    errors.append(f"{file}, row {line}, column 'item_id': unknown item id {cell!r} ({where})")
    return None


def _dimension_record(
    row: dict[str, Any], d: str, where: str, errors: list[str]
) -> tuple[DimensionRecord, list[str]]:
    """One dimension's score, criterion points and total of a row, and its blank columns when it
    has no score ([] otherwise)."""
    crit = [
        _number(row.get(f"{d}.{c}"), CRITERION_MAX, f"{where} '{d}.{c}'", errors) for c in CRITERIA
    ]
    total = _number(row.get(f"{d}.total"), TOTAL_MAX, f"{where} '{d}.total'", errors)
    score = _dimension_score(crit, total, f"{where} '{d}.total'", errors)
    blank: list[str] = []
    if math.isnan(score):
        blank = [f"{d}.{c}" for c, x in zip(CRITERIA, crit, strict=True) if math.isnan(x)]
        blank.append(f"{d}.total")
    criteria = {c: _points(x) for c, x in zip(CRITERIA, crit, strict=True)}
    return {"score": score, "criteria": criteria, "total": _points(total)}, blank


def _rater_rows(records: pd.DataFrame) -> list[tuple]:
    """(item, "human:<rater>", dimension, score, detail) per record."""
    rows = []
    for r in records.to_dict("records"):
        detail = {k: r[k] for k in ("criteria", "total", "rater", "file", "row")}
        rows.append((r["item_id"], f"human:{r['rater']}", r["dimension"], r["score"], detail))
    return rows


def _consensus_rows(records: pd.DataFrame) -> list[tuple]:
    """(item, "human", dimension, mean score of the raters who scored it (NaN: none), detail)
    per item and dimension."""
    rows = []
    for (iid, dim), g in records.groupby(["item_id", "dimension"], sort=True):
        scored = g[g["score"].notna()]
        detail = {
            "criteria": _mean_criteria(g["criteria"]),
            "n_raters": len(scored),
            "raters": {
                r["rater"]: {"criteria": r["criteria"], "total": r["total"]}
                for r in g.to_dict("records")
            },
        }
        score = float(scored["score"].mean()) if len(scored) else float("nan")
        rows.append((iid, "human", dim, score, detail))
    return rows


def _mean_criteria(criteria: pd.Series) -> dict[str, int | float | None]:
    """Each criterion's mean points over the raters who filled it (None: nobody did)."""
    out: dict[str, int | float | None] = {}
    for c in CRITERIA:
        vals = [x[c] for x in criteria if x[c] is not None]
        out[c] = _points(float(np.mean(vals))) if vals else None
    return out


def _score_rows(records: pd.DataFrame, known: dict[str, tuple], per_rater: bool) -> pd.DataFrame:
    """Scores-table rows from the parsed records (per rater, or the consensus per item)."""
    rows = _rater_rows(records) if per_rater else _consensus_rows(records)
    out = pd.DataFrame(rows, columns=["item_id", "judge", "dimension", "score", "detail"])
    keys = pd.DataFrame(
        [known[i] for i in out["item_id"]], columns=["question_id", "system", "set"]
    )
    out = pd.concat([keys, out.drop(columns="item_id")], axis=1)
    out["score"] = out["score"].astype(float)
    out = out.assign(
        sample=0,
        raw="",
        error=np.where(out["score"].isna(), "missing", ""),
        error_kind=np.where(out["score"].isna(), "missing", ""),
        detail=[json.dumps(d, ensure_ascii=False) for d in out["detail"]],
        finish_reason="",
        # accounting: no model call (call_id "", no tokens, cost 0.0: counted as skipped by
        # usage_summary, never as a call); latency is unknown, not zero
        **no_call_accounting("human", "judging", latency_s=float("nan")),
    )
    return out.loc[
        :,
        [
            *SCORE_COLUMNS,
            "sample",
            "raw",
            "error",
            "error_kind",
            "detail",
            "finish_reason",
            *ACCOUNTING_COLUMNS,
        ],
    ]


def import_ratings(
    paths: Path | list[Path],
    answers: pd.DataFrame,
    dimensions: list[str],
    *,
    per_rater: bool = False,
    key: Path | None = None,
) -> tuple[pd.DataFrame, RatingsReport]:
    """Read filled rating sheets (CSV/XLSX files or a folder), validate them, return scores.

    Args:
        paths: a file, a folder (all .csv/.xlsx in it except `*_criteria.csv` and `*_key.csv`),
            or a list.
        answers: answers table (item ids are checked against it).
        dimensions: dimensions to read.
        key: the key file mapping the sheet's opaque ids to answers; when None, the single
            `*_key.csv` of a given folder if there is one. Sheets written before blinding
            (ids `question_id::system::set`) need no key.
        per_rater: one judge `"human:<rater>"` per rater instead of the consensus `"human"`
            (mean over the raters who scored the item; NaN when none did).

    Returns:
        `(scores, report)`: scores in the `cube.config.schema` format (`detail` = JSON of the
        criterion points), and a report with `files, rows, raters, items, raters_per_item`
        (number of raters -> number of items), `items_with_several_raters`, `missing` (count per
        dimension), `missing_rows` (file, row, rater, item_id, dimension, blank columns).

    Raises:
        RatingsError: every problem found, each naming file, row and column.
    """
    require_columns(answers, ("question_id", "system", "set"), "answers")
    known = {
        item_id(*k): tuple(k)
        for k in answers[["question_id", "system", "set"]].itertuples(index=False)
    }
    errors: list[str] = []
    records: list[RatingRecord] = []
    missing: list[MissingCells] = []
    files, found_keys = _collect_files(paths)
    key = _chosen_key(key, found_keys)
    mapping = read_key(key, known, errors) if key is not None else {}
    for file in files:
        recs, miss = _parse_file(
            file, dimensions, known, mapping, str(key) if key else None, errors
        )
        records += recs
        missing += miss
    errors += _rated_twice(records, dimensions[0])
    if errors:
        raise RatingsError(errors)
    if not records:
        raise RatingsError([f"{[str(f) for f in files]}: no rating rows found"])
    table = pd.DataFrame(records)
    report = _ratings_report(table, files, dimensions, missing, key)
    return _score_rows(table, known, per_rater), report


def _chosen_key(key: Path | None, found_keys: list[Path]) -> Path | None:
    """The key file given, else the one found in the given folders (None: no key); several found
    and none given is an error."""
    if key is not None:
        return Path(key)
    if len(found_keys) > 1:
        raise RatingsError(
            [f"several key files found ({[str(k) for k in found_keys]}); pass the one to use"]
        )
    return found_keys[0] if found_keys else None


def _rated_twice(records: list[RatingRecord], first_dimension: str) -> list[str]:
    """An error per (rater, item) rated again, naming both rows."""
    errors: list[str] = []
    seen: dict[tuple[str, str], str] = {}
    for r in records:
        if r["dimension"] != first_dimension:
            continue  # one record per dimension: check each (rater, item) row once
        pair = (r["rater"], r["item_id"])
        here = f"{r['file']}, row {r['row']}"
        if pair in seen:
            errors.append(
                f"{here}: rater {pair[0]!r} rated item {pair[1]!r} again (first at {seen[pair]})"
            )
        else:
            seen[pair] = here
    return errors


def _ratings_report(
    table: pd.DataFrame,
    files: list[Path],
    dimensions: list[str],
    missing: list[MissingCells],
    key: Path | None,
) -> RatingsReport:
    """What `import_ratings` read (see its Returns)."""
    per_item = table.drop_duplicates(["item_id", "rater"]).groupby("item_id")["rater"].nunique()
    return {
        "files": [str(f) for f in files],
        "rows": int(len(table) // len(dimensions)),
        "raters": sorted(table["rater"].unique()),
        "items": int(table["item_id"].nunique()),
        "raters_per_item": {
            int(k): int(v) for k, v in per_item.value_counts().sort_index().items()
        },
        "items_with_several_raters": int((per_item > 1).sum()),
        "missing": {d: sum(m["dimension"] == d for m in missing) for d in dimensions},
        "missing_rows": missing,
        "key": str(key) if key is not None else None,
    }


def table7_criteria(
    human_scores: pd.DataFrame,
    question_id: str,
    system: str,
    set: str,  # noqa: A002 - the paper's and the tables' name
    dimension: str = "completeness",
    lang: str = "en",
    *,
    judge: str = HUMAN,
) -> pd.DataFrame:
    """The paper's Table 7: a human rating's criterion points with their wording, and the total.

    Reads the `detail` JSON written by `cube.judges.human.import_ratings` (`criteria` c1..c5). With
    `judge="human"` and only per-rater rows, the criterion points are averaged over raters.

    Returns:
        Columns `criterion, wording, points`; the last row is `total` ("Overall Score").
    """
    picked = _rating_of(human_scores, (question_id, system, set), dimension, judge)
    if picked.empty:
        raise KeyError(
            f"no {judge!r} rating for ({question_id!r}, {system!r}, {set!r}, {dimension!r})"
        )
    details = [json.loads(d) if isinstance(d, str) and d else {} for d in picked["detail"]]
    wording = dimension_criteria(dimension, lang)
    keys = [f"c{i + 1}" for i in range(len(wording))]
    points = [_mean_points(details, k) for k in keys]
    total = float(pd.to_numeric(picked["score"], errors="coerce").mean())
    overall = {"en": "Overall Score", "zh": "总分"}.get(lang, "Overall Score")
    return pd.DataFrame(
        {"criterion": [*keys, "total"], "wording": [*wording, overall], "points": [*points, total]}
    )


def _rating_of(
    human_scores: pd.DataFrame, answer: tuple[str, str, str], dimension: str, judge: str
) -> pd.DataFrame:
    """The judge's rows of one answer (question_id, system, set) and dimension; for "human"
    without a consensus row, every rater's."""
    question_id, system, set_ = (str(x) for x in answer)
    rows = human_scores[human_scores["dimension"] == dimension]
    rows = rows[
        (rows["question_id"].astype(str) == question_id)
        & (rows["system"].astype(str) == system)
        & (rows["set"].astype(str) == set_)
    ]
    picked = rows[rows["judge"] == judge]
    if picked.empty and judge == HUMAN:
        picked = rows[rows["judge"].astype(str).str.startswith(HUMAN + ":")]
    return picked


def _mean_points(details: list[dict], criterion: str) -> float:
    """A criterion's mean points over the ratings' details (NaN: none has it)."""
    values = [d.get("criteria", {}).get(criterion) for d in details]
    values = [float(v) for v in values if v is not None]
    return float(np.mean(values)) if values else math.nan
