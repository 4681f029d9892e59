"""Human ratings: a stratified annotation sample, the rating sheet, and its import (paper 5.6).

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
from typing import Any

import numpy as np
import pandas as pd

from cube.schema import ACCOUNTING_COLUMNS, ANSWER_COLUMNS, SCORE_COLUMNS, SchemaError, require_columns
from cube.usage import no_call_accounting

CRITERIA: tuple[str, ...] = ("c1", "c2", "c3", "c4", "c5")
CRITERION_MAX = 2.0
TOTAL_MAX = 10.0
SHEET_COLUMNS = ("item_id", "question", "gold_document", "answer", "rater")
KEY_COLUMNS = ("item_id", "question_id", "system", "set")
EXCEL_CELL_LIMIT = 32767  # characters; Excel silently refuses longer cells

INSTRUCTIONS = {
    "en": [
        "Rate each answer on each dimension; the sheet 'criteria' gives the five criteria of every dimension.",
        "Each criterion <dimension>.c1 .. c5 is worth 0, 1 or 2 points; <dimension>.total (0-10) is their sum.",
        "You may fill only the total; if you fill all five criteria and the total, the total must equal the sum.",
        "Leave a cell blank if you cannot rate it: blanks are reported, never guessed.",
        "Judge the answer against the question and the gold document. Do not edit item_id or add rows.",
        "Fill the 'rater' column with your id, or return one file per rater named after the rater.",
    ],
    "zh": [
        "请对每个回答在每个维度上打分；各维度的五条标准见“criteria”工作表。",
        "每条标准 <维度>.c1 .. c5 计 0、1 或 2 分；<维度>.total（0-10）为五项之和。",
        "可以只填总分；若五项与总分都填写，总分必须等于五项之和。",
        "无法评分的单元格请留空：空白会被报告，不会被猜测填补。",
        "请依据问题与标准文档评判回答。请勿修改 item_id，也不要添加行。",
        "请在“rater”列填写评分人编号，或每位评分人单独返回一个以其编号命名的文件。",
    ],
}


class RatingsError(ValueError):
    """Invalid rating sheet(s). `errors` holds one message per problem (file, row, column)."""

    def __init__(self, errors: list[str]):
        self.errors = list(errors)
        shown = self.errors[:50]
        more = f"\n... and {len(self.errors) - 50} more" if len(self.errors) > 50 else ""
        super().__init__(f"{len(self.errors)} problem(s) in the ratings:\n" + "\n".join(shown) + more)


def item_id(question_id: Any, system: Any, set_name: Any) -> str:
    """The internal id of one answer (also the item id of sheets written before blinding)."""
    return f"{question_id}::{system}::{set_name}"


def opaque_ids(n: int, prefix: str = "A") -> list[str]:
    """`A001 .. A<n>` (at least three digits), ids that reveal nothing about the answer."""
    width = max(3, len(str(n)))
    return [f"{prefix}{i:0{width}d}" for i in range(1, n + 1)]


def key_path(sheet_path: Path) -> Path:
    """The key file of a sheet: `annotation_sheet` -> `annotation_key.csv`, `x` -> `x_key.csv`."""
    sheet_path = Path(sheet_path)
    stem = sheet_path.stem
    stem = stem[: -len("_sheet")] if stem.endswith("_sheet") else stem
    return sheet_path.with_name(f"{stem}_key.csv")


def _retrieved(answers: pd.DataFrame) -> pd.Series:
    """Whether the system retrieved the question's gold document (rank > 0 of its `rag` row).

    zero/full rows carry no retrieval of their own (rank 0 / 1 by construction), so they
    take the rank of the same question's `rag` answer when there is one.
    """
    rank = pd.to_numeric(answers["rank"], errors="coerce").fillna(0)
    rag = answers.assign(_rank=rank)[answers["set"].astype(str) == "rag"]
    rag_rank = rag.groupby([rag["question_id"].astype(str), rag["system"].astype(str)])["_rank"].max()
    keys = pd.MultiIndex.from_arrays([answers["question_id"].astype(str), answers["system"].astype(str)])
    looked_up = pd.Series(rag_rank.reindex(keys).to_numpy(), index=answers.index)
    return looked_up.fillna(rank) > 0


def _allocate(sizes: np.ndarray, size: int) -> np.ndarray:
    """Proportional allocation (largest remainder), at least one per stratum when size allows."""
    quota = size * sizes / sizes.sum()
    floor = 1 if size >= len(sizes) else 0
    alloc = np.minimum(np.maximum(np.floor(quota).astype(int), floor), sizes)
    while alloc.sum() > size:  # minimum-one pushed us over: take from the most over-served
        over = np.where(alloc > floor, alloc - quota, -np.inf)
        alloc[int(np.argmax(over))] -= 1
    while alloc.sum() < size:
        under = np.where(alloc < sizes, quota - alloc, -np.inf)
        alloc[int(np.argmax(under))] += 1
    return alloc


def annotation_sample(
    answers: pd.DataFrame,
    size: int,
    seed: int,
    strata: tuple[str, ...] = ("set", "retrieved"),
    *,
    paired: bool = False,
) -> pd.DataFrame:
    """A stratified random sample of answers for human rating, deterministic for a seed.

    Args:
        answers: answers table.
        size: number of answers (or of (question, system) units when `paired`).
        seed: random seed; the input row order does not matter.
        strata: columns to stratify by; `"retrieved"` is computed (see `_retrieved`).
        paired: sample (question, system) units and keep all their sets, so the rated
            sample holds zero, rag and full answers of the same questions (for CuBE on the
            sample); `"set"` is then ignored as a stratum.

    Returns:
        The sampled answer rows plus a `retrieved` column, in a shuffled order (so that a
        rater does not see the sets in blocks), index reset.
    """
    require_columns(answers, ANSWER_COLUMNS, "answers")
    df = answers.assign(retrieved=_retrieved(answers))
    df = df.sort_values(["question_id", "system", "set"], key=lambda s: s.astype(str), kind="stable")
    df = df.reset_index(drop=True)
    strata = tuple(s for s in strata if not (paired and s == "set"))
    for s in strata:
        if s not in df.columns:
            raise SchemaError(f"answers: stratum column {s!r} not found; columns: {list(df.columns)}")
    units = df.drop_duplicates(["question_id", "system"]) if paired else df
    rng = np.random.default_rng(seed)
    if size >= len(units):
        chosen = units
    else:
        groups = [g for _, g in units.groupby(list(strata), sort=True)] if strata else [units]
        alloc = _allocate(np.array([len(g) for g in groups]), size)
        chosen = pd.concat(
            [
                g.iloc[np.sort(rng.choice(len(g), k, replace=False))]
                for g, k in zip(groups, alloc, strict=True)
            ]
        )
    if paired:
        keys = pd.MultiIndex.from_frame(chosen[["question_id", "system"]].astype(str))
        chosen = df[pd.MultiIndex.from_frame(df[["question_id", "system"]].astype(str)).isin(keys)]
    return chosen.iloc[rng.permutation(len(chosen))].reset_index(drop=True)


def rating_columns(dimensions: list[str]) -> list[str]:
    """`<dimension>.c1 .. c5, <dimension>.total` for every dimension."""
    return [f"{d}.{c}" for d in dimensions for c in (*CRITERIA, "total")]


def _criteria_table(dimensions: list[str], lang: str) -> pd.DataFrame:
    from cube.judges import dimension_criteria  # the judges package owns the wording

    rows = []
    for d in dimensions:
        wording = list(dimension_criteria(d, lang))
        if len(wording) != len(CRITERIA):
            raise ValueError(f"dimension {d!r}: expected {len(CRITERIA)} criteria, got {len(wording)}")
        rows += [
            {"dimension": d, "criterion": c, "column": f"{d}.{c}", "wording": w, "max_points": 2}
            for c, w in zip(CRITERIA, wording, strict=True)
        ]
    return pd.DataFrame(rows)


def export_annotation_sheet(
    answers: pd.DataFrame,
    questions: pd.DataFrame,
    corpus: pd.DataFrame,
    dimensions: list[str],
    lang: str,
    path: Path,
    *,
    size: int,
    seed: int,
    raters: list[str] | None = None,
    paired: bool = False,
) -> pd.DataFrame:
    """Write the blind rating sheet for a stratified sample as CSV and Excel, and its key.

    Files: `path.with_suffix(".csv")`, `<stem>_criteria.csv` (criteria wording),
    `path.with_suffix(".xlsx")` with sheets `instructions`, `criteria`, `ratings`, and the key
    `key_path(path)` (`item_id, question_id, system, set`; not for the raters). The sheet holds
    one row per sampled answer (per rater when `raters` is given): with `paired`, `size`
    (question, system) pairs times the answer sets each has.

    Args:
        answers, questions, corpus: the run's tables (corpus `text` = the gold document).
        dimensions: dimensions to rate.
        lang: `"zh"` or `"en"` (instructions and criteria wording).
        path: output path; the suffix is replaced.
        size, seed, paired: see `annotation_sample`.
        raters: when given, one row per (item, rater) with the `rater` cell filled.

    Returns:
        The ratings sheet as written (rating cells blank).
    """
    require_columns(questions, ("question_id", "question"), "questions")
    require_columns(corpus, ("doc_id", "text"), "corpus")
    criteria = _criteria_table(dimensions, lang)
    sample = annotation_sample(answers, size, seed, paired=paired)
    question_text = dict(zip(questions["question_id"].astype(str), questions["question"], strict=False))
    gold = dict(zip(corpus["doc_id"].astype(str), corpus["text"], strict=False))
    for col, lookup, table in (("question_id", question_text, "questions"), ("doc_id", gold, "corpus")):
        unknown = sorted(set(sample[col].astype(str)) - set(lookup))
        if unknown:
            raise SchemaError(f"{table}: no row for {col} {unknown[:10]} used by the sampled answers")
    ids = opaque_ids(len(sample))  # the sample is shuffled, so the ids follow no system or set
    key = pd.DataFrame(
        {
            "item_id": ids,
            "question_id": sample["question_id"].astype(str),
            "system": sample["system"].astype(str),
            "set": sample["set"].astype(str),
        }
    )
    sheet = pd.DataFrame(  # columns in the order of SHEET_COLUMNS
        {
            "item_id": ids,
            "question": sample["question_id"].astype(str).map(question_text),
            "gold_document": sample["doc_id"].astype(str).map(gold),
            "answer": sample["answer"].fillna("").astype(str),
            "rater": "",
        }
    )
    if raters:
        sheet = pd.concat([sheet.assign(rater=r) for r in raters], ignore_index=True)
    for col in rating_columns(dimensions):
        sheet[col] = ""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # utf-8-sig: Excel opens a BOM-marked CSV with Chinese text correctly
    sheet.to_csv(path.with_suffix(".csv"), index=False, encoding="utf-8-sig")
    key.to_csv(key_path(path), index=False, encoding="utf-8-sig")
    criteria.to_csv(path.with_name(f"{path.stem}_criteria.csv"), index=False, encoding="utf-8-sig")
    too_long = [
        c for c in ("question", "gold_document", "answer") if sheet[c].str.len().max() > EXCEL_CELL_LIMIT
    ]
    if too_long:
        raise ValueError(
            f"{path.with_suffix('.xlsx')}: column(s) {too_long} hold text longer than Excel's "
            f"{EXCEL_CELL_LIMIT}-character cell limit; the CSV was written, use it instead"
        )
    instructions = pd.DataFrame({"instructions": INSTRUCTIONS.get(lang, INSTRUCTIONS["en"])})
    with pd.ExcelWriter(path.with_suffix(".xlsx"), engine="openpyxl") as writer:
        instructions.to_excel(writer, sheet_name="instructions", index=False)
        criteria.to_excel(writer, sheet_name="criteria", index=False)
        sheet.to_excel(writer, sheet_name="ratings", index=False)
        writer.sheets["ratings"].freeze_panes = "B2"
    return sheet


def _collect_files(paths: Path | list[Path]) -> tuple[list[Path], list[Path]]:
    """Rating files (the given files, or every CSV/XLSX of a folder except criteria and key
    files), and the key files found in the given folders."""
    items = [Path(p) for p in ([paths] if isinstance(paths, str | Path) else paths)]
    files: list[Path] = []
    keys: list[Path] = []
    for p in items:
        if p.is_dir():
            keys += sorted(f for f in p.iterdir() if f.suffix.lower() == ".csv" and f.stem.endswith("_key"))
            found = sorted(
                f
                for f in p.iterdir()
                if f.suffix.lower() in (".csv", ".xlsx")
                and not f.stem.endswith(("_criteria", "_key"))
                and not f.name.startswith("~$")  # Excel lock files
            )
            stems: dict[str, Path] = {}
            for f in found:
                if f.stem in stems:
                    raise RatingsError(
                        [f"{p}: both {stems[f.stem].name} and {f.name} found; keep only the filled one"]
                    )
                stems[f.stem] = f
            files += found
        elif p.is_file():
            files.append(p)
        else:
            raise RatingsError([f"{p}: no such file or folder"])
    if not files:
        raise RatingsError([f"{[str(p) for p in items]}: no .csv or .xlsx rating file found"])
    return files, keys


def read_key(path: Path, answers_known: dict[str, tuple], errors: list[str]) -> dict[str, str]:
    """The key file as `{opaque id: internal item id}`; rows that name no answer are errors."""
    path = Path(path)
    if not path.is_file():
        errors.append(f"{path}: key file not found; it is written next to the sheet as {key_path(Path('annotation_sheet')).name}")
        return {}
    df = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    missing = [c for c in KEY_COLUMNS if c not in df.columns]
    if missing:
        errors.append(f"{path}: missing column(s) {missing}; expected {list(KEY_COLUMNS)}")
        return {}
    mapping: dict[str, str] = {}
    for i, row in enumerate(df.to_dict("records")):
        where = f"{path}, row {i + 2}"
        internal = item_id(row["question_id"], row["system"], row["set"])
        if internal not in answers_known:
            errors.append(f"{where}: ({row['question_id']}, {row['system']}, {row['set']}) is not in the answers")
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
        return pd.read_csv(file, dtype=str, keep_default_na=False, encoding="utf-8-sig")
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
            errors.append(f"{where}: total {total:g} disagrees with the criteria sum {sum(filled):g}")
        return float(sum(filled))
    if not math.isnan(total) and sum(filled) > total + 1e-9:
        errors.append(f"{where}: total {total:g} is below the sum {sum(filled):g} of the filled criteria")
    return total


def _parse_file(
    file: Path, dimensions: list[str], known: dict[str, tuple], key: dict[str, str], key_name: str | None,
    errors: list[str],
) -> tuple[list[dict], list[dict]]:
    """Per-rater rating records of one file, and its missing-cell reports."""
    df = _read_sheet(file)
    columns = [str(c).strip() for c in df.columns]
    df.columns = columns
    if "item_id" not in columns:
        errors.append(f"{file}: no 'item_id' column; columns are {columns}")
        return [], []
    for d in dimensions:
        if not any(c in columns for c in rating_columns([d])):
            errors.append(f"{file}: no column for dimension {d!r}; expected {rating_columns([d])}")
    records, missing = [], []
    for i, row in enumerate(df.to_dict("records")):
        line = i + 2  # spreadsheet row: the header is row 1
        if all(_blank(v) for v in row.values()):
            continue  # trailing empty rows of a spreadsheet
        cell = _text(row.get("item_id"))
        iid = key.get(cell, cell)  # an opaque id through the key; a pre-blinding id as it is
        if iid not in known:
            where = f"not in the key {key_name}" if key_name else "no key file given, and not in the answers"
            errors.append(f"{file}, row {line}, column 'item_id': unknown item id {cell!r} ({where})")
            continue
        rater = _text(row.get("rater")) or file.stem
        for d in dimensions:
            where = f"{file}, row {line}, column"
            crit = [
                _number(row.get(f"{d}.{c}"), CRITERION_MAX, f"{where} '{d}.{c}'", errors) for c in CRITERIA
            ]
            total = _number(row.get(f"{d}.total"), TOTAL_MAX, f"{where} '{d}.total'", errors)
            base = {"file": str(file), "row": line, "rater": rater, "item_id": iid, "dimension": d}
            score = _dimension_score(crit, total, f"{where} '{d}.total'", errors)
            if math.isnan(score):
                blanks = [f"{d}.{c}" for c, x in zip(CRITERIA, crit, strict=True) if math.isnan(x)]
                missing.append({**base, "columns": [*blanks, f"{d}.total"]})
            criteria = {c: _points(x) for c, x in zip(CRITERIA, crit, strict=True)}
            records.append({**base, "score": score, "criteria": criteria, "total": _points(total)})
    return records, missing


def _score_rows(records: pd.DataFrame, known: dict[str, tuple], per_rater: bool) -> pd.DataFrame:
    """Scores-table rows from the parsed records (per rater, or the consensus per item)."""
    rows = []
    if per_rater:
        for r in records.to_dict("records"):
            detail = {k: r[k] for k in ("criteria", "total", "rater", "file", "row")}
            rows.append((r["item_id"], f"human:{r['rater']}", r["dimension"], r["score"], detail))
    else:
        for (iid, dim), g in records.groupby(["item_id", "dimension"], sort=True):
            scored = g[g["score"].notna()]
            crit = {
                c: _points(float(np.mean(vals)))
                if (vals := [x[c] for x in g["criteria"] if x[c] is not None])
                else None
                for c in CRITERIA
            }
            detail = {
                "criteria": crit,  # mean points over the raters who filled the criterion
                "n_raters": len(scored),
                "raters": {
                    r["rater"]: {"criteria": r["criteria"], "total": r["total"]} for r in g.to_dict("records")
                },
            }
            score = float(scored["score"].mean()) if len(scored) else float("nan")
            rows.append((iid, "human", dim, score, detail))
    out = pd.DataFrame(rows, columns=["item_id", "judge", "dimension", "score", "detail"])
    keys = pd.DataFrame([known[i] for i in out["item_id"]], columns=["question_id", "system", "set"])
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
    return out.loc[:, [*SCORE_COLUMNS, "sample", "raw", "error", "error_kind", "detail", "finish_reason",
                       *ACCOUNTING_COLUMNS]]


def import_ratings(
    paths: Path | list[Path],
    answers: pd.DataFrame,
    dimensions: list[str],
    *,
    per_rater: bool = False,
    key: Path | None = None,
) -> tuple[pd.DataFrame, dict]:
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
        `(scores, report)`: scores in the `cube.schema` format (`detail` = JSON of the
        criterion points), and a report with `files, rows, raters, items, raters_per_item`
        (number of raters -> number of items), `items_with_several_raters`, `missing` (count per
        dimension), `missing_rows` (file, row, rater, item_id, dimension, blank columns).

    Raises:
        RatingsError: every problem found, each naming file, row and column.
    """
    require_columns(answers, ("question_id", "system", "set"), "answers")
    known = {item_id(*k): tuple(k) for k in answers[["question_id", "system", "set"]].itertuples(index=False)}
    errors: list[str] = []
    records: list[dict] = []
    missing: list[dict] = []
    files, found_keys = _collect_files(paths)
    if key is None and len(found_keys) > 1:
        raise RatingsError([f"several key files found ({[str(k) for k in found_keys]}); pass the one to use"])
    key = Path(key) if key is not None else (found_keys[0] if found_keys else None)
    mapping = read_key(key, known, errors) if key is not None else {}
    for file in files:
        recs, miss = _parse_file(file, dimensions, known, mapping, str(key) if key else None, errors)
        records += recs
        missing += miss
    seen: dict[tuple[str, str], str] = {}
    for r in records:
        if r["dimension"] != dimensions[0]:
            continue  # one record per dimension: check each (rater, item) row once
        pair = (r["rater"], r["item_id"])
        here = f"{r['file']}, row {r['row']}"
        if pair in seen:
            errors.append(f"{here}: rater {pair[0]!r} rated item {pair[1]!r} again (first at {seen[pair]})")
        else:
            seen[pair] = here
    if errors:
        raise RatingsError(errors)
    if not records:
        raise RatingsError([f"{[str(f) for f in files]}: no rating rows found"])
    table = pd.DataFrame(records)
    per_item = table.drop_duplicates(["item_id", "rater"]).groupby("item_id")["rater"].nunique()
    report = {
        "files": [str(f) for f in files],
        "rows": int(len(table) // len(dimensions)),
        "raters": sorted(table["rater"].unique()),
        "items": int(table["item_id"].nunique()),
        "raters_per_item": {int(k): int(v) for k, v in per_item.value_counts().sort_index().items()},
        "items_with_several_raters": int((per_item > 1).sum()),
        "missing": {d: sum(m["dimension"] == d for m in missing) for d in dimensions},
        "missing_rows": missing,
        "key": str(key) if key is not None else None,
    }
    return _score_rows(table, known, per_rater), report
