"""The weekly review sheet (issue 42, item 5): `cube annotate PARAMS --for-review`.

The evaluation-dataset article's workflow ends each change with "a person reviews the inconsistent
samples, weekly" before the release is decided. This module picks them from a run:

- **the regressed questions**: `report/decision.json`'s `regressed` (the release decision against
  the baseline, `cube run --baseline`): answered well by the baseline, badly by this version, beyond
  the judges' noise. They are the primary system's (the decision is about it);
- **the questions where the judges disagree most**: per answer and dimension, the range of the
  judges' scores (each judge's mean over its samples; unscored cells left out; the jury when the
  run's decision names one, so a judge the gate excluded adds no noise), per answer the largest
  over its dimensions, per (question, system) the largest over its answer sets; the `k` largest
  (`--disagreements`), ties by question id. A range needs two judges: a run of one judge has no
  disagreement to show, and says so;
- **the run's random sample** (`human.sample_size`, `human.seed`: the same items `cube annotate`
  writes), so that the ratings recalibrate the run.

The sheet is `cube annotate`'s (`cube.judges.annotation.write_annotation_sheet`: CSV and XLSX, blind
opaque ids, never a formula), every answer set of each chosen (question, system) pair (the rater
does not learn which answer is suspected), and its key `review_key.csv` has one more column,
`reason` (`regressed`, `disagreement`, `sample`, joined by `;`).

**Why the sample is in it.** Prediction-powered inference (`cube.method.ppi`) corrects the judges
with the human-minus-judge mean of a *random* sample; items chosen because the judges disagree or
because the score fell are chosen on the very errors it estimates, and would bias it. So on import
(`cube.run.human.human_stage`) ratings whose key `reason` lacks `sample` are kept apart (written to
`data/human_review.parquet`, counted in the import report) and the calibration, the agreement and
Table 5 read the sampled ones, exactly as for a `cube annotate` sheet.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cube.config.params import Params
from cube.config.runpaths import RunPaths

REVIEW_SHEET = "review_sheet"  # under the run's annotation/ folder: review_sheet.csv/.xlsx
REVIEW_KEY = "review_key.csv"
DECISION = "decision.json"  # report/decision.json, written by the release decision
SAMPLE, REGRESSED, DISAGREEMENT = "sample", "regressed", "disagreement"


class ReviewError(ValueError):
    """A run that has nothing to review from (no answers, or a decision file that is no JSON)."""


def regressed_questions(paths: RunPaths) -> tuple[list[str], str]:
    """The question ids of `report/decision.json`'s `regressed` rows, and where they came from
    ('' when the run has no decision file: a run without a baseline regresses nothing)."""
    path = paths.report / DECISION
    if not path.exists():
        return [], ""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ReviewError(f"{path}: cannot read the release decision as JSON: {exc}") from None
    rows = data.get("regressed") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        return [], f"{path}: no `regressed` list"
    ids = [str(r["question_id"]) for r in rows if isinstance(r, dict) and "question_id" in r]
    return list(dict.fromkeys(ids)), str(path)


def judge_spread(scores: pd.DataFrame, judges: list[str] | None = None) -> pd.DataFrame:
    """Per (question_id, system): the judges' disagreement, the largest range across judges of an
    answer's score on one dimension (`spread`, 0-10 points), and how many judges it compared.

    Each judge's score of a cell is its mean over samples; unscored cells and human ratings are
    left out; `judges` restricts the judges compared (the jury). Cells scored by fewer than two
    judges have no range."""
    s = scores[scores["score"].notna()]
    s = s[~s["judge"].astype(str).str.startswith("human")]
    if judges:
        s = s[s["judge"].astype(str).isin(judges)]
    keys = ["question_id", "system", "set", "dimension"]
    per_judge = s.groupby([*keys, "judge"], observed=True)["score"].mean().reset_index()
    cells = per_judge.groupby(keys, observed=True)["score"].agg(["max", "min", "count"])
    cells = cells[cells["count"] >= 2]
    cells["spread"] = cells["max"] - cells["min"]
    units = cells.reset_index().groupby(["question_id", "system"], observed=True)
    return units.agg(spread=("spread", "max"), judges=("count", "max")).reset_index()


def _jury(paths: RunPaths) -> list[str] | None:
    """The judges of the run's decision's jury (the union over its systems), None when unknown."""
    from cube.run.record import read_record

    if not paths.results.exists():
        return None
    decision = read_record(paths.results).decision.decision
    if decision is None:
        return None
    used = {j for s in [decision, *decision.systems] for j in s.judges_used}
    return sorted(used) or None


def _largest_spread(scores: pd.DataFrame, jury: list[str] | None) -> pd.DataFrame:
    """The pairs the judges disagree on at all, the largest spread first (ties by id)."""
    spread = judge_spread(scores, jury)
    return spread[spread["spread"] > 0].sort_values(
        ["spread", "question_id", "system"], ascending=[False, True, True], kind="stable"
    )


def _one_row_per_pair(units: list[tuple[str, str, str]]) -> pd.DataFrame:
    """(question_id, system, reason) rows, one per pair, its reasons joined by ';' in order."""
    table = pd.DataFrame(units, columns=["question_id", "system", "reason"])
    return (
        table.groupby(["question_id", "system"], sort=False)["reason"]
        .agg(lambda r: ";".join(dict.fromkeys(r)))
        .reset_index()
    )


def _range(values: pd.Series) -> list[float] | None:
    return [float(values.min()), float(values.max())] if len(values) else None


def review_units(
    params: Params, paths: RunPaths, answers: pd.DataFrame, scores: pd.DataFrame, k: int
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The (question_id, system, reason) units of the review sheet: the regressed questions of the
    primary system, the `k` pairs the judges disagree on most, the run's random sample; and a
    report of each part (counts, the largest and smallest spread taken, where they came from)."""
    from cube.judges.annotation import annotation_sample

    primary = params.systems[0].name
    regressed, source = regressed_questions(paths)
    known = set(answers.loc[answers["system"].astype(str) == primary, "question_id"].astype(str))
    unknown = [q for q in regressed if q not in known]
    units = [(q, primary, REGRESSED) for q in regressed if q in known]
    jury = _jury(paths)
    spread = _largest_spread(scores, jury)
    top = spread.head(k)
    units += [(str(r.question_id), str(r.system), DISAGREEMENT) for r in top.itertuples()]
    sample = annotation_sample(answers, params.human.sample_size, params.human.seed, paired=True)
    drawn = sample[["question_id", "system"]].astype(str).drop_duplicates()
    units += [(q, s, SAMPLE) for q, s in drawn.itertuples(index=False)]
    table = _one_row_per_pair(units)
    report = {
        "regressed": len(regressed) - len(unknown),
        "regressed_from": source or "no report/decision.json (no baseline: nothing regressed)",
        "regressed_not_in_answers": unknown,
        "disagreement": len(top),
        "disagreement_judges": jury or sorted(scores["judge"].astype(str).unique()),
        "spread_range": _range(top["spread"]),
        "sample": len(drawn),
        "pairs": len(table),
    }
    if not len(spread):
        report["disagreement_note"] = "no answer was scored by two judges: no disagreement"
    return table, report


