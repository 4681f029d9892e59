"""Human ratings (notebook 07): the blind annotation sheet, importing the filled sheets, the
human-calibrated CuBE (`results.json` `human_calibrated`, its own key) and page 07's agreement.

Moved out of `cube.run.pipeline` (which re-exports these names for the notebooks).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import pandas as pd

from cube.config.params import Params
from cube.config.runpaths import RunPaths
from cube.config.sheets import read_guarded_csv
from cube.method.evaluation import CubeResult
from cube.pages.escape import escape_text
from cube.run.evaluate import evaluate_run, system_top_n
from cube.run.notebook import Run

if TYPE_CHECKING:
    from cube.method.ppi import PPIResult

ImportReport = dict[str, Any]  # what `import_ratings` reports of the filled sheets (its own shape)
Imported = tuple[pd.DataFrame, ImportReport]  # the human ratings as scores rows, and the report
# the table of notebook 07, the `PPIResult` per rated system, their `results.json` headlines
Calibration = tuple[pd.DataFrame, dict[str, "PPIResult"], dict[str, dict[str, Any]]]


def annotation_dir(paths: RunPaths) -> Path:
    return paths.annotation  # the published folder, also from staging (cube.run.state)


def export_annotation(
    params: Params,
    out: Path | None = None,
    raters: list[str] | None = None,
    paths: RunPaths | None = None,
    overwrite: bool = False,
) -> list[Path]:
    """Export the blind annotation sheet (CSV, criteria CSV, Excel) and its key file for a run's
    answers.

    An existing sheet is kept unless `overwrite`: raters may be filling it in place, and the
    sample is deterministic, so writing it again could only erase their work."""
    from cube.judges.annotation import export_annotation_sheet, key_path

    paths = paths or RunPaths.for_params(params)
    target = out or annotation_dir(paths) / "annotation_sheet"
    key = key_path(
        target
    )  # `x_key.csv` for a sheet `x`: matched by the glob below, listed once, last
    existing = (
        sorted(p for p in target.parent.glob(f"{target.name}*") if p != key)
        if target.parent.exists()
        else []
    )
    if existing and not overwrite:
        return existing + [key] * key.exists()
    run = Run(params=params, paths=paths, params_path=Path("."))
    answers, questions, corpus = run.load("answers"), run.load("questions"), run.load("corpus")
    target.parent.mkdir(parents=True, exist_ok=True)
    export_annotation_sheet(
        answers,
        questions,
        corpus,
        params.dimension_names(),
        params.lang,
        target,
        size=params.human.sample_size,
        seed=params.human.seed,
        raters=raters,
        paired=True,
    )
    return sorted(p for p in target.parent.glob(f"{target.name}*") if p != key) + [key]


def human_stage(run: Run) -> Imported | None:
    """Import the filled annotation sheet(s) named by `human.ratings`; None when there are none.

    A review sheet's ratings (`cube annotate --for-review`, `cube.run.review`) are read through
    its own key (`review_key.csv` beside `review_sheet.*`, unless `human.key` names one); those of
    items chosen for review and not drawn at random are kept apart (`data/human_review.parquet`,
    `review_only` in the report): the calibration reads a random sample."""
    from cube.judges.human import import_ratings
    from cube.run.review import split_review_ratings

    if not run.params.human.ratings:
        return None
    answers = run.load("answers")
    ratings = Path(run.params.human.ratings)
    key = _ratings_key(run, ratings)
    human, report = import_ratings(
        ratings,
        answers,
        run.params.dimension_names(),
        per_rater=run.params.human.per_rater_judges,
        key=key,
    )
    drawn, review_only = split_review_ratings(human, _split_key(ratings, key))
    apart = run.paths.data / "human_review.parquet"
    if len(review_only):
        review_only.to_parquet(apart, index=False)
        report = {**report, "review_only": len(review_only)}
    else:  # an earlier import's items kept apart are not this import's
        apart.unlink(missing_ok=True)
    run.save("human_ratings", drawn)
    return drawn, report


def _split_key(ratings: Path, key: Path | None) -> Path | None:
    """The key telling review-only items from the random sample (its `reason` column): the key
    read through when it has one; else a review sheet's own `review_key.csv` beside the ratings (a
    ratings folder holding it, or a file named `review_sheet*` next to it), so a `human.key`
    naming the plain annotation key lets no review-only item reach the calibration."""
    from cube.config.sheets import read_guarded_csv
    from cube.run.review import REVIEW_KEY

    if key is not None and key.exists():
        head = read_guarded_csv(
            key, dtype=str, keep_default_na=False, encoding="utf-8-sig", nrows=0
        )
        if "reason" in head.columns:
            return key
    if ratings.is_dir():
        beside = ratings / REVIEW_KEY
    elif ratings.name.startswith("review_sheet"):
        beside = ratings.parent / REVIEW_KEY
    else:
        return key
    return beside if beside.exists() else key


def _ratings_key(run: Run, ratings: Path) -> Path | None:
    """The key the filled sheet(s) are read through: `human.key`; a sheet file's own key beside it
    (`review_sheet.xlsx` -> `review_key.csv`); the run's annotation key; None for the ratings
    folder's own key, or a sheet written before blinding."""
    from cube.judges.annotation import key_path

    if run.params.human.key:
        return Path(run.params.human.key)
    if ratings.is_file() and key_path(ratings).exists():
        return key_path(ratings)
    key = key_path(annotation_dir(run.paths) / "annotation_sheet")
    if not key.exists() or (ratings.is_dir() and any(ratings.glob("*_key.csv"))):
        return None
    return key


