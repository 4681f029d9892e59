"""The cells of an imported file (`cube.systems.imported`): lists of doc ids, lists of passages,
and a row's gold document from its reference cells (`questions.generator: imported`,
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
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from cube.config.schema import parse_doc_list
from cube.systems.passages import map_passages

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
    elif str(value).strip().startswith("["):
        items = _literal_list(str(value).strip())
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
