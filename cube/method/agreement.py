"""Agreement between judges: human vs LLM judges, and inter-rater reliability (paper 5.6).

All functions read the long `scores` table of `cube.config.schema` (`question_id, system, set,
judge, dimension, score`, optionally `sample`) and never modify it.

Rules (documented here because the paper does not give them):

- A *unit* is one answer judged on one dimension: `(question_id, system, set, dimension)`.
- Repeated samples of one judge on a unit are averaged first (NaN samples skipped; a unit
  whose samples are all NaN stays NaN, i.e. unscored).
- Human judges are named `"human"` (a consensus, e.g. from `cube.judges.human.import_ratings`) or
  `"human:<rater>"` (one rater). The *human consensus* of a unit is the mean over the
  `human:<rater>` scores of that unit (NaN skipped); a unit without any per-rater score
  takes the `"human"` row instead. So per-rater and consensus imports of the same sheet
  give the same reference, and the consensus is never averaged with its own raters.
- Pairs are matched on the unit; a pair where either side is NaN is dropped and counted
  (`n_missing`).
- Quadratic-weighted Cohen's kappa is computed only when every matched value on both sides
  is an integer (after averaging samples/raters, a mean such as 7.5 is not a category);
  otherwise it is NaN. Its categories are every integer from the smallest to the largest
  observed value, so distances are measured on the score scale, not on the rank of the
  labels that happen to occur.
- A correlation with a constant side (or fewer than 2 pairs) is NaN, silently.
- Sets are never pooled unless asked. Every statistic is computed within one answer set
  (`set` column; default the rag set only), because the zero, rag and full sets differ by
  construction: a judge that only tells the sets apart, and is constant within each, would
  otherwise "agree" with the humans through the gap between sets. `"pooled"` (all sets
  together, the units still distinct per set) is available as an explicit extra row.
- Every bootstrap resamples *questions*, not units: a drawn question brings all its units
  (every system, set and dimension) along, and one sequence of question draws (from `seed`)
  is shared by every row of a table, so rows are resampled together.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from cube.config.schema import HUMAN, require_columns
from cube.method import agreement_fast

UNIT = ("question_id", "system", "set", "dimension")
POOLED = "pooled"
DEFAULT_SETS = ("rag",)
STATISTICS = ("pearson", "spearman", "kendall", "weighted_kappa", "mean_abs_diff", "bias")


def is_human(judge: str) -> bool:
    """True for `"human"` and `"human:<rater>"`."""
    return judge == HUMAN or judge.startswith(HUMAN + ":")


def judge_means(scores: pd.DataFrame) -> pd.DataFrame:
    """One score per (judge, unit): repeated samples averaged, NaN samples skipped.

    Returns:
        Columns `judge, question_id, system, set, dimension, score`.
    """
    require_columns(scores, ("judge", *UNIT, "score"), "scores")
    df = scores.loc[:, ["judge", *UNIT, "score"]].copy()
    df["score"] = pd.to_numeric(df["score"], errors="coerce").astype(float)
    for col in ("judge", *UNIT):
        df[col] = df[col].astype(str)
    return df.groupby(["judge", *UNIT], sort=True, as_index=False)["score"].mean()


def human_consensus(means: pd.DataFrame, name: str = HUMAN) -> pd.DataFrame:
    """The human consensus per unit (see the module rules) from `judge_means` output.

    Returns:
        The same columns with `judge == name`; empty when there is no human judge.
    """
    raters = means[means["judge"].str.startswith(HUMAN + ":")]
    per_rater = raters.groupby(list(UNIT), as_index=False)["score"].mean()
    consensus = means[means["judge"] == HUMAN].loc[:, [*UNIT, "score"]]
    if len(per_rater):
        keys = pd.MultiIndex.from_frame(per_rater[list(UNIT)])
        keep = ~pd.MultiIndex.from_frame(consensus[list(UNIT)]).isin(keys)
        consensus = pd.concat([per_rater, consensus[keep]], ignore_index=True)
    out = consensus.assign(judge=name)
    return out.loc[:, ["judge", *UNIT, "score"]]


def with_human_consensus(means: pd.DataFrame) -> pd.DataFrame:
    """`judge_means` output whose `"human"` rows are the human consensus (raters kept as
    they are)."""
    if not means["judge"].map(is_human).any():
        return means
    return pd.concat([means[means["judge"] != HUMAN], human_consensus(means)], ignore_index=True)


def _reference(means: pd.DataFrame, reference_judge: str) -> tuple[pd.DataFrame, set[str]]:
    """The reference judge's scores and the judges absorbed into it (not compared with it)."""
    if reference_judge == HUMAN:
        absorbed = {j for j in means["judge"].unique() if is_human(j)}
        return human_consensus(means), absorbed
    return means[means["judge"] == reference_judge], {reference_judge}