def human_calibration(
    run: Run,
    results: dict[str, CubeResult] | None = None,
    imported: tuple[pd.DataFrame, Any] | None = None,
) -> Calibration | None:
    """The human-calibrated CuBE of every rated system (`cube.method.ppi`), None without ratings:
    the table of notebook 07, the `PPIResult` per system and their `results.json` headlines
    (recorded as `human_calibrated`, beside the decision: the report's index page says the
    human-calibrated line from it, `cube.diagnose.assessment.human_sentence`)."""
    from cube.method.ppi import calibrate_systems

    if not run.params.human.ratings:
        return None
    imported = imported or human_stage(run)
    if imported is None:
        return None
    results = results if results is not None else evaluate_run(run)
    ap = run.params.analysis
    answers, scores = run.load("answers"), run.load("scores")
    table, per = calibrate_systems(
        answers,
        scores,
        imported[0],
        results,
        ap,
        system_top_n(run.params),
        widths=(10.0, ap.max_interval_width),
    )
    heads = {s: p.headline() | {"n_ratings": rating_count(imported[0], s)} for s, p in per.items()}
    from cube.run.record import HumanRecord

    run.write_record(HumanRecord(human_calibrated=heads))  # the decision (06) is not rewritten
    return table, per, heads


def rating_count(human: pd.DataFrame, system: str) -> int:
    """The human ratings of a system: the filled cells (rater x answer x dimension) of its rows,
    what "N ratings" says beside the rated questions a human-calibrated CuBE counts (`n_rated`)."""
    mine = human[human["system"].astype(str) == system]
    return int(mine["score"].notna().sum())


# ------------------------------------------------------------------------ human agreement (07)
@dataclass
class HumanSection:
    """What notebook 07 shows: with ratings, human-vs-judge agreement and Table 5; without,
    the sheet to fill in and judge-vs-judge agreement (never invented ratings)."""

    has_ratings: bool
    message: str
    sheet: list[Path]
    sheet_preview: pd.DataFrame | None
    import_report: ImportReport | None
    agreement: pd.DataFrame
    reliability: pd.DataFrame
    pairwise: pd.DataFrame
    table5: pd.DataFrame | None
    scores: pd.DataFrame  # LLM judges' scores on the compared items, with human rows when rated
    sets: list[
        str
    ]  # the answer sets the agreement is computed on (`human.agreement_sets`, present ones)
    agreement_note: str  # which sets the statistics are on and what was left out
    set_scores: (
        pd.DataFrame
    )  # `scores` in the first of `sets` (all of them when it is "pooled"): the figures
    calibrated: pd.DataFrame | None = (
        None  # human-calibrated CuBE per rated system (cube.method.ppi)
    )
    calibrated_means: pd.DataFrame | None = (
        None  # its per (system, set, dimension) means: judge, human, PPI
    )


