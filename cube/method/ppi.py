"""Human-calibrated CuBE by prediction-powered inference (PPI / PPI++; issue 21 item 2).

Human ratings of a small sample correct the judges' bias on *every* question: per answer set s
(zero, rag, full) and dimension d, the human-scale mean over the evaluation subset (questions
whose gold document was retrieved, as CuBE) is estimated by

    theta[s, d] = mean_n(y) + lambda * (mean_N(f) - mean_n(f))

where f is the jury's score of an answer (mean over the given judges), y the human score (mean
over raters), n the rated (labelled) retrieved questions and N all retrieved questions
(Angelopoulos et al. 2023, "Prediction-powered inference"; PPI++ 2024 for lambda). `lambda = 1`
is plain PPI, `lambda = 0` the human ratings alone, `"auto"` the power-tuned
`lambda = Cov_n(y, f) / Var_n(f)`, clipped to [0, 1] and estimated per (set, dimension) in every
resample. That is the optimum here because the rated questions are a *subset* of the N (not a
second, independent sample as in PPI++'s `n / N` factor): writing the estimate as
`mean_n(y) - c mean_n(f) + c mean_u(f)` over the rated and the unrated questions, with
`c = lambda (1 - n / N)`, its variance is least at `c = Cov (N - n) / (N Var f)`, i.e.
`lambda = Cov / Var f` whatever n / N. Means, not trimmed means: PPI's rectifier is a mean; the
judge-only figure of this module (`judge_only`) uses the same means so the two are comparable.

From theta: `N_d = 100 (theta_rag - theta_zero) / (theta_full - theta_zero)`,
`W = 100 (T_rag - T_zero) / (T_full - T_zero)` with `T = sum_d w_d theta_d` and `CuBE = W * R@k`
(R@k over all questions of known retrieval, no human needed). A dimension with no positive
range (full <= zero) leaves W as in `cube.method.normalise`, flagged `w_dimension_left_out`.

Interval: the bootstrap over the **questions** (over their families when `clusters` is given, as
`analysis.cluster: family` makes the judge-only interval: a drawn family brings all its questions,
rated or not, and BCa's jackknife leaves out one family), BCa by default (`method`, as
`analysis.interval`: the percentile interval's levels moved by the share of resamples below the
estimate and by an acceleration from a jackknife of at most `JACKKNIFE_GROUPS` question groups, as
`cube.method.bootstrap`; both intervals' coverage is measured by benchmarks/ppi_coverage.py,
docs/measurements.md "Human-calibrated CuBE"): PPI++ with the labelled set a subset of the full set,
so one resample draws all questions with replacement (judge means and R@k) and the rated questions'
rectifier is read from the *same* draw (a rated question drawn twice counts twice in both means).
Drawing the rated questions independently of the questions (the two-sample PPBoot of Zrnic & Candes
2024, for disjoint samples) ignores that `mean_N(f)` contains the rated questions and made the
interval too narrow (coverage 0.88-0.90 at 95 % with a scale-squeezing judge and n / N >= 2/3; issue
21 review). `ratings_plan` (`ratings_needed`) splits the bootstrap variance of CuBE into the part
from the rated sample's rectifier (shrinking as 1/n) and the rest (fixed for the N questions), and
inverts it for a target interval width, never beyond the retrieved questions.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy import stats

from cube.config.schema import SETS, SchemaError, require_columns
from cube.method.analysis import dimension_order, retrieval_outcomes
from cube.method.bootstrap import (
    bca_levels,
    leave_out_rows,
    resample_counts,
    resample_unit_counts,
    unit_codes,
)

_EPS = 1e-12
METRICS = ("cube_score", "weighted_score")


@dataclass
class PPIResult:
    """A human-calibrated CuBE (see the module docstring).

    `cube_score`, `weighted_score`, `recall_at_k` and `dimensions` (N_d per dimension) on the
    human scale; `interval[metric] = (lo, hi)` at `confidence`; `judge_only` the same figures
    from the judges' means alone (no human correction); `means`: one row per (set, dimension)
    with `judge_mean` (all N), `judge_mean_rated` and `human_mean` (the n rated), `ppi_mean`,
    `lam`; `n_rated` (retrieved questions with a human rating), `n_retrieved`, `n_questions`;
    `var_rated` / `var_questions`: bootstrap variances of CuBE from each sample alone (used by
    `ratings_needed`); `n_valid`: resamples with a defined CuBE; `flags`: why a figure is NaN."""

    cube_score: float
    weighted_score: float
    recall_at_k: float
    dimensions: dict[str, float]
    interval: dict[str, tuple[float, float]]
    judge_only: dict[str, float]
    means: pd.DataFrame
    n_rated: int
    n_retrieved: int
    n_questions: int
    confidence: float
    n_resamples: int
    n_valid: int
    var_rated: float = float("nan")
    var_questions: float = float("nan")
    lam: str | float = "auto"
    flags: list[str] = field(default_factory=list)

    def headline(self) -> dict[str, Any]:
        """The figures for `results.json` (NaN as None)."""
        lo, hi = self.interval.get("cube_score", (float("nan"), float("nan")))
        return {
            k: (None if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in {
                "cube_score": self.cube_score,
                "cube_lo": lo,
                "cube_hi": hi,
                "weighted_score": self.weighted_score,
                "recall_at_k": self.recall_at_k,
                "judge_only_cube": self.judge_only.get("cube_score", float("nan")),
                "n_rated": self.n_rated,
                "n_retrieved": self.n_retrieved,
                "confidence": self.confidence,
                "n_resamples": self.n_resamples,
                "n_valid": self.n_valid,
                "lambda": self.lam,
            }.items()
        } | {"flags": list(self.flags)}


def _item_means(
    df: pd.DataFrame, qids: list[Any], dims: list[str], judges: Sequence[str] | None
) -> np.ndarray:
    """(sets, dims, questions) array of the mean score over the rows' judges (NaN when none)."""
    if judges is not None:
        df = df[df["judge"].astype(str).isin([str(j) for j in judges])]
    s = df.assign(score=pd.to_numeric(df["score"], errors="coerce"))
    per = s.groupby(["set", "dimension", "question_id"])["score"].mean()
    idx = pd.MultiIndex.from_product([list(SETS), dims, qids])
    return per.reindex(idx).to_numpy(float).reshape(len(SETS), len(dims), len(qids))


