"""`cube validate`'s data checks: load every input a run will read and name every problem at once.

A run reads the knowledge base, maybe a question file, and the QA files of imported systems.
`validate_data` reads them all before anything runs and returns a `DataReport`:

- errors (the run would fail or mislead): the file's path, format, sheet, encoding; unknown
  field keys; mapped or grouping columns the file lacks; empty or duplicate doc_ids; a question
  file or an imported QA file that is missing, unreadable or lacks its columns;
- warnings (the run works, the evaluation may not mean much): documents with nothing but a name,
  exact-duplicate document texts, rows repeating an item (a long-format file loaded without
  `corpus.group_by`);
- notes: what the loader did (grouping, derived ids, placeholders, unmapped columns, families).

Every message names the file and the rows or column concerned; nothing is truncated. The
report ends with a one-line summary: items, fields mapped, duplicates, warnings, errors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from cube.config.params import Params
from cube.config.schema import CORPUS_FIELDS, MAPPABLE
from cube.config.sections import ImportedSystem
from cube.kb.corpus import SheetError, read_table
from cube.kb.document import CorpusError, field_text, render_document
from cube.kb.mapping import WARNING, check_mapping, map_table

_NAME_ONLY = {"item_name", "region", "parent_region", "variant"}


@dataclass
class DataReport:
    """Everything `validate_data` found; `ok` when there is no error."""

    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.errors

    def summary(self) -> str:
        f = self.figures
        items = f"{f['items']} items" if "items" in f else "knowledge base not loaded"
        rows = f" from {f['rows']} rows" if f.get("rows") not in (None, f.get("items")) else ""
        return (
            f"validate: {'OK' if self.ok else 'FAILED'}: {items}{rows}, "
            f"{f.get('fields_mapped', 0)} fields mapped, {f.get('duplicate_texts', 0)} duplicate "
            f"texts, {len(self.warnings)} warning(s), {len(self.errors)} error(s)"
        )

    def lines(self) -> list[str]:
        """The report as printed: errors, warnings, notes, then the one-line summary."""
        out = [f"error: {e}" for e in self.errors] + [f"warning: {w}" for w in self.warnings]
        return out + [f"note: {n}" for n in self.notes] + [self.summary()]


def _resolve(path: str, base_dir: Path) -> Path:
    p = Path(path).expanduser()
    return p if p.is_absolute() else base_dir / p


def check_corpus(params: Params, base_dir: Path, report: DataReport) -> pd.DataFrame | None:
    """Load the knowledge base the way a run does, recording every problem; the corpus or None."""
    c = params.corpus
    if c.source == "demo":
        from cube.kb.corpus import build_corpus

        corpus = build_corpus(params, base_dir)
        report.notes.append(f"knowledge base: the synthetic demo corpus ({len(corpus)} items)")
        report.figures.update(items=len(corpus), fields_mapped=len(CORPUS_FIELDS))
        _check_documents(corpus, "demo corpus", None, report)
        return corpus
    path = _resolve(str(c.path), base_dir)
    unknown = {k: v for k, v in c.columns.items() if k not in MAPPABLE}
    if unknown:  # reported even when the file cannot be read
        report.errors.append(check_mapping([], unknown, (), str(path))[0])
    try:
        raw, where = read_table(
            path, c.format, sheet=c.sheet, encoding=c.encoding, labels=list(c.columns.values())
        )
    except SheetError as err:  # names corpus.sheet itself
        report.errors.append(str(err))
        return None
    except CorpusError as err:
        report.errors.append(f"{err} (corpus.path)")
        return None
    out, problems, notes = map_table(
        raw,
        where,
        c.columns,
        str(path),
        group_by=c.group_by,
        empty_values=c.empty_values,
        extra_columns=c.extra_columns,
    )
    report.errors.extend(p for p in problems if p not in report.errors)
    report.warnings.extend(n.removeprefix(WARNING) for n in notes if n.startswith(WARNING))
    report.notes.extend(n for n in notes if not n.startswith(WARNING))
    raw_cols = [str(x) for x in raw.columns]
    mapped = [k for k in MAPPABLE if c.columns.get(k, k) in raw_cols]
    report.figures.update(rows=len(raw), fields_mapped=len(mapped))
    report.notes.append(
        f"{path}: {len(raw)} rows; fields mapped: "
        + ", ".join(f"{k} <- '{c.columns.get(k, k)}'" for k in mapped)
    )
    if out is None:
        return None
    for k in MAPPABLE:
        out[k] = [field_text(k, v) for v in out[k]]
    out["text"] = [render_document(r, params.lang, r["extras"]) for r in out.to_dict("records")]
    report.figures["items"] = len(out)
    if not c.group_by:
        _suggest_group_by(out, c.columns, report, str(path))
    _check_documents(out, str(path), out["source_rows"], report)
    return out


def _suggest_group_by(
    corpus: pd.DataFrame, columns: dict[str, str], report: DataReport, source: str
) -> None:
    keys = [k for k in ("region", "item_name", "variant") if corpus[k].astype(str).ne("").any()]
    repeated = corpus[keys].duplicated(keep="first")
    if repeated.any():
        cols = [columns.get(k, k) for k in keys]
        report.warnings.append(
            f"{source}: {int(repeated.sum())} of {len(corpus)} rows repeat the {'/'.join(keys)} of "
            "an earlier row: a long-format file (one row per material)? Set corpus.group_by: "
            f"{cols} to make one document per item"
        )


def _check_documents(
    corpus: pd.DataFrame, source: str, rows: pd.Series | None, report: DataReport
) -> None:
    def at(mask: pd.Series) -> str:
        ids = corpus.loc[mask, "doc_id"].astype(str)
        if rows is None:
            return ", ".join(ids)
        return "; ".join(f"{d} ({r})" for d, r in zip(ids, rows[mask], strict=True))

    content = [f for f in CORPUS_FIELDS if f not in _NAME_ONLY]
    empty = ~corpus[content].astype(str).apply(lambda s: s.str.strip().ne("")).any(axis=1)
    if empty.any():
        report.warnings.append(
            f"{source}: {int(empty.sum())} document(s) hold nothing but a name "
            f"(no field beyond region, item name and variant): {at(empty)}"
        )
    dup = corpus["text"].duplicated(keep=False)
    n_dup = int(corpus["text"].duplicated(keep="first").sum())
    report.figures["duplicate_texts"] = n_dup
    if n_dup:
        groups = [at(corpus["text"].eq(t)) for t in dict.fromkeys(corpus.loc[dup, "text"])]
        report.warnings.append(
            f"{source}: {n_dup} document(s) are exact text duplicates of another ({len(groups)} "
            "group(s)); "
            "retrieval cannot tell them apart: " + " | ".join(groups)
        )
    fam = (
        corpus["family_id"].astype(str)
        if "family_id" in corpus
        else pd.Series("", index=corpus.index)
    )
    sizes = fam[fam.ne("")].value_counts()
    if not len(sizes):
        report.notes.append(
            f"{source}: no families (family_id empty or not mapped): near-duplicates across "
            "regions or variants are not identified; map the column naming the main item (e.g. "
            "主项名称) to family_id"
        )
    else:
        report.notes.append(
            f"families (family_id): {len(sizes)} families of {int(sizes.min())}-{int(sizes.max())} "
            f"documents, {int(sizes.sum())} of {len(corpus)} documents in a family"
        )


def check_questions(
    params: Params, corpus: pd.DataFrame | None, base_dir: Path, report: DataReport
) -> None:
    q = params.questions
    if q.generator == "llm" and q.model is None:
        report.errors.append(
            "questions.generator 'llm' needs questions.model (a model name from `models:` "
            "or an inline spec)"
        )
    if q.generator != "file":
        return
    if not q.path:
        report.errors.append("questions.generator 'file' needs questions.path")
        return
    from cube.kb.questions import QuestionError, load_questions_file

    path = _resolve(q.path, base_dir)
    if corpus is None:  # doc_ids cannot be checked; the file and its columns can
        try:
            raw, _ = read_table(path, what="question-set")
        except CorpusError as err:
            report.errors.append(f"{err} (questions.path)")
            return
        missing = [c for c in ("question", "doc_id") if c not in raw.columns]
        if missing:
            report.errors.append(
                f"{path}: missing column(s) {missing}; expected 'question' and 'doc_id'; columns "
                f"found: {[str(c) for c in raw.columns]} (questions.path)"
            )
        return
    try:
        n = len(load_questions_file(path, corpus))
        report.notes.append(f"{path}: {n} questions, every doc_id in the knowledge base")
    except QuestionError as err:
        report.errors.append(f"{err} (questions.path)")


def check_imported(
    system: ImportedSystem, corpus: pd.DataFrame | None, base_dir: Path, report: DataReport
) -> None:
    from cube.systems.imported import ImportedFileError, resolve_columns
    from cube.systems.imported import read_table as read_qa

    path = _resolve(system.path, base_dir)
    where = f"systems[{system.name}].path"
    try:
        raw = read_qa(path)
        names = resolve_columns(path, raw.columns, system.columns)
    except ImportedFileError as err:
        report.errors.append(f"{err} ({where})")
        return
    except Exception as err:  # a malformed CSV/JSONL/Parquet: pandas and pyarrow raise many types
        report.errors.append(
            f"{path}: cannot read the imported QA file: {type(err).__name__}: {err} ({where})"
        )
        return
    if corpus is not None:
        _check_imported_lists(raw, names, corpus, path, where, report)
    report.notes.append(f"{path}: {len(raw)} answers ({where})")


def _check_imported_lists(
    raw: pd.DataFrame,
    names: dict[str, str],
    corpus: pd.DataFrame,
    path: Path,
    where: str,
    report: DataReport,
) -> None:
    """The retrieved lists, as the import reads them: ids parsed and checked against the corpus
    (comma-separated ids are an error naming the separators), or passages parsed."""
    from cube.systems.imported import SEPARATORS_HINT, comma_lists, parse_ids, parse_passages

    col = names.get("retrieved_doc_ids") or names["retrieved_passages"]
    parse = parse_ids if "retrieved_doc_ids" in names else parse_passages
    lists: list[list[str]] = []
    for i, cell in enumerate(raw[col].tolist()):
        try:
            lists.append(parse(cell))
        except ValueError as err:
            report.errors.append(f"{path}: row {i + 1}, column '{col}': {err} ({where})")
            lists.append([])
    if "retrieved_doc_ids" not in names:  # passages: mapped to documents by the run
        return
    known = set(corpus["doc_id"].astype(str))
    commas = comma_lists(lists, known)
    if commas:
        rows = ", ".join(str(i + 1) for i in sorted(commas)[:10])
        report.errors.append(
            f"{path}: column '{col}' separates doc ids with commas, e.g. "
            f"{next(iter(commas.values()))!r} (rows {rows}); {SEPARATORS_HINT} ({where})"
        )
    bad = [(i, d) for i, ids in enumerate(lists) if i not in commas for d in ids if d not in known]
    if bad:
        report.warnings.append(
            f"{path}: column '{col}': {len(bad)} retrieved doc id(s) not in the knowledge "
            "base (they count as misses): " + ", ".join(f"row {i + 1}: {d}" for i, d in bad)
        )


def validate_data(params: Params, base_dir: str | Path = ".") -> DataReport:
    """Check every data input of a run (relative paths against `base_dir`); never raises on bad
    data."""
    base_dir, report = Path(base_dir), DataReport()
    corpus = check_corpus(params, base_dir, report)
    check_questions(params, corpus, base_dir, report)
    for s in params.systems:
        if isinstance(s, ImportedSystem):
            check_imported(s, corpus, base_dir, report)
        elif s.kind == "python":  # its functions load (`cube run` would stop at stage 02)
            from cube.systems.python_system import load_problems

            report.errors.extend(load_problems(s, base_dir))
    return report
