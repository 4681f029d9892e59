"""An imported file (`cube.systems.imported`) read: its table, its columns by our names
(`COLUMN_ALIASES`, `resolve_columns`), its cells (lists of doc ids, lists of passages), and a
row's gold document from its reference cells (`questions.generator: imported`,
`cube.systems.imported_questions`).

A list cell is a list (JSONL, JSON, Parquet), a JSON list, a Python list as pandas and ragas'
`to_csv` write one into a CSV (`['a', 'b']`), or a string: ids separated by `|` or `;`, or one
passage. DeepEval's CSV and JSONL exports join passages with `|` (`passages_parser`).

A row's gold document (`gold_documents`): its ids (`doc_id`, ragas `reference_context_ids`), all
naming one knowledge-base document; else its reference passages (ragas `reference_contexts`,
DeepEval `context`) mapped by `cube.systems.passages.map_passages` (the mapping retrieved passages
get, ties resolved within the row's own passages), every passage mapped, all to one document.
Anything else is no gold document, with the reason; never a guess.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cube.config.schema import parse_doc_list
from cube.config.sheets import unguarded_frame
from cube.systems.passages import map_passages

# Our column -> the names accepted for it, in order of preference: ours, then ragas'
# (EvaluationDataset / SingleTurnSample), DeepEval's (LLMTestCase) and ragas 0.1's.
COLUMN_ALIASES: dict[str, tuple[str, ...]] = {
    "question_id": ("question_id",),
    "question": ("question", "user_input", "input"),
    "answer": ("answer", "response", "actual_output"),
    "retrieved_doc_ids": (
        "retrieved_doc_ids",
        "retrieved",
        "document_list",
        "doc_list",
        "retrieved_context_ids",
    ),
    "retrieved_passages": (
        "retrieved_passages",
        "retrieved_contexts",
        "retrieval_context",
        "contexts",
    ),
    "answerer": ("answerer",),
    "error": ("error",),
    "reference": ("reference", "expected_output", "ground_truth"),
    # the gold document, read by `questions.generator: imported` (cube.systems.imported_questions)
    "doc_id": ("doc_id", "reference_context_ids"),
    "reference_passages": ("reference_passages", "reference_contexts", "context"),
}
LIST_COLUMNS = COLUMN_ALIASES["retrieved_doc_ids"]
SEPARATORS_HINT = "separate ids with '|' or ';' (D1|D2) or write a JSON list ([\"D1\", \"D2\"])"


class ImportedFileError(ValueError):
    """An imported QA file that does not fit the question set or the corpus."""


def read_table(path: Path) -> pd.DataFrame:
    """Read a CSV / JSONL / JSON (a list of objects) / Parquet file, chosen by extension."""
    if not path.is_file():
        raise ImportedFileError(f"{path}: imported QA file not found")
    suffix = path.suffix.lower()
    if suffix == ".csv":  # written by `cube questions` (guarded cells) or by hand: text as written
        return unguarded_frame(pd.read_csv(path, dtype=str, keep_default_na=False))
    if suffix in (".jsonl", ".ndjson"):
        return pd.read_json(path, lines=True, dtype=False)
    if suffix == ".json":
        return _read_json_list(path)
    if suffix in (".parquet", ".pq"):
        return pd.read_parquet(path)
    raise ImportedFileError(
        f"{path}: unsupported extension {suffix!r}; expected .csv, .jsonl, .json or .parquet"
    )


def _read_json_list(path: Path) -> pd.DataFrame:
    """A .json file holding a list of objects, one per question (DeepEval's and ragas' shape)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ImportedFileError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        got = type(data).__name__ if not isinstance(data, list) else "a list of non-objects"
        raise ImportedFileError(
            f"{path}: expected a JSON list of objects (one per question), got {got}; a JSON "
            "Lines file (one object per line) takes the extension .jsonl"
        )
    return pd.DataFrame(data)


