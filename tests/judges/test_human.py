"""Human rating sheets: stratified sample, export -> fill -> import round trip, validation."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import openpyxl
import pandas as pd
import pytest

from cube.judges import dimension_criteria
from cube.judges.annotation import (
    RatingsError,
    annotation_sample,
    export_annotation_sheet,
    item_id,
    key_path,
    rating_columns,
)
from cube.judges.human import import_ratings
from cube.judges.scoring import SCORES_TABLE_COLUMNS
from cube.llm.usage import usage_summary

DIMS = ["relevance", "completeness"]
RAG_RANKS = [1, 3, 0, 2, 0, 1, 0, 4, 1, 2]  # 7 of 10 questions retrieved


@pytest.fixture
def tables() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    corpus = pd.DataFrame(
        {
            "doc_id": [f"d{i}" for i in range(10)],
            "text": [f"事项名称：营业执照办理{i}\n申请材料：身份证、申请表" for i in range(10)],
        }
    )
    questions = pd.DataFrame(
        {
            "question_id": [f"q{i}" for i in range(10)],
            "doc_id": corpus["doc_id"],
            "question": "需要什么材料？",
        }
    )
    rows = []
    for i, rank in enumerate(RAG_RANKS):
        for set_name, r, ids in (
            ("zero", 0, []),
            ("rag", rank, ["d9", f"d{i}"]),
            ("full", 1, [f"d{i}"]),
        ):
            rows.append(
                {
                    "question_id": f"q{i}",
                    "doc_id": f"d{i}",
                    "system": "bm25",
                    "set": set_name,
                    "answer": f"回答{i}{set_name}：请带身份证。",
                    "retrieved_doc_ids": ids,
                    "rank": r,
                }
            )
    return pd.DataFrame(rows), questions, corpus


def test_annotation_sample_stratified_and_deterministic(tables):
    answers = tables[0]
    sample = annotation_sample(answers, 12, seed=1)
    assert len(sample) == 12 and sample[["question_id", "set"]].drop_duplicates().shape[0] == 12
    # zero/full rows take the retrieval status of their question's rag answer
    expected = {f"q{i}": r > 0 for i, r in enumerate(RAG_RANKS)}
    assert (sample["retrieved"] == sample["question_id"].map(expected)).all()
    # 30 answers in 6 strata (3 sets x retrieved 7 / not 3): quotas 12 * 7/30 = 2.8 and
    # 12 * 3/30 = 1.2; floors 2 and 1 sum to 9, the 3 left go to the largest remainders (0.8)
    counts = sample.groupby(["set", "retrieved"]).size()
    assert counts.to_dict() == {
        (s, r): 3 if r else 1 for s in ("full", "rag", "zero") for r in (False, True)
    }
    shuffled = answers.sample(frac=1, random_state=5)
    again = annotation_sample(shuffled, 12, seed=1)
    pd.testing.assert_frame_equal(
        sample.drop(columns="retrieved_doc_ids"), again.drop(columns="retrieved_doc_ids")
    )
    assert not annotation_sample(answers, 12, seed=2)[["question_id", "set"]].equals(
        sample[["question_id", "set"]]
    )
    # fewer slots than strata: at most one per stratum
    assert annotation_sample(answers, 4, seed=0).groupby(["set", "retrieved"]).size().max() == 1


def test_annotation_sample_paired_keeps_all_sets(tables):
    sample = annotation_sample(tables[0], 4, seed=0, paired=True)
    assert len(sample) == 12
    assert (sample.groupby("question_id")["set"].nunique() == 3).all()
    assert (
        sample.drop_duplicates("question_id")["retrieved"].sum() == 3
    )  # quotas 4 * 7/10 = 2.8, 1.2


def _fill(sheet: pd.DataFrame, seed: int) -> tuple[pd.DataFrame, dict]:
    """Fill criteria with seeded points; rows of rater 'bob' give totals only."""
    rng = np.random.default_rng(seed)
    filled, expected = sheet.copy(), {}
    for idx, row in sheet.iterrows():
        for d in DIMS:
            points = rng.integers(0, 3, 5)
            if row["rater"] == "bob":
                filled.loc[idx, f"{d}.total"] = str(points.sum())
            else:
                for k, p in enumerate(points):
                    filled.loc[idx, f"{d}.c{k + 1}"] = str(p)
            expected[(row["rater"], row["item_id"], d)] = float(points.sum())
    return filled, expected


def _check_scores(scores: pd.DataFrame, expected: dict, answers: pd.DataFrame) -> None:
    got = {
        (j.split(":", 1)[1], item_id(q, s, t), d): v
        for q, s, t, j, d, v in scores[
            ["question_id", "system", "set", "judge", "dimension", "score"]
        ].itertuples(index=False)
    }
    assert got == expected
    assert (scores["sample"] == 0).all() and (scores["error"] == "").all()


@pytest.mark.parametrize("fmt", ["csv", "xlsx"])
def test_round_trip(tables, tmp_path: Path, fmt: str):
    answers, questions, corpus = tables
    sheet = export_annotation_sheet(
        answers,
        questions,
        corpus,
        DIMS,
        "zh",
        tmp_path / "sheet",
        size=6,
        seed=0,
        raters=["alice", "bob"],
    )
    assert len(sheet) == 12 and list(sheet.columns[5:]) == rating_columns(DIMS)
    assert (tmp_path / "sheet_criteria.csv").exists()
    key = pd.read_csv(
        tmp_path / "sheet_key.csv", dtype=str, keep_default_na=False, encoding="utf-8-sig"
    )
    assert len(key) == 6 and list(key["item_id"]) == list(sheet["item_id"][:6])
    crit = pd.read_csv(tmp_path / "sheet_criteria.csv", encoding="utf-8-sig")
    assert list(crit.loc[crit["dimension"] == "completeness", "wording"]) == dimension_criteria(
        "completeness", "zh"
    )
    book = openpyxl.load_workbook(tmp_path / "sheet.xlsx")
    assert book.sheetnames == ["instructions", "criteria", "ratings"]
    first, first_key = sheet.iloc[0], key.iloc[0]
    assert (
        first["gold_document"]
        == corpus.set_index("doc_id").loc[
            answers.set_index(["question_id", "set"]).loc[
                (first_key["question_id"], first_key["set"]), "doc_id"
            ],
            "text",
        ]
    )

    if fmt == "csv":
        on_disk = pd.read_csv(
            tmp_path / "sheet.csv", dtype=str, keep_default_na=False, encoding="utf-8-sig"
        )
        filled, expected = _fill(on_disk, seed=4)
        target = tmp_path / "filled" / "ratings.csv"
        target.parent.mkdir()
        filled.to_csv(target, index=False)
        expected = {
            (r, key.set_index("item_id").loc[i].pipe(lambda k: item_id(*k)), d): v
            for (r, i, d), v in expected.items()
        }
    else:
        ws = book["ratings"]
        header = [c.value for c in ws[1]]
        on_disk = pd.DataFrame(ws.iter_rows(min_row=2, values_only=True), columns=header).fillna("")
        filled, expected = _fill(on_disk, seed=4)
        for r, row in enumerate(filled.itertuples(index=False), start=2):
            for c, col in enumerate(header, start=1):
                if "." in col and row[c - 1] != "":
                    ws.cell(
                        row=r, column=c, value=int(row[c - 1])
                    )  # numbers, as a rater would type
        target = tmp_path / "filled" / "ratings.xlsx"
        target.parent.mkdir()
        book.save(target)
        expected = {
            (r, key.set_index("item_id").loc[i].pipe(lambda k: item_id(*k)), d): v
            for (r, i, d), v in expected.items()
        }

    with pytest.raises(RatingsError, match="no key file given"):
        import_ratings(target.parent, answers, DIMS)  # opaque ids need the key
    per_rater, report = import_ratings(
        target.parent, answers, DIMS, per_rater=True, key=tmp_path / "sheet_key.csv"
    )
    _check_scores(per_rater, expected, answers)
    assert report["raters"] == ["alice", "bob"] and report["items"] == 6
    assert report["raters_per_item"] == {2: 6} and report["missing"] == {
        "relevance": 0,
        "completeness": 0,
    }
    alice = per_rater[per_rater["judge"] == "human:alice"].iloc[0]
    detail = json.loads(alice["detail"])
    assert sum(detail["criteria"].values()) == alice["score"]

    (tmp_path / "sheet_key.csv").rename(
        target.parent / "sheet_key.csv"
    )  # a key inside the folder is found
    consensus, report = import_ratings(target.parent, answers, DIMS)
    assert report["key"] == str(target.parent / "sheet_key.csv")
    assert set(consensus["judge"]) == {"human"} and len(consensus) == 6 * len(DIMS)
    mean = per_rater.groupby(["question_id", "system", "set", "dimension"])["score"].mean()
    got = consensus.set_index(["question_id", "system", "set", "dimension"])["score"]
    pd.testing.assert_series_equal(got.sort_index(), mean.sort_index(), check_names=False)
    # the judges' table shape; a rating is no model call: skipped in the usage, cost 0, not a call
    assert (
        set(consensus.columns) == set(SCORES_TABLE_COLUMNS)
        and (consensus["finish_reason"] == "").all()
    )
    usage = usage_summary([per_rater]).iloc[0]
    assert (usage["model"], usage["calls"], usage["skipped"], usage["cost_total"]) == (
        "human",
        0,
        len(per_rater),
        0.0,
    )


@pytest.fixture
def blank_sheet(tables, tmp_path: Path) -> pd.DataFrame:
    answers, questions, corpus = tables
    export_annotation_sheet(answers, questions, corpus, DIMS, "en", tmp_path / "s", size=3, seed=0)
    sheet = pd.read_csv(tmp_path / "s.csv", dtype=str, keep_default_na=False, encoding="utf-8-sig")
    for d in DIMS:
        sheet[f"{d}.total"] = "5"
    return sheet


def _errors(sheet: pd.DataFrame, answers: pd.DataFrame, path: Path) -> str:
    sheet.to_csv(path, index=False)
    with pytest.raises(RatingsError) as info:
        import_ratings(path, answers, DIMS, key=path.parent / "s_key.csv")
    return str(info.value)


def test_invalid_sheets_name_file_row_and_column(tables, blank_sheet, tmp_path: Path):
    answers = tables[0]
    bad = blank_sheet.copy()
    bad.loc[1, "relevance.c2"] = "3"
    msg = _errors(bad, answers, tmp_path / "range.csv")
    assert "range.csv, row 3, column 'relevance.c2': value '3' is outside 0-2" in msg

    bad = blank_sheet.copy()
    bad.loc[0, "completeness.total"] = "11"
    bad.loc[2, "completeness.total"] = "many"
    msg = _errors(bad, answers, tmp_path / "total.csv")
    assert "total.csv, row 2, column 'completeness.total': value '11' is outside 0-10" in msg
    assert "row 4, column 'completeness.total': 'many' is not a number" in msg

    bad = blank_sheet.copy()
    bad.loc[0, "item_id"] = "A999"
    msg = _errors(bad, answers, tmp_path / "unknown.csv")
    assert "unknown.csv, row 2, column 'item_id': unknown item id 'A999' (not in the key" in msg

    bad = pd.concat([blank_sheet, blank_sheet.iloc[[1]]], ignore_index=True)
    msg = _errors(bad, answers, tmp_path / "dup.csv")
    assert "dup.csv, row 5: rater 'dup' rated item" in msg and "first at" in msg and "row 3" in msg

    bad = blank_sheet.copy()
    for k in range(1, 6):
        bad.loc[0, f"relevance.c{k}"] = "1"  # criteria sum 5 ...
    bad.loc[0, "relevance.total"] = "7"  # ... but the total says 7
    msg = _errors(bad, answers, tmp_path / "sum.csv")
    assert (
        "sum.csv, row 2, column 'relevance.total': total 7 disagrees with the criteria sum 5" in msg
    )
    assert isinstance(RatingsError(["x"]), ValueError)


def test_missing_cells_reported_not_guessed(tables, blank_sheet, tmp_path: Path):
    answers = tables[0]
    sheet = blank_sheet.copy()
    sheet.loc[1, "completeness.total"] = ""
    sheet.loc[1, "completeness.c1"] = "2"  # a partial criteria row without total: still missing
    sheet.loc[2, "relevance.total"] = ""
    path = tmp_path / "rater7.csv"
    sheet.to_csv(path, index=False)
    scores, report = import_ratings(path, answers, DIMS, per_rater=True, key=tmp_path / "s_key.csv")
    assert set(scores["judge"]) == {"human:rater7"}  # rater id from the file stem
    assert report["missing"] == {"relevance": 1, "completeness": 1}
    rows = {(m["row"], m["dimension"]) for m in report["missing_rows"]}
    assert rows == {(3, "completeness"), (4, "relevance")}
    missing = scores[scores["error"] == "missing"]
    assert len(missing) == 2 and missing["score"].isna().all()
    assert scores["score"].notna().sum() == 3 * len(DIMS) - 2


def test_rater_files_in_folder(tables, blank_sheet, tmp_path: Path):
    answers = tables[0]
    folder = tmp_path / "returned"
    folder.mkdir()
    (tmp_path / "s_key.csv").rename(folder / "s_key.csv")  # not read as a rater's file
    blank_sheet.to_csv(folder / "ann.csv", index=False)
    other = blank_sheet.copy()
    for d in DIMS:
        other[f"{d}.total"] = "9"
    other.to_csv(folder / "ben.csv", index=False)
    scores, report = import_ratings(folder, answers, DIMS)
    assert report["raters"] == ["ann", "ben"] and report["items_with_several_raters"] == 3
    assert (scores["score"] == 7.0).all()  # mean of 5 and 9
    other.to_excel(folder / "ben.xlsx", index=False)
    with pytest.raises(RatingsError, match="ben.csv and ben.xlsx"):
        import_ratings(folder, answers, DIMS)


def test_sheet_is_blind(tables, tmp_path: Path):
    """Raters see question, gold document and answer only: no system/set column, and no id,
    text or cell that reveals them; the key file maps the ids back."""
    answers, questions, corpus = tables
    answers = pd.concat([answers, answers.assign(system="dense-top4")], ignore_index=True)
    sheet = export_annotation_sheet(
        answers,
        questions,
        corpus,
        DIMS,
        "en",
        tmp_path / "annotation_sheet",
        size=8,
        seed=3,
        paired=True,
    )
    key = pd.read_csv(key_path(tmp_path / "annotation_sheet"), dtype=str, keep_default_na=False)
    assert key_path(tmp_path / "annotation_sheet").name == "annotation_key.csv"
    for frame in (
        sheet,
        pd.read_csv(tmp_path / "annotation_sheet.csv", dtype=str, keep_default_na=False),
        pd.read_excel(tmp_path / "annotation_sheet.xlsx", sheet_name="ratings", dtype=str),
    ):
        assert list(frame.columns[:5]) == [
            "item_id",
            "question",
            "gold_document",
            "answer",
            "rater",
        ]
        assert not {"system", "set", "question_id", "doc_id", "retrieved"} & set(frame.columns)
        assert frame["item_id"].str.fullmatch(r"A\d{3}").all() and frame["item_id"].is_unique
        cells = frame[["item_id", "rater"]].fillna("").astype(str).to_numpy().ravel()
        for word in ("bm25", "dense", "zero", "rag", "full", "q1"):
            assert not any(word in c for c in cells), word
    # 8 (question, system) pairs x 3 sets, ids in sheet order, every answer set of a pair present
    assert len(sheet) == len(key) == 24 and list(key["item_id"]) == list(sheet["item_id"])
    assert (key.groupby(["question_id", "system"])["set"].nunique() == 3).all()
    assert list(sheet["item_id"]) == sorted(sheet["item_id"])  # ids follow the shuffled order ...
    assert list(key["set"][:6]) != sorted(key["set"][:6])  # ... which does not group the sets
    answer_of = answers.set_index(["question_id", "system", "set"])["answer"]
    assert [answer_of[tuple(k)] for k in key[["question_id", "system", "set"]].to_numpy()] == list(
        sheet["answer"]
    )


def test_old_unblinded_sheet_still_imports(tables, tmp_path: Path):
    """A sheet filled before blinding (item ids question::system::set, system/set columns) needs no
    key."""
    answers = tables[0]
    rows = answers.iloc[:4]
    old = pd.DataFrame(
        {
            "item_id": [
                item_id(q, s, t) for q, s, t in rows[["question_id", "system", "set"]].to_numpy()
            ],
            "question_id": rows["question_id"],
            "system": rows["system"],
            "set": rows["set"],
            "question": "?",
            "gold_document": "",
            "answer": rows["answer"],
            "rater": "old",
        }
    )
    for d in DIMS:
        old[f"{d}.total"] = "6"
    old.to_csv(tmp_path / "old.csv", index=False)
    scores, report = import_ratings(tmp_path / "old.csv", answers, DIMS)
    assert report["key"] is None and len(scores) == 4 * len(DIMS) and (scores["score"] == 6.0).all()
    assert set(zip(scores["question_id"], scores["set"], strict=True)) == set(
        zip(rows["question_id"], rows["set"], strict=True)
    )


def test_bad_key_rows_are_reported(tables, tmp_path: Path):
    answers, questions, corpus = tables
    export_annotation_sheet(answers, questions, corpus, DIMS, "en", tmp_path / "s", size=2, seed=0)
    key = pd.read_csv(tmp_path / "s_key.csv", dtype=str, keep_default_na=False)
    key.loc[1, "system"] = "nope"
    key.to_csv(tmp_path / "s_key.csv", index=False)
    sheet = pd.read_csv(tmp_path / "s.csv", dtype=str, keep_default_na=False)
    sheet.to_csv(tmp_path / "r.csv", index=False)
    with pytest.raises(RatingsError) as info:
        import_ratings(tmp_path / "r.csv", answers, DIMS, key=tmp_path / "s_key.csv")
    msg = str(info.value)
    assert "s_key.csv, row 3: (" in msg and "nope" in msg and "is not in the answers" in msg
    assert (
        f"unknown item id {sheet.loc[1, 'item_id']!r}" in msg
    )  # and the row that needed it, together
    with pytest.raises(RatingsError, match="key file not found"):
        import_ratings(tmp_path / "r.csv", answers, DIMS, key=tmp_path / "absent_key.csv")
