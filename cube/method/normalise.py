"""Normalisation between the bounds, the weighted score W and the flags that explain every
undefined or suspicious figure (docs/explanation/method.md; paper 5.4-5.5; issue 9 items 1-2).

Rules, shared with `cube.method.bootstrap` through `effective_weights` so the point estimate and the
interval always agree on the same input:

- a dimension is *normalisable* when its trimmed means exist in all three sets and
  `full - zero > 0`. With `full == zero` (zero range) or `full < zero` (inverted bounds) its
  N_d is NaN (flagged) and it **leaves W**; the remaining weights are renormalised to sum
  to 1 (flag names the dimension and the cause);
- a dimension with a positive weight but **no trimmed mean** in some set (no question scored
  in all three sets, e.g. absent or failed rows) makes W **NaN with a flag**: W never sums
  different dimensions in different sets, and a missing measurement is not silently dropped;
- a dimension of weight 0 contributes nothing, with or without scores;
- rag outside [zero, full] keeps its value (N < 0 or > 100) and is flagged.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd

from cube.config.schema import SETS, SchemaError, require_columns

_EPS = 1e-12
FLAG_COLUMNS = ["judge", "dimension", "code", "message"]


def effective_weights(
    w: np.ndarray, zero: np.ndarray, rag: np.ndarray, full: np.ndarray
) -> np.ndarray:
    """Weights actually used by W, per dimension (axis 0): a dimension with weight > 0 but no
        trimmed mean in some set makes every weight NaN (W undefined); a dimension without a
        positive range (full - zero <= 0) gets 0; the rest are rescaled to the weights' own sum
        (1), unchanged
    when no dimension left (NaN if none is left)."""
    w = np.asarray(w, float)
    weighted = np.nan_to_num(w, nan=0.0) > 0
    missing = (weighted & (np.isnan(zero) | np.isnan(rag) | np.isnan(full))).any(axis=0)
    with np.errstate(invalid="ignore"):
        valid = np.nan_to_num(full - zero, nan=0.0) > _EPS
    use = np.where(weighted & valid, w, 0.0)
    total = use.sum(axis=0)
    given = np.where(weighted, w, 0.0).sum(
        axis=0
    )  # the weights' own sum (1, or the paper's rounded ~1)
    ok = ~missing & (total > _EPS)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(ok, use * (given / np.where(ok, total, 1.0)), np.nan)


def _totals(w_eff: np.ndarray, tm: np.ndarray) -> np.ndarray:
    """sum_d w_d TM_d, a weight-0 dimension contributing 0 even without a trimmed mean."""
    return np.where(w_eff == 0, 0.0, w_eff * tm).sum(axis=0)


def weighted_totals(
    trimmed: pd.DataFrame, weights: pd.DataFrame, effective: pd.DataFrame | None = None
) -> pd.DataFrame:
    """`T[judge, set] = sum_d w_d TM[judge, set, d]` (paper Table 2's last column), with the
    weights W uses (`effective_weights`): identical to the configured ones unless a dimension
    left W (flagged in `cube_scores`). `effective`: `effective_weight_table` of the same two when
    the caller has it."""
    eff = effective_weight_table(trimmed, weights) if effective is None else effective
    m = trimmed.merge(eff, on=["judge", "dimension"], how="left")
    # a NaN judge or set is no group (the grouping's dropna); factorizing would number it
    m = m[m["judge"].notna().to_numpy() & m["set"].notna().to_numpy()]
    wtm = np.where(m["effective_weight"] == 0, 0.0, m["effective_weight"] * m["trimmed_mean"])
    # per (judge, set) in order of appearance, the sum of its rows in their order (NaN kept):
    # `np.sum` of each group's values, what `Series.sum(skipna=False)` computes, without a grouping
    # calling a Python function per group
    codes, _ = pd.factorize(pd.MultiIndex.from_arrays([m["judge"], m["set"]]))
    order = np.argsort(codes, kind="stable")
    starts = (
        np.flatnonzero(np.r_[True, np.diff(codes[order]) != 0]) if len(m) else np.array([], int)
    )
    bounds = np.r_[starts, len(order)]
    out = m[["judge", "set"]].iloc[order[starts]].reset_index(drop=True)
    out["weighted_total"] = np.array(
        [np.sum(wtm[order[lo:hi]]) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)],
        dtype=float,
    )
    return out


def trimmed_wide(trimmed: pd.DataFrame) -> pd.DataFrame:
    """The trimmed means one row per (judge, dimension), one column per set (zero, rag, full):
    what `effective_weight_table` and `cube_scores_with_flags` read, which a caller making both
    passes to each as `wide` (a pivot table is most of either's cost on a small evaluation)."""
    return _wide(trimmed)


def _wide(trimmed: pd.DataFrame) -> pd.DataFrame:
    return trimmed.pivot_table(
        index=["judge", "dimension"],
        columns="set",
        values="trimmed_mean",
        aggfunc="first",
        dropna=False,
    ).reindex(columns=list(SETS))


def effective_weight_table(
    trimmed: pd.DataFrame, weights: pd.DataFrame, *, wide: pd.DataFrame | None = None
) -> pd.DataFrame:
    """`judge, dimension, weight, effective_weight` (the weights W actually uses). `wide`:
    `trimmed_wide` of the same trimmed means when the caller has it."""
    tm = _wide(trimmed) if wide is None else wide
    rows = []
    for judge, g in weights.groupby("judge", sort=False):
        dims = list(g["dimension"])
        t = tm.reindex(pd.MultiIndex.from_product([[judge], dims]))
        eff = effective_weights(g["weight"].to_numpy(float), *(t[s].to_numpy(float) for s in SETS))
        rows.append(
            pd.DataFrame(
                {
                    "judge": judge,
                    "dimension": dims,
                    "weight": g["weight"].to_numpy(float),
                    "effective_weight": eff,
                }
            )
        )
    cols = ["judge", "dimension", "weight", "effective_weight"]
    return pd.concat(rows, ignore_index=True)[cols] if rows else pd.DataFrame(columns=cols)


def _normalise(rag: Any, zero: Any, full: Any) -> np.ndarray:
    rag, zero, full = (np.asarray(a, dtype=float) for a in (rag, zero, full))
    den = full - zero
    ok = np.nan_to_num(den, nan=0.0) > _EPS
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(ok, 100.0 * (rag - zero) / np.where(ok, den, 1.0), np.nan)


def _dimension_flags(judge: str, d: str, z: float, r: float, f: float) -> list[tuple[str, str]]:
    who = f"judge {judge} · {d}"
    missing = [s for s, v in zip(SETS, (z, r, f), strict=True) if not np.isfinite(v)]
    if missing:
        return [
            (
                "no_trimmed_mean",
                f"{who}: no trimmed mean in the {'/'.join(missing)} set (no question "
                "scored in all three sets): N undefined",
            )
        ]
    if abs(f - z) <= _EPS:
        return [
            (
                "zero_range",
                f"{who}: zero range (full = zero = {z:.2f}; zero denominator): N undefined and "
                "the dimension leaves W",
            )
        ]
    if f < z:
        return [
            (
                "inverted_bounds",
                f"{who}: inverted bounds (full {f:.2f} < zero {z:.2f}): N undefined and the "
                "dimension leaves W",
            )
        ]
    if not z - _EPS <= r <= f + _EPS:
        n = 100 * (r - z) / (f - z)
        return [
            (
                "rag_outside_bounds",
                f"{who}: rag {r:.2f} outside the bounds [zero {z:.2f}, full {f:.2f}]: "
                f"N = {n:.1f}, outside [0, 100]",
            )
        ]
    return []


def cube_scores_with_flags(
    trimmed: pd.DataFrame,
    weights: pd.DataFrame,
    recall: float,
    weight_causes: dict[str, str] | None = None,
    effective: pd.DataFrame | None = None,
    *,
    wide: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`cube_scores` and the flags as a table `judge, dimension, code, message` (dimension
    `W` for the weighted score, `R@k` for retrieval). `effective`: `effective_weight_table` of
    the same trimmed means and weights when the caller has it; `wide`: `trimmed_wide` of the same
    trimmed means when the caller has it (else each makes the wide table anew)."""
    _require_sets(trimmed)
    tm = _wide(trimmed) if wide is None else wide
    dims = list(dict.fromkeys(trimmed["dimension"]))
    if effective is None:
        effective = effective_weight_table(trimmed, weights, wide=tm)
    eff = effective.set_index(["judge", "dimension"])
    causes = weight_causes or {}
    rows, flags = [], []
    for judge in sorted(trimmed["judge"].unique(), key=str):
        row, jflags = _judge_row(judge, tm, eff, dims, float(recall), causes)
        rows.append(row)
        flags += [{"judge": judge, "dimension": d, "code": c, "message": m} for d, c, m in jflags]
    for r in rows:
        if r["flags"]:
            warnings.warn(r["flags"], _warning_class(), stacklevel=3)
    return pd.DataFrame(rows).set_index("judge"), pd.DataFrame(flags, columns=FLAG_COLUMNS)


Flag = tuple[str, str, str]  # (dimension, code, message)

# the flag codes that leave a denominator at zero or undefined (`flag_zero_denominator`)
ZERO_DENOMINATOR_CODES = {
    "zero_range",
    "weights_undefined",
    "w_missing_dimension",
    "w_no_valid_dimension",
    "no_trimmed_mean",
}


def _require_sets(trimmed: pd.DataFrame) -> None:
    """The trimmed means have the columns and the three scoring sets CuBE needs."""
    require_columns(trimmed, ["judge", "set", "dimension", "trimmed_mean"], "trimmed_means")
    for s in SETS:
        if not (trimmed["set"] == s).any():
            raise SchemaError(
                f"trimmed_means: no '{s}' set; CuBE needs the zero, rag and full scoring sets"
            )


def _judge_row(
    judge: Any,
    tm: pd.DataFrame,
    eff: pd.DataFrame,
    dims: list[str],
    recall: float,
    causes: dict[str, str],
) -> tuple[dict[str, Any], list[Flag]]:
    """One judge's row of `cube_scores` (N_d per dimension, W, R@k, CuBE, the flag columns) and
    its flags."""
    row: dict[str, Any] = {"judge": judge}
    jflags: list[Flag] = []
    t = tm.reindex(pd.MultiIndex.from_product([[judge], dims]))
    z, r, f = (t[s].to_numpy(float) for s in SETS)
    n = _normalise(r, z, f)
    for i, d in enumerate(dims):
        row[d] = float(n[i])
        jflags += [(d, c, m) for c, m in _dimension_flags(str(judge), d, z[i], r[i], f[i])]
    e = eff.reindex(pd.MultiIndex.from_product([[judge], dims]))
    w, we = e["weight"].to_numpy(float), e["effective_weight"].to_numpy(float)
    cause = causes.get(str(judge), "every weight is 0 or undefined")
    W, w_flags = _weighted_score(f"judge {judge} · W", dims, (z, r, f), w, we, cause)
    cube, cube_flags = _cube_score(judge, W, recall)
    jflags += w_flags + cube_flags
    row["weighted_score"] = W
    row["recall_at_k"] = recall
    row["cube_score"] = cube
    row.update(_flag_columns(jflags))
    return row, jflags


def _weighted_score(
    who: str,
    dims: list[str],
    bounds: tuple[np.ndarray, np.ndarray, np.ndarray],
    w: np.ndarray,
    we: np.ndarray,
    cause: str,
) -> tuple[float, list[Flag]]:
    """W of one judge (NaN when undefined) and the flags that say why or what it left out."""
    if not (np.nan_to_num(w, nan=0.0) > 0).any():
        what = f"{who}: undefined because the weights are undefined: {cause}"
        return float("nan"), [("W", "weights_undefined", what)]
    if not np.isfinite(we).all():
        return float("nan"), [_undefined_w_flag(who, dims, bounds, w)]
    z, r, f = bounds
    T = [float(_totals(we, v)) for v in (z, r, f)]
    W = float(_normalise(T[1], T[0], T[2]))
    return W, _computed_w_flags(who, dims, w, we, W)


def _undefined_w_flag(
    who: str, dims: list[str], bounds: tuple[np.ndarray, ...], w: np.ndarray
) -> Flag:
    """Why W is undefined although some weight is positive: a weighted dimension lacks a trimmed
    mean in some set, or no weighted dimension has full > zero."""
    z, r, f = bounds
    gone = [d for i, d in enumerate(dims) if w[i] > 0 and not np.isfinite([z[i], r[i], f[i]]).all()]
    if gone:
        return (
            "W",
            "w_missing_dimension",
            f"{who}: undefined: weighted dimension(s) {', '.join(gone)} have no "
            "trimmed mean in some set (absent or unscored rows), so W would mix "
            "different dimensions",
        )
    return (
        "W",
        "w_no_valid_dimension",
        f"{who}: undefined: no weighted dimension has full > zero (zero range or inverted bounds)",
    )


def _computed_w_flags(
    who: str, dims: list[str], w: np.ndarray, we: np.ndarray, W: float
) -> list[Flag]:
    """The flags of a computed W: dimensions it left out (renormalised), W outside [0, 100]."""
    flags: list[Flag] = []
    left = [d for i, d in enumerate(dims) if w[i] > 0 and we[i] == 0]
    if left:
        used = [d for i, d in enumerate(dims) if we[i] > 0]
        flags.append(
            (
                "W",
                "w_dimension_left_out",
                f"{who}: computed over {', '.join(used)}; {', '.join(left)} left W (no "
                "positive range between zero and full) and the remaining weights were "
                "renormalised",
            )
        )
    if np.isfinite(W) and not -1e-9 <= W <= 100 + 1e-9:
        flags.append(("W", "w_outside_bounds", f"{who}: W = {W:.1f}, outside [0, 100]"))
    return flags


def _cube_score(judge: Any, W: float, recall: float) -> tuple[float, list[Flag]]:
    """CuBE = W x R@k, and 0 when nothing was retrieved, whatever W is (flagged)."""
    if recall == 0.0:
        what = f"judge {judge}: nothing retrieved: R@k = 0, so CuBE = 0"
        return 0.0, [("R@k", "nothing_retrieved", what)]
    return W * recall, []


def _flag_columns(jflags: list[Flag]) -> dict[str, Any]:
    """The row's flag columns, from its flags' codes, and the messages joined."""
    codes = {c for _, c, _ in jflags}
    return {
        "flag_zero_denominator": bool(codes & ZERO_DENOMINATOR_CODES),
        "flag_out_of_bounds": bool(codes & {"rag_outside_bounds", "w_outside_bounds"}),
        "flag_inverted_bounds": "inverted_bounds" in codes,
        "flags": "; ".join(m for _, _, m in jflags),
    }


def _warning_class() -> type[Warning]:
    from cube.method.analysis import CubeWarning

    return CubeWarning


def cube_scores(
    trimmed: pd.DataFrame,
    weights: pd.DataFrame,
    recall: float,
    weight_causes: dict[str, str] | None = None,
) -> pd.DataFrame:
    """Table 4: per judge, each dimension normalised between its bounds, the weighted score,
    R@k and the CuBE score, with flags naming judge, dimension and cause (module docstring).

    Columns: one per dimension (0-100), `weighted_score`, `recall_at_k` (0-1), `cube_score`,
    `flag_zero_denominator`, `flag_out_of_bounds`, `flag_inverted_bounds`, `flags` (text)."""
    return cube_scores_with_flags(trimmed, weights, recall, weight_causes)[0]
