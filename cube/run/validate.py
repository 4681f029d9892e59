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

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from cube.config.params import Params
from cube.config.schema import CORPUS_FIELDS, MAPPABLE
from cube.config.sections import CorpusParams, ImportedSystem, QuestionParams
from cube.kb.corpus import SheetError, oversized_cells, read_table
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
        return _demo_corpus(params, base_dir, report)
    path = _resolve(str(c.path), base_dir)
    unknown = {k: v for k, v in c.columns.items() if k not in MAPPABLE}
    if unknown:  # reported even when the file cannot be read
        report.errors.append(check_mapping([], unknown, (), str(path))[0])
    table = _read_corpus_table(c, path, report)
    if table is None:
        return None
    raw, where = table
    # a cell over the documented size: a warning with its row and column (issue 38)
    report.warnings.extend(oversized_cells(raw, where, str(path)))
    out, problems, notes = map_table(
        raw,
        where,
        c.columns,
        str(path),
        group_by=c.group_by,
        empty_values=c.empty_values,
        extra_columns=c.extra_columns,
    )
    _record_mapping(report, problems, notes)
    _note_mapped_fields(raw, c.columns, path, report)
    if out is None:
        return None
    out = _as_documents(out, params)
    report.figures["items"] = len(out)
    if not c.group_by:
        _suggest_group_by(out, c.columns, report, str(path))
    _check_documents(out, str(path), out["source_rows"], report)
    return out


def _demo_corpus(params: Params, base_dir: Path, report: DataReport) -> pd.DataFrame:
    from cube.kb.corpus import build_corpus

    corpus = build_corpus(params, base_dir)
    report.notes.append(f"knowledge base: the synthetic demo corpus ({len(corpus)} items)")
    report.figures.update(items=len(corpus), fields_mapped=len(CORPUS_FIELDS))
    _check_documents(corpus, "demo corpus", None, report)
    return corpus


def _read_corpus_table(
    c: CorpusParams, path: Path, report: DataReport
) -> tuple[pd.DataFrame, list[str]] | None:
    """The knowledge base's raw table and where each row came from; None (with the error
    recorded) when it cannot be read."""
    try:
        return read_table(
            path, c.format, sheet=c.sheet, encoding=c.encoding, labels=list(c.columns.values())
        )
    except SheetError as err:  # names corpus.sheet itself
        report.errors.append(str(err))
    except CorpusError as err:
        report.errors.append(f"{err} (corpus.path)")
    return None


def _record_mapping(report: DataReport, problems: list[str], notes: list[str]) -> None:
    """The mapping's problems as errors (once each), its notes as warnings or notes."""
    report.errors.extend(p for p in problems if p not in report.errors)
    report.warnings.extend(n.removeprefix(WARNING) for n in notes if n.startswith(WARNING))
    report.notes.extend(n for n in notes if not n.startswith(WARNING))


def _note_mapped_fields(
    raw: pd.DataFrame, columns: dict[str, str], path: Path, report: DataReport
) -> None:
    raw_cols = [str(x) for x in raw.columns]
    mapped = [k for k in MAPPABLE if columns.get(k, k) in raw_cols]
    report.figures.update(rows=len(raw), fields_mapped=len(mapped))
    report.notes.append(
        f"{path}: {len(raw)} rows; fields mapped: "
        + ", ".join(f"{k} <- '{columns.get(k, k)}'" for k in mapped)
    )


def _as_documents(out: pd.DataFrame, params: Params) -> pd.DataFrame:
    """The mapped rows as the run's documents: each field's text, and the rendered document."""
    for k in MAPPABLE:
        out[k] = [field_text(k, v) for v in out[k]]
    out["text"] = [render_document(r, params.lang, r["extras"]) for r in out.to_dict("records")]
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
    if not _question_file_named(q, report):
        return
    from cube.kb.questions import QuestionError, load_questions_file

    path = _resolve(q.path, base_dir)
    if corpus is None:  # doc_ids cannot be checked; the file and its columns can
        _check_question_columns(path, q, report)
        return
    try:
        n = len(load_questions_file(path, corpus, q.encoding))
        report.notes.append(f"{path}: {n} questions, every doc_id in the knowledge base")
    except QuestionError as err:
        report.errors.append(f"{err} (questions.path)")


