"""Human ratings, the first half: the stratified annotation sample and the blind rating sheet
(paper 5.6). Reading filled sheets back is `cube.judges.human`.

The sheet is blind: its columns are `item_id, question, gold_document, answer, rater`, then per
dimension `<dimension>.c1 .. <dimension>.c5` (0-2) and `<dimension>.total` (0-10). Raters never see
the system nor the answer set (zero/rag/full): `item_id` is an opaque id (`A001`, `A002`, ... in the
shuffled order of the sample), and a separate key file (`annotation_key.csv` next to
`annotation_sheet.csv`, kept by the organiser) maps it to `question_id, system, set`. No cell of
either is a formula, whatever an answer begins with (`cube.config.sheets`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cube.config.schema import (
    ANSWER_COLUMNS,
    SchemaError,
    require_columns,
)
from cube.config.sheets import write_csv, write_xlsx_sheet
from cube.judges.dimensions import dimension_criteria

CRITERIA: tuple[str, ...] = ("c1", "c2", "c3", "c4", "c5")
CRITERION_MAX = 2.0
TOTAL_MAX = 10.0
SHEET_COLUMNS = ("item_id", "question", "gold_document", "answer", "rater")
KEY_COLUMNS = ("item_id", "question_id", "system", "set")
EXCEL_CELL_LIMIT = 32767  # characters; Excel silently refuses longer cells

INSTRUCTIONS = {
    "en": [
        "Rate each answer on each dimension; the sheet 'criteria' gives the five criteria of every "
        "dimension.",
        "Each criterion <dimension>.c1 .. c5 is worth 0, 1 or 2 points; <dimension>.total (0-10) "
        "is their sum.",
        "You may fill only the total; if you fill all five criteria and the total, the total must "
        "equal the sum.",
        "Leave a cell blank if you cannot rate it: blanks are reported, never guessed.",
        "Judge the answer against the question and the gold document. Do not edit item_id or add "
        "rows.",
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
        super().__init__(
            f"{len(self.errors)} problem(s) in the ratings:\n" + "\n".join(shown) + more
        )


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
    rag_rank = rag.groupby([rag["question_id"].astype(str), rag["system"].astype(str)])[
        "_rank"
    ].max()
    keys = pd.MultiIndex.from_arrays(
        [answers["question_id"].astype(str), answers["system"].astype(str)]
    )
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
    df = df.sort_values(
        ["question_id", "system", "set"], key=lambda s: s.astype(str), kind="stable"
    )
    df = df.reset_index(drop=True)
    strata = _checked_strata(df, strata, paired)
    units = df.drop_duplicates(["question_id", "system"]) if paired else df
    rng = np.random.default_rng(seed)
    chosen = units if size >= len(units) else _stratified(units, strata, size, rng)
    if paired:
        chosen = _every_set_of(df, chosen)
    return chosen.iloc[rng.permutation(len(chosen))].reset_index(drop=True)


def _checked_strata(df: pd.DataFrame, strata: tuple[str, ...], paired: bool) -> tuple[str, ...]:
    """The strata to sample by (`set` is no stratum of paired units); a missing column raises."""
    strata = tuple(s for s in strata if not (paired and s == "set"))
    for s in strata:
        if s not in df.columns:
            raise SchemaError(
                f"answers: stratum column {s!r} not found; columns: {list(df.columns)}"
            )
    return strata


def _stratified(
    units: pd.DataFrame, strata: tuple[str, ...], size: int, rng: np.random.Generator
) -> pd.DataFrame:
    """`size` units drawn without replacement, allocated over the strata (`_allocate`)."""
    groups = [g for _, g in units.groupby(list(strata), sort=True)] if strata else [units]
    alloc = _allocate(np.array([len(g) for g in groups]), size)
    return pd.concat(
        [
            g.iloc[np.sort(rng.choice(len(g), k, replace=False))]
            for g, k in zip(groups, alloc, strict=True)
        ]
    )


def _every_set_of(df: pd.DataFrame, chosen: pd.DataFrame) -> pd.DataFrame:
    """All the answer rows (every set) of the chosen (question, system) units."""
    keys = pd.MultiIndex.from_frame(chosen[["question_id", "system"]].astype(str))
    return df[pd.MultiIndex.from_frame(df[["question_id", "system"]].astype(str)).isin(keys)]


def rating_columns(dimensions: list[str]) -> list[str]:
    """`<dimension>.c1 .. c5, <dimension>.total` for every dimension."""
    return [f"{d}.{c}" for d in dimensions for c in (*CRITERIA, "total")]


def _criteria_table(dimensions: list[str], lang: str) -> pd.DataFrame:

    rows = []
    for d in dimensions:
        wording = list(dimension_criteria(d, lang))
        if len(wording) != len(CRITERIA):
            raise ValueError(
                f"dimension {d!r}: expected {len(CRITERIA)} criteria, got {len(wording)}"
            )
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
    sample = annotation_sample(answers, size, seed, paired=paired)
    return write_annotation_sheet(sample, questions, corpus, dimensions, lang, path, raters=raters)


def _check_lookups(sample: pd.DataFrame, question_text: dict, gold: dict) -> None:
    """Every sampled answer's question and gold document are known (else the ids, named)."""
    for col, lookup, table in (
        ("question_id", question_text, "questions"),
        ("doc_id", gold, "corpus"),
    ):
        unknown = sorted(set(sample[col].astype(str)) - set(lookup))
        if unknown:
            raise SchemaError(
                f"{table}: no row for {col} {unknown[:10]} used by the sampled answers"
            )


