"""The `imported` system: a user's existing QA set (answers already produced elsewhere).

File: CSV, JSONL, JSON (a list of objects) or Parquet, by extension. Its columns, by our name
(`COLUMN_ALIASES` lists the names accepted for each, ours first, then ragas' and DeepEval's;
the table with types and meanings is docs/reference/imported-files.md):

- `question_id` (preferred) or `question` (ragas `user_input`, DeepEval `input`; matched to
  the question set by exact text, surrounding whitespace ignored);
- `answer` (ragas `response`, DeepEval `actual_output`);
- the retrieved documents in rank order, either as ids, `retrieved_doc_ids` (also
  `retrieved`, `document_list`, `doc_list`, ragas `retrieved_context_ids`): a JSON list
  (`["D1", "D2"]`), a list (Parquet/JSONL/JSON) or a string separated by `|` or `;`; or as
  texts, `retrieved_passages` (ragas `retrieved_contexts`, DeepEval `retrieval_context`, ragas
  0.1 `contexts`): a list of chunk texts (DeepEval's CSV and JSONL join them with `|`, split
  back under DeepEval's names: `cube.systems.cells`), mapped to the corpus documents they came
  from by `cube.systems.passages.map_passages`, through the policy of every kind,
  `cube.systems.retrieved.ranked_lists` (passages that match no document, or several
  equally, keep their rank as `unmapped:passage<k>` and are counted in `attrs['unmapped']`, with
  a warning). Empty means nothing retrieved. When both are given, a row's ids are used, its
  passages where its ids are empty;
- optional `answerer` (the model that wrote the answers), `error`, and `reference` (ragas
  `reference`, DeepEval `expected_output`: read, not used; CuBE scores against the gold
  document);
- optional gold-document columns, read only by `questions.generator: imported`
  (`cube.systems.imported_questions`): `doc_id` (ragas `reference_context_ids`) and
  `reference_passages` (ragas `reference_contexts`, DeepEval `context`).

A question set read from an imported file holds only its questions with a gold document: a row
asking another question is left out (`attrs['outside']`), with a warning naming the rows (and, in
the source file, why each has no gold document), never scored as a miss (`_outside`).

`spec.columns` maps our names to the file's own for any other naming (`{question: query}`); a
mapped column the file lacks is an error. A list of a Python literal's shape (`['D1', 'D2']`,
what pandas writes for a list in a CSV, as ragas' `to_csv` does) is read as a list.

Validation against the question set and corpus: unknown questions, duplicated questions,
empty answers, unparsable lists, retrieved ids that are not corpus doc_ids, and questions of the
set that the file does not answer. With `on_invalid: error` (default) the first kind found is an
error naming the file and the rows (1-based data rows); with `on_invalid: drop` the offending
questions are dropped, counted in `attrs['dropped']` and announced with a warning. Ids separated
by commas ("D1,D2": not corpus ids, but each part is) are always an error naming the rows and the
separators to use, whatever `on_invalid`: a comma may be part of an id, and dropping every row
would hide the mistake. A document listed again (several chunks of one document) keeps the rank
of its first listing, as with RAGFlow; lists still longer than `top_n` (>= 1) are cut at
`top_n` (counted in `attrs['truncated']`, with a warning) so ranks stay within the N of
`rank_score`.

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

from cube.config.params import Params
from cube.config.schema import require_columns
from cube.config.sections import ImportedSystem
from cube.llm import Response
from cube.llm.usage import no_call_accounting
from cube.systems.base import System, answers_frame
from cube.systems.cells import (  # noqa: F401  (the file's reading, re-exported: cube.run.validate)
    COLUMN_ALIASES,
    LIST_COLUMNS,
    SEPARATORS_HINT,
    ImportedFileError,
    cell_text,
    gold_documents,
    parse_ids,
    parse_passages,
    passages_parser,
    read_table,
    resolve_columns,
)
from cube.systems.kinds import PlanContext, Planned, SystemKind, register
from cube.systems.retrieved import Retrieved, RetrievedLists, did_you_mean, ranked_lists


def question_source_of(questions: pd.DataFrame) -> str | None:
    """The imported system whose file the question set was read from
    (`questions.generator: imported` writes `generator` "imported:<system>"), or None."""
    gens = set(questions["generator"].astype(str)) if "generator" in questions else set()
    if len(gens) == 1 and (gen := next(iter(gens))).startswith("imported:"):
        return gen.removeprefix("imported:")
    return None


def comma_lists(lists: list[list[str]], known: set[str]) -> dict[int, str]:
    """Rows whose ids are comma-separated lists of corpus ids ("D1,D2"): row -> the first such
    id."""
    out: dict[int, str] = {}
    for i, ids in enumerate(lists):
        for d in ids:
            parts = [p.strip() for p in d.split(",")]
            if d not in known and len(parts) > 1 and all(p in known for p in parts if p):
                out.setdefault(i, d)
    return out


def _error_texts(raw: pd.DataFrame) -> pd.Series:
    """Each row's recorded error as text ("" for none, and for a file without an error column)."""
    if "error" in raw.columns:
        return raw["error"].map(cell_text)
    return pd.Series([""] * len(raw))