def _question_file_named(q: QuestionParams, report: DataReport) -> bool:
    """Whether the questions come from a file that is named (the generator's needs recorded)."""
    if q.generator == "llm" and q.model is None:
        report.errors.append(
            "questions.generator 'llm' needs questions.model (a model name from `models:` "
            "or an inline spec)"
        )
    if q.generator != "file":
        return False
    if not q.path:
        report.errors.append("questions.generator 'file' needs questions.path")
        return False
    return True


def _check_question_columns(path: Path, q: QuestionParams, report: DataReport) -> None:
    """Without a knowledge base: the question file readable, with its two columns."""
    try:
        raw, _ = read_table(
            path, what="question-set", encoding=q.encoding, encoding_key="questions.encoding"
        )
    except CorpusError as err:
        report.errors.append(f"{err} (questions.path)")
        return
    missing = [c for c in ("question", "doc_id") if c not in raw.columns]
    if missing:
        report.errors.append(
            f"{path}: missing column(s) {missing}; expected 'question' and 'doc_id'; columns "
            f"found: {[str(c) for c in raw.columns]} (questions.path)"
        )


def check_imported(
    system: ImportedSystem,
    corpus: pd.DataFrame | None,
    base_dir: Path,
    report: DataReport,
    run_inputs: tuple[pd.DataFrame, pd.DataFrame] | None = None,
    max_share: float = 0.1,
) -> None:
    """An imported QA file: readable, with its columns, every row's list parsed and mapped to the
    knowledge base without calling anything (more than `max_share` of its passages matching no
    document, or of its ids not in the knowledge base, is an error: the run could not measure its
    retrieval); then, when the run's knowledge base and question set are known (`run_inputs`),
    read by the run's own import (`ImportedAnswers`), so whatever it refuses (unanswered
    questions, unknown ids, a malformed list...) is an error here, with its fix; else its ids
    checked against `corpus`."""
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
    if corpus is not None:  # every row's list, beside the import's first refusal
        _check_imported_lists(raw, names, corpus, path, where, report, unknown=run_inputs is None)
        _check_measurable(raw, names, corpus, path, where, report, max_share)
    if run_inputs is not None:
        _import_as_the_run(system, run_inputs, report)
    report.notes.append(f"{path}: {len(raw)} answers ({where})")


def _check_imported_lists(
    raw: pd.DataFrame,
    names: dict[str, str],
    corpus: pd.DataFrame,
    path: Path,
    where: str,
    report: DataReport,
    unknown: bool = True,
) -> None:
    """The retrieved lists, as the import reads them: ids parsed and checked against the corpus
    (comma-separated ids are an error naming the separators), or passages parsed. With `unknown`,
    ids not in the knowledge base are a warning (with the run's question set, the run's own import
    says what it does with them)."""
    from cube.systems.imported import parse_ids, passages_parser

    col = names.get("retrieved_doc_ids") or names["retrieved_passages"]
    # passages as the import splits them (DeepEval's `|`-joined cells under its own names)
    parse = parse_ids if "retrieved_doc_ids" in names else passages_parser(col)
    lists = _parsed_lists(raw[col].tolist(), parse, f"column '{col}'", path, where, report)
    if "retrieved_doc_ids" not in names:  # passages: mapped to documents by the run
        return
    _check_id_lists(lists, set(corpus["doc_id"].astype(str)), col, (path, where), report, unknown)


def _parsed_lists(
    cells: list[Any],
    parse: Callable[[Any], list[str]],
    column: str,
    path: Path,
    where: str,
    report: DataReport,
) -> list[list[str]]:
    """Each cell's list as the import parses it; a cell it refuses is an error naming its row,
    and an empty list."""
    lists: list[list[str]] = []
    for i, cell in enumerate(cells):
        try:
            lists.append(parse(cell))
        except ValueError as err:
            report.errors.append(f"{path}: row {i + 1}, {column}: {err} ({where})")
            lists.append([])
    return lists