def export_review(
    params: Params,
    paths: RunPaths,
    *,
    disagreements: int = 20,
    out: Path | None = None,
    raters: list[str] | None = None,
) -> tuple[list[Path], dict[str, Any]]:
    """Write the review sheet (`REVIEW_SHEET`: CSV, XLSX, criteria) and its key with `reason`; the
    files written and the report of `review_units`."""
    from cube.judges.annotation import key_path, write_annotation_sheet
    from cube.run.notebook import Run

    run = Run(params=params, paths=paths, params_path=Path("."))
    run.require("corpus", "questions", "answers", "scores")
    answers, scores = run.load("answers"), run.load("scores")
    units, report = review_units(params, paths, answers, scores, disagreements)
    chosen = units.merge(
        answers.assign(
            question_id=answers["question_id"].astype(str), system=answers["system"].astype(str)
        ),
        on=["question_id", "system"],
    )
    # shuffled (seeded): a rater sees neither the reasons nor the sets in blocks
    chosen = chosen.sample(frac=1.0, random_state=params.human.seed).reset_index(drop=True)
    target = out or paths.annotation / REVIEW_SHEET
    target.parent.mkdir(parents=True, exist_ok=True)
    write_annotation_sheet(
        chosen,
        run.load("questions"),
        run.load("corpus"),
        params.dimension_names(),
        params.lang,
        target,
        raters=raters,
        key_extra={"reason": chosen["reason"]},
        prefix="R",
    )
    key = key_path(target)
    files = sorted(p for p in target.parent.glob(f"{target.name}*") if p != key) + [key]
    return files, report


def split_review_ratings(
    human: pd.DataFrame, key: Path | None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ratings a calibration may read (those of items drawn at random) and those left out
    (rows of items chosen for review alone): with a key whose `reason` column exists, items whose
    reason lacks `sample` were chosen on the judges' errors (see the module docstring); without
    one, every rating is read."""
    from cube.config.sheets import read_guarded_csv

    if key is None or not Path(key).exists():
        return human, human.iloc[:0]
    k = read_guarded_csv(key, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    if "reason" not in k.columns:
        return human, human.iloc[:0]
    chosen = k[~k["reason"].str.split(";").map(lambda r: SAMPLE in r)]
    left = set(zip(chosen["question_id"], chosen["system"], chosen["set"], strict=True))
    rows = list(
        zip(
            human["question_id"].astype(str),
            human["system"].astype(str),
            human["set"].astype(str),
            strict=True,
        )
    )
    out = np.array([r in left for r in rows], dtype=bool)
    return human[~out], human[out]