def _rows(idx: list[int], limit: int = 10) -> str:
    shown = ", ".join(str(i + 1) for i in idx[:limit])
    return shown + (f" ... ({len(idx)} rows)" if len(idx) > limit else "")


class ImportedAnswers(System):
    """Answers and retrieved lists read from a file, validated against the question set.

    Args:
        spec: the params entry (`path`, `on_invalid`, `top_n`, `columns`).
    """

    kind = "imported"

    def __init__(self, spec: ImportedSystem):
        super().__init__(spec.name)
        if spec.top_n < 1:  # config validates it; `docs[:0]` or `docs[:-1]` would cut silently
            raise ImportedFileError(f"systems[{spec.name}].top_n: must be >= 1, got {spec.top_n}")
        self.spec = spec
        self.path = Path(spec.path).expanduser()
        self.names: dict[str, str] = {}  # our column -> the file's, once read
        self.outside = 0  # rows outside a question set read from an imported file

    def _problem(self, message: str, bad: set[int], drop: set[int]) -> None:
        if not bad:
            return
        if self.spec.on_invalid == "error":
            raise ImportedFileError(f"{self.path}: {message} (data rows {_rows(sorted(bad))})")
        drop.update(bad)

    def read(self) -> pd.DataFrame:
        """The file with our column names (`resolve_columns`), rows in file order."""
        raw = read_table(self.path).reset_index(drop=True)
        self.names = resolve_columns(self.path, raw.columns, self.spec.columns)
        return pd.DataFrame({ours: raw[theirs] for ours, theirs in self.names.items()})

    def answer(
        self, questions: pd.DataFrame, corpus: pd.DataFrame, *, progress: bool = True
    ) -> pd.DataFrame:
        require_columns(questions, ("question_id", "doc_id", "question"), "questions")
        raw = self.read()
        drop: set[int] = set()
        self.outside = 0
        qids = questions["question_id"].astype(str)
        row_qid = self._row_question_ids(raw, questions, qids, drop, corpus)
        errors = _error_texts(raw)
        self._drop_empty(raw, errors, drop)
        retrieved = self._retrieved(raw, corpus, drop)
        keep = [i for i in range(len(raw)) if i not in drop]
        n_dropped = self._check_coverage(qids, row_qid, keep, drop)

        # -- assemble, in question-set order
        row_of = {row_qid[i]: i for i in keep}
        q_keep = questions[qids.isin(set(row_of))].reset_index(drop=True)
        rows = [row_of[q] for q in q_keep["question_id"].astype(str)]
        truncated = self._warn_truncated(sum(retrieved.long[i] for i in rows))
        df = self._frame(raw, errors, retrieved, q_keep, rows)
        df.attrs.update(
            dropped=n_dropped,
            truncated=truncated,
            unmapped=retrieved.unmapped,
            retrieved=retrieved,
            outside=self.outside,
        )
        return df

    def _drop_empty(self, raw: pd.DataFrame, errors: pd.Series, drop: set[int]) -> None:
        """An empty answer is invalid unless the row records why the system failed."""
        empty = {i for i, a in enumerate(raw["answer"]) if not cell_text(a) and not errors[i]}
        self._problem("empty answer (and no error recorded)", empty, drop)

    def _frame(
        self,
        raw: pd.DataFrame,
        errors: pd.Series,
        retrieved: RetrievedLists,
        questions: pd.DataFrame,
        rows: list[int],
    ) -> pd.DataFrame:
        """The answers table of the kept rows, in question-set order."""
        df = answers_frame(
            questions,
            system=self.name,
            set_name="rag",
            responses=[self._response(raw, errors, i) for i in rows],
            retrieved=[retrieved.lists[i] for i in rows],
            answerer=self._answerer(raw, rows[0]) if rows else "imported",
            # A failed row without a list: the system's retrieval outcome is unknown, not empty.
            retrieval_ok=[not (errors[i] and not retrieved.lists[i]) for i in rows],
        )
        if "answerer" in raw.columns:
            df["answerer"] = [self._answerer(raw, i) for i in rows]
        return df

    def _warn_truncated(self, truncated: int) -> int:
        if truncated:
            warnings.warn(
                f"system {self.name!r} ({self.path}): {truncated} retrieved list(s) longer than "
                f"top_n={self.spec.top_n} were cut at top_n",
                stacklevel=3,
            )
        return truncated

    def _row_question_ids(
        self,
        raw: pd.DataFrame,
        questions: pd.DataFrame,
        qids: pd.Series,
        drop: set[int],
        corpus: pd.DataFrame,
    ) -> pd.Series:
        """Which question each row answers (by id, else by exact text)."""
        if "question_id" in raw.columns:
            row_qid = raw["question_id"].astype(str).str.strip()
            unknown = {i for i, q in enumerate(row_qid) if q not in set(qids)}
            unknown = self._outside(unknown, questions, drop, raw, corpus)
            self._problem("question_id not in the question set", unknown, drop)
        else:
            by_text: dict[str, list[str]] = {}
            for qid, text in zip(qids, questions["question"].astype(str), strict=True):
                by_text.setdefault(text.strip(), []).append(qid)
            texts = raw["question"].astype(str).str.strip()
            unknown = {i for i, t in enumerate(texts) if t not in by_text}
            unknown = self._outside(unknown, questions, drop, raw, corpus)
            self._problem("question text not in the question set", unknown, drop)
            ambiguous = {i for i, t in enumerate(texts) if len(by_text.get(t, [])) > 1}
            self._problem(
                "question text matches several questions; give question_id", ambiguous, drop
            )
            row_qid = pd.Series([by_text.get(t, [""])[0] for t in texts], dtype=object)
        asked = row_qid.isin(set(qids))  # rows left out above are no duplicates of each other
        dup = set(np.flatnonzero((row_qid.duplicated(keep=False) & asked).to_numpy()))
        self._problem("the same question is answered more than once", dup, drop)
        return row_qid

    def _outside(
        self,
        unknown: set[int],
        questions: pd.DataFrame,
        drop: set[int],
        raw: pd.DataFrame,
        corpus: pd.DataFrame,
    ) -> set[int]:
        """Rows asking questions outside a question set read from an imported file
        (`questions.generator: imported`): that set holds the file's questions with a gold
        document, so such a row cannot be scored; it is left out (`attrs['outside']`) with a
        warning naming the rows (and, in the source file, why each has no gold document).
        Returns the unknown rows that remain a problem (all of them for another generator)."""
        source = question_source_of(questions)
        if source is None or not unknown:
            return unknown
        self.outside = len(unknown)
        drop.update(unknown)
        if source == self.name:
            _, why = gold_documents(raw.iloc[sorted(unknown)], self.names, corpus)
            detail = "; ".join(
                f"row {i + 1}: {w or 'not sampled by questions.limit'}"
                for i, w in zip(sorted(unknown), why, strict=True)
            )
            said = f"their question has no gold document ({detail})"
        else:
            said = (
                f"they ask questions outside the question set (the questions of system "
                f"{source!r} with a gold document; data rows {_rows(sorted(unknown))})"
            )
        warnings.warn(
            f"system {self.name!r} ({self.path}): {len(unknown)} row(s) left out of the "
            f"evaluation, not scored as retrieval misses: {said}",
            stacklevel=4,
        )
        return set()

    def _retrieved(self, raw: pd.DataFrame, corpus: pd.DataFrame, drop: set[int]) -> RetrievedLists:
        """Each row's ranked doc ids (`cube.systems.retrieved.ranked_lists`): its ids where it
        gives them, else its passages mapped to documents."""
        n = len(raw)
        ids: list[list[str]] | list[None] = (
            self._id_lists(raw["retrieved_doc_ids"], corpus, drop)
            if "retrieved_doc_ids" in raw.columns
            else [None] * n
        )
        passages: list[list[str]] | list[None] = [None] * n
        if "retrieved_passages" in raw.columns:
            parse = passages_parser(self.names["retrieved_passages"])
            passages = self._parsed(raw["retrieved_passages"], parse, drop)
        out = ranked_lists(
            [Retrieved(ids=i, passages=p) for i, p in zip(ids, passages, strict=True)],
            corpus,
            self.spec.top_n,
        )
        if out.unmapped_passages:
            warnings.warn(
                f"system {self.name!r} ({self.path}): {out.unmapped_passages} of {out.passages} "
                "retrieved passage(s) matched no knowledge-base document (or several equally): "
                "each keeps its rank as a miss (unmapped:passage<k>) "
                "(docs/explanation/passage-mapping.md)",
                stacklevel=3,
            )
        return out

    def _parsed(self, cells: pd.Series, parse: Any, drop: set[int]) -> list[list[str]]:
        """Each cell parsed into a list; unparsable cells are a problem (rows named)."""
        lists: list[list[str]] = []
        unparsable: dict[int, str] = {}
        for i, cell in enumerate(cells):
            try:
                lists.append(parse(cell))
            except ValueError as exc:
                unparsable[i] = str(exc)
                lists.append([])
        column = self.names.get(str(cells.name), str(cells.name))
        self._problem(
            f"column {column!r} is not a list ({next(iter(unparsable.values()), '')})",
            set(unparsable),
            drop,
        )
        return lists

    def _id_lists(self, cells: pd.Series, corpus: pd.DataFrame, drop: set[int]) -> list[list[str]]:
        """Retrieved doc ids; comma-separated lists are an error, unknown ids a problem."""
        known = set(corpus["doc_id"].astype(str))
        lists = [list(dict.fromkeys(ids)) for ids in self._parsed(cells, parse_ids, drop)]
        commas = comma_lists(lists, known)
        if commas:
            raise ImportedFileError(
                f"{self.path}: column {self.names['retrieved_doc_ids']!r} separates doc ids "
                f"with commas, e.g. {next(iter(commas.values()))!r} (data rows "
                f"{_rows(sorted(commas))}); a comma can be part of a doc id, so it is no "
                f"separator: {SEPARATORS_HINT}"
            )
        bad_ids = {i: [d for d in docs if d not in known] for i, docs in enumerate(lists)}
        bad_ids = {i: v for i, v in bad_ids.items() if v}
        if bad_ids:
            example = next(iter(bad_ids.values()))[:3]
            hint = did_you_mean(example, known)
            self._problem(
                f"retrieved doc id(s) not in the corpus, e.g. {example}"
                + (
                    f" (did you mean {', '.join(map(repr, hint.values()))}? ids must match the "
                    "knowledge base's doc_id exactly, case included)"
                    if hint
                    else ""
                ),
                set(bad_ids),
                drop,
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
                f"question(s): {len(drop) - self.outside} invalid file row(s) (rows "
                f"{_rows(sorted(drop))}) and "
                f"{len(absent)} unanswered question(s)",
                stacklevel=3,
            )
        return n_dropped

    def _response(self, raw: pd.DataFrame, errors: pd.Series, i: int) -> Response:
        # no call of this run produced these rows: no call_id, no tokens, cost 0.0
        acc = no_call_accounting(self._answerer(raw, i), "answering")
        return Response(
            text=cell_text(raw["answer"][i]),
            error=errors[i] or None,
            model=acc["model"],
            cost=acc["cost"],
            call_id=acc["call_id"],
        )

    @staticmethod
    def _answerer(raw: pd.DataFrame, i: int) -> str:
        return (cell_text(raw["answerer"][i]) if "answerer" in raw.columns else "") or "imported"