def _check_id_lists(
    lists: list[list[str]],
    known: set[str],
    col: str,
    at: tuple[Path, str],
    report: DataReport,
    unknown: bool,
) -> None:
    """Comma-separated ids are an error naming the separators; with `unknown`, ids not in the
    knowledge base a warning (they count as misses)."""
    from cube.systems.imported import SEPARATORS_HINT, comma_lists

    path, where = at
    commas = comma_lists(lists, known)
    if commas:
        rows = ", ".join(str(i + 1) for i in sorted(commas)[:10])
        report.errors.append(
            f"{path}: column '{col}' separates doc ids with commas, e.g. "
            f"{next(iter(commas.values()))!r} (rows {rows}); {SEPARATORS_HINT} ({where})"
        )
    if not unknown:
        return
    bad = [(i, d) for i, ids in enumerate(lists) if i not in commas for d in ids if d not in known]
    if bad:
        report.warnings.append(
            f"{path}: column '{col}': {len(bad)} retrieved doc id(s) not in the knowledge "
            "base (they count as misses): " + ", ".join(f"row {i + 1}: {d}" for i, d in bad)
        )


def _check_measurable(
    raw: pd.DataFrame,
    names: dict[str, str],
    corpus: pd.DataFrame,
    path: Path,
    where: str,
    report: DataReport,
    max_share: float,
) -> None:
    """The file's retrieved lists through the run's own policy (`cube.systems.retrieved`): when
    more than `max_share` of its passages match no document, or of its ids are not knowledge-base
    doc ids, the run would withhold the verdict (retrieval not measured): an error now, before any
    call, with the fix (the knowledge base's mapping, the file's `columns:`, the ids' case)."""
    from cube.systems.imported import parse_ids, passages_parser
    from cube.systems.retrieved import Retrieved, ranked_lists, unmeasured_reasons

    def parsed(key: str, parse: Any) -> list[list[str] | None]:
        if key not in names:
            return [None] * len(raw)
        out: list[list[str] | None] = []
        for cell in raw[names[key]].tolist():
            try:
                out.append(parse(cell))
            except ValueError:  # said by `_check_imported_lists`
                out.append(None)
        return out

    replies = [
        Retrieved(ids=i, passages=p)
        for i, p in zip(
            parsed("retrieved_doc_ids", parse_ids),
            parsed("retrieved_passages", passages_parser(names.get("retrieved_passages", ""))),
            strict=True,
        )
    ]
    read = [repr(names[k]) for k in ("retrieved_doc_ids", "retrieved_passages") if k in names]
    for reason in unmeasured_reasons(ranked_lists(replies, corpus, None), max_share):
        report.errors.append(
            f"{path}: {reason}; more than analysis.max_unmapped_share = {max_share:.0%} did not "
            f"map, so the run would withhold the verdict ({where}; the column read: "
            f"{', '.join(read)}, set another with the system's `columns:`)"
        )


def _import_as_the_run(
    system: ImportedSystem, run_inputs: tuple[pd.DataFrame, pd.DataFrame], report: DataReport
) -> None:
    """Read the file with the run's own import against the run's question set and knowledge base:
    its error, with the fix; its warnings (dropped questions, cut lists) as warnings. When it
    refuses the file, what `on_invalid: drop` would keep is said too (every problem at once)."""
    from cube.systems.imported import ImportedAnswers, ImportedFileError

    corpus, questions = run_inputs
    where = f"systems[{system.name}]"
    answers, caught, error = _imported_answers(ImportedAnswers(system), questions, corpus)
    report.warnings.extend(f"{w} ({where})" for w in caught)
    if error is None:
        report.notes.append(
            f"{where}: answers {answers['question_id'].nunique()} of the {len(questions)} "
            "questions of the run's question set"
        )
        return
    if not isinstance(error, ImportedFileError):
        report.errors.append(f"{where}: the import failed: {type(error).__name__}: {error}")
        return
    drop = system.model_copy(update={"on_invalid": "drop"})
    kept, dropped, _ = _imported_answers(ImportedAnswers(drop), questions, corpus)
    outcome = (
        f"with `on_invalid: drop` the run would evaluate {kept['question_id'].nunique()} of "
        f"{len(questions)} questions ({'; '.join(dropped) or 'none dropped'})"
        if kept is not None
        else "`on_invalid: drop` would not help: fix the file"
    )
    report.errors.append(
        f"{error} ({where}.path). Fix the file (the question set the run asks: `cube questions "
        f"PARAMS --out FILE`), or set `on_invalid: drop` under {where} to leave the questions "
        f"it cannot use out of the evaluation: {outcome}"
    )