def _wmean(C: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Weighted mean of v (NaN skipped) per row of C."""
    m = ~np.isnan(v)
    n = C @ m.astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(n > 0, C @ np.where(m, v, 0.0) / n, np.nan)


def _var(x: np.ndarray) -> float:
    """Variance (ddof 1) of the finite values; NaN with fewer than two."""
    x = x[np.isfinite(x)]
    return float(np.var(x, ddof=1)) if len(x) > 1 else float("nan")


def _estimate(
    f_all: np.ndarray,
    f_lab: np.ndarray,
    y_lab: np.ndarray,
    C_all: np.ndarray,
    C_lab: np.ndarray,
    lam: str | float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """PPI means per (set, dim) and resample: (theta, judge-only means, lambda), each (S, D, B)."""
    S, D = f_all.shape[:2]
    B = C_all.shape[0]
    theta, judge, lams = (np.full((S, D, B), np.nan) for _ in range(3))
    for s in range(S):
        for d in range(D):
            both = ~np.isnan(f_lab[s, d]) & ~np.isnan(y_lab[s, d])
            f, y = np.where(both, f_lab[s, d], np.nan), np.where(both, y_lab[s, d], np.nan)
            mf_all = _wmean(C_all, f_all[s, d])
            mf, my = _wmean(C_lab, f), _wmean(C_lab, y)
            if lam == "auto":
                with np.errstate(divide="ignore", invalid="ignore"):
                    cov = _wmean(C_lab, f * y) - mf * my
                    var = _wmean(C_lab, f * f) - mf**2
                    lt = np.where(var > _EPS, cov / var, 0.0)
                lt = np.clip(np.nan_to_num(lt, nan=0.0), 0.0, 1.0)
            else:
                lt = np.full(B, float(lam))
            theta[s, d] = my + lt * (mf_all - mf)
            judge[s, d], lams[s, d] = mf_all, lt
    return theta, judge, lams


def _cube(theta: np.ndarray, w: np.ndarray, recall: np.ndarray) -> dict[str, np.ndarray]:
    """N_d, W and CuBE from (S, D, B) means; a dimension without positive range leaves W."""
    z, r, f = (theta[SETS.index(s)] for s in ("zero", "rag", "full"))
    with np.errstate(divide="ignore", invalid="ignore"):
        rng = f - z
        ok = np.nan_to_num(rng, nan=0.0) > _EPS
        nd = np.where(ok, 100 * (r - z) / np.where(ok, rng, 1.0), np.nan)
        missing = ((w[:, None] > 0) & (np.isnan(z) | np.isnan(r) | np.isnan(f))).any(axis=0)
        we = np.where(ok, w[:, None], 0.0)
        tot = we.sum(axis=0)
        we = np.where(tot > _EPS, we / np.where(tot > _EPS, tot, 1.0), np.nan)
        T = [np.where(we == 0, 0.0, we * v).sum(axis=0) for v in (z, r, f)]
        den = T[2] - T[0]
        W = np.where(
            (den > _EPS) & ~missing, 100 * (T[1] - T[0]) / np.where(den > _EPS, den, 1.0), np.nan
        )
    cube = np.where(recall == 0, 0.0, W * recall)
    return {"dimensions": nd, "weighted_score": W, "cube_score": cube}


def ppi_cube(
    answers: pd.DataFrame,
    scores: pd.DataFrame,
    human: pd.DataFrame,
    *,
    judges: Sequence[str] | None = None,
    weights: Mapping[str, float] | None = None,
    dimensions: Sequence[str] | None = None,
    confidence: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
    lam: Literal["auto"] | float = "auto",
    top_n: int = 8,
    method: Literal["bca", "percentile"] = "bca",
    clusters: Mapping[Any, Any] | None = None,
) -> PPIResult:
    """The human-calibrated CuBE of one system (module docstring for the estimator and interval).

    Args:
        answers: one system's answers (`question_id, system, set, rank`, optional `retrieval_ok`,
            as `cube.method.analysis.evaluate`); only the rag rows' retrieval outcome is read.
        scores: the judges' scores of that system (`question_id, set, judge, dimension, score`).
        human: human ratings of that system in the same long format; several raters (any `judge`
            values) are averaged per answer. Only retrieved questions rated in the set count.
        judges: the judges whose mean is the prediction f (default: every judge in `scores`;
            pass the jury, i.e. the judges that passed the validity gate).
        weights: dimension weights of W (default: equal); normalised to sum 1.
        dimensions: the dimensions (default: those of `scores`).
        confidence, n_resamples, seed: the bootstrap interval (0 resamples: no interval).
        method: `"bca"` (default, as `analysis.interval`) or `"percentile"` (module docstring).
        lam: `"auto"` (PPI++ power tuning), 1.0 (plain PPI) or 0.0 (human ratings alone).
        top_n: N of the system's retrieved list (for the rank transform only).
        clusters: question id -> family, the resampling unit (None: each question its own).

    Returns:
        A `PPIResult`; figures are NaN with a flag when undefined (no rated retrieved question,
        a set or dimension without ratings, no positive range between the bounds).
    """
    _check_arguments(human, scores, lam, method)
    outcomes = retrieval_outcomes(answers, top_n)
    ranks = outcomes.ranks.sort_values("question_id", kind="stable")
    qids = _retrieved_ids(ranks)
    retrieved = ranks["retrieved"].to_numpy(bool)
    dims = dimension_order(dimensions if dimensions is not None else scores["dimension"].unique())
    w = _normalised_weights(weights, dims)
    f_all = _item_means(scores, qids, dims, judges)
    h_all = _item_means(human, qids, dims, None)
    rated = _rated_items(h_all)
    f_lab, y_lab = f_all[:, :, rated], h_all[:, :, rated]
    flags = _rating_gaps(rated, w, f_lab, y_lab, dims)
    run = functools.partial(
        _run, retrieved=retrieved, rated=rated, f_all=f_all, f_lab=f_lab, y_lab=y_lab, w=w, lam=lam
    )
    n_all = len(retrieved)
    units = unit_codes(ranks["question_id"].tolist(), clusters)
    point, judge_means, (theta, lams) = run(np.ones((1, n_all)))
    judge_fig = _cube(judge_means, w, point["recall_at_k"])
    flags += _range_flags(theta, w, dims, point, check_w=bool(rated and not flags))
    interval = {m: (float("nan"), float("nan")) for m in METRICS}
    n_valid, var_lab, var_all = 0, float("nan"), float("nan")
    if _can_resample(n_resamples, rated, n_all):
        interval, n_valid, var_lab, var_all = _bootstrap_interval(
            run, point, n_all, rated, n_resamples, seed, confidence, method, flags, units, retrieved
        )
    return PPIResult(
        cube_score=float(point["cube_score"][0]),
        weighted_score=float(point["weighted_score"][0]),
        recall_at_k=float(point["recall_at_k"][0]),
        dimensions={dim: float(point["dimensions"][d, 0]) for d, dim in enumerate(dims)},
        interval=interval,
        judge_only={
            "cube_score": float(judge_fig["cube_score"][0]),
            "weighted_score": float(judge_fig["weighted_score"][0]),
        },
        means=_means_table(dims, judge_means, f_lab, y_lab, theta, lams),
        n_rated=len(rated),
        n_retrieved=len(qids),
        n_questions=n_all,
        confidence=confidence,
        n_resamples=n_resamples,
        n_valid=n_valid,
        var_rated=var_lab,
        var_questions=var_all,
        lam=lam,
        flags=flags,
    )


def _retrieved_ids(ranks: pd.DataFrame) -> list[Any]:
    """The question ids with the gold document retrieved, in the ranks' order."""
    return [q for q, hit in zip(ranks["question_id"], ranks["retrieved"], strict=True) if hit]