# --------------------------------------------------------------------------- the kind
def _plan(ctx: PlanContext, entry: ImportedSystem) -> Planned:
    """An imported system's answers are read from the file: no call (its bounds are answered)."""
    params = ctx.params
    spec = params.model(params.system_answerer(entry))
    g = ctx.add("answering", spec, [], calls=0)
    if ctx.real:
        answers = ImportedAnswers(entry).answer(ctx.questions, ctx.corpus, progress=False)
        return spec, [ctx.known_answers(answers, entry.name)]
    g.notes.append(f"system {entry.name}: the bounds assume its file answers every question")
    return spec, [ctx.answers_to_come(entry.name, entry.name)]


def _free_outcomes(
    entry: ImportedSystem, params: Params, corpus: pd.DataFrame, questions: pd.DataFrame
) -> pd.DataFrame:
    """Each question's retrieval as the file holds it (read, never asked): its rows, with
    `attrs["retrieved"]` for `cube.systems.known_outcomes` to check as the run does; an error
    row without a list has `retrieval_ok` False (unknown)."""
    return ImportedAnswers(entry).answer(questions, corpus, progress=False)


KIND = register(
    SystemKind(
        "imported",
        ImportedSystem,
        lambda entry, params, cache_path: ImportedAnswers(entry),
        "answers your system wrote elsewhere, imported from a file",
        plan=_plan,
        free_outcomes=_free_outcomes,
    )
)