def _imported_answers(
    system: Any, questions: pd.DataFrame, corpus: pd.DataFrame
) -> tuple[pd.DataFrame | None, list[str], Exception | None]:
    """(answers, warning messages, exception) of one import."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            answers, error = system.answer(questions, corpus, progress=False), None
        except Exception as err:  # reported, never raised: validate lists every problem
            answers, error = None, err
    return answers, [str(w.message) for w in caught], error


def run_inputs(
    params: Params, base_dir: Path, report: DataReport
) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """The run's knowledge base and question set as stages 01-02 make them
    (`cube.run.pipeline.question_set`), for the checks that need the question set (imported
    answers' coverage); None when they depend on LLM calls (`questions.generator: llm`) or cannot
    be made (reported)."""
    if params.questions.generator == "llm":
        if any(isinstance(s, ImportedSystem) for s in params.systems):
            report.notes.append(
                "questions.generator llm: the question set is written during the run, so the "
                "coverage of imported answers is checked at run time (stage 02); `cube questions "
                "PARAMS --out FILE` writes it beforehand (its calls are cached: the run asks the "
                "same questions)"
            )
        return None
    from cube.run.pipeline import question_set

    try:
        return question_set(params, base_dir)
    except Exception as err:  # the loaders' own checks above name the cause; this says the stage
        report.errors.append(f"the run's question set cannot be made: {type(err).__name__}: {err}")
        return None


def check_systems(params: Params, report: DataReport, missing: set[str] = frozenset()) -> None:
    """Every system is made as the run makes it (`cube.systems.make_system`: its own checks of its
    settings, e.g. a Python system's function that cannot be imported); no call is sent. A system
    naming a file already reported missing (`missing`: dotted keys) is not made again."""
    from cube.systems import make_system

    for s in params.systems:
        if any(key.startswith(f"systems[{s.name}].") for key in missing):
            continue
        try:
            make_system(s, params, None)
        except Exception as err:  # reported, never raised
            report.errors.append(f"systems[{s.name}] ({s.kind}): {type(err).__name__}: {err}")


def check_dimensions(params: Params, base_dir: Path, report: DataReport) -> None:
    """The dimensions load as stage 03 loads them: their files, prompt files and templates."""
    from cube.judges.dimensions import DimensionError, load_dimensions

    try:
        load_dimensions(params, base_dir=base_dir)
    except (DimensionError, OSError, ValueError) as err:
        report.errors.append(f"{err} (dimensions)")


def check_paths(
    params: Params, base_dir: Path, report: DataReport, params_file: Path | None
) -> set[str]:
    """Every local file the params name and the run reads (not outputs_dir nor cache_path, which
    it makes) exists; each missing one is an error naming the key, the path as written, the params
    file it was read against and the path that was looked for. Returns the keys missing."""
    from cube.config.project import local_paths

    used = local_paths(json.loads(params.model_dump_json()))
    written = _written_paths(params_file)
    missing = set()
    for where, path in used.items():
        if where in ("outputs_dir", "cache_path") or not _read_by_run(params, where):
            continue
        full = _resolve(path, base_dir)
        if full.exists():
            continue
        missing.add(where)
        shown = written.get(where) if params_file is not None else None
        report.errors.append(_missing_message(where, full, shown, params_file or base_dir))
    return missing


def _read_by_run(params: Params, where: str) -> bool:
    if where == "corpus.path":
        return params.corpus.source == "file"
    if where == "questions.path":
        return params.questions.generator == "file"
    return True


def _written_paths(params_file: Path | None) -> dict[str, str]:
    """The local paths of a params file as written in it, by dotted key."""
    if params_file is None:
        return {}
    from cube.config.params import ParamsError, read_params_yaml
    from cube.config.project import local_paths

    try:
        return local_paths(read_params_yaml(params_file))
    except ParamsError:
        return {}


# What each path key names, for the message of a missing one.
FILE_KINDS = {
    "corpus.path": "knowledge-base file or folder",
    "questions.path": "question file",
    "systems.path": "imported answers file",
    "systems.callable": "Python file",
    "systems.bounds": "Python file",
    "dimensions.path": "dimension file or folder",
    "dimensions.prompt_file": "prompt file",
    "human.ratings": "ratings file or folder",
    "human.key": "annotation key file",
}


def _missing_message(where: str, full: Path, written: str | None, read_from: Path) -> str:
    """A missing file: as written in the params file `read_from` (a relative path read from its
    folder), or, for params without a file (`written` None), read from the folder `read_from`."""
    import re

    from cube.config.project import is_relative_local

    kind = FILE_KINDS.get(re.sub(r"\[[^\]]*\]", "", where), "file")
    if written is None:
        return f"{where}: {kind} {full} not found (a relative path is read from {read_from})"
    if is_relative_local(written):
        return (
            f"{where}: {kind} {written!r} not found: a relative path is read from the folder of "
            f"the params file {read_from}, so it names {full}; give the path from that folder, or "
            "an absolute path"
        )
    return f"{where}: {kind} {full} not found (as written in {read_from})"


def kind_checks(params: Params, base_dir: Path, missing: set[str]) -> list[str]:
    """Each system kind's own checks (`cube.systems.kinds.SystemKind.check`: a python system's
    functions load), less the problems of a key whose file is already reported missing (a
    missing `bounds` file does not hide a `callable` that fails to load)."""
    from cube.systems.kinds import kind_of

    return [
        problem
        for s in params.systems
        if (check := kind_of(s).check) is not None
        for problem in check(s, base_dir)
        if problem.split(":", 1)[0] not in missing
    ]


def validate_data(
    params: Params, base_dir: str | Path = ".", params_file: str | Path | None = None
) -> DataReport:
    """Check every data input of a run as the run reads it before its first LLM call (relative
    paths of a params built from a mapping against `base_dir`; a loaded params file's are
    absolute already); never raises on bad data. `params_file`: the file the params came from,
    named by the message of a missing file."""
    base_dir, report = Path(base_dir), DataReport()
    missing = check_paths(params, base_dir, report, Path(params_file) if params_file else None)
    corpus = check_corpus(params, base_dir, report) if "corpus.path" not in missing else None
    if "questions.path" not in missing:
        check_questions(params, corpus, base_dir, report)
    _check_imported_systems(params, corpus, base_dir, report, missing)
    report.errors.extend(kind_checks(params, base_dir, missing))
    check_systems(params, report, missing)
    from cube.run.sequential import sequential_problems  # analysis.sequential's values

    report.errors.extend(sequential_problems(params))
    from cube.run.release import params_baseline_problems  # the baseline: a completed run

    report.errors.extend(params_baseline_problems(params, base_dir))
    if not any(w.startswith("dimensions") for w in missing):
        check_dimensions(params, base_dir, report)
    return report


def _check_imported_systems(
    params: Params,
    corpus: pd.DataFrame | None,
    base_dir: Path,
    report: DataReport,
    missing: set[str],
) -> None:
    """Every imported system whose file exists, read as the run reads it (with the run's
    knowledge base and question set when both are sound so far)."""
    imported = [
        s
        for s in params.systems
        if isinstance(s, ImportedSystem) and f"systems[{s.name}].path" not in missing
    ]
    sound = bool(imported) and corpus is not None and report.ok
    inputs = run_inputs(params, base_dir, report) if sound else None
    for s in imported:
        check_imported(s, corpus, base_dir, report, inputs, params.analysis.max_unmapped_share)
