"""Sheets people open in a spreadsheet: no cell the project writes is ever a formula.

A system's answer, a question, a document or a name may begin with `=`, `+`, `-` or `@` (or a tab
or carriage return): a spreadsheet opening the CSV, or openpyxl writing the XLSX, would make it a
live formula (`=HYPERLINK("http://...?q="&B2, "Click")`, `+cmd|' /C calc'!A0`): CSV or formula
injection. The project writes such text as text, after OWASP's advice: in a CSV the cell gets a
leading single quote (`guard`); in an XLSX the cell keeps its text and is typed as a string
(`write_xlsx_sheet`), so openpyxl never stores it as a formula. Only strings are guarded: a number
(a negative one included) is written as a number.

Reading a sheet back (`unguard`, `read_guarded_csv`) removes exactly the quote `guard` added, so
the text comes back as it was: a text that itself begins with quotes before such a character gets
one more quote, and loses exactly that one when read (`unguard(guard(x)) == x` for every string).
`write_csv` is the one writer of the project's CSV files (tables, the annotation sheet and its
key, the compare exports, the simulation's tables).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def needs_guard(text: str) -> bool:
    """True when `text`, after any leading single quotes, begins with a formula character."""
    return text.lstrip("'").startswith(FORMULA_START)


def guard(value: Any) -> Any:
    """A CSV cell's value: a string that a spreadsheet would read as a formula with a leading
    single quote; anything else (numbers, None, NaN, other strings) unchanged."""
    return "'" + value if isinstance(value, str) and needs_guard(value) else value


def unguard(value: Any) -> Any:
    """The inverse of `guard`: the quote it added removed, anything else unchanged."""
    if isinstance(value, str) and value.startswith("'") and needs_guard(value[1:]):
        return value[1:]
    return value


def guarded_frame(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of `df` with every string cell, column name and index label `guard`ed (columns
    of numbers are left as they are)."""
    out = df.copy()
    for col in out.columns:
        if out[col].dtype == object or pd.api.types.is_string_dtype(out[col]):
            out[col] = out[col].map(guard)
    out.columns = _guarded_index(out.columns)
    out.index = _guarded_index(out.index)
    return out


def _guarded_index(index: pd.Index) -> pd.Index:
    if isinstance(index, pd.MultiIndex):
        return pd.MultiIndex.from_tuples(
            [tuple(guard(v) for v in t) for t in index], names=index.names
        )
    if index.dtype == object or pd.api.types.is_string_dtype(index):
        return pd.Index([guard(v) for v in index], name=guard(index.name), dtype=object)
    return index


def write_csv(df: pd.DataFrame, path: str | Path, **kwargs: Any) -> Path:
    """`df.to_csv(path, **kwargs)` with every cell `guard`ed: no cell a spreadsheet opens is a
    formula. Lines end in CRLF (RFC 4180), so that a text holding a lone carriage return is
    quoted like one holding a line feed (the csv module quotes only the line ending's
    characters). Returns the path."""
    guarded_frame(df).to_csv(path, **{"lineterminator": "\r\n", **kwargs})
    return Path(path)


def unguarded_frame(df: pd.DataFrame) -> pd.DataFrame:
    """A frame read from a guarded CSV with the text as it was written (`unguard` on every
    string cell and column name)."""
    out = df.copy()
    for col in out.columns:
        if out[col].dtype == object or pd.api.types.is_string_dtype(out[col]):
            out[col] = out[col].map(unguard)
    out.columns = [unguard(c) for c in out.columns]
    return out


def read_guarded_csv(path: str | Path, **kwargs: Any) -> pd.DataFrame:
    """`pd.read_csv(path, **kwargs)` of a CSV `write_csv` wrote, each text as it was."""
    return unguarded_frame(pd.read_csv(path, **kwargs))


def write_xlsx_sheet(writer: pd.ExcelWriter, df: pd.DataFrame, sheet_name: str) -> None:
    """`df` as the sheet `sheet_name` of an openpyxl `ExcelWriter`, without the index, every
    string cell typed as a string: openpyxl stores a string beginning with `=` as a formula
    unless its type says otherwise. Numbers stay numbers."""
    df.to_excel(writer, sheet_name=sheet_name, index=False)
    for row in writer.sheets[sheet_name].iter_rows():
        for cell in row:
            if isinstance(cell.value, str) and cell.data_type == "f":
                cell.data_type = "s"