def write_annotation_sheet(
    sample: pd.DataFrame,
    questions: pd.DataFrame,
    corpus: pd.DataFrame,
    dimensions: list[str],
    lang: str,
    path: Path,
    *,
    raters: list[str] | None = None,
    key_extra: dict[str, pd.Series] | None = None,
    prefix: str = "A",
) -> pd.DataFrame:
    """Write the blind rating sheet of the answer rows `sample` (in their order) as
    `export_annotation_sheet` does; `key_extra`: more key columns (aligned with `sample`, e.g. the
    review sheet's `reason`, `cube.run.review`); `prefix`: the opaque ids' letter (a review sheet's
    `R001` cannot be read through a sampled sheet's key by mistake)."""
    require_columns(questions, ("question_id", "question"), "questions")
    require_columns(corpus, ("doc_id", "text"), "corpus")
    criteria = _criteria_table(dimensions, lang)
    question_text = dict(
        zip(questions["question_id"].astype(str), questions["question"], strict=False)
    )
    gold = dict(zip(corpus["doc_id"].astype(str), corpus["text"], strict=False))
    _check_lookups(sample, question_text, gold)
    # the sample is shuffled, so the ids follow no system or set
    ids = opaque_ids(len(sample), prefix)
    key = pd.DataFrame(
        {
            "item_id": ids,
            "question_id": sample["question_id"].astype(str),
            "system": sample["system"].astype(str),
            "set": sample["set"].astype(str),
            **{k: v.astype(str).to_numpy() for k, v in (key_extra or {}).items()},
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
    # no cell is a formula: text beginning with = + - @ gets a quote in the CSV, a string type in
    # the XLSX (cube.config.sheets; cube.judges.human reads the text back as it was)
    write_csv(sheet, path.with_suffix(".csv"), index=False, encoding="utf-8-sig")
    write_csv(key, key_path(path), index=False, encoding="utf-8-sig")
    write_csv(
        criteria, path.with_name(f"{path.stem}_criteria.csv"), index=False, encoding="utf-8-sig"
    )
    too_long = [
        c
        for c in ("question", "gold_document", "answer")
        if sheet[c].str.len().max() > EXCEL_CELL_LIMIT
    ]
    if too_long:
        raise ValueError(
            f"{path.with_suffix('.xlsx')}: column(s) {too_long} hold text longer than Excel's "
            f"{EXCEL_CELL_LIMIT}-character cell limit; the CSV was written, use it instead"
        )
    instructions = pd.DataFrame({"instructions": INSTRUCTIONS.get(lang, INSTRUCTIONS["en"])})
    with pd.ExcelWriter(path.with_suffix(".xlsx"), engine="openpyxl") as writer:
        write_xlsx_sheet(writer, instructions, "instructions")
        write_xlsx_sheet(writer, criteria, "criteria")
        write_xlsx_sheet(writer, sheet, "ratings")
        writer.sheets["ratings"].freeze_panes = "B2"
    return sheet