def _constant(x: np.ndarray) -> bool:
    return len(x) < 2 or bool(np.all(x == x[0]))


def _is_integer(x: np.ndarray) -> bool:
    return bool(np.all(np.isfinite(x)) and np.all(x == np.round(x)))


def _check_sets(means: pd.DataFrame, sets: Sequence[str] | str) -> list[str]:
    """The requested set labels (set names or `"pooled"`), checked against the data."""
    labels = [sets] if isinstance(sets, str) else list(sets)
    present = sorted(means["set"].unique())
    unknown = [s for s in labels if s != POOLED and s not in present]
    if not labels or unknown:
        raise ValueError(
            f"sets: expected one or more of {present + [POOLED]}; got {labels!r}"
            + (f" ({unknown} not in the scores)" if unknown else "")
        )
    return labels


def _in_set(means: pd.DataFrame, label: str) -> pd.DataFrame:
    return means if label == POOLED else means[means["set"] == label]


def question_draws(
    question_ids: Sequence[str], n: int, seed: int
) -> tuple[dict[str, int], np.ndarray]:
    """`n` bootstrap resamples of questions as multiplicities.

    Returns:
        `(code, counts)`: `code[question_id]` is the column of that question in `counts`,
        an `n x Q` array where `counts[b, q]` is how often question `q` is drawn in resample `b`
        (questions sorted, so the draws do not depend on row order).
    """
    # the distinct ids first: a set of a text column walks it element by element (slow for Arrow)
    unique = question_ids.unique() if isinstance(question_ids, pd.Series) else question_ids
    qs = sorted(set(unique))
    rng = np.random.default_rng(seed)
    if not qs or n == 0:
        return {q: i for i, q in enumerate(qs)}, np.zeros((n, len(qs)), dtype=int)
    # one call draws the same stream as one call per resample (row b = resample b)
    draws = rng.integers(0, len(qs), (n, len(qs))) + len(qs) * np.arange(n)[:, None]
    counts = np.bincount(draws.ravel(), minlength=n * len(qs)).reshape(n, len(qs))
    return {q: i for i, q in enumerate(qs)}, counts