def _rated_items(h_all: np.ndarray) -> list[int]:
    """The retrieved questions with a human rating in some set and dimension."""
    return [i for i in range(h_all.shape[2]) if (~np.isnan(h_all[:, :, i])).any()]


def _can_resample(n_resamples: int, rated: list[int], n_all: int) -> bool:
    """An interval needs resamples, a rated retrieved question and questions."""
    return n_resamples > 0 and bool(rated) and n_all > 0


def _check_arguments(human: pd.DataFrame, scores: pd.DataFrame, lam: Any, method: str) -> None:
    check_human(human)
    require_columns(scores, ("question_id", "set", "judge", "dimension", "score"), "scores")
    if lam != "auto" and not (isinstance(lam, int | float) and 0 <= float(lam) <= 1):
        raise ValueError(f"lam must be 'auto' or a number in [0, 1], got {lam!r}")
    if method not in ("bca", "percentile"):
        raise ValueError(f"method must be 'bca' or 'percentile', got {method!r}")


def _normalised_weights(weights: Mapping[str, float] | None, dims: list[str]) -> np.ndarray:
    w = np.array([float((weights or {}).get(d, 1.0 if weights is None else 0.0)) for d in dims])
    if not (w >= 0).all() or w.sum() <= 0:
        raise ValueError(
            f"weights must be >= 0 with a positive sum, got {dict(zip(dims, w, strict=True))}"
        )
    return w / w.sum()


