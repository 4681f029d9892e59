"""Agreement statistics of many bootstrap resamples at once, from value-pair counts.

A judge's scores take few distinct values (0-10, or halves after averaging two samples), so a
resample of matched pairs `(x, y)` is fully described by how often each distinct pair of values
occurs in it: a small `Kx x Ky` table. Every statistic of `cube.method.agreement._statistics` is a
function of that table: the means of |x - y| and x - y; Pearson's r from the weighted moments;
Spearman's rho as Pearson's r of the tie-averaged ranks (a value's rank is the count of smaller
values plus (its count + 1) / 2, which is what `scipy.stats.rankdata` gives every copy);
Kendall's tau-b from concordant and discordant pair counts (scipy's variant b, with its ties);
and the quadratic-weighted kappa as 1 - sum(w O) / sum(w E) with w = (x - y)^2, the definition
sklearn's `cohen_kappa_score` computes (categories absent from both sides add zeros, so the
`lo..hi` label range changes nothing). The tables of all resamples come from one matrix product
(`counts @ pair one-hot`), so the whole bootstrap costs a few array operations instead of
thousands of scipy/sklearn calls; the values equal the loop's up to float rounding (tested).

The undefined cases follow `cube.method.agreement`: a correlation is NaN when a side is constant in
the resample (or it has fewer than 2 pairs), the kappa is NaN when a present value is not an
integer, when fewer than 2 pairs are drawn, or when one category holds every value.
"""

from __future__ import annotations

import numpy as np

MAX_CELLS = 2500  # beyond this many distinct value pairs the per-resample loop is used instead


def pair_tables(
    x: np.ndarray, y: np.ndarray, counts: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(tables `B x Kx x Ky`, x values, y values), or None when there are too many
    distinct pairs."""
    xv, xi = np.unique(x, return_inverse=True)
    yv, yi = np.unique(y, return_inverse=True)
    if len(xv) * len(yv) > MAX_CELLS:
        return None
    cell = xi * len(yv) + yi
    onehot = np.zeros((len(x), len(xv) * len(yv)))
    onehot[np.arange(len(x)), cell] = 1.0
    tables = (counts.astype(float) @ onehot).reshape(len(counts), len(xv), len(yv))
    return tables, xv.astype(float), yv.astype(float)


def _pearson(t: np.ndarray, a: np.ndarray, b: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Weighted Pearson r of row scores `a` and column scores `b` (per resample when 2-D)."""
    a = a if a.ndim == 2 else np.broadcast_to(a, (len(t), len(a)))
    b = b if b.ndim == 2 else np.broadcast_to(b, (len(t), len(b)))
    rows, cols = t.sum(axis=2), t.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        ma = (rows * a).sum(axis=1) / n
        mb = (cols * b).sum(axis=1) / n
        da, db = a - ma[:, None], b - mb[:, None]
        cov = np.einsum("bij,bi,bj->b", t, da, db)
        va = (rows * da**2).sum(axis=1)
        vb = (cols * db**2).sum(axis=1)
        r = cov / np.sqrt(va * vb)
    return np.clip(r, -1.0, 1.0)


def _ranks(margin: np.ndarray) -> np.ndarray:
    """Tie-averaged rank of each value given its count (per resample)."""
    below = np.cumsum(margin, axis=1) - margin
    return below + (margin + 1) / 2


def _kendall(t: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Kendall's tau-b (scipy's default) from the pair tables."""
    # suffix[b, i, j] = sum of t[b, i', j'] over i' >= i, j' >= j
    suffix = np.flip(np.cumsum(np.cumsum(np.flip(t, (1, 2)), axis=1), axis=2), (1, 2))
    above = np.zeros_like(t)  # strictly larger on both sides
    above[:, :-1, :-1] = suffix[:, 1:, 1:]
    # rows strictly larger, columns strictly smaller: (rows > i) minus (rows > i, columns >= j)
    rows_after = np.zeros_like(t)
    rows_after[:, :-1, :] = suffix[:, 1:, :1]  # rows > i, any column
    cols_ge = np.zeros_like(t)
    cols_ge[:, :-1, :] = suffix[:, 1:, :]
    below = rows_after - cols_ge
    con = (t * above).sum(axis=(1, 2))
    dis = (t * below).sum(axis=(1, 2))
    tot = n * (n - 1) / 2
    rows, cols = t.sum(axis=2), t.sum(axis=1)
    xtie = (rows * (rows - 1) / 2).sum(axis=1)
    ytie = (cols * (cols - 1) / 2).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = (con - dis) / np.sqrt(tot - xtie) / np.sqrt(tot - ytie)
    return np.clip(tau, -1.0, 1.0)


def _kappa(t: np.ndarray, xv: np.ndarray, yv: np.ndarray, n: np.ndarray) -> np.ndarray:
    w = (xv[:, None] - yv[None, :]) ** 2
    rows, cols = t.sum(axis=2), t.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        expected = rows[:, :, None] * cols[:, None, :] / n[:, None, None]
        kappa = 1 - (t * w).sum(axis=(1, 2)) / (expected * w).sum(axis=(1, 2))
    integer_x, integer_y = xv == np.round(xv), yv == np.round(yv)
    ok = (n >= 2) & (rows[:, ~integer_x].sum(axis=1) == 0) & (cols[:, ~integer_y].sum(axis=1) == 0)
    present_x, present_y = rows > 0, cols > 0
    lo = np.minimum(
        np.where(present_x, xv, np.inf).min(axis=1), np.where(present_y, yv, np.inf).min(axis=1)
    )
    hi = np.maximum(
        np.where(present_x, xv, -np.inf).max(axis=1), np.where(present_y, yv, -np.inf).max(axis=1)
    )
    return np.where(ok & (lo < hi), kappa, np.nan)


def statistics(tables: np.ndarray, xv: np.ndarray, yv: np.ndarray) -> dict[str, np.ndarray]:
    """Every statistic of `cube.method.agreement.STATISTICS` for each resample's table (NaN as
    the loop)."""
    n = tables.sum(axis=(1, 2))
    rows, cols = tables.sum(axis=2), tables.sum(axis=1)
    diff = xv[:, None] - yv[None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        mad = (tables * np.abs(diff)).sum(axis=(1, 2)) / n
        bias = (tables * diff).sum(axis=(1, 2)) / n
    varied = ((rows > 0).sum(axis=1) >= 2) & ((cols > 0).sum(axis=1) >= 2)
    out = {
        "pearson": np.where(varied, _pearson(tables, xv, yv, n), np.nan),
        "spearman": np.where(varied, _pearson(tables, _ranks(rows), _ranks(cols), n), np.nan),
        "kendall": np.where(varied, _kendall(tables, n), np.nan),
        "weighted_kappa": _kappa(tables, xv, yv, n),
        "mean_abs_diff": np.where(n > 0, mad, np.nan),
        "bias": np.where(n > 0, bias, np.nan),
    }
    return out


def percentile_intervals(
    draws: dict[str, np.ndarray], confidence: float
) -> dict[str, tuple[float, float]]:
    """Percentile interval of each statistic over its finite draws (NaN, NaN when none)."""
    tail = (1 - confidence) / 2
    out = {}
    for key, values in draws.items():
        arr = values[np.isfinite(values)]
        out[key] = (
            (float(np.quantile(arr, tail)), float(np.quantile(arr, 1 - tail)))
            if len(arr)
            else (np.nan, np.nan)
        )
    return out
