"""Bootstrap of the CuBE score, resampling questions, vectorised; BCa (`analysis.interval`'s
default) or percentile intervals.

A resample draws resampling units with replacement: families of near-duplicate questions
(`analysis.cluster: family`, the default: questions whose gold documents share a corpus
`family_id` share retrieval confusions and answer errors, so they are not independent draws) or
single questions (`question`); all questions of a drawn unit and the three sets of each travel
together (paired), so the bounds and the system are always compared on the same questions. Each
resample recomputes the whole chain: R@k, the rank correlations and hence the weights (when
weights come from correlations), the trimmed means on the evaluation subset, the normalised
dimensions, the weighted score and CuBE, for every judge and for the jury mean.

A resample is represented by how many times it draws each question (a counts matrix C,
resamples x questions), so each statistic is a matrix product instead of a Python loop:
correlations from count-weighted moments, trimmed means from the cumulative counts of the
sorted scores (the elements that `scipy.stats.trim_mean` keeps are the positions
[floor(p n), n - floor(p n)) of the sorted resample), summed per distinct score value (scores
take at most a few dozen values, so this is a resamples x values matrix, not x questions). With
C = all ones the computation reproduces `cube.method.analysis.evaluate` exactly (tested).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from cube.method import analysis as A
from cube.method.normalise import effective_weights

METRICS = ("cube_score", "weighted_score", "recall_at_k")
MIN_VALID_SHARE = (
    0.9  # below this share of defined jury resamples the interval is no basis for a verdict
)


@dataclass(frozen=True)
class Prepared:
    judges: list[str]
    dims: list[str]
    rank_score: np.ndarray  # (n,)
    retrieved: np.ndarray  # (n,) bool
    scores: np.ndarray  # (J, 3 sets, D, n) NaN = unscored / missing
    proportion: float
    subset: str
    mode: str
    custom: dict[str, float] | None
    paired: bool
    fallback: str = "none"
    units: np.ndarray | None = None  # (n,) resampling unit code per question; None: each its own

    def unit_codes(self) -> np.ndarray:
        """The resampling unit of each question (0..G-1, first-seen order); one per question when
        no units are given."""
        return np.arange(len(self.rank_score)) if self.units is None else self.units


def unit_codes(qids: list[Any], clusters: Mapping[Any, Any] | None) -> np.ndarray | None:
    """Codes 0..G-1 of each question's unit (`clusters`: question id -> unit, e.g. the family of its
    gold document), numbered in the order the units first occur in `qids`; a question missing from
    `clusters` (or mapped to None / "") is its own unit. None when `clusters` is None. With every
    question its own unit the codes are 0..n-1 in order, so a unit bootstrap draws exactly the
    question bootstrap's resamples."""
    if clusters is None:
        return None
    seen: dict[Any, int] = {}
    codes = np.empty(len(qids), dtype=int)
    for i, q in enumerate(qids):
        u = clusters.get(q)
        key = ("unit", u) if u is not None and u == u and str(u) != "" else ("question", q)
        codes[i] = seen.setdefault(key, len(seen))
    return codes


def prepare(
    answers: pd.DataFrame,
    scores: pd.DataFrame,
    *,
    proportion: float,
    subset: str,
    mode: str,
    custom: dict[str, float] | None,
    top_n: int,
    paired: bool = True,
    judges: list[str] | None = None,
    dimensions: list[str] | None = None,
    fallback: str = "none",
    clusters: Mapping[Any, Any] | None = None,
    grid: pd.DataFrame | None = None,
    ranks: pd.DataFrame | None = None,
) -> Prepared:
    """The arrays the resamples read. `grid`: `cube.method.analysis.score_grid` of the same scores,
    judges, dimensions and known-retrieval questions when the caller has it (in any question order:
    it is reindexed here), else made here. `ranks`: `retrieval_outcomes(answers, top_n).ranks` when
    the caller has it (`cube.method.evaluation.evaluate` does, on the answers before it left out
    the questions of unknown retrieval, which are not among these ranks either), else made here."""
    # Sorted by question id, so the same seed draws the same questions whatever the row order.
    # The same grid as cube.method.analysis (absent rows are NaN) and the same known-retrieval
    # questions.
    if ranks is None:
        ranks = A.retrieval_outcomes(answers, top_n).ranks
    ranks = ranks.sort_values("question_id", kind="stable").reset_index(drop=True)
    qids = ranks["question_id"].tolist()
    if grid is None:
        grid = A.score_grid(scores, judges=judges, dimensions=dimensions, questions=qids)
    judges_all = sorted(grid["judge"].unique(), key=str)
    dims = list(grid["dimension"].unique())  # in order of appearance, each once
    cube = _grid_array(grid, judges_all, dims, qids)
    return Prepared(
        judges_all,
        dims,
        ranks["rank_score"].to_numpy(float),
        ranks["retrieved"].to_numpy(bool),
        cube,
        proportion,
        subset,
        mode,
        custom,
        paired,
        fallback,
        unit_codes(qids, clusters),
    )


