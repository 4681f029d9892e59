"""Tables formatted for people in notebooks and published pages.

`table(df)` returns the same data as a `ShownTable` (a DataFrame: computations on it give plain
DataFrames) whose notebook/HTML display has human headers (`trim_proportion` -> "Trim proportion"),
numbers rounded (2 decimals; whole numbers without decimals), no index column (a meaningful index
becomes ordinary columns), missing values as an empty cell in text columns and "n/a" in numeric
ones, p-values by `format_p` ("< 0.0001" below 1e-4; the one p-value formatter, defined in
`cube.method.analysis` so the gate's and the audit's sentences use it too), booleans as yes/no,
lists joined, long text wrapped with its line breaks kept (at blanks, a word broken only when it
alone is wider than the column), names (short text without a blank:
"rubric-lenient") and headers never broken mid-word, and every column shown: a table of more
than `MAX_COLUMNS` columns in parts one under the other, each repeating the name columns, so
nothing is cut off at a 1280 px page. The CSV written by `Run.table` keeps the raw values. `links`
turn the cells of a column into links (e.g. question ids into the judgment browser,
`cube.pages.browser`): per column, a function of the row giving the cell's href, or a list of (text,
href) pairs, or None (no link); text and href are both escaped (`cube.pages.escape.escape_text`).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable
from typing import Any

import pandas as pd

from cube.method.analysis import format_p
from cube.pages.escape import escape_text

MAX_ROWS = 200
MARK = " †"  # a cell `marks` single out (`to_html`); the table's footnote says why
# A table wider than this many columns is shown in parts, each repeating the leading name columns
# (system, judge, ...), so that no column is cut off at a 1280 px page width.
MAX_COLUMNS = 10
NAME_CHARS = 40  # a text cell this short without a blank is a name: never broken across lines
# Abbreviations kept as written in headers.
KEEP = {
    "id": "ID",
    "sd": "SD",
    "ci": "CI",
    "llm": "LLM",
    "bm25": "BM25",
    "r@k": "R@k",
    "cube": "CuBE",
    "w": "W",
    "ndcg": "nDCG",
    "mrr": "MRR",
    "bleu": "BLEU",
    "rouge": "ROUGE",
    "kb": "KB",
    "n": "n",
    "qa": "QA",
    "icc": "ICC",
    "p": "p",
    "rag": "rag",
    "top": "top",
}
# `!important`: JupyterLab's and nbconvert's own table styles right-align every cell.
STYLE = (
    "<style>.cube-table{border-collapse:collapse;font-size:.9rem;margin:.4em 0}"
    ".cube-table th,.cube-table td{border:1px solid #d9dde3;padding:4px 8px;vertical-align:top;"
    "text-align:left!important}.cube-table th{background:#eef1f5}"
    ".cube-table td.num{text-align:right!important;"
    "font-variant-numeric:tabular-nums;white-space:nowrap}.cube-table td.text{white-space:pre-wrap;"
    "max-width:42em;overflow-wrap:break-word}.cube-table td.name{white-space:nowrap}"
    ".cube-table th{overflow-wrap:normal;word-break:normal;hyphens:none}"
    ".cube-parts{overflow-x:auto;max-width:100%}"
    ".cube-table caption{caption-side:bottom;color:#5b6472;text-align:left;font-size:.85rem}"
    "</style>"
)


def header(name: Any) -> str:
    """`snake_case` (or a tuple of MultiIndex levels) as a header a person reads."""
    if isinstance(name, tuple):
        return " · ".join(header(n) for n in name if str(n) != "")
    text = str(name)
    if not re.fullmatch(r"[A-Za-z0-9_@]+", text):
        return text  # already a phrase, or a name (a judge, a system) to show as written
    words = [KEEP.get(w.lower(), w) for w in text.split("_") if w]
    if words and words[0] == words[0].lower() and words[0] not in KEEP.values():
        words[0] = words[0][:1].upper() + words[0][1:]
    return " ".join(words)


def _missing(value: Any) -> bool:
    """Whether a value is missing (None, NaN, `pd.NA`, `pd.NaT`): an empty cell."""
    return (
        value is None
        or (isinstance(value, float) and math.isnan(value))
        or value is pd.NA
        or value is pd.NaT
    )


def _int_text(value: Any) -> str:
    """A whole number, its thousands separated by a blank from 10 000 on."""
    n = int(value)
    return f"{n:,}".replace(",", " ") if abs(n) >= 10_000 else str(n)


def _float_text(v: float, digits: int) -> str:
    """A float: ∞ as a sign, a whole value without decimals, a small one in two significant
    digits (never 0.00), else `digits` decimals."""
    if math.isinf(v):
        return "∞" if v > 0 else "-∞"
    if v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return f"{v:.{digits}f}" if abs(v) >= 10**-digits else f"{v:.2g}"


def _is_sequence(value: Any) -> bool:
    """A list, tuple, set or numpy array: shown joined."""
    return isinstance(value, list | tuple | set) or type(value).__name__ == "ndarray"


def cell(value: Any, digits: int = 2) -> tuple[str, str]:
    """(text, css class) of one value."""
    if _missing(value):
        return "", "text"
    if isinstance(value, bool | np_bool()):
        return ("yes" if value else "no"), "text"
    if isinstance(value, int | np_int()):
        return _int_text(value), "num"
    if isinstance(value, float | np_float()):
        return _float_text(float(value), digits), "num"
    if _is_sequence(value):
        return ", ".join(cell(v, digits)[0] for v in value), "text"
    return str(value), "text"


_P_COLUMN = re.compile(r"(?:^|[_\s])p(?:[_\s]?value|_holm)?(?:$|[_\s])", re.I)


def is_p_column(name: Any) -> bool:
    """Whether a column holds p-values (`p`, `p_value`, `gate_p_value`, `p_holm`, `ks_p_value`
    ...): its cells are printed by `format_p` ("< 0.0001", never 1.7e-53)."""
    return bool(_P_COLUMN.search(str(name)))


def np_bool():
    import numpy as np

    return np.bool_


def np_int():
    import numpy as np

    return np.integer


def np_float():
    import numpy as np

    return np.floating


Links = dict[str, Callable[[dict[str, Any]], "str | list[tuple[str, str]] | None"]]


def _linked(text: str, target: str | list[tuple[str, str]] | None) -> str:
    if target is None:
        return escape_text(text)
    if isinstance(target, str):
        return f'<a href="{escape_text(target)}">{escape_text(text)}</a>' if text else ""
    return ", ".join(f'<a href="{escape_text(h)}">{escape_text(t)}</a>' for t, h in target)


def column_parts(
    frame: pd.DataFrame, numeric: set[Any], max_columns: int = MAX_COLUMNS
) -> list[list[int]]:
    """Column positions of each part of a wide table: all columns when they fit in `max_columns`,
    else the leading name columns (up to two text columns) repeated before each slice of the
    rest."""
    n = len(frame.columns)
    if n <= max_columns:
        return [list(range(n))]
    keys = []
    for i, c in enumerate(frame.columns[:2]):
        if c in numeric:
            break
        keys.append(i)
    rest = [i for i in range(n) if i not in keys]
    count = math.ceil(len(rest) / (max_columns - len(keys)))
    size = math.ceil(len(rest) / count)  # balanced parts: 9 columns as 5 + 4, not 8 + 1
    return [keys + rest[j : j + size] for j in range(0, len(rest), size)]


Marks = dict[str, Callable[[dict[str, Any]], bool]]
_SENTENCE_MARKS = set("，。？！；：、")  # a Chinese sentence's, never in a name


def is_name(text: str) -> bool:
    """Whether a text cell is a name, never broken across lines: short (at most `NAME_CHARS`
    columns, a Chinese character counting two) with no blank and no sentence punctuation. A Chinese
    question has no blank either: without the width and punctuation rules it was kept on one line
    and pushed page 07's annotation table past a 1280 px page."""
    if not text or any(c.isspace() for c in text):
        return False
    width = sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)
    return width <= NAME_CHARS and not any(c in _SENTENCE_MARKS for c in text)


