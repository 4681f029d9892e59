"""`questions.generator: imported`: the question set of an imported file (a ragas or DeepEval
dataset), each question with the gold document its reference contexts come from.

A ragas testset carries, per question, the chunks it was written from (`reference_contexts`,
sometimes their ids, `reference_context_ids`); a DeepEval golden its ideal `context`. They say
which knowledge-base document holds the answer, so the file plus the knowledge base is a
complete run and no question file is needed. A row's gold document is, in this order:

1. its `doc_id` (our name) or ragas `reference_context_ids`: knowledge-base doc ids, all the same
   document;
2. else its reference passages (ragas `reference_contexts`, DeepEval `context`; "|"-joined in
   DeepEval's CSV and JSONL), mapped to documents by `cube.systems.passages.map_passages`, the
   mapping retrieved passages get: every passage must map, all to one document.

A row whose gold document cannot be determined (no reference context, a passage that matches no
document or several equally, contexts from several documents as in a ragas multi-hop question, an
id not in the knowledge base, an empty question) is left out of the question set, never guessed:
CuBE needs one gold document per question, for R@k and for the full bound's answer. It keeps its
row with the reason in `error` ("no gold document: ..."), so the run drops it with a count and
keeps it in `data/questions_failed.parquet`, and a warning names the rows and reasons. The
systems' rows for such questions are left out with it (`ImportedAnswers`: a question outside a set
read from an imported file cannot be scored).

Question ids: the file's `question_id`, else "Q00001"... by data row, so a question keeps its id
whichever rows are left out. Rows are matched to the set by id, else by exact text, so a text the
file asks twice (without `question_id`) is an error naming the rows.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd

from cube.config.params import Params
from cube.kb.questions import QUESTION_TABLE_COLUMNS, QuestionError
from cube.llm.usage import no_call_accounting
from cube.systems.cells import gold_documents
from cube.systems.imported import ImportedAnswers, ImportedFileError

NO_GOLD = "no gold document: "  # the prefix of an excluded row's `error`
GOLD_COLUMNS = "`doc_id`, ragas `reference_context_ids` or `reference_contexts`, DeepEval `context`"


def questions_from_imported(
    params: Params, corpus: pd.DataFrame, base_dir: Path = Path(".")
) -> pd.DataFrame:
    """The question set of the imported system `params.question_source()` names, rows in file
    order (`QUESTION_TABLE_COLUMNS`); rows without a gold document keep `error` (module docstring).

    Raises:
        QuestionError: the file cannot be read, has no question text or no gold-document column,
            a question asked twice, or no question with a gold document (naming file and rows).
    """
    spec = params.question_source()
    path = Path(spec.path).expanduser()
    system = ImportedAnswers(
        spec.model_copy(update={"path": str(path if path.is_absolute() else base_dir / path)})
    )
    where = f"questions.generator imported (systems[{spec.name}])"
    try:
        raw = system.read()
    except ImportedFileError as err:
        raise QuestionError(f"{err} ({where})") from None
    if "question" not in raw.columns:
        raise QuestionError(
            f"{system.path}: no question text (a `question`, ragas `user_input` or DeepEval "
            f"`input` column) to ask ({where})"
        )
    if "doc_id" not in raw.columns and "reference_passages" not in raw.columns:
        raise QuestionError(
            f"{system.path}: no column giving each question's gold document ({GOLD_COLUMNS}); "
            f"columns found: {sorted(system.names.values())}. Export the dataset with its "
            f"reference contexts, or write a question file (questions.generator: file) ({where})"
        )
    df = _question_rows(raw, spec.name)
    _check_unique(df, system.path, where)
    golds, reasons = gold_documents(raw, system.names, corpus)
    df["doc_id"] = golds
    df["error"] = [NO_GOLD + r if r else "" for r in reasons]
    df.loc[df["question"].eq(""), "error"] = NO_GOLD + "empty question"
    _report(df, system.path, spec.name)
    qp = params.questions
    ok = df["error"].eq("")
    if qp.limit is not None and qp.limit < int(ok.sum()):
        keep = df[ok].sample(n=qp.limit, random_state=qp.seed).index
        df = df[~ok | df.index.isin(keep)]
    return df.reset_index(drop=True)[list(QUESTION_TABLE_COLUMNS)]


def holds_questions(path: Path) -> bool:
    """Whether an imported file can give the question set: it reads, with question texts and a
    gold-document column (`cube init` then writes `questions: {generator: imported}`)."""
    from cube.systems.imported import read_table, resolve_columns

    try:
        names = resolve_columns(path, read_table(path).columns)
    except Exception:  # noqa: BLE001  unreadable or lacking columns: `cube validate` says why
        return False
    return "question" in names and ("doc_id" in names or "reference_passages" in names)


def _question_rows(raw: pd.DataFrame, system: str) -> pd.DataFrame:
    text = raw["question"].map(lambda v: "" if v is None or pd.isna(v) else str(v).strip())
    df = pd.DataFrame({"question": text})
    df["question_id"] = (
        raw["question_id"].astype(str).str.strip()
        if "question_id" in raw.columns
        else [f"Q{i + 1:05d}" for i in range(len(raw))]
    )
    df["asked_field"], df["style"] = "", ""
    df["generator"] = f"imported:{system}"
    for col, value in no_call_accounting("file", "question_generation").items():
        df[col] = value
    df["raw"] = ""
    return df


def _check_unique(df: pd.DataFrame, path: Path, where: str) -> None:
    """A question id, or a text without ids, asked twice cannot be matched back to its answer."""
    for col in ("question_id", "question"):
        dup = df[col].duplicated(keep=False) & df["question"].ne("")
        if dup.any():
            rows = ", ".join(str(i + 1) for i in df.index[dup][:10])
            raise QuestionError(
                f"{path}: the same {col.replace('_', ' ')} on several rows (data rows {rows}, "
                f"e.g. {df.loc[dup, col].iloc[0]!r}): each row must ask another question"
                + (", or give each a `question_id`" if col == "question" else "")
                + f" ({where})"
            )


def _report(df: pd.DataFrame, path: Path, system: str) -> None:
    """Warn naming the rows left out and why; none left: an error (nothing to evaluate)."""
    bad = df.index[df["error"].ne("")]
    if not len(bad):
        return
    detail = "; ".join(
        f"row {i + 1}: {df.at[i, 'error'].removeprefix(NO_GOLD)}" for i in bad[:10]
    ) + (f"; ... ({len(bad)} rows)" if len(bad) > 10 else "")
    if len(bad) == len(df):
        raise QuestionError(
            f"{path}: none of the {len(df)} questions has a gold document ({detail}); each needs "
            f"{GOLD_COLUMNS} naming or quoting one knowledge-base document "
            f"(questions.generator imported, systems[{system}])"
        )
    warnings.warn(
        f"{path}: {len(bad)} of {len(df)} question(s) have no gold document and are left out of "
        f"the evaluation (not scored as retrieval misses): {detail}",
        stacklevel=3,
    )