def _rating_gaps(
    rated: list[int], w: np.ndarray, f_lab: np.ndarray, y_lab: np.ndarray, dims: list[str]
) -> list[str]:
    flags: list[str] = []
    if not rated:
        flags.append(
            "no retrieved question has a human rating: the human-calibrated CuBE is undefined"
        )
    for s in range(len(SETS)):
        for d, dim in enumerate(dims):
            if rated and w[d] > 0 and (np.isnan(y_lab[s, d]) | np.isnan(f_lab[s, d])).all():
                flags.append(
                    f"no {SETS[s]} answer has both a human and a judge score on {dim}: W undefined"
                )
    return flags


def _run(
    C_all: np.ndarray,
    C_lab: np.ndarray | None = None,
    *,
    retrieved: np.ndarray,
    rated: list[int],
    f_all: np.ndarray,
    f_lab: np.ndarray,
    y_lab: np.ndarray,
    w: np.ndarray,
    lam: str | float,
) -> tuple[dict[str, np.ndarray], np.ndarray, Any]:
    # C_all over all known questions; the means use its retrieved columns, R@k all of them; the
    # rated questions' counts are those of the same draw unless given (the variance split below)
    if C_lab is None:
        C_lab = C_all[:, retrieved][:, rated]
    with np.errstate(divide="ignore", invalid="ignore"):
        recall = C_all @ retrieved.astype(float) / C_all.sum(axis=1)
    theta, judge, lams = _estimate(f_all, f_lab, y_lab, C_all[:, retrieved], C_lab, lam)
    return {**_cube(theta, w, recall), "recall_at_k": recall}, judge, (theta, lams)


