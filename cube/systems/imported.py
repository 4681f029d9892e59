"""The `imported` system: a user's existing QA set (answers already produced elsewhere).

File: CSV, JSONL or Parquet (by extension) with

- `question_id` (preferred) or `question` (matched to the question set by exact text,
  surrounding whitespace ignored);
- `answer`;
- the retrieved documents in rank order, column `retrieved_doc_ids` (also accepted:
  `retrieved`, `document_list`, `doc_list`), as a JSON list (`["D1", "D2"]`), a list
  (Parquet/JSONL) or a string separated by `|` or `;`. Empty means nothing retrieved;
- optional `answerer` (the model that wrote the answers) and `error`.

Validation against the question set and corpus: unknown questions, duplicated questions,
empty answers, retrieved ids that are not corpus doc_ids, and questions of the set that the
file does not answer. With `on_invalid: error` (default) the first kind found is an error
naming the file and the rows (1-based data rows); with `on_invalid: drop` the offending
questions are dropped, counted in `attrs['dropped']` and announced with a warning. A document
listed again (several chunks of one document) keeps the rank of its first listing, as with
RAGFlow; lists still longer than `top_n` (>= 1) are cut at `top_n` (counted in
`attrs['truncated']`, with a warning) so ranks stay within the N of `rank_score`.

`retrieval_ok` is False for a row that records an `error` and gives no retrieved list (the
system failed; nothing is known about its retrieval, so it is not a retrieval miss); an empty
list without an error is a known empty retrieval. Imported answers came from no call of this
run: accounting `call_id` "", no tokens, cost 0.0 (`cube.llm.usage.no_call_accounting`).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cube.config.schema import parse_doc_list, require_columns
from cube.config.sections import ImportedSystem
from cube.llm import Response
from cube.llm.usage import no_call_accounting
from cube.systems.base import System, answers_frame

LIST_COLUMNS = ("retrieved_doc_ids", "retrieved", "document_list", "doc_list")


class ImportedFileError(ValueError):
    """An imported QA file that does not fit the question set or the corpus."""


def read_table(path: Path) -> pd.DataFrame:
    """Read a CSV / JSONL / Parquet file, chosen by extension."""
    if not path.is_file():
        raise ImportedFileError(f"{path}: imported QA file not found")
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return pd.read_csv(path, dtype=str, keep_default_na=False)
    if suffix in (".jsonl", ".ndjson"):
        return pd.read_json(path, lines=True, dtype=False)
    if suffix in (".parquet", ".pq"):
        return pd.read_parquet(path)
    raise ImportedFileError(
        f"{path}: unsupported extension {suffix!r}; expected .csv, .jsonl or .parquet"
    )


def _text(value: Any) -> str:
    """A cell as stripped text; missing values (None, NaN, NA) are ''."""
    if value is None or (not isinstance(value, list | tuple | np.ndarray) and pd.isna(value)):
        return ""
    return str(value).strip()


def _rows(idx: list[int], limit: int = 10) -> str:
    shown = ", ".join(str(i + 1) for i in idx[:limit])
    return shown + (f" ... ({len(idx)} rows)" if len(idx) > limit else "")


class ImportedAnswers(System):
    """Answers and retrieved lists read from a file, validated against the question set.

    Args:
        spec: the params entry (`path`, `on_invalid`, `top_n`).
    """

    kind = "imported"

    def __init__(self, spec: ImportedSystem):
        super().__init__(spec.name)
        if spec.top_n < 1:  # config validates it; `docs[:0]` or `docs[:-1]` would cut silently
            raise ImportedFileError(f"systems[{spec.name}].top_n: must be >= 1, got {spec.top_n}")
        self.spec = spec
        self.path = Path(spec.path).expanduser()

    def _problem(self, message: str, bad: set[int], drop: set[int]) -> None:
        if not bad:
            return
        if self.spec.on_invalid == "error":
            raise ImportedFileError(f"{self.path}: {message} (data rows {_rows(sorted(bad))})")
        drop.update(bad)

    def answer(
        self, questions: pd.DataFrame, corpus: pd.DataFrame, *, progress: bool = True
    ) -> pd.DataFrame:
        require_columns(questions, ("question_id", "doc_id", "question"), "questions")
        raw = read_table(self.path).reset_index(drop=True)
        list_col = self._list_column(raw)
        drop: set[int] = set()
        qids = questions["question_id"].astype(str)
        row_qid = self._row_question_ids(raw, questions, qids, drop)
        answers = raw["answer"]
        errors = raw["error"].map(_text) if "error" in raw.columns else pd.Series([""] * len(raw))
        # An empty answer is invalid unless the row records why the system failed.
        empty = {i for i, a in enumerate(answers) if not _text(a) and not errors[i]}
        self._problem("empty answer (and no error recorded)", empty, drop)
        lists = self._retrieved_lists(raw, list_col, corpus, drop)
        keep = [i for i in range(len(raw)) if i not in drop]
        n_dropped = self._check_coverage(qids, row_qid, keep, drop)

        # -- assemble, in question-set order
        row_of = {row_qid[i]: i for i in keep}
        q_keep = questions[qids.isin(set(row_of))].reset_index(drop=True)
        rows = [row_of[q] for q in q_keep["question_id"].astype(str)]
        truncated = sum(len(lists[i]) > self.spec.top_n for i in rows)
        if truncated:
            warnings.warn(
                f"system {self.name!r} ({self.path}): {truncated} retrieved list(s) longer than "
                f"top_n={self.spec.top_n} were cut at top_n",
                stacklevel=2,
            )
        df = answers_frame(
            q_keep,
            system=self.name,
            set_name="rag",
            responses=[self._response(raw, answers, errors, i) for i in rows],
            retrieved=[lists[i][: self.spec.top_n] for i in rows],
            answerer=self._answerer(raw, rows[0]) if rows else "imported",
            # A failed row without a list: the system's retrieval outcome is unknown, not empty.
            retrieval_ok=[not (errors[i] and not lists[i]) for i in rows],
        )
        if "answerer" in raw.columns:
            df["answerer"] = [self._answerer(raw, i) for i in rows]
        df.attrs["dropped"] = n_dropped
        df.attrs["truncated"] = truncated
        return df

    def _list_column(self, raw: pd.DataFrame) -> str:
        """The column of retrieved lists; an error when a required column is missing."""
        list_col = next((c for c in LIST_COLUMNS if c in raw.columns), None)
        missing = [
            c
            for c, ok in (
                (
                    "question_id or question",
                    "question_id" in raw.columns or "question" in raw.columns,
                ),
                ("answer", "answer" in raw.columns),
                (f"one of {list(LIST_COLUMNS)}", list_col),
            )
            if not ok
        ]
        if missing:
            raise ImportedFileError(
                f"{self.path}: missing column(s) {missing}; got {list(raw.columns)}"
            )
        return str(list_col)

    def _row_question_ids(
        self, raw: pd.DataFrame, questions: pd.DataFrame, qids: pd.Series, drop: set[int]
    ) -> pd.Series:
        """Which question each row answers (by id, else by exact text)."""
        if "question_id" in raw.columns:
            row_qid = raw["question_id"].astype(str).str.strip()
            unknown = {i for i, q in enumerate(row_qid) if q not in set(qids)}
            self._problem("question_id not in the question set", unknown, drop)
        else:
            by_text: dict[str, list[str]] = {}
            for qid, text in zip(qids, questions["question"].astype(str), strict=True):
                by_text.setdefault(text.strip(), []).append(qid)
            texts = raw["question"].astype(str).str.strip()
            unknown = {i for i, t in enumerate(texts) if t not in by_text}
            self._problem("question text not in the question set", unknown, drop)
            ambiguous = {i for i, t in enumerate(texts) if len(by_text.get(t, [])) > 1}
            self._problem(
                "question text matches several questions; give question_id", ambiguous, drop
            )
            row_qid = pd.Series([by_text.get(t, [""])[0] for t in texts], dtype=object)
        dup = set(np.flatnonzero(row_qid.duplicated(keep=False).to_numpy()))
        self._problem("the same question is answered more than once", dup, drop)
        return row_qid

    def _retrieved_lists(
        self, raw: pd.DataFrame, list_col: str, corpus: pd.DataFrame, drop: set[int]
    ) -> list[list[str]]:
        """Each row's retrieved doc ids; unparsable lists and unknown ids are problems."""
        known = set(corpus["doc_id"].astype(str))
        lists: list[list[str]] = []
        unparsable: dict[int, str] = {}
        for i, cell in enumerate(raw[list_col]):
            try:
                # a document keeps its first rank
                lists.append(list(dict.fromkeys(parse_doc_list(cell))))
            except ValueError as exc:
                unparsable[i] = str(exc)
                lists.append([])
        self._problem(
            f"column {list_col!r} is not a document list ({next(iter(unparsable.values()), '')})",
            set(unparsable),
            drop,
        )
        bad_ids = {i: [d for d in docs if d not in known] for i, docs in enumerate(lists)}
        bad_ids = {i: v for i, v in bad_ids.items() if v}
        if bad_ids:
            example = next(iter(bad_ids.values()))[:3]
            self._problem(
                f"retrieved doc id(s) not in the corpus, e.g. {example}", set(bad_ids), drop
            )
        return lists

    def _check_coverage(
        self, qids: pd.Series, row_qid: pd.Series, keep: list[int], drop: set[int]
    ) -> int:
        """Questions of the set without a valid answer: an error, or dropped with a warning."""
        answered = {row_qid[i] for i in keep}
        absent = [q for q in qids if q not in answered and q not in {row_qid[i] for i in drop}]
        if absent and self.spec.on_invalid == "error":
            raise ImportedFileError(
                f"{self.path}: {len(absent)} question(s) of the question set have no answer, "
                f"e.g. question_id {absent[:10]}"
            )
        n_dropped = len(qids) - len(answered & set(qids))
        if n_dropped:
            warnings.warn(
                f"system {self.name!r} ({self.path}): dropped {n_dropped} of {len(qids)} "
                f"question(s): {len(drop)} invalid file row(s) (rows {_rows(sorted(drop))}) and "
                f"{len(absent)} unanswered question(s)",
                stacklevel=3,
            )
        return n_dropped

    def _response(
        self, raw: pd.DataFrame, answers: pd.Series, errors: pd.Series, i: int
    ) -> Response:
        # no call of this run produced these rows: no call_id, no tokens, cost 0.0
        acc = no_call_accounting(self._answerer(raw, i), "answering")
        return Response(
            text=_text(answers[i]),
            error=errors[i] or None,
            model=acc["model"],
            cost=acc["cost"],
            call_id=acc["call_id"],
        )

    @staticmethod
    def _answerer(raw: pd.DataFrame, i: int) -> str:
        return (_text(raw["answerer"][i]) if "answerer" in raw.columns else "") or "imported"
