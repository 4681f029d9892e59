"""The per-category report: every headline figure by department and by question style.

For each category (a value of the gold document's `department`, or of the question's `style`)
the system's rag questions of that category are evaluated on their own with
`cube.method.analysis.evaluate` (same params; the bootstrap capped at `bootstrap` resamples so the
report stays fast): R@N with its Wilson interval, W and CuBE with their bootstrap intervals,
and the low-scoring answers with their most frequent failure pattern (`cube.diagnose.failures`).

A category with fewer than `min_questions` questions gets no W / CuBE (NaN) and says so in
`note`: a trimmed mean and a correlation on a handful of questions would be a plausible wrong
figure. The categories of one breakdown partition the questions, so their `questions` sum to
the system's total.

With `refusal` (`cube.diagnose.refusal_categories.refusal_by_category` of the same breakdown) each
row also carries refusal accuracy on the category's refusal questions and the false-refusal rate on
its answerable ones, with Wilson intervals (`REFUSAL_COLUMNS`); a category that only refusal
questions have (an item no document names: "(not in corpus)"; the "refusal" style) gets a row of its
own with 0 `questions` and NaN for the other figures.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd

from cube.diagnose.retrieval import family_wilson, retrieval_icc
from cube.diagnose.verdict import gate_withhold_reasons
from cube.method.analysis import CubeWarning, retrieval_outcomes
from cube.method.evaluation import evaluate_headline

COLUMNS = [
    "questions",
    "R@N",
    "R@N_lo",
    "R@N_hi",
    "W",
    "W_lo",
    "W_hi",
    "CuBE",
    "CuBE_lo",
    "CuBE_hi",
    "low",
    "top_pattern",
    "note",
]
REFUSAL_COLUMNS = [
    "unanswerable",
    "refusal_accuracy",
    "refusal_lo",
    "refusal_hi",
    "false_refusal_rate",
    "false_refusal_lo",
    "false_refusal_hi",
    "no_answer",
]


def category_report(
    answers: pd.DataFrame,
    scores: pd.DataFrame,
    groups: pd.DataFrame,
    classified: pd.DataFrame,
    system: str,
    top_n: int,
    by: str,
    analysis_params: Any = None,
    *,
    min_questions: int = 20,
    bootstrap: int = 100,
    judges: list[str] | None = None,
    dimensions: list[str] | None = None,
    refusal: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per value of `by` (a column of `cube.diagnose.retrieval.question_groups`), most
    questions first. `classified`: `cube.diagnose.failures.classify` of the same system."""
    from cube.config.sections import AnalysisParams

    given = analysis_params or AnalysisParams()
    ap = given.model_copy(update={"bootstrap": min(bootstrap, given.bootstrap)})  # 0 stays 0
    a = answers[answers["system"] == system]
    s = scores[scores["system"] == system]
    keep = ["question_id", by] + ["family"] * ("family" in groups and by != "family")
    ranks = retrieval_outcomes(a, top_n).ranks.merge(groups[keep], on="question_id", how="left")
    ranks[by] = ranks[by].fillna("(unknown)")
    families = getattr(ap, "cluster", "family") == "family" and "family" in ranks
    rho = retrieval_icc(ranks, top_n) if families else float("nan")
    low = classified.loc[classified["low"], ["question_id", "primary"]].merge(
        groups[["question_id", by]], on="question_id", how="left"
    )
    rows = []
    for value, g in ranks.groupby(by, sort=True):
        ids = set(g["question_id"])
        hit = ((g["rank"] > 0) & (g["rank"] <= top_n)).to_numpy()
        hits = int(hit.sum())
        fam = g["family"].fillna("").astype(str).to_numpy() if families else None
        lo, hi = family_wilson(hit, fam, rho, ap.confidence)  # families of near-duplicates
        row: dict[str, Any] = {
            by: value,
            "questions": len(g),
            "R@N": hits / len(g),
            "R@N_lo": lo,
            "R@N_hi": hi,
            **_category_scores(
                a[a["question_id"].isin(ids)],
                s[s["question_id"].isin(ids)],
                ap,
                top_n,
                (len(g), min_questions),
                judges=judges,
                dimensions=dimensions,
            ),
        }
        mine = low[low[by] == value]
        row["low"] = len(mine)
        row["top_pattern"] = str(mine["primary"].value_counts().index[0]) if len(mine) else ""
        rows.append(row)
    out = pd.DataFrame(rows, columns=[by, *COLUMNS])
    if refusal is not None:
        out = _with_refusal(out, refusal, by)
    return out.sort_values(["questions", by], ascending=[False, True], kind="stable").reset_index(
        drop=True
    )


_FIGURES = ("W", "W_lo", "W_hi", "CuBE", "CuBE_lo", "CuBE_hi")


def _category_scores(
    answers: pd.DataFrame,
    scores: pd.DataFrame,
    ap: Any,
    top_n: int,
    size: tuple[int, int],
    **evaluated: Any,
) -> dict[str, Any]:
    """W and CuBE of one category with their intervals and a `note`: not computed when its
    questions are fewer than `min_questions` (`size`: the two), nor published when no judge passes
    the gate on it or the gate withholds the verdict for a kept judge. `evaluated`: `judges` and
    `dimensions` of `evaluate`."""
    row: dict[str, Any] = {**dict.fromkeys(_FIGURES, np.nan), "note": ""}
    n, min_questions = size
    if n < min_questions:
        row["note"] = f"W and CuBE not computed: {n} question(s), fewer than {min_questions}"
        return row
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CubeWarning)
        r = evaluate_headline(answers, scores, ap, top_n, **evaluated)
    row.update({"W": float(r.jury.at["mean", "weighted_score"]), "CuBE": r.jury_cube()})
    row["W_lo"], row["W_hi"] = r.interval("jury", "weighted_score")
    row["CuBE_lo"], row["CuBE_hi"] = r.interval("jury", "cube_score")
    if not r.jury_judges:
        row["note"] = "no judge passed the validity gate on this category"
    elif causes := gate_withhold_reasons(r):  # kept judges the verdict is withheld for
        row["note"] = "; ".join(causes) + ": W and CuBE not published"
        row.update(dict.fromkeys(_FIGURES, np.nan))
    return row


def _with_refusal(out: pd.DataFrame, refusal: pd.DataFrame, by: str) -> pd.DataFrame:
    """The refusal figures of each category beside its scores; a category with refusal questions
    only gets a row of its own."""
    out = out.merge(refusal[[by, *REFUSAL_COLUMNS]].astype({by: object}), on=by, how="outer")
    only = out["questions"].isna()
    out.loc[only, ["questions", "low"]] = 0
    out.loc[only, ["top_pattern"]] = ""
    out.loc[only, "note"] = "refusal questions only"
    out = out.astype({"questions": int, "low": int, "unanswerable": "Int64", "no_answer": "Int64"})
    out[["unanswerable", "no_answer"]] = out[["unanswerable", "no_answer"]].fillna(0).astype(int)
    return out