def _range_flags(
    theta: np.ndarray,
    w: np.ndarray,
    dims: list[str],
    point: dict[str, np.ndarray],
    *,
    check_w: bool,
) -> list[str]:
    flags: list[str] = []
    z, f = theta[SETS.index("zero"), :, 0], theta[SETS.index("full"), :, 0]
    w_defined = bool(np.isfinite(point["weighted_score"][0]))
    if check_w and not w_defined:
        flags.append(
            "no weighted dimension has full > zero on the human scale ("
            + ", ".join(f"{d}: zero {z[i]:.2f}, full {f[i]:.2f}" for i, d in enumerate(dims))
            + "): W undefined"
        )
    left = _left_out(w, z, f)
    if w_defined and left:  # as `cube.method.normalise` flags it
        flags.append(_left_out_flag(dims, w, z, f, left))
    return flags


def _left_out(w: np.ndarray, z: np.ndarray, f: np.ndarray) -> list[int]:
    """The weighted dimensions without a positive range between zero and full."""
    return [i for i in range(len(w)) if w[i] > 0 and not np.nan_to_num(f[i] - z[i], nan=0.0) > _EPS]


def _left_out_flag(
    dims: list[str], w: np.ndarray, z: np.ndarray, f: np.ndarray, left: list[int]
) -> str:
    return (
        "w_dimension_left_out: W computed over "
        + ", ".join(d for i, d in enumerate(dims) if w[i] > 0 and i not in left)
        + "; "
        + ", ".join(f"{dims[i]} (zero {z[i]:.2f}, full {f[i]:.2f})" for i in left)
        + " left W (no positive range between "
        "zero and full on the human scale) and the remaining weights were renormalised"
    )


NO_BCA_FLAG = (
    "no BCa interval: every resample's CuBE lies on one side of the estimate (its "
    "bias correction is undefined); analysis.interval: percentile gives the "
    "percentile one"
)


def _quantile_intervals(
    boot: dict[str, np.ndarray],
    point: dict[str, np.ndarray],
    jack: dict[str, np.ndarray] | None,
    a: float,
    flags: list[str],
) -> dict[str, tuple[float, float]]:
    """Each metric's interval from its defined resamples: percentile, or BCa with the jackknife
    (NaN, and for CuBE a flag, where BCa's levels are undefined)."""
    interval = {m: (float("nan"), float("nan")) for m in METRICS}
    for m in METRICS:
        ok = boot[m][np.isfinite(boot[m])]
        if not len(ok):
            continue
        levels = [a, 1 - a] if jack is None else bca_levels(float(point[m][0]), ok, jack[m], a)
        if np.isfinite(levels).all():
            interval[m] = tuple(float(x) for x in np.quantile(ok, levels))
        elif m == "cube_score":
            flags.append(NO_BCA_FLAG)
    return interval


def _remainder(var_total: float, var_lab: float) -> float:
    """The variance left beyond the rated questions' rectifier (>= 0; NaN when unknown)."""
    return max(var_total - var_lab, 0.0) if math.isfinite(var_lab) else float("nan")


def _bootstrap_interval(
    run: Callable[..., tuple[dict[str, np.ndarray], np.ndarray, Any]],
    point: dict[str, np.ndarray],
    n_all: int,
    rated: list[int],
    n_resamples: int,
    seed: int,
    confidence: float,
    method: str,
    flags: list[str],
    units: np.ndarray | None = None,
    retrieved: np.ndarray | None = None,
) -> tuple[dict[str, tuple[float, float]], int, float, float]:
    rng = np.random.default_rng(seed)
    all_units = np.arange(n_all) if units is None else units
    boot = run(resample_unit_counts(all_units, n_resamples, rng))[0]
    a = (1 - confidence) / 2
    jack = run(1.0 - leave_out_rows(n_all, units))[0] if method == "bca" else None
    interval = _quantile_intervals(boot, point, jack, a, flags)
    n_valid = int(np.isfinite(boot["cube_score"]).sum())
    # the rated questions' rectifier alone (the questions' judge means and R@k fixed): the part
    # of the variance that shrinks as 1/n; the rest, fixed for these questions, is the remainder
    C_lab = _rated_counts(rated, n_resamples, rng, units, retrieved)
    var_lab = _var(run(np.ones((n_resamples, n_all)), C_lab)[0]["cube_score"])
    var_all = _remainder(_var(boot["cube_score"]), var_lab)
    if n_valid < 0.9 * n_resamples:
        flags.append(
            f"only {n_valid} of {n_resamples} resamples give a defined CuBE: the interval rests "
            "on a selection of resamples"
        )
    return interval, n_valid, var_lab, var_all