def weighted_kappa(a: np.ndarray, b: np.ndarray) -> float:
    """Quadratic-weighted Cohen's kappa on an integer scale; NaN if undefined (see module)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if len(a) < 2 or not (_is_integer(a) and _is_integer(b)):
        return float("nan")
    lo, hi = int(min(a.min(), b.min())), int(max(a.max(), b.max()))
    if lo == hi:
        return float("nan")  # one category: chance agreement is total, kappa is 0/0
    # imported here: scikit-learn costs ~75 MB and ~1.5 s in every stage that imports this module
    # (the figures do, through `cube.pages.plots`), and only the human-agreement stage calls it
    from sklearn.metrics import cohen_kappa_score

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        value = cohen_kappa_score(
            a.astype(int), b.astype(int), labels=list(range(lo, hi + 1)), weights="quadratic"
        )
    return float(value)


def _statistics(judge: np.ndarray, ref: np.ndarray) -> dict[str, float]:
    """All agreement statistics of one matched pair of vectors (no NaN inside)."""
    nan = float("nan")
    out = dict.fromkeys(STATISTICS, nan)
    if len(judge) == 0:
        return out
    diff = judge - ref
    out["mean_abs_diff"] = float(np.mean(np.abs(diff)))
    out["bias"] = float(np.mean(diff))
    out["weighted_kappa"] = weighted_kappa(judge, ref)
    if not (_constant(judge) or _constant(ref)):
        out["pearson"] = float(stats.pearsonr(judge, ref)[0])
        out["spearman"] = float(stats.spearmanr(judge, ref)[0])
        out["kendall"] = float(stats.kendalltau(judge, ref)[0])
    return out


def _bootstrap_draws(
    x: np.ndarray,
    y: np.ndarray,
    func: Callable[[np.ndarray, np.ndarray], dict[str, float]],
    counts: np.ndarray,
) -> dict[str, np.ndarray]:
    """Every statistic in every resample; `counts` (resamples x units) says how often each
    matched unit is drawn, i.e. how often its question is (see `question_draws`)."""
    draws: dict[str, list[float]] = {}
    units = np.arange(len(x))
    for row in counts:
        idx = np.repeat(units, row)
        for key, value in func(x[idx], y[idx]).items():
            draws.setdefault(key, []).append(value)
    return {k: np.asarray(v, float) for k, v in draws.items()}


def _bootstrap(
    x: np.ndarray,
    y: np.ndarray,
    func: Callable[[np.ndarray, np.ndarray], dict[str, float]],
    counts: np.ndarray,
    confidence: float,
) -> dict[str, tuple[float, float]]:
    """Percentile intervals of every statistic over its defined resamples."""
    return agreement_fast.percentile_intervals(_bootstrap_draws(x, y, func, counts), confidence)


def _bootstrap_statistics(
    x: np.ndarray, y: np.ndarray, counts: np.ndarray, confidence: float
) -> tuple[dict[str, tuple[float, float]], int]:
    """Percentile intervals of `_statistics`, all resamples at once from value-pair tables
    (`cube.method.agreement_fast`; the loop when the values are too varied for small tables),
    and the most resamples any statistic is undefined in (e.g. a constant resample has no
    correlation): the intervals rest on the others, and that count is reported."""
    tables = agreement_fast.pair_tables(x, y, counts)
    draws = (
        _bootstrap_draws(x, y, _statistics, counts)
        if tables is None
        else agreement_fast.statistics(*tables)
    )
    undefined = max((int((~np.isfinite(v)).sum()) for v in draws.values()), default=0)
    return agreement_fast.percentile_intervals(draws, confidence), undefined


def _matched(a: pd.DataFrame, b: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, int]:
    """Inner join on the unit; returns both score vectors without NaN pairs and the drop count."""
    x, y, dropped, _ = _matched_with_questions(a, b)
    return x, y, dropped


def _matched_with_questions(
    a: pd.DataFrame, b: pd.DataFrame
) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
    """`_matched` plus the question id of every matched pair."""
    # outer: a unit scored on one side only is a missing pair too, counted like a NaN one
    m = a.loc[:, [*UNIT, "score"]].merge(
        b.loc[:, [*UNIT, "score"]], on=list(UNIT), how="outer", suffixes=("_a", "_b")
    )
    m = m.sort_values(list(UNIT))  # row order of the input never matters (bootstrap included)
    ok = m["score_a"].notna() & m["score_b"].notna()
    return (
        m.loc[ok, "score_a"].to_numpy(float),
        m.loc[ok, "score_b"].to_numpy(float),
        int((~ok).sum()),
        m.loc[ok, "question_id"].to_numpy(str),
    )


def agreement_table(
    scores: pd.DataFrame,
    reference_judge: str = HUMAN,
    *,
    sets: Sequence[str] | str = DEFAULT_SETS,
    bootstrap: int = 0,
    confidence: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """Agreement of every judge with a reference judge, per answer set and dimension.

    Args:
        scores: long scores table.
        reference_judge: `"human"` (the human consensus, see module rules) or any judge name.
        sets: the answer sets, one row group each (default the rag set only); `"pooled"` adds
            all sets together (module rules: never the default).
        bootstrap: number of bootstrap resamples of the reference's questions for percentile
            intervals (`<stat>_lo`, `<stat>_hi` columns); 0 = none.
        confidence: interval coverage.
        seed: seed of the question draws (shared by every row).

    Returns:
        Columns `judge, set, dimension, n, n_missing, pearson, spearman, kendall, weighted_kappa,
        mean_abs_diff, bias` (+ `boot_undefined` and the intervals);
        `bias = mean(judge - reference)`. `n_missing` counts the units either side left unscored or
        never scored (absent on one side); `boot_undefined` the most resamples in which a statistic
        was undefined (its interval rests on the others). Human raters forming the human consensus
        are not compared with it (use `pairwise_agreement`).
    """
    means = judge_means(scores)
    labels = _check_sets(means, sets)
    ref, absorbed = _reference(means, reference_judge)
    _require_reference(ref, reference_judge, means)
    code, counts = question_draws(ref["question_id"], bootstrap, seed)
    rows = []
    for judge in sorted(set(means["judge"].unique()) - absorbed):
        for label in labels:
            jm, rm = _in_set(means[means["judge"] == judge], label), _in_set(ref, label)
            for dim in sorted(set(jm["dimension"].unique()) & set(rm["dimension"].unique())):
                x, y, dropped, qids = _matched_with_questions(
                    jm[jm["dimension"] == dim], rm[rm["dimension"] == dim]
                )
                row: dict[str, object] = {
                    "judge": judge,
                    "set": label,
                    "dimension": dim,
                    "n": len(x),
                    "n_missing": dropped,
                }
                row.update(_statistics(x, y))
                if bootstrap > 0 and len(x) > 0:
                    unit_counts = counts[:, [code[q] for q in qids]]
                    row.update(_interval_columns(x, y, unit_counts, confidence))
                rows.append(row)
    columns = ["judge", "set", "dimension", "n", "n_missing", *STATISTICS]
    if bootstrap > 0:
        columns += ["boot_undefined", *(f"{s}_{side}" for s in STATISTICS for side in ("lo", "hi"))]
    return pd.DataFrame(rows).reindex(columns=columns)


def _require_reference(ref: pd.DataFrame, reference_judge: str, means: pd.DataFrame) -> None:
    if ref.empty:
        raise ValueError(
            f"scores: reference judge {reference_judge!r} has no rows; judges present: "
            f"{sorted(means['judge'].unique())}"
        )


def _interval_columns(
    x: np.ndarray, y: np.ndarray, unit_counts: np.ndarray, confidence: float
) -> dict[str, object]:
    """`boot_undefined` and each statistic's `<stat>_lo`, `<stat>_hi` over the resamples."""
    intervals, undefined = _bootstrap_statistics(x, y, unit_counts, confidence)
    out: dict[str, object] = {"boot_undefined": undefined}
    for key, (lo, hi) in intervals.items():
        out[f"{key}_lo"], out[f"{key}_hi"] = lo, hi
    return out


