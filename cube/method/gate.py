"""The judge validity gate: which judges count in the jury mean and the verdict (issue 9 item 3).

A judge counts only if, on this run,

(a) it **discriminates**: its full-set weighted total exceeds its zero-set one credibly. Per
    question of the evaluation subset, the weighted total `T(q) = sum_d w_d s_d(q)` (the
    weights W uses) of the full and zero answers are compared with a one-sided Wilcoxon
    signed-rank test (`scipy.stats.wilcoxon`, alternative `greater`) at
    `analysis.gate_alpha` (default 0.05, the conventional level: a judge that ignores the
    answer passes it 5 % of the time, and then usually fails (c)); AND the separation of the
    trimmed-mean totals `T_full - T_zero` (the denominator of W) is at least
    `analysis.gate_min_separation` points of the 0-10 scale (default 0.5: half of the
    smallest step of an integer judge, so W is never a ratio of rounding noise; the paper's
    judges separate the bounds by 2-5 points);
(a') its rag-set score **follows the retrieval outcome**: the one-sided Pearson test of the
    per-question rag total against `rank_score` (all questions of known retrieval) at the same
    level. The total uses weights fixed before looking at the data: equal weights over the
    judge's scored dimensions under `weights: rank_correlation` (W's own weights are derived
    from these very correlations, so testing with them would be optimistic: a judge that
    ignores the answer then passed (a') in 23.6 % of seeded runs instead of the nominal 5 %),
    W's weights under `equal` / `custom`. Measured by `benchmarks/random_judge_admission.py`
    (`--runs 150`, 60 questions): a random judge passes (a') in 7.5 % of the 106 runs where its
    W is defined (23.6 % before) and enters the jury in 0.7 % of the runs (1 of 150; 2.0 % before). Not applied
    when `rank_score` is constant: no correlation exists, see the flags;
(b) its call + parse **failure rate** (`error_kind` `call` / `parse` among the rows it was
    asked to judge; rows `skipped` for a missing answer are not its failures) is at most
    `analysis.gate_max_failure_rate` (default 0.2: above that the surviving questions are a
    selection, not the question set). Without an `error_kind` column the share of unscored
    (NaN or absent) items is used;
(c) its **W stays in a sane band**, [-tol, 100 + tol] with tol = `analysis.gate_band_tolerance`
    (default 25 points: a real system can sit a little outside its bounds, a judge whose
    W is far outside them is measuring noise over a tiny denominator), and W is defined.

Excluded judges keep their rows everywhere, with `in_jury` False and `excluded_reason`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from cube.config.schema import require_columns

GATE_COLUMNS = ["judge", "in_jury", "excluded_reason", "judging_failed", "gate_p_value", "gate_separation",
                "gate_questions", "gate_rank_r", "gate_rank_p_value", "failure_rate"]


def failure_rates(scores: pd.DataFrame, by_dimension: bool = False) -> pd.DataFrame:
    """Call and parse failures per judge (and per dimension when `by_dimension`).

    Rows skipped because the answer was missing (`error_kind` 'skipped') are not the judge's
    failures: they are counted in `skipped` and left out of the rates.

    Returns:
        Columns: judge[, dimension], n (rows), skipped, call_failures, parse_failures,
        call_failure_rate, parse_failure_rate (shares of the n - skipped judged rows; NaN when
        none was judged).
    """
    require_columns(scores, ("judge", "dimension", "error_kind"), "scores")
    keys = ["judge", "dimension"] if by_dimension else ["judge"]
    kind = scores["error_kind"].fillna("").astype(str)
    tmp = scores[keys].assign(_call=(kind == "call").astype(int), _parse=(kind == "parse").astype(int),
                              _skip=(kind == "skipped").astype(int))
    out = tmp.groupby(keys, sort=True).agg(
        n=("_call", "size"), skipped=("_skip", "sum"), call_failures=("_call", "sum"),
        parse_failures=("_parse", "sum"),
    ).reset_index()
    judged = (out["n"] - out["skipped"]).where(lambda x: x > 0)
    out["call_failure_rate"] = out["call_failures"] / judged
    out["parse_failure_rate"] = out["parse_failures"] / judged
    return out


def failure_table(scores: pd.DataFrame, grid: pd.DataFrame, judges: list[Any]) -> pd.DataFrame:
    """Per judge: `rows`, `judged`, `call_failures`, `parse_failures`, `failure_rate`, `scored_items`,
    `by_kind` (False without an `error_kind` column: the rate is then the share of unscored items)."""
    scored = grid.groupby("judge")["score"].apply(lambda s: int(s.notna().sum()))
    if "error_kind" in scores and len(scores):
        fr = failure_rates(scores).set_index("judge")
        out = pd.DataFrame(index=pd.Index(judges, name="judge"))
        out["rows"] = fr["n"].reindex(out.index).fillna(0).astype(int)
        out["judged"] = (fr["n"] - fr["skipped"]).reindex(out.index).fillna(0).astype(int)
        out["call_failures"] = fr["call_failures"].reindex(out.index).fillna(0).astype(int)
        out["parse_failures"] = fr["parse_failures"].reindex(out.index).fillna(0).astype(int)
        with np.errstate(divide="ignore", invalid="ignore"):
            out["failure_rate"] = (out["call_failures"] + out["parse_failures"]) / out["judged"].where(
                out["judged"] > 0)
    else:
        size = grid.groupby("judge")["score"].size()
        out = pd.DataFrame(index=pd.Index(judges, name="judge"))
        out["rows"] = size.reindex(out.index).fillna(0).astype(int)
        out["judged"] = out["rows"]
        out["call_failures"] = 0
        out["parse_failures"] = 0
        out["failure_rate"] = 1 - scored.reindex(out.index).fillna(0) / out["rows"].where(out["rows"] > 0)
    out["by_kind"] = "error_kind" in scores and len(scores) > 0
    out["scored_items"] = scored.reindex(out.index).fillna(0).astype(int)
    return out


def _rank_test(grid: pd.DataFrame, judge: Any, weights: pd.Series, ranks: pd.DataFrame) -> tuple[float, float]:
    """Pearson r and one-sided p of the weighted rag total against rank_score (NaN if undefined)."""
    qt = _question_totals(grid, judge, weights, None, sets=("rag",))
    rs = ranks.set_index("question_id")["rank_score"].astype(float)
    both = pd.DataFrame({"t": qt["rag"], "rs": rs.reindex(qt.index)}).dropna()
    if len(both) < 3 or both["rs"].nunique() < 2 or both["t"].nunique() < 2:
        return float("nan"), float("nan")
    res = stats.pearsonr(both["rs"], both["t"], alternative="greater")
    return float(res.statistic), float(res.pvalue)


def _rank_test_weights(grid: pd.DataFrame, judge: Any, w: pd.Series, ap: Any) -> pd.Series:
    """Weights of the rank test (a'), independent of the correlations it tests: equal over the
    judge's dimensions with a rag-set score under rank-correlation weights, else W's weights."""
    if getattr(ap, "weights", "rank_correlation") != "rank_correlation":
        return w
    g = grid[(grid["judge"] == judge) & (grid["set"] == "rag")]
    dims = [d for d, s in g.groupby("dimension", sort=False)["score"] if s.notna().any()]
    return pd.Series(1.0 / len(dims), index=pd.Index(dims, name="dimension")) if dims else w


def _question_totals(grid: pd.DataFrame, judge: Any, weights: pd.Series, qids: set[Any] | None,
                     sets: tuple[str, ...] = ("zero", "full")) -> pd.DataFrame:
    g = grid[(grid["judge"] == judge) & grid["dimension"].isin(weights.index)]
    if qids is not None:
        g = g[g["question_id"].isin(qids)]
    wide = g.pivot_table(index="question_id", columns=["set", "dimension"], values="score", aggfunc="first",
                         dropna=False)
    out = {}
    for s in sets:
        part = wide[s] if s in wide.columns.get_level_values(0) else pd.DataFrame(index=wide.index)
        part = part.reindex(columns=list(weights.index))
        complete = part.notna().all(axis=1)
        out[s] = (part.fillna(0.0) * weights.to_numpy(float)).sum(axis=1).where(complete)
    return pd.DataFrame(out).dropna()


def _failure_counts(f: pd.Series, sep: str = ", ") -> str:
    if not f["by_kind"]:
        return f"{int(f['rows'] - f['scored_items'])} of {int(f['rows'])} items unscored or absent"
    return (f"{int(f['call_failures'])} call{sep}{int(f['parse_failures'])} parse"
            f"{' failures' if sep != ', ' else ''} of {int(f['judged'])} judgments")


def judge_gate(grid: pd.DataFrame, scores: pd.DataFrame, cube_table: pd.DataFrame, effective: pd.DataFrame,
               totals: pd.DataFrame, evaluation_questions: set[Any] | None, ap: Any,
               ranks: pd.DataFrame | None = None) -> pd.DataFrame:
    """The gate's decision per judge (module docstring). `grid`: `cube.method.analysis.score_grid`;
    `effective`: `judge, dimension, effective_weight`; `totals`: `judge, set, weighted_total`."""
    judges = list(cube_table.index)
    fails = failure_table(scores, grid, judges)
    tot = totals.set_index(["judge", "set"])["weighted_total"]
    rows = []
    for judge in judges:
        reasons: list[str] = []
        failed = False
        f = fails.loc[judge]
        rate = float(f["failure_rate"]) if np.isfinite(f["failure_rate"]) else float("nan")
        if f["scored_items"] == 0:
            failed = True
            if f["rows"] == 0:
                reasons.append(f"judge {judge} has no scores (no score rows for this system)")
            else:
                reasons.append(f"judge {judge} has no scores ({_failure_counts(f, ' and ')})")
        elif np.isfinite(rate) and rate > ap.gate_max_failure_rate:
            failed = True
            reasons.append(f"failure rate {rate:.0%} > {ap.gate_max_failure_rate:.0%} ({_failure_counts(f)})")
        w = effective[effective["judge"] == judge].set_index("dimension")["effective_weight"]
        w = w[w.fillna(0) > 0]
        p_value, sep, nq, rank_r, rank_p = float("nan"), float("nan"), 0, float("nan"), float("nan")
        W = float(cube_table.at[judge, "weighted_score"])
        if not failed:
            if len(w) == 0 or not np.isfinite(W):
                cause = str(cube_table.at[judge, "flags"]) if "flags" in cube_table else ""
                reasons.append("W undefined" + (f" ({cause})" if cause else ""))
            else:
                sep = float(tot.get((judge, "full"), np.nan) - tot.get((judge, "zero"), np.nan))
                qt = _question_totals(grid, judge, w, evaluation_questions)
                nq = len(qt)
                diff = (qt["full"] - qt["zero"]).to_numpy(float)
                nonzero = diff[np.abs(diff) > 1e-12]
                p_value = float(stats.wilcoxon(nonzero, alternative="greater").pvalue) if len(nonzero) else 1.0
                if not (p_value < ap.gate_alpha and sep >= ap.gate_min_separation):
                    reasons.append(f"does not separate the bounds credibly: full - zero = {sep:.2f} points "
                                   f"(minimum {ap.gate_min_separation:g}), one-sided Wilcoxon p = {p_value:.3g} "
                                   f"on {nq} questions (level {ap.gate_alpha:g})")
                if ranks is not None:
                    rank_r, rank_p = _rank_test(grid, judge, _rank_test_weights(grid, judge, w, ap), ranks)
                    if np.isfinite(rank_p) and not rank_p < ap.gate_alpha:
                        reasons.append(f"its weighted rag-set score does not follow retrieval: Pearson r with "
                                       f"rank_score = {rank_r:.2f}, one-sided p = {rank_p:.3g} (level {ap.gate_alpha:g})")
                tol = ap.gate_band_tolerance
                if not -tol <= W <= 100 + tol:
                    reasons.append(f"W = {W:.1f} outside the sane band [{-tol:g}, {100 + tol:g}]")
        rows.append({"judge": judge, "in_jury": not reasons, "excluded_reason": "; ".join(reasons),
                     "judging_failed": failed, "gate_p_value": p_value, "gate_separation": sep,
                     "gate_questions": nq, "gate_rank_r": rank_r, "gate_rank_p_value": rank_p,
                     "failure_rate": rate})
    return pd.DataFrame(rows, columns=GATE_COLUMNS).set_index("judge")