def _rated_counts(
    rated: list[int],
    n_resamples: int,
    rng: np.random.Generator,
    units: np.ndarray | None,
    retrieved: np.ndarray | None,
) -> np.ndarray:
    """Counts of the rated questions alone (the rectifier's part of the variance): their families
    drawn with replacement (each rated question its own without `units`)."""
    if units is None or retrieved is None:
        return resample_counts(len(rated), n_resamples, rng)
    _, codes = np.unique(units[retrieved][rated], return_inverse=True)
    return resample_unit_counts(codes, n_resamples, rng)


def _means_table(
    dims: list[str],
    judge_means: np.ndarray,
    f_lab: np.ndarray,
    y_lab: np.ndarray,
    theta: np.ndarray,
    lams: np.ndarray,
) -> pd.DataFrame:
    n_human = (~np.isnan(y_lab)).sum(axis=2)
    return pd.DataFrame(
        [
            {
                "set": s,
                "dimension": dim,
                "judge_mean": float(judge_means[i, d, 0]),
                "judge_mean_rated": float(np.nanmean(f_lab[i, d]))
                if (~np.isnan(f_lab[i, d])).any()
                else np.nan,
                "human_mean": float(np.nanmean(y_lab[i, d])) if n_human[i, d] else np.nan,
                "ppi_mean": float(theta[i, d, 0]),
                "lam": float(lams[i, d, 0]),
                "n_rated": int(n_human[i, d]),
            }
            for i, s in enumerate(SETS)
            for d, dim in enumerate(dims)
        ]
    )


def ratings_plan(result: PPIResult, width: float) -> tuple[float, str]:
    """Rated questions needed for a CuBE interval of `width` points (at the result's confidence),
    and why it is inf ('' when finite).

    The joint bootstrap's variance of CuBE splits as `var_rated * n / n' + var_questions` for n'
    rated questions among the same retrieved ones: `var_rated` is the rated questions' rectifier
    (`mean_n(y) - lambda mean_n(f)`, shrinking as 1/n), `var_questions` the rest (the judges' mean
    over the N retrieved questions, its covariance with the rectifier, R@k), fixed for these
    questions; so n' = var_rated n / ((width / 2z)^2 - var_questions). Only the retrieved questions
    can be rated: inf when the questions alone make the interval wider than `width`, or when n'
    exceeds the retrieved questions (rating all of them is not enough); more questions are needed
    then, not ratings. NaN when the variances are unknown (no interval). An approximation: lambda
    and the judge-human relation are taken as measured on the current sample."""
    if width <= 0:
        raise ValueError(f"width must be > 0, got {width}")
    if (
        not (math.isfinite(result.var_rated) and math.isfinite(result.var_questions))
        or result.n_rated == 0
    ):
        return float("nan"), "no interval: the variances are unknown"
    z = stats.norm.ppf(1 - (1 - result.confidence) / 2)
    room = (width / (2 * z)) ** 2 - result.var_questions
    if room <= 0:
        return float("inf"), (
            f"the questions alone make the interval wider than {width:g} points: more "
            "questions are needed, not ratings"
        )
    need = math.ceil(result.var_rated * result.n_rated / room)
    if need > result.n_retrieved:
        best = (
            2
            * z
            * math.sqrt(
                result.var_rated * result.n_rated / max(result.n_retrieved, 1)
                + result.var_questions
            )
        )
        return float("inf"), (
            f"a {width:g}-point interval would need {need} rated questions, but rating all "
            f"{result.n_retrieved} retrieved questions gives about {best:.1f} points: more "
            "questions are needed"
        )
    return float(need), ""