def _sheet_size(sample_size: int, files: list[Path]) -> str:
    """What the sheet's rows are, from its key file: '40 sampled question-system pairs x 3 answer
    sets (zero, rag, full), shuffled, with blind ids'."""
    key = next((p for p in files if p.stem.endswith("_key")), None)
    if key is None:  # a sheet written before blinding
        return f"{sample_size} sampled question-system pairs, each in all its answer sets"
    k = read_guarded_csv(key, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    pairs = k[["question_id", "system"]].drop_duplicates().shape[0]
    sets = (
        sorted(k["set"].unique(), key=["zero", "rag", "full"].index)
        if set(k["set"]) <= {"zero", "rag", "full"}
        else sorted(k["set"].unique())
    )
    return (
        f"{pairs} sampled question-system pairs × {len(sets)} answer sets ({', '.join(sets)}), "
        "shuffled; raters see only the question, the gold document and the answer under an opaque "
        f"id, and `{key.name}` maps the ids back"
    )


class _Compared(NamedTuple):
    """Whom the agreement compares: the human raters with the judges, or the judges alone."""

    message: str
    scores: pd.DataFrame  # the judges' scores, with the human rows when rated
    groups: dict[str, list[str]]  # the raters' groups whose reliability is measured
    reference: str  # the agreement's reference judge ("human" with ratings)
    table5: pd.DataFrame | None
    report: ImportReport | None
    calibrated: Calibration | None


def human_agreement(run: Run) -> HumanSection:
    from cube.method import agreement as ag

    scores = run.load("scores")
    sheet = export_annotation(run.params, paths=run.paths)
    preview, n_rows = _sheet_preview(run, sheet)
    imported = human_stage(run)
    judges = sorted(scores["judge"].unique())
    ap = run.params.analysis
    compared = (
        _judges_only(run, scores, judges, n_rows, sheet)
        if imported is None
        else _with_humans(run, imported, scores, judges)
    )
    both = compared.scores
    sets, note = _agreement_sets(run.params.human.agreement_sets, both)
    agreement = ag.agreement_table(
        both,
        reference_judge=compared.reference,
        sets=sets,
        bootstrap=min(ap.bootstrap, 200),
        confidence=ap.confidence,
        seed=ap.seed,
    )
    first = sets[0]
    set_scores = both if first == ag.POOLED else both[both["set"].astype(str) == first]
    calibrated = compared.calibrated
    return HumanSection(
        imported is not None,
        compared.message,
        sheet,
        preview,
        compared.report,
        agreement,
        _reliability(both, compared.groups, sets),
        ag.pairwise_agreement(both, set_name=first),
        compared.table5,
        both,
        sets,
        note + _unpaired_note(agreement),
        set_scores,
        None if calibrated is None else calibrated[0],
        _calibrated_means(calibrated),
    )


def _sheet_preview(run: Run, sheet: list[Path]) -> tuple[pd.DataFrame, int]:
    """The annotation sheet's first five rows (the ids, the texts cut at 60 characters, the
    first dimension's columns) and its number of rows."""
    sheet_csv = next(
        p for p in sheet if p.suffix == ".csv" and not p.stem.endswith(("_criteria", "_key"))
    )
    preview = read_guarded_csv(sheet_csv, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    n_rows = len(preview)
    preview = preview.head(5)
    first = run.params.dimension_names()[0]
    preview = preview[
        [c for c in ("item_id", "question", "answer", "rater") if c in preview.columns]
        + [c for c in preview.columns if c.startswith(f"{first}.")]
    ]
    preview[["question", "answer"]] = preview[["question", "answer"]].map(
        lambda t: t[:60] + "…" * (len(t) > 60)
    )
    return preview, n_rows


def _judges_only(
    run: Run, scores: pd.DataFrame, judges: list[str], n_rows: int, sheet: list[Path]
) -> _Compared:
    """Without ratings: the judges against the first of them, and where the sheet to fill is."""
    reference = judges[0]
    msg = (
        "No human ratings were given (params `human.ratings` is empty), so none are shown: "
        f"this notebook never invents them. The annotation sheet ({n_rows} rows: "
        f"{escape_text(_sheet_size(run.params.human.sample_size, sheet))}) is ready in "
        # <code>, not backticks: a code span shows character references as written
        f"<code>{escape_text(run.shown_path(annotation_dir(run.paths)))}/</code>; fill it in "
        "(or hand it to raters), then set `human: {ratings: <the filled file or folder>}` in "
        "the params and re-run "
        "notebooks 07-08. Meanwhile, the judges are compared with each other, taking "
        f"{escape_text(reference)} as the reference."  # Markdown: a name is outside text
    )
    return _Compared(msg, scores, {"LLM/offline judges": judges}, reference, None, None, None)


def _with_humans(
    run: Run,
    imported: Imported,
    scores: pd.DataFrame,
    judges: list[str],
) -> _Compared:
    """With ratings: the raters against the judges on the rated answers, Table 5 over the jury
    and the human-calibrated CuBE."""
    from cube.method.tables import table5_human_vs_cube

    human, report = imported
    rated = set(zip(human["question_id"], human["system"], human["set"], strict=True))
    key = list(zip(scores["question_id"], scores["system"], scores["set"], strict=True))
    both = pd.concat([scores[[k in rated for k in key]], human], ignore_index=True)
    raters = sorted(j for j in human["judge"].unique())
    full = evaluate_run(run, bootstrap=False)
    full_recall = {s: r.recall_at_k for s, r in full.items()}
    jury = {s: r.jury_judges for s, r in full.items()}  # Table 5 over the jury only
    t5 = table5_human_vs_cube(
        run.load("answers"),
        scores,
        human,
        run.params.analysis,
        system_top_n(run.params),
        full_recall,
        jury,
    )
    calibrated = human_calibration(run, imported=imported)
    msg = (
        f"{len(raters)} human rater(s) rated "
        f"{human[['question_id', 'system', 'set']].drop_duplicates().shape[0]} answers; "
        f"{int(human['score'].isna().sum())} cells were left blank and are reported, not "
        "guessed."
    )
    groups = {"human raters": raters, "judges": judges}
    return _Compared(msg, both, groups, "human", t5, report, calibrated)


def _reliability(
    scores: pd.DataFrame, groups: dict[str, list[str]], sets: list[str]
) -> pd.DataFrame:
    """The inter-rater reliability of each group of more than one rater (empty when none)."""
    from cube.method import agreement as ag

    several = {k: v for k, v in groups.items() if len(v) > 1}
    return ag.reliability_table(scores, several, sets=sets) if several else pd.DataFrame()


def _unpaired_note(agreement: pd.DataFrame) -> str:
    unpaired = int(agreement["n_missing"].sum()) if len(agreement) else 0
    if not unpaired:
        return ""
    return (
        f" {unpaired} (judge, answer, dimension) pair(s) where a side is unscored are left out and "
        "counted in `n_missing`."
    )


def _calibrated_means(
    calibrated: Calibration | None,
) -> pd.DataFrame | None:
    if calibrated is None:
        return None
    return pd.concat(
        [p.means.assign(system=s) for s, p in calibrated[1].items()], ignore_index=True
    )


def _agreement_sets(requested: list[str], scores: pd.DataFrame) -> tuple[list[str], str]:
    """The requested agreement sets that have scores, and a one-paragraph note saying which sets the
    statistics are on and which were left out (never pooled unless `pooled` is requested)."""
    present = sorted(scores["set"].astype(str).unique())
    sets = [s for s in dict.fromkeys(requested) if s == "pooled" or s in present]
    absent = [s for s in dict.fromkeys(requested) if s not in sets]
    if not sets:
        raise ValueError(
            f"human.agreement_sets: none of {requested} has scores in this run; sets present: "
            f"{present}"
        )
    return sets, _agreement_note(sets, present, absent)


def _set_phrase(name: str) -> str:
    # the note is Markdown: the set names are escaped
    return "all sets pooled" if name == "pooled" else f"the {escape_text(name)} set"


def _agreement_note(sets: list[str], present: list[str], absent: list[str]) -> str:
    """Which sets the statistics are on, which present sets were left out and which requested
    sets have no scores."""
    pooled = "pooled" in sets
    named = ", ".join(_set_phrase(s) for s in sets)
    left = [] if pooled else [s for s in present if s not in sets]
    note = (
        f"Agreement is computed on {named} (`human.agreement_sets`), each separately"
        + ("" if pooled else ", never pooled across sets")
        + "; bootstrap intervals resample questions (all answers of a question move together)."
    )
    if left:
        note += f" Not included: the {escape_text(', '.join(left))} set(s)."
    if absent:
        note += f" Requested but without scores: {escape_text(', '.join(absent))}."
    return note