def _text_and_class(col: Any, value: Any, fmt: dict[str, Any]) -> tuple[str, str]:
    """A cell's text and css class: a p-value by `format_p`, a missing number as "n/a", a name
    kept on one line."""
    text, cls = (format_p(value), "num") if col in fmt["pcols"] else cell(value, fmt["digits"])
    if col in fmt["numeric"] and text == "":
        return "n/a", "num"
    if cls == "text" and is_name(text):
        return text, "text name"
    return text, cls


def _applies(per_column: Links | Marks | None, col: Any, text: str) -> bool:
    """Whether a function of `per_column` (links or marks) applies to a cell: one for its column
    and a cell that is not empty."""
    return bool(per_column and col in per_column and text)


def _td(col: Any, value: Any, row: dict[str, Any], fmt: dict[str, Any], links: Links | None) -> str:
    """One cell as `<td>` (see `to_html`); `fmt`: digits, numeric and p-value columns, marks."""
    text, cls = _text_and_class(col, value, fmt)
    inner = _linked(text, links[col](row)) if _applies(links, col, text) else escape_text(text)
    marks = fmt["marks"]
    if _applies(marks, col, text) and marks[col](row):
        inner += MARK
    return f'<td class="{cls}">{inner}</td>'


def _flat(df: pd.DataFrame) -> pd.DataFrame:
    """The table with a meaningful index (named, or not 0..n-1) made ordinary columns."""
    if not isinstance(df.index, pd.RangeIndex) or df.index.name is not None:
        return df.reset_index()
    return df


