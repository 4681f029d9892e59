"""The CuBE mathematics (METHOD.md) as pure functions on long-format DataFrames.

Inputs, in DESIGN.md's words:

- **answers** (one row per question, system and QA set): `question_id`, `doc_id` (the
  question's gold document), `system`, `set` (`zero` = the answering model without documents,
  the lower bound; `rag` = the system under test; `full` = the gold document alone, the upper
  bound), `answer`, `retrieved_doc_ids` (the system's ranked list) and `rank` (1-based position
  of the gold document in that list, 0 = not retrieved). Only the `rag` rows' rank and list
  are used: a question's rank is the system's retrieval outcome, whichever set is scored.
- **scores** (the scoring sets, one row per question, system, set, judge and dimension, and
  `sample` when a judgment is repeated): `score` is a float on 0-10, NaN = unscored (a failed
  call or an unparseable reply). Repeated samples are averaged; NaN scores are excluded and
  counted, never replaced.

Pipeline (paper 5.3-5.5): rank -> `rank_score` -> Pearson r per judge and dimension on the
`rag` scoring set -> weights `w_d = r_d / sum(r)` -> trimmed means `TM[judge, set, d]` on the
evaluation subset (default: questions whose gold document was retrieved) -> normalised
`N_d = 100 (TM_rag - TM_zero) / (TM_full - TM_zero)` -> weighted score
`W = 100 (T_rag - T_zero) / (T_full - T_zero)` with `T = sum_d w_d TM_d` -> `CuBE = W * R@k`
-> jury mean and SD (ddof = 1) across judges. Every function here is pure: no I/O, no state.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy import stats

from cube.config import PAPER_DIMENSIONS
from cube.schema import SETS, SchemaError, require_columns

ANSWER_REQUIRED = ("question_id", "system", "set", "rank")
SCORE_REQUIRED = ("question_id", "system", "set", "judge", "dimension", "score")
_EPS = 1e-12


class CubeWarning(UserWarning):
    """A result that needs the reader's attention (negative correlation, zero denominator)."""


# ----------------------------------------------------------------------------------- validation
def validate_answers(answers: pd.DataFrame, table: str = "answers") -> None:
    """Raise `SchemaError` for missing columns, unknown sets, bad ranks or duplicated rows."""
    require_columns(answers, ANSWER_REQUIRED, table)
    _check_sets(answers, table)
    ranks = pd.to_numeric(answers["rank"], errors="coerce")
    bad = answers.index[ranks.isna() | (ranks < 0) | (ranks != ranks.round())]
    if len(bad):
        raise SchemaError(
            f"{table}: column 'rank' must be an integer >= 0 (0 = not retrieved); bad rows {list(bad[:5])}"
        )
    dup = answers.duplicated(["question_id", "system", "set"], keep=False)
    if dup.any():
        rows = answers.loc[dup, ["question_id", "system", "set"]].head(5).to_dict("records")
        raise SchemaError(f"{table}: duplicated (question_id, system, set) rows, e.g. {rows}")


def validate_scores(scores: pd.DataFrame, table: str = "scores") -> None:
    """Raise `SchemaError` for missing columns, unknown sets, out-of-range or duplicated scores."""
    require_columns(scores, SCORE_REQUIRED, table)
    _check_sets(scores, table)
    s = pd.to_numeric(scores["score"], errors="coerce")
    non_numeric = scores["score"].notna() & s.isna()
    out = s.notna() & ((s < 0) | (s > 10))
    if non_numeric.any() or out.any():
        rows = scores.loc[non_numeric | out, list(SCORE_REQUIRED)].head(5).to_dict("records")
        raise SchemaError(f"{table}: 'score' must be a number in [0, 10] or NaN (unscored); bad rows: {rows}")
    keys = ["question_id", "system", "set", "judge", "dimension"] + (["sample"] if "sample" in scores else [])
    dup = scores.duplicated(keys, keep=False)
    if dup.any():
        rows = scores.loc[dup, keys].head(5).to_dict("records")
        raise SchemaError(f"{table}: duplicated {tuple(keys)} rows, e.g. {rows}")