def ratings_needed(result: PPIResult, width: float) -> float:
    """The number of `ratings_plan` (inf or NaN with the reason there)."""
    return ratings_plan(result, width)[0]


def check_human(human: pd.DataFrame, table: str = "human") -> None:
    """Raise `SchemaError` listing every bad row of a human ratings table at once."""
    require_columns(human, ("question_id", "set", "dimension", "score"), table)
    s = pd.to_numeric(human["score"], errors="coerce")
    bad = (human["score"].notna() & s.isna()) | (s < 0) | (s > 10) | ~human["set"].isin(SETS)
    if bad.any():
        raise SchemaError(
            f"{table}: rows {list(human.index[bad][:10])} need a set in {list(SETS)} and a score "
            "in [0, 10] or empty"
        )


def jury_weights(result: Any) -> dict[str, float]:
    """The dimension weights of the human-calibrated W: the mean of the jury judges' weights
    (their configured or rank-correlation weights), equal when none is defined or when a jury
    member's W is noise (`gate_w_unusable`: the rank-correlation weights of this run carry no usable
    signal, and equal weights are the remedy the gate names)."""
    t = result.cube_table
    if (
        "gate_w_unusable" in t
        and t.loc[t.index.astype(str).isin(result.jury_judges), "gate_w_unusable"]
        .fillna(False)
        .astype(bool)
        .any()
    ):
        return {str(d): 1.0 for d in result.weights["dimension"].unique()}
    w = result.weights
    w = w[w["judge"].astype(str).isin(result.jury_judges)].groupby("dimension")["weight"].mean()
    w = w.fillna(0.0).clip(lower=0.0)
    if w.sum() <= 0:
        return {str(d): 1.0 for d in result.weights["dimension"].unique()}
    return {str(d): float(v) for d, v in w.items()}


def calibrate_systems(
    answers: pd.DataFrame,
    scores: pd.DataFrame,
    human: pd.DataFrame,
    results: Mapping[str, Any],
    analysis_params: Any,
    top_n: Mapping[str, int],
    widths: Sequence[float] = (10.0,),
) -> tuple[pd.DataFrame, dict[str, PPIResult]]:
    """`ppi_cube` for every system with human ratings, beside its judge-only CuBE.

    `results`: each system's `CubeResult` (its jury gives the predicting judges and the weights).
    Returns a table (one row per system: `n_rated`, the judge-only jury CuBE and its interval, the
    judge-only CuBE on means, the human-calibrated CuBE and interval, `ratings_for_<w>_points`
    for each width in `widths`, inf with the reason in `flags` when ratings alone cannot reach it)
    and the `PPIResult` per system."""
    ap = analysis_params
    rows, out = [], {}
    for system, h in human.groupby("system", sort=True):
        if system not in results:
            continue
        res = results[system]
        a, s = answers[answers["system"] == system], scores[scores["system"] == system]
        p = ppi_cube(
            a,
            s,
            h,
            judges=res.jury_judges or None,
            weights=jury_weights(res),
            confidence=ap.confidence,
            n_resamples=ap.bootstrap,
            seed=ap.seed,
            top_n=ap.top_n or top_n.get(system, 8),
            method=ap.interval,
            clusters=getattr(res, "clusters", None),  # the units of the judge-only interval
        )
        out[str(system)] = p
        lo, hi = res.interval("jury", "cube_score")
        plo, phi = p.interval["cube_score"]
        plans = {w: ratings_plan(p, w) for w in widths}
        row = {
            "system": system,
            "n_rated": p.n_rated,
            "n_retrieved": p.n_retrieved,
            "judge_cube": res.jury_cube(),
            "judge_lo": lo,
            "judge_hi": hi,
            "judge_cube_means": p.judge_only["cube_score"],
            "human_calibrated_cube": p.cube_score,
            "human_lo": plo,
            "human_hi": phi,
            "human_width": phi - plo,
            "weighted_score": p.weighted_score,
            "recall_at_k": p.recall_at_k,
            **{f"ratings_for_{w:g}_points": plans[w][0] for w in widths},
            "flags": "; ".join(
                [
                    *p.flags,
                    *dict.fromkeys(why for need, why in plans.values() if why and math.isinf(need)),
                ]
            ),
        }
        rows.append(row)
    return pd.DataFrame(rows), out