def _numeric_columns(frame: pd.DataFrame) -> set[Any]:
    """The columns of numbers (booleans are yes/no text)."""
    is_number, is_bool = pd.api.types.is_numeric_dtype, pd.api.types.is_bool_dtype
    return {c for c in frame.columns if is_number(frame[c]) and not is_bool(frame[c])}


def _row_cells(
    frame: pd.DataFrame, fmt: dict[str, Any], links: Links | None, max_rows: int
) -> list[list[str]]:
    """Per row shown (the first `max_rows`), the `<td>` of each column."""
    cells = []
    for values in frame.head(max_rows).itertuples(index=False, name=None):
        # the row as a dict only for the functions that read it
        row = dict(zip(frame.columns, values, strict=True)) if links or fmt["marks"] else {}
        cells.append(
            [
                _td(col, value, row, fmt, links)
                for col, value in zip(frame.columns, values, strict=True)
            ]
        )
    return cells


def _rows_note(rows: int, max_rows: int) -> str:
    """What the caption says of rows left out (nothing when all are shown)."""
    if rows <= max_rows:
        return ""
    return f"{rows} rows; the first {max_rows} are shown (all are in the CSV)."


def _part_note(k: int, parts: int, columns: int) -> str:
    """Which part of a wide table this is (nothing for a table shown whole)."""
    if parts == 1:
        return ""
    after = "; continued below." if k < parts else "."
    return (
        f"Part {k} of {parts} of a table of {columns} columns (the first columns repeated){after}"
    )


def _joined(*texts: str) -> str:
    """The non-empty texts joined by a blank."""
    return " ".join(x for x in texts if x)


def _caption(k: int, parts: int, columns: int, caption: str, note: str) -> str:
    """Part `k`'s caption: its part note; the caption and the rows note under the last part."""
    last = _joined(caption, note) if k == parts else ""
    return _joined(_part_note(k, parts, columns), last)


def _table_part(cap: str, heads: list[str], cells: list[list[str]], cols: list[int]) -> str:
    """One `<table>` of the columns at positions `cols`."""
    body = "".join("<tr>" + "".join(tds[i] for i in cols) + "</tr>" for tds in cells)
    return (
        '<table class="cube-table">'
        + (f"<caption>{escape_text(cap)}</caption>" if cap else "")
        + f"<thead><tr>{''.join(heads[i] for i in cols)}</tr></thead>"
        f"<tbody>{body}</tbody></table>"
    )


