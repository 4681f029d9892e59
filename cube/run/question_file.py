"""`cube questions PARAMS --out FILE`: the run's question set as a file, for a system that cannot
be called from here (the two-step flow: write the questions, have your system answer them
elsewhere, import the answers with `kind: imported`).

The file holds what a system needs to answer and what the import reads back, nothing more: the
`question_id` the import matches answers by, the `question` text, the run's `lang`, and the two
columns to fill, `answer` and `retrieved_doc_ids` (empty; the documents your system retrieved, in
rank order). The gold document (`doc_id`) is left out: a system under test must not see it.
CSV or JSONL, by the file's extension; in JSONL the list column is a JSON list (`[]`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

SUFFIXES = (".csv", ".jsonl")


def export_columns() -> tuple[str, ...]:
    """The columns written: the import's own names (`cube.systems.imported`)."""
    from cube.systems.imported import LIST_COLUMNS

    return ("question_id", "question", "lang", "answer", LIST_COLUMNS[0])


def write_question_file(questions: pd.DataFrame, lang: str, path: Path) -> int:
    """Write the question set to `path` (.csv or .jsonl); the number of questions written.

    Raises:
        ValueError: another extension (naming the accepted ones).
    """
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise ValueError(
            f"{path}: unsupported extension {suffix or '(none)'!r}; write the question set to a "
            ".csv or .jsonl file"
        )
    cols = export_columns()
    rows = [
        dict(zip(cols, (str(qid), str(text), lang, "", ""), strict=True))
        for qid, text in zip(questions["question_id"], questions["question"], strict=True)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".csv":
        from cube.config.sheets import (
            write_csv,  # a question opened in a spreadsheet: never a formula
        )

        write_csv(pd.DataFrame(rows, columns=list(cols)), path, index=False)
    else:
        with path.open("w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps({**row, cols[-1]: []}, ensure_ascii=False) + "\n")
    return len(rows)