def _reliability_matrix(
    means: pd.DataFrame, judges: Sequence[str], dimension: str | None
) -> np.ndarray:
    """Raters x units matrix (NaN = missing) for `krippendorff.alpha`."""
    return _reliability_units(means, judges, dimension)[0]


def _reliability_units(
    means: pd.DataFrame, judges: Sequence[str], dimension: str | None
) -> tuple[np.ndarray, np.ndarray]:
    """`_reliability_matrix` plus the question id of every column (unit)."""
    df = means[means["judge"].isin(list(judges))]
    if dimension is not None:
        df = df[df["dimension"] == dimension]
    wide = df.pivot_table(index="judge", columns=list(UNIT), values="score", aggfunc="mean")
    questions = (
        wide.columns.get_level_values("question_id").to_numpy(str)
        if len(wide.columns)
        else np.array([])
    )
    return wide.reindex(index=list(judges)).to_numpy(float), questions


def _alpha(data: np.ndarray, level: str) -> float:
    """Krippendorff's alpha, NaN when undefined (fewer than 2 raters or pairable values,
    one value)."""
    if data.shape[0] < 2 or data.size == 0:
        return float("nan")
    pairable = np.sum(~np.isnan(data), axis=0) >= 2
    values = data[:, pairable]
    values = values[~np.isnan(values)]
    if len(np.unique(values)) < 2:
        return float("nan")
    import krippendorff  # imported on use, as scikit-learn above (weighted_kappa)

    return float(krippendorff.alpha(reliability_data=data[:, pairable], level_of_measurement=level))