def resolve_columns(
    path: Path, found: Iterable[str], mapping: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Our column -> the file's column, from `mapping` (params `columns:`) else the first alias
    present.

    Raises:
        ImportedFileError: a mapped column the file lacks, or a required column missing (every
            problem at once, with the columns found and where the accepted names are listed).
    """
    found = [str(c) for c in found]
    mapping = dict(mapping or {})
    problems = [
        f"columns.{ours}: {theirs!r} is not a column of the file"
        for ours, theirs in mapping.items()
        if theirs not in found
    ]
    out = _matched_columns(found, mapping)
    missing = [name for name, ours in _REQUIRED_COLUMNS if not any(o in out for o in ours)]
    if missing:
        problems.append(f"missing column(s) {missing}")
    if problems:
        raise ImportedFileError(
            f"{path}: {'; '.join(problems)}; columns found: {found} (accepted names and the "
            "`columns:` mapping: docs/reference/imported-files.md)"
        )
    return out


# what a QA file must hold: each named need met by one of our columns
_REQUIRED_COLUMNS = (
    ("question_id or question", ("question_id", "question")),
    ("answer", ("answer",)),
    ("retrieved_doc_ids or retrieved_passages", ("retrieved_doc_ids", "retrieved_passages")),
)


def _matched_columns(found: list[str], mapping: dict[str, str]) -> dict[str, str]:
    """Our column -> the file's, for the columns the file has: the mapped name, else the first
    alias present."""
    out = {
        ours: mapping.get(ours) or next((a for a in aliases if a in found), "")
        for ours, aliases in COLUMN_ALIASES.items()
    }
    return {ours: theirs for ours, theirs in out.items() if theirs in found}


# DeepEval's CSV and JSONL exports (`EvaluationDataset.save_as`) join a list of passages into one
# cell with "|" (deepeval.dataset.utils.DELIMITER); its loader splits them so, and so do we. Only
# columns under DeepEval's names: elsewhere a string is one passage, whatever it holds.
DEEPEVAL_JOINED = ("retrieval_context", "context")
DEEPEVAL_DELIMITER = "|"
# A DeepEval `RetrievedContextData` as its exports write it: the passage after the marker.
_DEEPEVAL_MARKER = re.compile(r"^deepeval_source=.*?,deepeval_context=(?P<context>.*)$", re.S)


def _literal_list(text: str) -> list[Any]:
    """A cell holding a list: JSON, else a Python literal (pandas writes lists so in a CSV)."""
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        try:
            parsed = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            raise ValueError(f"not a valid JSON list ({exc.msg})") from None
    if not isinstance(parsed, list | tuple):
        raise ValueError("expected a JSON list")
    return list(parsed)


def _maybe_list(text: str) -> list[Any] | None:
    """A passages cell that parses as a list; None for text that only starts with "[" (a citation
    marker such as "[1] The passport office...": one passage, not a malformed list)."""
    if not text.startswith("["):
        return None
    try:
        return _literal_list(text)
    except ValueError:
        return None


def parse_ids(value: Any) -> list[str]:
    """A retrieved-ids cell as doc ids (JSON or Python list, list, or `|`/`;` string)."""
    if isinstance(value, str) and value.strip().startswith("["):
        return [str(v).strip() for v in _literal_list(value.strip()) if str(v).strip()]
    return parse_doc_list(value)


def parse_passages(value: Any, joined: bool = False) -> list[str]:
    """A passages cell as texts: a list, a JSON or Python list, else one passage, or with
    `joined` (a DeepEval column) the passages DeepEval joined with "|". A DeepEval
    `RetrievedContextData` marker ("deepeval_source=...,deepeval_context=TEXT") gives its TEXT."""
    if isinstance(value, list | tuple | np.ndarray):
        items = list(value)
    elif cell_text(value) == "":
        return []
    elif (listed := _maybe_list(str(value).strip())) is not None:
        items = listed
    elif joined:
        items = str(value).split(DEEPEVAL_DELIMITER)
    else:
        items = [str(value)]
    texts = [str(v) for v in items if v is not None and str(v).strip()]
    return [m.group("context") if (m := _DEEPEVAL_MARKER.match(t)) else t for t in texts]


def passages_parser(file_column: str) -> Callable[[Any], list[str]]:
    """The parser of a passages column: DeepEval's names split "|"-joined cells."""
    joined = file_column in DEEPEVAL_JOINED
    return lambda value: parse_passages(value, joined=joined)


def cell_text(value: Any) -> str:
    """A cell as stripped text; missing values (None, NaN, NA) are ''."""
    if value is None or (not isinstance(value, list | tuple | np.ndarray) and pd.isna(value)):
        return ""
    return str(value).strip()


def gold_documents(
    raw: pd.DataFrame, names: dict[str, str], corpus: pd.DataFrame
) -> tuple[list[str], list[str]]:
    """Each row's gold doc_id ("" when undetermined) and why not ("" when determined), from its
    ids (`doc_id` / `reference_context_ids`), else its reference passages (module docstring).
    `raw` has our column names; `names` maps them to the file's."""
    n = len(raw)
    known = set(corpus["doc_id"].astype(str))
    ids = [_cell(parse_ids, v) for v in raw["doc_id"]] if "doc_id" in raw else [[]] * n
    passages = (
        [_cell(passages_parser(names["reference_passages"]), v) for v in raw["reference_passages"]]
        if "reference_passages" in raw
        else [[]] * n
    )
    todo = [p if isinstance(p, list) and not i else [] for i, p in zip(ids, passages, strict=True)]
    mapped, _ = map_passages(todo, corpus)
    golds, reasons = [], []
    for row_ids, texts, docs in zip(ids, passages, mapped, strict=True):
        gold, why = _gold_from_ids(row_ids, known) if row_ids else _gold_from_passages(texts, docs)
        golds.append(gold)
        reasons.append(why)
    return golds, reasons


def _cell(parse, value) -> list[str] | str:
    """A parsed list cell, or the parse error as text."""
    try:
        return parse(value)
    except ValueError as err:
        return f"unreadable list ({err})"


def _gold_from_ids(ids: list[str] | str, known: set[str]) -> tuple[str, str]:
    if isinstance(ids, str):
        return "", ids
    unknown = [d for d in ids if d not in known]
    if unknown:
        return "", f"doc id(s) {unknown[:3]} not in the knowledge base"
    docs = list(dict.fromkeys(ids))
    if len(docs) > 1:
        return "", f"its ids name several documents ({', '.join(docs)})"
    return docs[0], ""


def _gold_from_passages(texts: list[str] | str, docs: list[str]) -> tuple[str, str]:
    if isinstance(texts, str):
        return "", texts
    if not texts:
        return "", "no reference context"
    unmapped = sum(d.startswith("unmapped:") for d in docs)
    if unmapped:
        return "", (
            f"{unmapped} of {len(texts)} reference context(s) match no knowledge-base document "
            "(or several equally)"
        )
    found = list(dict.fromkeys(docs))
    if len(found) > 1:
        return "", f"its reference contexts come from several documents ({', '.join(found)})"
    return found[0], ""