def to_html(
    df: pd.DataFrame,
    digits: int = 2,
    caption: str = "",
    max_rows: int = MAX_ROWS,
    links: Links | None = None,
    marks: Marks | None = None,
) -> str:
    """The table as HTML for people (see the module docstring). Every value is escaped. A table of
    more than `MAX_COLUMNS` columns is shown in parts (`column_parts`), one under the other.
    `marks`: per column, a function of the row saying whether its cell gets `MARK` (a footnote
    explains it: put it in `caption`)."""
    frame = _flat(df)
    numeric = _numeric_columns(frame)
    fmt = {
        "digits": digits,
        "numeric": numeric,
        "pcols": {c for c in numeric if is_p_column(c)},
        "marks": marks,
    }
    cells = _row_cells(frame, fmt, links, max_rows)
    note = _rows_note(len(frame), max_rows)
    heads = [f"<th>{escape_text(header(c))}</th>" for c in frame.columns]
    parts = column_parts(frame, numeric)
    n, width = len(parts), len(frame.columns)
    tables = [
        _table_part(_caption(k, n, width, caption, note), heads, cells, cols)
        for k, cols in enumerate(parts, 1)
    ]
    if len(tables) == 1:
        return STYLE + tables[0]
    return f'{STYLE}<div class="cube-parts">{"".join(tables)}</div>'


class ShownTable(pd.DataFrame):
    """A DataFrame displayed by `to_html` in notebooks; anything computed from it is a plain
    DataFrame."""

    _metadata = ["_cube_digits", "_cube_links", "_cube_marks", "_cube_note"]

    @property
    def _constructor(self):  # noqa: D401 (pandas hook)
        return pd.DataFrame

    def _repr_html_(self) -> str:
        return to_html(
            self,
            getattr(self, "_cube_digits", 2) or 2,
            caption=getattr(self, "_cube_note", "") or "",
            links=getattr(self, "_cube_links", None),
            marks=getattr(self, "_cube_marks", None),
        )


def table(df: pd.DataFrame, digits: int = 2, links: Links | None = None) -> ShownTable:
    """`df` unchanged, displayed for people (see the module docstring), with `links` if given."""
    shown = ShownTable(df)
    shown._cube_digits = digits
    shown._cube_links = links
    shown._cube_marks = None
    shown._cube_note = ""
    return shown


def mark_outside(
    df: pd.DataFrame,
    columns: list[Any],
    low: float,
    high: float,
    note: str,
    skip: Callable[[dict[str, Any]], bool] | None = None,
) -> ShownTable:
    """`df` displayed (`table`, keeping the digits and links of a `ShownTable`) with `MARK` on
    every value of `columns` outside [low, high] (rows for which `skip` is true left unmarked, an
    SD row say), and `note` under the table saying what a mark means (when any cell is marked)."""

    def outside(col: Any) -> Callable[[dict[str, Any]], bool]:
        def test(row: dict[str, Any]) -> bool:
            v = pd.to_numeric(pd.Series([row.get(col)]), errors="coerce").iloc[0]
            return bool(pd.notna(v) and not low <= v <= high and not (skip and skip(row)))

        return test

    shown = table(df, getattr(df, "_cube_digits", 2) or 2, getattr(df, "_cube_links", None))
    shown._cube_marks = {c: outside(c) for c in columns if c in df.columns}
    rows = df.reset_index().to_dict("records")
    marked = any(t(r) for t in shown._cube_marks.values() for r in rows)
    shown._cube_note = f"{MARK.strip()} {note}" if marked else ""
    return shown


def with_note(df: pd.DataFrame, note: str) -> ShownTable:
    """`df` displayed (`table`, keeping a `ShownTable`'s digits and links) with `note` under it."""
    shown = table(df, getattr(df, "_cube_digits", 2) or 2, getattr(df, "_cube_links", None))
    shown._cube_note = note
    return shown