def _resolve_judges(means: pd.DataFrame, judges: Sequence[str] | None) -> list[str]:
    """Judge names; `"human"` stands for the consensus when only per-rater rows exist."""
    present = sorted(means["judge"].unique())
    if judges is None:
        return present
    missing = [j for j in judges if j not in present]
    if missing:
        raise ValueError(f"scores: judge(s) {missing} not found; judges present: {present}")
    return list(judges)


def krippendorff_alpha(
    scores: pd.DataFrame,
    judges: list[str] | None = None,
    dimension: str | None = None,
    level: str = "interval",
    set_name: str = DEFAULT_SETS[0],
) -> float:
    """Krippendorff's alpha among judges (raters) over units, via the `krippendorff` package.

    Args:
        scores: long scores table.
        judges: the raters (judge names as they appear; default all judges in `scores`).
        dimension: one dimension, or None to pool every (answer, dimension) unit.
        level: `"interval"` or `"ordinal"` (or any level the package accepts).
        set_name: the answer set (default rag), or `"pooled"` for all sets together.

    Returns:
        Alpha; NaN when fewer than two raters, no unit rated twice, or a single value.
    """
    means = judge_means(scores)
    _check_sets(means, set_name)
    names = _resolve_judges(means, judges)
    return _alpha(_reliability_matrix(_in_set(means, set_name), names, dimension), level)