def _check_sets(df: pd.DataFrame, table: str) -> None:
    bad = sorted(set(df["set"].astype(str)) - set(SETS))
    if bad:
        raise SchemaError(f"{table}: unknown set name(s) {bad}; expected one of {list(SETS)}")


def _single_system(df: pd.DataFrame, table: str) -> None:
    systems = df["system"].dropna().unique()
    if len(systems) > 1:
        raise SchemaError(
            f"{table}: holds {len(systems)} systems {sorted(map(str, systems))}; filter to one system "
            "(e.g. df[df.system == name]) or use evaluate_systems()"
        )


# ----------------------------------------------------------------------------------------- rank
def rank_of(gold_doc_id: Any, retrieved_doc_ids: Sequence[Any] | None) -> int:
    """1-based position of the gold document in the retrieved list; 0 when absent."""
    if retrieved_doc_ids is None:
        return 0
    for i, doc in enumerate(list(retrieved_doc_ids), start=1):
        if doc == gold_doc_id:
            return i
    return 0


def rank_score(rank: int, n_retrieved: int, top_n: int = 8) -> int:
    """The paper's rank transform: `(top_n + 2) - rank`, `top_n + 2` for the gold document
    retrieved alone, 0 when not retrieved (N = 8: ranks 1..8 -> 9..2, alone -> 10)."""
    rank, n_retrieved = int(rank), int(n_retrieved)
    if rank < 0:
        raise ValueError(f"rank must be >= 0 (0 = not retrieved), got {rank}")
    if rank == 0:
        return 0
    if rank > top_n:
        raise ValueError(f"rank {rank} exceeds top_n {top_n}: set analysis.top_n to the system's list length")
    if rank > n_retrieved:
        raise ValueError(f"rank {rank} exceeds the number of retrieved documents {n_retrieved}")
    if n_retrieved == 1:
        return top_n + 2
    return top_n + 2 - rank


def question_ranks(answers: pd.DataFrame, top_n: int = 8) -> pd.DataFrame:
    """One row per question of the `rag` set: `question_id, rank, n_retrieved, retrieved, rank_score`."""
    validate_answers(answers)
    _single_system(answers, "answers")
    rag = answers[answers["set"] == "rag"]
    if rag.empty:
        raise SchemaError("answers: no 'rag' rows (the system under test's answers)")
    out = pd.DataFrame({"question_id": rag["question_id"].to_numpy(), "rank": rag["rank"].astype(int).to_numpy()})
    if "n_retrieved" in rag:
        n = pd.to_numeric(rag["n_retrieved"], errors="coerce").fillna(top_n).astype(int).to_numpy()
    elif "retrieved_doc_ids" in rag:
        n = rag["retrieved_doc_ids"].map(lambda x: len(x) if x is not None else 0).to_numpy()
    else:
        n = np.full(len(rag), top_n)
    out["n_retrieved"] = n
    out["retrieved"] = out["rank"] > 0
    out["rank_score"] = [rank_score(r, k, top_n) for r, k in zip(out["rank"], out["n_retrieved"], strict=True)]
    return out


def recall_at_k(answers: pd.DataFrame, k: int | None = None) -> float:
    """R@k: share of questions whose gold document the system retrieved (rank 1..k; any rank if k is None)."""
    validate_answers(answers)
    _single_system(answers, "answers")
    rank = answers.loc[answers["set"] == "rag", "rank"].astype(int)
    if rank.empty:
        raise SchemaError("answers: no 'rag' rows to compute R@k from")
    hit = rank > 0 if k is None else (rank > 0) & (rank <= k)
    return float(hit.mean())


# --------------------------------------------------------------------------------- correlations
def _per_item(scores: pd.DataFrame) -> pd.DataFrame:
    """Average repeated samples: one score per (question, system, set, judge, dimension); NaN kept."""
    keys = ["question_id", "system", "set", "judge", "dimension"]
    s = scores[keys + ["score"]].copy()
    s["score"] = pd.to_numeric(s["score"], errors="coerce").astype(float)
    return s.groupby(keys, as_index=False, sort=False, dropna=False)["score"].mean()