def _grid_array(
    grid: pd.DataFrame, judges: list[Any], dims: list[str], qids: list[Any]
) -> np.ndarray:
    """The grid's scores as an array judges x sets x dimensions x `qids`. A grid as `score_grid`
    makes it (every judge x set x dimension x question, nested in that order) is reshaped and its
    judges and questions taken in the order asked, by position (a reindex by four labels was most
    of the bootstrap's set-up when the grid's questions are in another order); any other grid is
    reindexed by label. Either way each cell is the grid's value of its labels."""
    axes = [judges, list(A.SETS), dims, qids]
    shape = tuple(len(a) for a in axes)
    order = _positions(_nested_axes(grid, shape), axes)
    if order is not None:
        return grid["score"].to_numpy(float).reshape(shape)[np.ix_(*order)]
    return (
        grid.set_index(["judge", "set", "dimension", "question_id"])["score"]
        .reindex(pd.MultiIndex.from_product(axes))
        .to_numpy(float)
        .reshape(shape)
    )


def _positions(own: list[list[Any]] | None, axes: list[list[Any]]) -> list[np.ndarray] | None:
    """Where each label of `axes` sits on the grid's own axes; None when one is missing or
    repeated (or the grid has no nested axes)."""
    if own is None:
        return None
    out = []
    for mine, asked in zip(own, axes, strict=True):
        where = {v: i for i, v in enumerate(mine)}
        order = [where.get(v, -1) for v in asked]
        if len(set(order)) != len(order) or min(order, default=0) < 0:
            return None
        out.append(np.asarray(order, dtype=np.intp))
    return out


def _nested_axes(grid: pd.DataFrame, shape: tuple[int, ...]) -> list[list[Any]] | None:
    """The grid's own judge, set, dimension and question axes when its rows are their full
    product, nested in that order (each key column is its axis broadcast over the others); None
    otherwise."""
    if not len(grid) or len(grid) != int(np.prod(shape)):
        return None
    out = []
    for i, key in enumerate(("judge", "set", "dimension", "question_id")):
        col = grid[key].to_numpy(object).reshape(shape)
        axis = col[tuple(slice(None) if k == i else 0 for k in range(len(shape)))]
        expected = axis.reshape([-1 if k == i else 1 for k in range(len(shape))])
        if not (col == expected).all():
            return None
        out.append(list(axis))
    return out


def _weighted_pearson(
    C: np.ndarray, x: np.ndarray, y: np.ndarray, memo: dict | None = None
) -> np.ndarray:
    """The count-weighted Pearson r of x and y (NaN in y skipped) in every row of C. `memo`: the
    x side's sums (`_x_sums`) by y's mask, kept by a caller that correlates the same C and x with
    many y (every judge's every dimension: most share one mask)."""
    m = ~np.isnan(y)
    y0 = np.where(m, y, 0.0)
    n, x_sum, xx_sum, xm = _x_sums(C, x, m) if memo is None else _memo_x_sums(memo, C, x, m)
    with np.errstate(divide="ignore", invalid="ignore"):
        sx, sy = x_sum / n, C @ y0 / n
        vx = xx_sum / n - sx**2
        vy = C @ (y0 * y0) / n - sy**2
        cov = C @ (xm * y0) / n - sx * sy
        r = cov / np.sqrt(vx * vy)
    scale = np.maximum(1.0, np.maximum(np.abs(sx), np.abs(sy))) ** 2
    r[(n < 3) | (vx <= 1e-12 * scale) | (vy <= 1e-12 * scale)] = np.nan
    return r