def reliability_table(
    scores: pd.DataFrame,
    groups: dict[str, list[str]],
    level: str = "interval",
    *,
    sets: Sequence[str] | str = DEFAULT_SETS,
    bootstrap: int = 0,
    confidence: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """Inter-rater reliability per group of raters (e.g. humans, LLM judges), set and dimension.

    Args:
        scores: long scores table.
        groups: group name -> judge names (e.g. `{"humans": ["human:a", "human:b"],
            "llm": ["gpt-4o", "qwen"]}`).
        level: Krippendorff level of measurement.
        sets: the answer sets, one row group each (default rag only); `"pooled"` = all together.
        bootstrap: resamples of the questions (a drawn question brings all its units, i.e.
            columns of the reliability matrix) for a percentile interval `alpha_lo, alpha_hi`;
            0 = none.
        confidence: interval coverage.
        seed: seed of the question draws (shared by every row).

    Returns:
        Columns `group, set, dimension, n_units, n_raters, alpha` (+ interval). `n_units` counts
        units rated by at least two of the group's raters (the pairable ones), `n_raters`
        the group's raters with at least one score on the dimension.
    """
    means = judge_means(scores)
    labels = _check_sets(means, sets)
    members_all = [j for members in groups.values() for j in _resolve_judges(means, members)]
    code, counts = question_draws(
        means.loc[means["judge"].isin(members_all), "question_id"], bootstrap, seed
    )
    rows = []
    for group, members in groups.items():
        names = _resolve_judges(means, members)
        for label in labels:
            in_set = _in_set(means, label)
            dims = sorted(in_set.loc[in_set["judge"].isin(names), "dimension"].unique())
            for dim in dims:
                data, questions = _reliability_units(in_set, names, dim)
                rated = ~np.isnan(data)
                row: dict[str, object] = {
                    "group": group,
                    "set": label,
                    "dimension": dim,
                    "n_units": int(np.sum(rated.sum(axis=0) >= 2)),
                    "n_raters": int(np.sum(rated.any(axis=1))),
                    "alpha": _alpha(data, level),
                }
                if bootstrap > 0:
                    unit_counts = counts[:, [code[q] for q in questions]]
                    row.update(_alpha_interval(data, unit_counts, level, confidence))
                rows.append(row)
    columns = ["group", "set", "dimension", "n_units", "n_raters", "alpha"]
    if bootstrap > 0:
        columns += ["alpha_lo", "alpha_hi"]
    return pd.DataFrame(rows).reindex(columns=columns)


def _alpha_interval(
    data: np.ndarray, unit_counts: np.ndarray, level: str, confidence: float
) -> dict[str, float]:
    """`alpha_lo`, `alpha_hi`: the percentile interval of alpha over the resampled units (NaN when
    no resample defines it)."""
    columns = np.arange(data.shape[1])
    arr = np.asarray([_alpha(data[:, np.repeat(columns, c)], level) for c in unit_counts], float)
    arr = arr[np.isfinite(arr)]
    if not len(arr):
        return {"alpha_lo": np.nan, "alpha_hi": np.nan}
    tail = (1 - confidence) / 2
    return {
        "alpha_lo": float(np.quantile(arr, tail)),
        "alpha_hi": float(np.quantile(arr, 1 - tail)),
    }


def _pair_stat(x: np.ndarray, y: np.ndarray, stat: str) -> float:
    if stat == "mae":
        return float(np.mean(np.abs(x - y))) if len(x) else float("nan")
    if stat == "kappa":
        return weighted_kappa(x, y)
    if _constant(x) or _constant(y):
        return float("nan")
    return float((stats.spearmanr if stat == "spearman" else stats.pearsonr)(x, y)[0])


def pairwise_agreement(
    scores: pd.DataFrame,
    dimension: str | None = None,
    stat: str = "spearman",
    set_name: str = DEFAULT_SETS[0],
) -> pd.DataFrame:
    """Square judge x judge matrix of one agreement statistic (for a heatmap).

    Every judge appears as named (each human rater separately), plus the human consensus as
    `"human"` (module rules) when there is any human judge.

    Args:
        scores: long scores table.
        dimension: one dimension, or None to pool all units of all dimensions.
        stat: `"spearman"`, `"pearson"`, `"kappa"` (quadratic weighted) or `"mae"`.
        set_name: the answer set (default rag), or `"pooled"` for all sets together.

    Returns:
        DataFrame indexed and columned by judge name; the diagonal is 1 (0 for `mae`).
    """
    if stat not in ("spearman", "pearson", "kappa", "mae"):
        raise ValueError(f"stat: expected one of spearman, pearson, kappa, mae; got {stat!r}")
    means = judge_means(scores)
    means = with_human_consensus(_in_set(means, _check_sets(means, set_name)[0]))
    if dimension is not None:
        means = means[means["dimension"] == dimension]
    names = sorted(means["judge"].unique())
    matrix = pd.DataFrame(
        np.nan, index=pd.Index(names, name="judge"), columns=pd.Index(names, name="judge")
    )
    by_judge = {j: means[means["judge"] == j] for j in names}
    for i, a in enumerate(names):
        for b in names[i:]:
            x, y, _ = _matched(by_judge[a], by_judge[b])
            value = (0.0 if stat == "mae" else 1.0) if a == b and len(x) else _pair_stat(x, y, stat)
            matrix.loc[a, b] = matrix.loc[b, a] = value
    return matrix