def _dimension_order(dimensions: Iterable[str]) -> list[str]:
    """The paper's four in the paper's order, then any custom dimension alphabetically
    (independent of row order, so shuffled inputs give identical tables)."""
    present = set(dimensions)
    return [d for d in PAPER_DIMENSIONS if d in present] + sorted(present - set(PAPER_DIMENSIONS))


def _order(df: pd.DataFrame, dims: list[str]) -> pd.DataFrame:
    """Rows by judge, then set (zero, rag, full), then dimension in the order the input gave."""
    keys = ["judge"] + (["set"] if "set" in df else []) + ["dimension"]
    rank = {"set": {s: i for i, s in enumerate(SETS)}.get, "dimension": {d: i for i, d in enumerate(dims)}.get}
    return df.sort_values(keys, key=lambda s: s.map(rank[s.name]) if s.name in rank else s,
                          kind="stable").reset_index(drop=True)


def _pearson(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    if len(x) < 3 or np.ptp(x) < _EPS or np.ptp(y) < _EPS:
        return float("nan"), float("nan")
    res = stats.pearsonr(x, y)
    return float(res.statistic), float(res.pvalue)


def rank_correlations(
    scores: pd.DataFrame,
    answers: pd.DataFrame,
    subset: Literal["all", "retrieved"] = "all",
    top_n: int = 8,
    against: str = "rank_score",
) -> pd.DataFrame:
    """Pearson r between `rank_score` (or a custom `answers` column) and each dimension's
    score on the `rag` scoring set, per judge. `subset='retrieved'` keeps questions with rank > 0.

    Returns columns `judge, dimension, r, p_value, n` (r is NaN when a side is constant)."""
    validate_scores(scores)
    ranks = question_ranks(answers, top_n)
    if against != "rank_score":
        require_columns(answers, [against], "answers")
        rag = answers[answers["set"] == "rag"].set_index("question_id")[against]
        ranks[against] = ranks["question_id"].map(rag).astype(float)
    if subset == "retrieved":
        ranks = ranks[ranks["retrieved"]]
    elif subset != "all":
        raise ValueError(f"subset must be 'all' or 'retrieved', got {subset!r}")
    items = _per_item(scores[scores["set"] == "rag"]).merge(ranks[["question_id", against]], on="question_id")
    rows = []
    for (judge, dim), g in items.groupby(["judge", "dimension"], sort=True):
        g = g.dropna(subset=["score", against])
        r, p = _pearson(g[against].to_numpy(float), g["score"].to_numpy(float))
        rows.append({"judge": judge, "dimension": dim, "r": r, "p_value": p, "n": len(g)})
    out = pd.DataFrame(rows, columns=["judge", "dimension", "r", "p_value", "n"])
    return _order(out, _dimension_order(scores["dimension"]))


def dimension_weights(
    correlations: pd.DataFrame,
    mode: Literal["rank_correlation", "equal", "custom"] = "rank_correlation",
    custom: Mapping[str, float] | None = None,
) -> pd.DataFrame:
    """Weights per judge and dimension, summing to 1 per judge.

    `rank_correlation`: `w_d = r_d / sum(r)`, where a negative or undefined r counts as 0
    (with a `CubeWarning`); `equal`: 1/D; `custom`: the given weights, normalised."""
    require_columns(correlations, ["judge", "dimension"], "correlations")
    out = correlations[["judge", "dimension"]].copy()
    if mode == "rank_correlation":
        require_columns(correlations, ["r"], "correlations")
        r = correlations["r"].astype(float)
        bad = r.isna() | (r < 0)
        for _, row in correlations[bad].iterrows():
            warnings.warn(
                f"judge {row['judge']!r}, dimension {row['dimension']!r}: correlation with rank is "
                f"{row['r']:.3f}; its weight is set to 0",
                CubeWarning,
                stacklevel=2,
            )
        out["raw"] = r.where(~bad, 0.0)
    elif mode == "equal":
        out["raw"] = 1.0
    elif mode == "custom":
        if not custom:
            raise ValueError("custom weights requested but none given (analysis.custom_weights)")
        missing = sorted(set(out["dimension"]) - set(custom))
        if missing:
            raise ValueError(f"analysis.custom_weights: no weight for dimension(s) {missing}")
        neg = {k: v for k, v in custom.items() if v < 0}
        if neg:
            raise ValueError(f"analysis.custom_weights: weights must be >= 0, got {neg}")
        out["raw"] = out["dimension"].map(custom).astype(float)
    else:
        raise ValueError(f"weights mode must be rank_correlation, equal or custom, got {mode!r}")
    total = out.groupby("judge")["raw"].transform("sum")
    for judge in out.loc[total <= _EPS, "judge"].unique():
        warnings.warn(f"judge {judge!r}: all weights are 0; its weighted score is undefined", CubeWarning, stacklevel=2)
    out["weight"] = np.where(total > _EPS, out["raw"] / total.where(total > _EPS, 1.0), np.nan)
    return out[["judge", "dimension", "weight"]]


# ------------------------------------------------------------------------------ trimmed means
def trimmed_means(
    scores: pd.DataFrame, proportion: float = 0.1, question_ids: Iterable[Any] | None = None,
    paired: bool = True,
) -> pd.DataFrame:
    """`scipy.stats.trim_mean` of each judge's scores per set and dimension, cutting `proportion`
    per tail; optionally on a subset of questions.

    Unscored (NaN) items are excluded and counted (`n_unscored`). With `paired` (the default,
    METHOD.md), a judge's dimension uses only questions it scored in all three sets, so the
    bounds and the system are compared on the same questions; questions dropped because
    another set of theirs is unscored are counted in `n_unpaired`. Every (judge, set,
    dimension) of the scores gets a row, NaN when the subset leaves it no scores.

    Returns `judge, set, dimension, trimmed_mean, n, n_unscored, n_unpaired`."""
    validate_scores(scores)
    _single_system(scores, "scores")
    if not 0 <= proportion < 0.5:
        raise ValueError(f"trim proportion must be in [0, 0.5), got {proportion}")
    items = _per_item(scores)
    groups = items[["judge", "set", "dimension"]].drop_duplicates()
    if question_ids is not None:
        items = items[items["question_id"].isin(set(question_ids))]
    if paired:
        complete = items.pivot_table(index=["judge", "dimension", "question_id"], columns="set", values="score",
                                     aggfunc="first", dropna=False).reindex(columns=list(SETS))
        ok = complete.notna().all(axis=1).rename("paired_ok").reset_index()
        items = items.merge(ok[["judge", "dimension", "question_id", "paired_ok"]], how="left",
                            on=["judge", "dimension", "question_id"])
    else:
        items = items.assign(paired_ok=True)
    rows = []
    by_group = dict(tuple(items.groupby(["judge", "set", "dimension"], sort=False)))
    for judge, set_, dim in groups.itertuples(index=False):
        g = by_group.get((judge, set_, dim), items.iloc[:0])
        v = g["score"].to_numpy(float)
        keep = g["paired_ok"].fillna(False).to_numpy(bool) & ~np.isnan(v)
        tm = float(stats.trim_mean(v[keep], proportion)) if keep.any() else float("nan")
        rows.append({"judge": judge, "set": set_, "dimension": dim, "trimmed_mean": tm, "n": int(keep.sum()),
                     "n_unscored": int(np.isnan(v).sum()), "n_unpaired": int((~keep & ~np.isnan(v)).sum())})
    cols = ["judge", "set", "dimension", "trimmed_mean", "n", "n_unscored", "n_unpaired"]
    return _order(pd.DataFrame(rows, columns=cols), _dimension_order(scores["dimension"]))


def weighted_totals(trimmed: pd.DataFrame, weights: pd.DataFrame) -> pd.DataFrame:
    """`T[judge, set] = sum_d w_d TM[judge, set, d]` (paper Table 2's last column).

    A dimension of weight 0 contributes 0 whatever its trimmed mean; a weighted dimension
    without a trimmed mean makes T undefined (NaN), so W never mixes different dimensions."""
    m = trimmed.merge(weights, on=["judge", "dimension"], how="left")
    m["wtm"] = np.where(m["weight"] == 0, 0.0, m["weight"] * m["trimmed_mean"])
    out = m.groupby(["judge", "set"], as_index=False, sort=False).agg(
        weighted_total=("wtm", lambda s: s.sum(skipna=False)))
    return out


# ---------------------------------------------------------------------------- normalisation
def _normalise(rag: Any, zero: Any, full: Any) -> tuple[Any, Any]:
    rag, zero, full = (np.asarray(a, dtype=float) for a in (rag, zero, full))
    den = full - zero
    zero_den = np.abs(den) <= _EPS
    with np.errstate(divide="ignore", invalid="ignore"):
        n = np.where(zero_den, np.nan, 100.0 * (rag - zero) / np.where(zero_den, 1.0, den))
    return n, zero_den


def cube_scores(trimmed: pd.DataFrame, weights: pd.DataFrame, recall: float) -> pd.DataFrame:
    """Table 4: per judge, each dimension normalised between its bounds, the weighted score,
    R@k and the CuBE score, with flags for zero denominators and out-of-bounds values.

    Columns: one per dimension (0-100), `weighted_score`, `recall_at_k` (0-1), `cube_score`,
    `flag_zero_denominator`, `flag_out_of_bounds`, `flags` (text)."""
    require_columns(trimmed, ["judge", "set", "dimension", "trimmed_mean"], "trimmed_means")
    for s in SETS:
        if not (trimmed["set"] == s).any():
            raise SchemaError(f"trimmed_means: no '{s}' set; CuBE needs the zero, rag and full scoring sets")
    tm = trimmed.set_index(["judge", "dimension", "set"])["trimmed_mean"].unstack("set").reindex(columns=list(SETS))
    dims = list(dict.fromkeys(trimmed["dimension"]))
    totals = weighted_totals(trimmed, weights).set_index(["judge", "set"])["weighted_total"].unstack("set")
    totals = totals.reindex(columns=list(SETS))
    rows = []
    for judge in sorted(trimmed["judge"].unique()):
        row: dict[str, Any] = {"judge": judge}
        flags: list[str] = []
        for d in dims:
            t = tm.loc[(judge, d)] if (judge, d) in tm.index else pd.Series(dtype=float)
            n, zden = _normalise(t.get("rag", np.nan), t.get("zero", np.nan), t.get("full", np.nan))
            row[d] = float(n)
            if bool(zden):
                flags.append(f"{d}: zero denominator (full = zero)")
        t = totals.loc[judge]
        w, zden = _normalise(t["rag"], t["zero"], t["full"])
        row["weighted_score"] = float(w)
        if bool(zden):
            flags.append("weighted: zero denominator (full = zero)")
        elif not np.isfinite(w):
            flags.append("weighted: undefined (a weighted dimension has no trimmed mean in some set)")
        row["recall_at_k"] = float(recall)
        if float(recall) == 0.0:  # CuBE = W x R@k is 0 when nothing was retrieved, whatever W is
            row["cube_score"] = 0.0
            flags.append("nothing retrieved: R@k = 0, so CuBE = 0")
        else:
            row["cube_score"] = float(w) * float(recall)
        oob = [c for c in [*dims, "weighted_score"] if np.isfinite(row[c]) and not -_EPS <= row[c] <= 100 + 1e-9]
        flags += [f"{c}: outside [0, 100] ({row[c]:.1f})" for c in oob]
        row["flag_zero_denominator"] = any("zero denominator" in f or "undefined" in f for f in flags)
        row["flag_out_of_bounds"] = bool(oob)
        row["flags"] = "; ".join(flags)
        rows.append(row)
    for r in rows:
        if r["flags"]:
            warnings.warn(f"judge {r['judge']!r}: {r['flags']}", CubeWarning, stacklevel=2)
    return pd.DataFrame(rows).set_index("judge")


def jury_summary(cube_table: pd.DataFrame) -> pd.DataFrame:
    """Mean and SD (ddof = 1) across judges of every numeric column (Table 4's last row).

    Returns a frame indexed `mean`, `sd` (SD is NaN with a single judge)."""
    num = cube_table.select_dtypes(include="number").drop(
        columns=[c for c in cube_table if c.startswith("flag_")], errors="ignore"
    )
    return pd.DataFrame({"mean": num.mean(), "sd": num.std(ddof=1)}).T


def format_mean_sd(jury: pd.DataFrame, digits: int = 2) -> pd.Series:
    """`82.76 ± 4.50` strings from `jury_summary` output."""
    return pd.Series(
        {c: f"{jury.at['mean', c]:.{digits}f} ± {jury.at['sd', c]:.{digits}f}" for c in jury.columns}
    )


def judge_summary(scores: pd.DataFrame, set_: str | None = "rag") -> pd.DataFrame:
    """Paper Table 1: mean and SD (ddof = 1) per judge and dimension (of one set, default `rag`).

    Returns `judge, dimension, mean, sd, n, n_unscored`."""
    validate_scores(scores)
    items = _per_item(scores if set_ is None else scores[scores["set"] == set_])
    g = items.groupby(["judge", "dimension"], sort=True)["score"]
    out = g.agg(mean="mean", sd=lambda s: s.std(ddof=1), n="count").reset_index()
    out["n_unscored"] = g.apply(lambda s: int(s.isna().sum())).to_numpy()
    return _order(out, _dimension_order(scores["dimension"]))


# ------------------------------------------------------------------------------- composition
@dataclass
class CubeResult:
    """Everything one system's CuBE evaluation produces (paper Tables 1-4 and the intervals)."""

    system: str
    recall_at_k: float
    n_questions: int
    n_retrieved: int
    ranks: pd.DataFrame
    correlations_all: pd.DataFrame
    correlations_retrieved: pd.DataFrame
    weights: pd.DataFrame
    trimmed_means: pd.DataFrame
    weighted_totals: pd.DataFrame
    cube_table: pd.DataFrame
    jury: pd.DataFrame
    judge_summary: pd.DataFrame
    retrieved_summary: pd.DataFrame
    bootstrap: pd.DataFrame | None
    settings: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def jury_cube(self) -> float:
        return float(self.jury.at["mean", "cube_score"])

    def interval(self, judge: str = "jury", metric: str = "cube_score") -> tuple[float, float]:
        if self.bootstrap is None:
            return (float("nan"), float("nan"))
        row = self.bootstrap[(self.bootstrap["judge"] == judge) & (self.bootstrap["metric"] == metric)]
        return (float(row["lo"].iloc[0]), float(row["hi"].iloc[0])) if len(row) else (float("nan"),) * 2


def _known_retrieval(answers: pd.DataFrame, scores: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    """Drop questions whose retrieval outcome is unknown (`retrieval_ok` False on the rag row: the
    system call failed), so a failure never counts as a retrieval miss; warn with the count."""
    if "retrieval_ok" not in answers:
        return answers, scores, 0
    rag = answers[answers["set"] == "rag"]
    unknown = set(rag.loc[~rag["retrieval_ok"].fillna(False).astype(bool), "question_id"])
    if not unknown:
        return answers, scores, 0
    warnings.warn(f"{len(unknown)} question(s) left out: the system call failed, so whether it retrieved the "
                  "gold document is unknown (not counted as misses)", CubeWarning, stacklevel=3)
    return (answers[~answers["question_id"].isin(unknown)], scores[~scores["question_id"].isin(unknown)],
            len(unknown))


def evaluate(answers: pd.DataFrame, scores: pd.DataFrame, analysis_params: Any = None,
             top_n: int | None = None) -> CubeResult:
    """The whole CuBE computation for one system, so a notebook makes one call.

    `analysis_params` is a `cube.config.AnalysisParams` (defaults when None); `top_n` is the
    system's list length N for `rank_score` (params' `analysis.top_n` wins, default 8)."""
    from cube.bootstrap import bootstrap_cube
    from cube.config import AnalysisParams

    ap = analysis_params or AnalysisParams()
    n_top = ap.top_n or top_n or 8
    validate_answers(answers)
    validate_scores(scores)
    _single_system(answers, "answers")
    _single_system(scores, "scores")
    system = str(answers["system"].iloc[0]) if len(answers) else ""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CubeWarning)
        answers, scores, n_unknown = _known_retrieval(answers, scores)
        ranks = question_ranks(answers, n_top)
        recall = float(ranks["retrieved"].mean())
        corr_all = rank_correlations(scores, answers, "all", n_top)
        corr_ret = rank_correlations(scores, answers, "retrieved", n_top)
        weights = dimension_weights(corr_all, ap.weights, ap.custom_weights)
        qids = ranks.loc[ranks["retrieved"], "question_id"] if ap.subset == "retrieved" else None
        tm = trimmed_means(scores, ap.trim_proportion, qids, paired=ap.paired)
        table = cube_scores(tm, weights, recall)
    for w in caught:  # recorded in the result and still shown to the reader
        warnings.warn(w.message, CubeWarning, stacklevel=2)
    boot = None
    if ap.bootstrap > 0:
        boot = bootstrap_cube(answers, scores, n_resamples=ap.bootstrap, confidence=ap.confidence,
                              seed=ap.seed, proportion=ap.trim_proportion, subset=ap.subset,
                              weights=ap.weights, custom_weights=ap.custom_weights, top_n=n_top,
                              paired=ap.paired)
    retrieved_ids = set(ranks.loc[ranks["retrieved"], "question_id"])
    return CubeResult(
        system=system,
        recall_at_k=recall,
        n_questions=len(ranks),
        n_retrieved=int(ranks["retrieved"].sum()),
        ranks=ranks,
        correlations_all=corr_all,
        correlations_retrieved=corr_ret,
        weights=weights,
        trimmed_means=tm,
        weighted_totals=weighted_totals(tm, weights),
        cube_table=table,
        jury=jury_summary(table),
        judge_summary=judge_summary(scores),
        retrieved_summary=judge_summary(scores[scores["question_id"].isin(retrieved_ids)]),
        bootstrap=boot,
        settings={"trim_proportion": ap.trim_proportion, "subset": ap.subset, "weights": ap.weights,
                  "top_n": n_top, "bootstrap": ap.bootstrap, "confidence": ap.confidence, "paired": ap.paired,
                  "retrieval_unknown": n_unknown},
        warnings=[str(w.message) for w in caught],
    )


def evaluate_systems(answers: pd.DataFrame, scores: pd.DataFrame, analysis_params: Any = None,
                     top_n: Mapping[str, int] | int | None = None) -> dict[str, CubeResult]:
    """`evaluate` for every system of the tables (several systems or versions in one run)."""
    out = {}
    for system in sorted(answers["system"].dropna().unique()):
        n = top_n.get(system) if isinstance(top_n, Mapping) else top_n
        out[system] = evaluate(answers[answers["system"] == system], scores[scores["system"] == system],
                               analysis_params, n)
    return out


def sample_variance(scores: pd.DataFrame) -> pd.DataFrame:
    """Run-to-run variance of judges that scored each answer several times (`samples: n`).

    Per judge and dimension: `items` (answers scored), `samples` (most valid samples on one
    item), `items_compared` (items with >= 2 valid, i.e. non-NaN, samples: the only ones whose
    samples can agree or disagree), `items_single` (items with fewer: counted apart, never as
    agreeing), the mean within-item SD (ddof = 1) and the share of compared items whose samples
    disagree, both over the compared items only. No compared item (e.g. one sample per item)
    gives NaN SD and share: repeat the judgments to measure them."""
    validate_scores(scores)
    keys = ["question_id", "system", "set", "judge", "dimension"]
    s = scores.assign(score=pd.to_numeric(scores["score"], errors="coerce"))
    per_item = s.groupby(keys, sort=False)["score"].agg(samples="count", sd=lambda v: v.std(ddof=1))
    per_item = per_item.reset_index()
    per_item["compared"] = per_item["samples"] >= 2
    per_item.loc[~per_item["compared"], "sd"] = np.nan
    per_item["disagree"] = (per_item["sd"] > 0).astype(float).where(per_item["compared"])
    out = per_item.groupby(["judge", "dimension"]).agg(
        items=("samples", "size"), samples=("samples", "max"), items_compared=("compared", "sum"),
        mean_within_sd=("sd", "mean"), share_disagreeing=("disagree", "mean"),
    ).reset_index()
    out["items_single"] = out["items"] - out["items_compared"]
    out = out[["judge", "dimension", "items", "samples", "items_compared", "items_single", "mean_within_sd",
               "share_disagreeing"]]
    return _order(out, _dimension_order(out["dimension"]))