def _x_sums(
    C: np.ndarray, x: np.ndarray, m: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """What `_weighted_pearson` reads of x on the mask m: the counts' sums of m, of x and of x²
    (x zeroed off the mask), and x zeroed off the mask."""
    xm = np.where(m, x, 0.0)
    return C @ m.astype(float), C @ xm, C @ (xm * xm), xm


def _memo_x_sums(
    memo: dict, C: np.ndarray, x: np.ndarray, m: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """`_x_sums` made once per mask (the same products of the same arrays: the same bits)."""
    key = m.tobytes()
    if key not in memo:
        memo[key] = _x_sums(C, x, m)
    return memo[key]


def _weighted_trim_mean(
    C: np.ndarray, v: np.ndarray, keep: np.ndarray, proportion: float
) -> np.ndarray:
    """Trimmed mean of `v[keep]` (NaN skipped) in every resample. Scores take few distinct values,
    so the counts are summed per distinct value first (`C @ one-hot`, k columns instead of n) and
    the trimming works on k sorted values with their counts; the sum over a run of equal values
    of what each copy keeps is what the run keeps, so the result is the per-element one's."""
    ok = keep & ~np.isnan(v)
    values, inverse = np.unique(v[ok], return_inverse=True)
    if len(values) <= _MAX_DISTINCT:
        onehot = np.zeros((len(v), len(values)))
        onehot[np.flatnonzero(ok), inverse] = 1.0
        return _trim_sorted(C @ onehot, values, proportion)
    idx = np.flatnonzero(ok)
    order = idx[np.argsort(v[idx], kind="stable")]
    return _trim_sorted(C[:, order], v[order], proportion)


_MAX_DISTINCT = 256  # more distinct values than this: per element (sorting the columns of C)
# at most this many distinct values: a score's one-hot columns join its judge's one product (judges'
# scores on a 0-10 scale, averaged over samples, have a few dozen at most); the one-hot matrix of
# scores with more (simulated, continuous) would be large for little gain
_AT_ONCE_DISTINCT = 32
_AT_ONCE_ROWS = 16  # fewer resamples (a point estimate, a look): a product per pair, as before
_ONEHOT_CELLS = 4_000_000  # a batch's one-hot matrix at most this many cells (32 MB)


def _whole_counts(C: np.ndarray) -> bool:
    """Whether every count is a whole number (resamples, the jackknife, the point estimate): then
    every sum of counts over a score's questions is exact in floating point, whatever the order
    of summation, and one product with all of a judge's one-hot columns gives the very sums the
    products with each one's columns give."""
    return bool(np.array_equal(C, np.rint(C)))


def _judge_trim_means(
    C: np.ndarray,
    scores: np.ndarray,
    keeps: list[np.ndarray],
    proportion: float,
    whole: bool,
    left_out: np.ndarray | None = None,
) -> np.ndarray:
    """`_weighted_trim_mean` of one judge's every set and dimension (`scores`: sets x dims x n,
    `keeps[d]`: the questions kept for dimension d), as an array sets x dims x resamples. With
    whole counts and many resamples the one-hot columns of its (set, dimension) pairs are
    multiplied by C a batch at a time (`_ONEHOT_CELLS` at most): one wide product instead of a
    narrow one each (C read once per batch, ~3x faster at the paper's scale), the same sums
    (`_whole_counts`). `left_out`: C's rows are the jackknife's (`_trim_batch`)."""
    n_sets, n_dims = scores.shape[0], scores.shape[1]
    out = np.empty((n_sets, n_dims, C.shape[0]))
    at_once = whole and C.shape[0] >= _AT_ONCE_ROWS
    batch: list[tuple] = []  # (set, dim, distinct values, positions scored, value index of each)
    for d, keep in enumerate(keeps):
        for s in range(n_sets):
            v = scores[s, d]
            ok = keep & ~np.isnan(v)
            values, inverse = np.unique(v[ok], return_inverse=True)
            if not (at_once and len(values) <= _AT_ONCE_DISTINCT):
                out[s, d] = _weighted_trim_mean(C, v, keep, proportion)
                continue
            if (sum(len(x[2]) for x in batch) + len(values)) * C.shape[1] > _ONEHOT_CELLS:
                _trim_batch(C, batch, proportion, out, left_out)
                batch = []
            batch.append((s, d, values, np.flatnonzero(ok), inverse))
    _trim_batch(C, batch, proportion, out, left_out)
    return out


def _trim_batch(
    C: np.ndarray,
    batch: list[tuple],
    proportion: float,
    out: np.ndarray,
    left_out: np.ndarray | None = None,
) -> None:
    """The trimmed means of a batch of (set, dimension) pairs from one product of C with all
    their one-hot columns, into `out` (sets x dims x resamples).

    `left_out`: C is whole counts of the jackknife, 1 minus one-hot rows (`_jackknife`): each
    question's row of C that leaves it out (-1: none). Then C's product with the one-hot columns
    is their column sums minus each row's left-out questions' sums: sums of whole numbers, exact
    in any order, so the very numbers the product gives, without multiplying every row by every
    question (most of the jackknife's cost on a small evaluation)."""
    if not batch:
        return
    starts = np.cumsum([0, *(len(x[2]) for x in batch)])
    onehot = np.zeros((C.shape[1], int(starts[-1])))
    for (_, _, _, at, inverse), start in zip(batch, starts[:-1], strict=True):
        onehot[at, start + inverse] = 1.0
    if left_out is None:
        counts = C @ onehot
    else:
        out_sums = np.zeros((C.shape[0], onehot.shape[1]))
        hit = left_out >= 0
        np.add.at(out_sums, left_out[hit], onehot[hit])
        counts = onehot.sum(axis=0)[None, :] - out_sums
    for (s, d, values, _, _), lo, hi in zip(batch, starts[:-1], starts[1:], strict=True):
        out[s, d] = _trim_sorted(counts[:, lo:hi], values, proportion)


def _trim_sorted(Cs: np.ndarray, vals: np.ndarray, proportion: float) -> np.ndarray:
    """Trimmed means from counts `Cs` (resamples x sorted values `vals`)."""
    cum = np.cumsum(Cs, axis=1)
    prev = cum - Cs
    nobs = cum[:, -1] if cum.shape[1] else np.zeros(Cs.shape[0])
    low = np.floor(proportion * nobs)
    high = nobs - low
    take = np.clip(np.minimum(cum, high[:, None]) - np.maximum(prev, low[:, None]), 0, None)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(high - low > 0, (take @ vals) / (high - low), np.nan)


def _resampled_weight(
    p: Prepared, C: np.ndarray, j: int, d: int, memo: dict | None = None
) -> np.ndarray | float:
    """Judge j's weight of dimension d in each resample: its rank correlation on the rag set (0
    when negative or undefined), 1, or the custom weight. `memo`: `_weighted_pearson`'s, for
    this C."""
    if p.mode == "rank_correlation":
        r = _weighted_pearson(C, p.rank_score, p.scores[j, A.SETS.index("rag"), d], memo)
        return np.where(np.isnan(r) | (r < 0), 0.0, r)
    if p.mode == "equal":
        return 1.0
    return float((p.custom or {})[p.dims[d]])


def cube_from_counts(
    p: Prepared, C: np.ndarray, *, left_out: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """Every judge's weighted score and CuBE for each row of the counts matrix C (B x n).
    `left_out`: C's rows are the jackknife's, 1 minus a one-hot row each: the row leaving each
    question out (-1: none), which the trimmed means' counts are summed from (`_trim_batch`)."""
    B = C.shape[0]
    J, D = len(p.judges), len(p.dims)
    recall = C @ p.retrieved.astype(float) / C.sum(axis=1)
    keep = p.retrieved if p.subset == "retrieved" else np.ones_like(p.retrieved)
    rag = A.SETS.index("rag")
    w = np.empty((J, D, B))
    tm = np.empty((J, len(A.SETS), D, B))
    whole = _whole_counts(C)
    memo: dict = {}  # rank_score's sums per mask of scored questions, shared by the correlations
    for j in range(J):
        for d in range(D):
            w[j, d] = _resampled_weight(p, C, j, d, memo)
        # paired: only questions this judge scored in all three sets (as
        # cube.method.analysis.trimmed_means)
        keeps = [
            keep & ~np.isnan(p.scores[j, :, d]).any(axis=0) if p.paired else keep for d in range(D)
        ]
        tm[j] = _judge_trim_means(C, p.scores[j], keeps, p.proportion, whole, left_out)
    total_w = w.sum(axis=1, keepdims=True)
    # undefined weights -> 1/D (analysis.weights_fallback), as dimension_weights
    if p.fallback == "equal":
        w = np.where(total_w > 1e-12, w, 1.0)
    zero, full = A.SETS.index("zero"), A.SETS.index("full")
    W = np.empty((J, B))
    # the rules of cube.method.normalise: missing weighted dimension -> NaN, no range -> leaves W
    for j in range(J):
        we = effective_weights(w[j], tm[j, zero], tm[j, rag], tm[j, full])  # (D, B)
        T = np.where(we[None] == 0, 0.0, we[None] * tm[j]).sum(axis=1)  # (sets, B)
        with np.errstate(divide="ignore", invalid="ignore"):
            den = T[full] - T[zero]
            W[j] = np.where(den > 1e-12, 100 * (T[rag] - T[zero]) / den, np.nan)
    cube = np.where(recall[None, :] == 0, 0.0, W * recall[None, :])  # nothing retrieved: CuBE = 0
    return {
        "weighted_score": W,
        "cube_score": cube,
        "recall_at_k": recall,
        "trimmed_means": tm,
        "weights": w,
    }


def resample_counts(
    n: int, n_resamples: int, rng: np.random.Generator, chunk: int = 64
) -> np.ndarray:
    """The counts matrix (resamples x n) of `n_resamples` draws of n items with replacement: the
    draws of `rng.integers(0, n, size=(n_resamples, n))`, made and counted a few rows at a time
    (the whole draws matrix and its scatter indices were ~150 MB at the paper's scale)."""
    C = np.empty((n_resamples, n))
    for start in range(0, n_resamples, chunk):
        rows = min(chunk, n_resamples - start)
        draws = rng.integers(0, n, size=(rows, n))
        flat = (draws + (np.arange(rows) * n)[:, None]).ravel()
        C[start : start + rows] = np.bincount(flat, minlength=rows * n).reshape(rows, n)
    return C


def resample_unit_counts(
    units: np.ndarray, n_resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """The counts matrix (resamples x questions) of drawing the G units (`units`: the code of each
    question's unit) with replacement: each question counts as often as its unit is drawn. With
    units 0..n-1 in order it is `resample_counts(n, ...)` itself."""
    G = int(units.max()) + 1 if len(units) else 0
    return resample_counts(G, n_resamples, rng)[:, units]


def bootstrap_cube(
    answers: pd.DataFrame,
    scores: pd.DataFrame,
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    proportion: float = 0.1,
    subset: str = "retrieved",
    weights: str = "rank_correlation",
    custom_weights: dict[str, float] | None = None,
    top_n: int = 8,
    paired: bool = True,
    judges: list[str] | None = None,
    dimensions: list[str] | None = None,
    jury_judges: list[str] | None = None,
    weights_fallback: str = "none",
    method: str = "percentile",
    expand: bool = True,
    clusters: Mapping[Any, Any] | None = None,
    grid: pd.DataFrame | None = None,
    ranks: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Intervals (`method`, `expand`: see `bootstrap_prepared`) of each judge's and the jury's CuBE,
    W and R@k. `grid` and `ranks`: the score grid and the retrieval ranks when the caller has made
    them (`prepare`).

    The jury averages `jury_judges` only (the judges that passed the validity gate; default:
    every judge), and a resample where one of them is undefined is undefined for the jury.
    Returns `judge, metric, estimate, lo, hi, n_valid` (the jury row is named `jury`; `n_valid`
    counts resamples where the value was defined, e.g. no zero denominator; the verdict is
    withheld when the jury's is below `MIN_VALID_SHARE` of the resamples, `cube.diagnose.verdict`).
    `clusters`: question id -> resampling unit (None: every question its own unit)."""
    p = prepare(
        answers,
        scores,
        proportion=proportion,
        subset=subset,
        mode=weights,
        custom=custom_weights,
        top_n=top_n,
        paired=paired,
        judges=judges,
        dimensions=dimensions,
        fallback=weights_fallback,
        clusters=clusters,
        grid=grid,
        ranks=ranks,
    )
    return bootstrap_prepared(
        p,
        n_resamples=n_resamples,
        confidence=confidence,
        seed=seed,
        jury_judges=jury_judges,
        method=method,
        expand=expand,
    )


INTERVAL_METHODS = ("percentile", "bca", "basic")


def expanded_alpha(alpha: float, n: int) -> float:
    """One tail's level of a bootstrap interval widened for a sample of n units:
    Phi(-t_{n-1}(1 - alpha)) instead of alpha, i.e. the interval reaches as far into the resamples
    as Student's t quantile with n - 1 degrees of freedom reaches beyond z. A bootstrap interval is
    as wide as a z interval with a plug-in SE; with the SE estimated from n units it covers less
    than its confidence on a few dozen units (measured for the jury CuBE's BCa interval at R@k 0.8:
    94.5 % at 40 questions over 8,000 simulated runs, 95.2 % at 100, docs/measurements.md).
    Hesterberg's expanded percentile interval (2015, "What teachers should know about the
    bootstrap") also multiplies t by sqrt(n / (n - 1)); measured on the same runs it over-covered at
    100 questions (jury CuBE 95.7 %, W 95.9 %). Levels: 2.16 / 97.84 % at n = 40, 2.36 / 97.64 % at
    n = 100, 2.45 / 97.55 % at
    n = 300; n < 3: unchanged."""
    if n < 3:
        return alpha
    from scipy.stats import norm, t

    return float(norm.cdf(-t.ppf(1 - alpha, n - 1)))


MIN_RETRIEVED_FOR_W = 10  # W's interval is flagged below this many retrieved questions


def t_level_units(p: Prepared) -> int:
    """The number of questions W's t levels are taken at: those W is computed on, the retrieved
    ones under `subset: retrieved` (at R@k 0.3 of 40 questions, about 12: jury W's BCa interval
    covered 93.0 % with t levels at all 40 questions, 94.9 % at the retrieved count over 1,000
    simulated runs). CuBE keeps all questions: its interval already covered 96.7 % there (98.5 %
    at the retrieved count), R@k's share of its variance resting on every question."""
    units = p.unit_codes()
    on = units[np.asarray(p.retrieved, bool)] if p.subset == "retrieved" else units
    return int(len(np.unique(on)))  # families among them when families are the unit (issue 30)


def bootstrap_prepared(
    p: Prepared,
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    jury_judges: list[str] | None = None,
    method: str = "percentile",
    expand: bool = True,
) -> pd.DataFrame:
    """`bootstrap_cube` on prepared arrays (the simulation study calls it on simulated arrays).

    `method`: `percentile` (the alpha/2 and 1 - alpha/2 quantiles of the resamples), `bca` (Efron's
    bias-corrected and accelerated percentiles: the bias correction z0 from the share of resamples
    below the estimate, the acceleration from the jackknife, each leave-one-question-out value
    computed by the same `cube_from_counts`) or `basic` (the percentile interval reflected about the
    estimate, [2 est - q_hi, 2 est - q_lo]: where the estimator is biased the resamples repeat the
    bias, so the percentile interval sits twice the bias from the truth and the basic one about on
    it; measured by benchmarks/simulation_coverage.py, not offered in the params).

    Resamples draw the units of `p.units` (families; each question its own when None) and BCa's
    jackknife leaves out one unit (or one block of units beyond `JACKKNIFE_GROUPS`).

    `expand` (default): the tails' levels of CuBE and W are `expanded_alpha` of the number of units
    resampled (W's: of the units among the retrieved questions it is computed on,
    `t_level_units`), so the interval does not fall short of its confidence on a few dozen units;
    R@k's are not on independent questions (its plain interval covered 95.0-95.3 % over 8,000
    simulated runs at 40-300 questions, docs/measurements.md), and are when fewer families than
    questions are resampled (at 20 families of 5 its plain interval covered 93.1 % in 1,000
    runs)."""
    if method not in INTERVAL_METHODS:
        raise ValueError(
            f"bootstrap interval method {method!r}: expected one of {INTERVAL_METHODS}"
        )
    n = len(p.rank_score)
    units = p.unit_codes()
    n_units = int(units.max()) + 1 if n else 0
    point = cube_from_counts(p, np.ones((1, n)))
    boot = cube_from_counts(
        p, resample_unit_counts(units, n_resamples, np.random.default_rng(seed))
    )
    jack = _jackknife(p) if method == "bca" else None
    alpha = (1 - confidence) / 2
    # t levels at the number of units each statistic rests on: W (and the trimmed means under it)
    # on the retrieved questions' units only, CuBE = W x R@k on all of them (issue 30); R@k's at t
    # levels too when families are fewer than questions (few units)
    on = {"cube_score": n_units, "weighted_score": t_level_units(p), "recall_at_k": n_units}
    tail = _tails(alpha, on, expand, few_units=n_units < n)
    members = _jury_members(p, jury_judges)
    rows = []
    for judge, j, metric in _cells(p):
        est = float(_metric_values(point, j, metric, members)[0])
        sample = _metric_values(boot, j, metric, members)
        jacked = None if jack is None else _metric_values(jack, j, metric, members)
        lo, hi, n_valid = _interval(est, sample, jacked, tail[metric], method)
        rows.append(
            {
                "judge": judge,
                "metric": metric,
                "estimate": est,
                "lo": lo,
                "hi": hi,
                "n_valid": n_valid,
            }
        )
    return pd.DataFrame(rows)


def _tails(alpha: float, on: dict[str, int], expand: bool, few_units: bool) -> dict[str, float]:
    """Each metric's tail level: `expanded_alpha` of the units it rests on when `expand`, but
    R@k's only when families are fewer than questions (`few_units`)."""
    return {
        m: expanded_alpha(alpha, on[m]) if expand and (m != "recall_at_k" or few_units) else alpha
        for m in _METRICS
    }


def _jury_members(p: Prepared, jury_judges: list[str] | None) -> list[int]:
    """The indices of the jury's judges (every judge when None)."""
    if jury_judges is None:
        return list(range(len(p.judges)))
    chosen = set(jury_judges)
    return [i for i, j in enumerate(p.judges) if j in chosen]


def _cells(p: Prepared) -> list[tuple[str, int | None, str]]:
    """(judge, its index or None, metric) of each interval: every judge's three (R@k is the
    system's), then the jury's."""
    cells = [
        (judge, None if m == "recall_at_k" else j, m)
        for j, judge in enumerate(p.judges)
        for m in _METRICS
    ]
    return cells + [("jury", None, m) for m in _METRICS]


_METRICS = ("cube_score", "weighted_score", "recall_at_k")


def _metric_values(
    res: dict[str, np.ndarray], j: int | None, m: str, members: list[int]
) -> np.ndarray:
    """A metric's values over the resamples: R@k's, judge j's, or the jury's (j None). The jury
    mean always averages the same judges: a resample where a member is undefined is undefined for
    the jury (not a mean of fewer judges); `n_valid` counts the defined ones."""
    if m == "recall_at_k":
        return res[m]
    if j is not None:
        return res[m][j]
    return np.mean(res[m][members], axis=0) if members else np.full(res[m].shape[-1], np.nan)


def _interval(
    est: float, sample: np.ndarray, jacked: np.ndarray | None, tail: float, method: str
) -> tuple[float, float, int]:
    """(lo, hi, number of defined resamples) of one metric by `method` (see
    `bootstrap_prepared`); NaN where no resample or level is defined."""
    ok = sample[np.isfinite(sample)]
    q = [tail, 1 - tail]
    if method == "bca" and len(ok) and np.isfinite(est):
        q = bca_levels(est, ok, jacked, tail)  # type: ignore[arg-type]
    lo, hi = np.quantile(ok, q) if len(ok) and np.all(np.isfinite(q)) else (np.nan, np.nan)
    if method == "basic":
        lo, hi = 2 * est - hi, 2 * est - lo
    return float(lo), float(hi), int(len(ok))


JACKKNIFE_GROUPS = (
    200  # at most this many leave-out groups for BCa's acceleration (one CuBE computation each)
)


def jackknife_groups(n: int, max_groups: int) -> np.ndarray:
    """The leave-out group of each of n questions (in the prepared order, sorted by question id):
    one question per group up to `max_groups` questions, else `max_groups` contiguous blocks of
    n // max_groups or one more questions."""
    return np.arange(n) if n <= max_groups else np.arange(n) * max_groups // n


def leave_out_rows(n: int, units: np.ndarray | None = None) -> np.ndarray:
    """The jackknife's leave-out rows over n questions: row k is 1 on the questions of group k
    (`jackknife_groups` of the units, at most `JACKKNIFE_GROUPS` groups; a unit is never split);
    counts = 1 - row leave that group out. `units`: each question's unit code (None: its own)."""
    g = _leave_out_groups(n, units)
    return (g[None, :] == np.arange(g.max() + 1)[:, None]).astype(float)


def _leave_out_groups(n: int, units: np.ndarray | None) -> np.ndarray:
    """The leave-out group of each of n questions (`leave_out_rows`' row k leaves out group k)."""
    u = np.arange(n) if units is None else units
    G = int(u.max()) + 1 if n else 0
    return jackknife_groups(G, JACKKNIFE_GROUPS)[u]


def _jackknife(p: Prepared, chunk: int = 256) -> dict[str, np.ndarray]:
    """`cube_from_counts` with each group of questions left out once (counts = ones minus
    the group).

    With one question per group this is the jackknife; from `max_groups` questions on, the grouped
    (delete-m) jackknife, whose leave-out differences are sums of about m questions' influences:
    their skewness ratio, BCa's acceleration, estimates the same quantity (E[(sum of m)^3] = m
    E[U^3], E[(sum of m)^2] = m E[U^2]) at a cost of `JACKKNIFE_GROUPS` CuBE computations instead of
    n (6,111 at the paper's scale, six times its 1,000 resamples)."""
    leave_out = leave_out_rows(len(p.rank_score), p.units)
    groups = _leave_out_groups(len(p.rank_score), p.units)
    parts = [
        cube_from_counts(
            p,
            1.0 - leave_out[s : s + chunk],
            left_out=np.where((groups >= s) & (groups < s + chunk), groups - s, -1),
        )
        for s in range(0, len(leave_out), chunk)
    ]
    return {
        k: np.concatenate([x[k] for x in parts], axis=-1)
        for k in ("cube_score", "weighted_score", "recall_at_k")
    }


def bca_levels(est: float, sample: np.ndarray, jack: np.ndarray, alpha: float) -> list[float]:
    """The BCa quantile levels of the bootstrap `sample` for a two-sided interval at level
    1 - 2 alpha."""
    from scipy.stats import norm

    share = (np.sum(sample < est) + 0.5 * np.sum(sample == est)) / len(sample)
    if not 0 < share < 1:
        return [np.nan, np.nan]
    z0 = norm.ppf(share)
    jack = jack[np.isfinite(jack)]
    d = jack.mean() - jack if len(jack) > 2 else np.zeros(1)
    den = 6.0 * np.sum(d**2) ** 1.5
    acc = float(np.sum(d**3) / den) if den > 0 else 0.0
    z = norm.ppf([alpha, 1 - alpha])
    den = 1 - acc * (z0 + z)
    if not (
        den > 0
    ).all():  # an acceleration this large has no BCa interval (the levels would wrap)
        return [np.nan, np.nan]
    return list(norm.cdf(z0 + (z0 + z) / den))
