"""The CuBE mathematics (docs/explanation/method.md) as pure functions on long-format DataFrames.

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
-> jury mean and SD (ddof = 1) across the judges that pass the validity gate (`cube.method.gate`).
Every function here is pure: no I/O, no state.

Scores are read on the full judge x set x dimension x question grid (`score_grid`), so an
absent row is NaN and counted like an unscored one; the rules for W, the zero range, inverted
bounds and the flags are in `cube.method.normalise`; retrieval figures come from one function,
`retrieval_outcomes`, which leaves out (and counts) questions whose system call failed.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy import stats

from cube.config.schema import SETS, SchemaError, known_retrieval, require_columns
from cube.config.sections import PAPER_DIMENSIONS

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
            f"{table}: column 'rank' must be an integer >= 0 (0 = not retrieved); bad rows "
            f"{list(bad[:5])}"
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
        raise SchemaError(
            f"{table}: 'score' must be a number in [0, 10] or NaN (unscored); bad rows: {rows}"
        )
    keys = ["question_id", "system", "set", "judge", "dimension"] + (
        ["sample"] if "sample" in scores else []
    )
    dup = scores.duplicated(keys, keep=False)
    if dup.any():
        rows = scores.loc[dup, keys].head(5).to_dict("records")
        raise SchemaError(f"{table}: duplicated {tuple(keys)} rows, e.g. {rows}")


def _check_sets(df: pd.DataFrame, table: str) -> None:
    bad = sorted(
        {str(x) for x in df["set"].unique()} - set(SETS)
    )  # unique() first: 293k rows at paper scale
    if bad:
        raise SchemaError(f"{table}: unknown set name(s) {bad}; expected one of {list(SETS)}")


def single_system(df: pd.DataFrame, table: str) -> None:
    systems = df["system"].dropna().unique()
    if len(systems) > 1:
        raise SchemaError(
            f"{table}: holds {len(systems)} systems {sorted(map(str, systems))}; filter to one "
            "system (e.g. df[df.system == name]) or use evaluate_systems()"
        )


# ----------------------------------------------------------------------------------------- rank
def rank_score(rank: int, n_retrieved: int, top_n: int = 8) -> int:
    """The paper's rank transform: `(top_n + 2) - rank`, `top_n + 2` for the gold document
    retrieved alone, 0 when not retrieved (N = 8: ranks 1..8 -> 9..2, alone -> 10)."""
    rank, n_retrieved = int(rank), int(n_retrieved)
    if rank < 0:
        raise ValueError(f"rank must be >= 0 (0 = not retrieved), got {rank}")
    if rank == 0:
        return 0
    if rank > top_n:
        raise ValueError(
            f"rank {rank} exceeds top_n {top_n}: set analysis.top_n to the system's list length"
        )
    if rank > n_retrieved:
        raise ValueError(f"rank {rank} exceeds the number of retrieved documents {n_retrieved}")
    if n_retrieved == 1:
        return top_n + 2
    return top_n + 2 - rank


def question_ranks(answers: pd.DataFrame, top_n: int = 8) -> pd.DataFrame:
    """One row per question of the `rag` set: `question_id, rank, n_retrieved,
    retrieved, rank_score`."""
    validate_answers(answers)
    single_system(answers, "answers")
    rag = answers[answers["set"] == "rag"]
    if rag.empty:
        raise SchemaError("answers: no 'rag' rows (the system under test's answers)")
    out = pd.DataFrame(
        {"question_id": rag["question_id"].to_numpy(), "rank": rag["rank"].astype(int).to_numpy()}
    )
    if "n_retrieved" in rag:
        n = pd.to_numeric(rag["n_retrieved"], errors="coerce").fillna(top_n).astype(int).to_numpy()
    elif "retrieved_doc_ids" in rag:
        n = rag["retrieved_doc_ids"].map(lambda x: len(x) if x is not None else 0).to_numpy()
    else:
        n = np.full(len(rag), top_n)
    out["n_retrieved"] = n
    out["retrieved"] = out["rank"] > 0
    out["rank_score"] = [
        rank_score(r, k, top_n) for r, k in zip(out["rank"], out["n_retrieved"], strict=True)
    ]
    return out


@dataclass
class RetrievalOutcomes:
    """What one system retrieved, for every table, figure and the decision (one R@k everywhere).

    `ranks`: one row per question whose retrieval outcome is known (`question_ranks` columns);
    `unknown`: question ids left out because the system call failed (`retrieval_ok` False on
    the rag row), so a failure is never counted as a retrieval miss; `failed`: those of them whose
    rag row records an error (the call failed), the others' retrieval could not be told (a tie among
    near-duplicates: `cube.systems.retrieved.undetermined`)."""

    ranks: pd.DataFrame
    unknown: list[Any]
    top_n: int
    failed: list[Any] = field(default_factory=list)

    @property
    def n_failed(self) -> int:
        return len(self.failed)

    @property
    def n_unknown(self) -> int:
        return len(self.unknown)

    def recall(self, k: int | None = None) -> float:
        """R@k over the known questions (any rank when k is None); NaN when none is known."""
        rank = self.ranks["rank"]
        if rank.empty:
            return float("nan")
        hit = rank > 0 if k is None else (rank > 0) & (rank <= k)
        return float(hit.mean())


def retrieval_outcomes(answers: pd.DataFrame, top_n: int = 8) -> RetrievalOutcomes:
    """The one source of retrieval figures: per-question rank of the rag set, without the
    questions whose system call failed (counted in `unknown`)."""
    validate_answers(answers)
    single_system(answers, "answers")
    rag = answers[answers["set"] == "rag"]
    if rag.empty:
        raise SchemaError("answers: no 'rag' rows (the system under test's answers)")
    unknown: list[Any] = []
    failed: list[Any] = []
    if "retrieval_ok" in rag:
        bad = ~known_retrieval(rag)
        unknown = sorted(set(rag.loc[bad, "question_id"]), key=str)
        errors = rag["error"].fillna("").astype(str) if "error" in rag else pd.Series("", rag.index)
        failed = sorted(set(rag.loc[bad & errors.ne(""), "question_id"]), key=str)
        rag = rag[~bad]
    if rag.empty:
        # typed, so a filter on `retrieved` stays a row filter (an empty object column would be
        # read as a list of column labels and drop every column)
        ranks = pd.DataFrame(
            {
                "question_id": pd.Series([], dtype=object),
                "rank": pd.Series([], dtype="int64"),
                "n_retrieved": pd.Series([], dtype="int64"),
                "retrieved": pd.Series([], dtype=bool),
                "rank_score": pd.Series([], dtype=float),
            }
        )
    else:
        ranks = question_ranks(rag, top_n)
    return RetrievalOutcomes(ranks, unknown, top_n, failed)


def recall_at_k(answers: pd.DataFrame, k: int | None = None, top_n: int | None = None) -> float:
    """R@k: share of questions (with a known retrieval outcome) whose gold document the system
    retrieved (rank 1..k; any rank if k is None)."""
    validate_answers(answers)
    rank = pd.to_numeric(answers.loc[answers["set"] == "rag", "rank"]).astype(int)
    if rank.empty:
        raise SchemaError("answers: no 'rag' rows to compute R@k from")
    return retrieval_outcomes(answers, top_n or max(int(rank.max()), k or 1, 1)).recall(k)


# --------------------------------------------------------------------------------- correlations
def _per_item(scores: pd.DataFrame) -> pd.DataFrame:
    """Average repeated samples: one score per (question, system, set, judge, dimension);
    NaN kept."""
    keys = ["question_id", "system", "set", "judge", "dimension"]
    s = scores[keys + ["score"]].copy()
    s["score"] = pd.to_numeric(s["score"], errors="coerce").astype(float)
    return s.groupby(keys, as_index=False, sort=False, dropna=False)["score"].mean()


def score_grid(
    scores: pd.DataFrame,
    *,
    judges: Iterable[Any] | None = None,
    dimensions: Iterable[str] | None = None,
    questions: Iterable[Any] | None = None,
) -> pd.DataFrame:
    """Per-item scores of one system reindexed to the full judge x set x dimension x question
    grid, so an absent row is NaN and counted like an unscored one.

    The grid's judges, dimensions and questions are the given ones plus any in `scores`
    (questions: only the given ones when given, e.g. the rag questions of known retrieval).
    Returns `judge, set, dimension, question_id, score`."""
    return _grid_of(_per_item(scores), judges, dimensions, questions)


def _grid_of(
    items: pd.DataFrame,
    judges: Iterable[Any] | None,
    dimensions: Iterable[str] | None,
    questions: Iterable[Any] | None,
) -> pd.DataFrame:
    """`score_grid` of the per-item scores (`_per_item`)."""
    js = list(dict.fromkeys([*(judges or []), *sorted(items["judge"].unique(), key=str)]))
    ds = dimension_order([*(dimensions or []), *items["dimension"].unique()])
    qs = (
        list(dict.fromkeys(questions))
        if questions is not None
        else sorted(items["question_id"].unique(), key=str)
    )
    keys = ["judge", "set", "dimension", "question_id"]
    idx = pd.MultiIndex.from_product([js, list(SETS), ds, qs], names=keys)
    grid = items.set_index(keys)["score"]
    grid = grid[grid.index.isin(idx)].reindex(idx)
    return grid.reset_index()


def dimension_order(dimensions: Iterable[str]) -> list[str]:
    """The paper's four in the paper's order, then any custom dimension alphabetically
    (independent of row order, so shuffled inputs give identical tables)."""
    present = set(dimensions.unique() if isinstance(dimensions, pd.Series) else dimensions)
    return [d for d in PAPER_DIMENSIONS if d in present] + sorted(present - set(PAPER_DIMENSIONS))


def _order(df: pd.DataFrame, dims: list[str]) -> pd.DataFrame:
    """Rows by judge, then set (zero, rag, full), then dimension in the order the input gave."""
    keys = ["judge"] + (["set"] if "set" in df else []) + ["dimension"]
    rank = {
        "set": {s: i for i, s in enumerate(SETS)}.get,
        "dimension": {d: i for i, d in enumerate(dims)}.get,
    }
    return df.sort_values(
        keys, key=lambda s: s.map(rank[s.name]) if s.name in rank else s, kind="stable"
    ).reset_index(drop=True)


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
    judges: Iterable[Any] | None = None,
    dimensions: Iterable[str] | None = None,
) -> pd.DataFrame:
    """Pearson r between `rank_score` (or a custom `answers` column) and each dimension's
    score on the `rag` scoring set, per judge. `subset='retrieved'` keeps questions with rank > 0.

    Every judge (of `scores` and `judges`) gets a row per dimension (of `scores` and
    `dimensions`, the configured ones), with n = 0 and r NaN when it has no scores, so absent
    rows give what NaN rows give. Returns columns `judge, dimension, r, p_value, n` (r is NaN when a
    side is constant or n < 3)."""
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
    return correlations_of(
        rag_items(scores),
        ranks,
        against,
        sorted({*(judges or []), *scores["judge"].unique()}, key=str),
        dimension_order([*(dimensions or []), *scores["dimension"].unique()]),
    )


def rag_items_and_grid(
    scores: pd.DataFrame,
    *,
    judges: Iterable[Any] | None = None,
    dimensions: Iterable[str] | None = None,
    questions: Iterable[Any] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`rag_items(scores)` and `score_grid(scores, ...)` from one per-item table (each makes its
    own otherwise): the rag set's per-item rows are the whole table's rows of the rag set, in the
    same order (a grouping in order of appearance puts a rag item where its first rag row is
    either way) with the same means (the same rows, in the same order)."""
    items = _per_item(scores)
    rag = items[items["set"] == "rag"].reset_index(drop=True)
    if rag.empty:  # an empty table's column types are the grouping's own: made as rag_items does
        rag = rag_items(scores)
    return rag, _grid_of(items, judges, dimensions, questions)


def rag_items(scores: pd.DataFrame) -> pd.DataFrame:
    """The per-item scores (`_per_item`) of the `rag` scoring set: what the correlations with rank
    and Table 1 read (`cube.method.evaluation.evaluate` makes it once for all four)."""
    return _per_item(scores[scores["set"] == "rag"])


def correlations_of(
    items: pd.DataFrame,
    ranks: pd.DataFrame,
    against: str,
    all_judges: list[Any],
    all_dims: list[str],
) -> pd.DataFrame:
    """`rank_correlations` of validated inputs: `items` the rag set's per-item scores
    (`rag_items`), `ranks` the questions kept with their `against` column, every judge and
    dimension given. Each pair's questions are taken by position, in the rows' order (as a
    group of `groupby` keeps them), so r is the same to the last bit as on the group's frame."""
    merged = items.merge(ranks[["question_id", against]], on="question_id")
    x = merged[against].to_numpy(float)
    y = merged["score"].to_numpy(float)
    scored = ~np.isnan(x) & ~np.isnan(y)
    positions = merged.groupby(["judge", "dimension"], sort=True).indices if len(merged) else {}
    none = np.empty(0, dtype=np.intp)
    rows = []
    for judge in all_judges:
        for dim in all_dims:
            at = positions.get((judge, dim), none)
            at = at[scored[at]]
            r, p = _pearson(x[at], y[at])
            rows.append({"judge": judge, "dimension": dim, "r": r, "p_value": p, "n": len(at)})
    out = pd.DataFrame(rows, columns=["judge", "dimension", "r", "p_value", "n"])
    return _order(out, all_dims)


def dimension_weights(
    correlations: pd.DataFrame,
    mode: Literal["rank_correlation", "equal", "custom"] = "rank_correlation",
    custom: Mapping[str, float] | None = None,
    fallback: Literal["none", "equal"] = "none",
) -> pd.DataFrame:
    """Weights per judge and dimension, summing to 1 per judge.

    `rank_correlation`: `w_d = r_d / sum(r)`, where a negative or undefined r counts as 0
    (with a `CubeWarning`); `equal`: 1/D; `custom`: the given weights, normalised. When all of
    a judge's weights are 0 they are undefined (NaN, so W is NaN), unless `fallback='equal'`
    (`analysis.weights_fallback`): then 1/D, with a warning."""
    require_columns(correlations, ["judge", "dimension"], "correlations")
    out = correlations[["judge", "dimension"]].copy()
    if mode == "rank_correlation":
        out["raw"] = _rank_weights(correlations)
    elif mode == "equal":
        out["raw"] = 1.0
    elif mode == "custom":
        _check_custom(out, custom)
        out["raw"] = out["dimension"].map(custom).astype(float)
    else:
        raise ValueError(f"weights mode must be rank_correlation, equal or custom, got {mode!r}")
    total = out.groupby("judge")["raw"].transform("sum")
    _warn_all_zero(out.loc[total <= _EPS, "judge"].unique(), fallback)
    if fallback == "equal":
        out["raw"] = np.where(total <= _EPS, 1.0, out["raw"])
        total = out.groupby("judge")["raw"].transform("sum")
    out["weight"] = np.where(total > _EPS, out["raw"] / total.where(total > _EPS, 1.0), np.nan)
    return out[["judge", "dimension", "weight"]]


def _rank_weights(correlations: pd.DataFrame) -> pd.Series:
    """The raw weights r, a negative or undefined r as 0 (with a warning each)."""
    require_columns(correlations, ["r"], "correlations")
    r = correlations["r"].astype(float)
    bad = r.isna() | (r < 0)
    for _, row in correlations[bad].iterrows():
        warnings.warn(
            f"judge {row['judge']!r}, dimension {row['dimension']!r}: correlation with rank is "
            f"{row['r']:.3f}; its weight is set to 0",
            CubeWarning,
            stacklevel=3,
        )
    return r.where(~bad, 0.0)


def _check_custom(out: pd.DataFrame, custom: Mapping[str, float] | None) -> None:
    """Custom weights are given, for every dimension, and none is negative."""
    if not custom:
        raise ValueError("custom weights requested but none given (analysis.custom_weights)")
    missing = sorted(set(out["dimension"]) - set(custom))
    if missing:
        raise ValueError(f"analysis.custom_weights: no weight for dimension(s) {missing}")
    neg = {k: v for k, v in custom.items() if v < 0}
    if neg:
        raise ValueError(f"analysis.custom_weights: weights must be >= 0, got {neg}")


def _warn_all_zero(judges: Iterable[Any], fallback: str) -> None:
    """A warning per judge whose weights are all 0: equal weights used, or W undefined."""
    for judge in judges:
        if fallback == "equal":
            what = "equal weights used (analysis.weights_fallback)"
        else:
            what = "its weighted score is undefined"
        warnings.warn(f"judge {judge!r}: all weights are 0; {what}", CubeWarning, stacklevel=3)


# ------------------------------------------------------------------------------ trimmed means
def trimmed_means(
    scores: pd.DataFrame,
    proportion: float = 0.1,
    question_ids: Iterable[Any] | None = None,
    paired: bool = True,
    *,
    questions: Iterable[Any] | None = None,
    judges: Iterable[Any] | None = None,
    dimensions: Iterable[str] | None = None,
) -> pd.DataFrame:
    """`scipy.stats.trim_mean` of each judge's scores per set and dimension, cutting `proportion`
    per tail; optionally on a subset of questions (`question_ids`).

    The scores are first reindexed to the full grid (`score_grid`: judges x sets x dimensions
    x `questions`), so an absent row is NaN exactly like an unscored one: both are excluded
    and counted (`n_unscored`). With `paired` (the default, docs/explanation/method.md), a judge's
    dimension uses only questions it scored in all three sets, so the bounds and the system are
    compared on the same questions; questions dropped because another set of theirs is unscored are
    counted in `n_unpaired`. Every (judge, set, dimension) gets a row, NaN when nothing is left.

    Returns `judge, set, dimension, trimmed_mean, n, n_unscored, n_unpaired`."""
    validate_scores(scores)
    single_system(scores, "scores")
    if not 0 <= proportion < 0.5:
        raise ValueError(f"trim proportion must be in [0, 0.5), got {proportion}")
    grid = score_grid(scores, judges=judges, dimensions=dimensions, questions=questions)
    return trimmed_means_of_grid(grid, scores, proportion, question_ids, paired, dimensions)


def trimmed_means_of_grid(
    grid: pd.DataFrame,
    scores: pd.DataFrame,
    proportion: float,
    question_ids: Iterable[Any] | None,
    paired: bool,
    dimensions: Iterable[str] | None,
) -> pd.DataFrame:
    """`trimmed_means` on its score grid (`score_grid` of the validated `scores`, which name the
    judges and dimensions when the grid is empty)."""
    if question_ids is not None:
        grid = grid[grid["question_id"].isin(set(question_ids))]
    cube = grid.set_index(["judge", "dimension", "question_id", "set"])["score"].unstack("set")
    cube = cube.reindex(columns=list(SETS))
    ok = cube.notna().all(axis=1).to_numpy() if paired else np.ones(len(cube), dtype=bool)
    judges_all, dims = _grid_axes(grid, scores, dimensions)
    # positions of each (judge, dimension)'s questions: one lookup, not a label lookup per row
    at = cube.groupby(level=["judge", "dimension"], sort=False).indices if len(cube) else {}
    values = {set_: cube[set_].to_numpy(float) for set_ in SETS}
    rows = [
        _trimmed_row(judge, set_, dim, at.get((judge, dim)), values[set_], ok, proportion)
        for judge in judges_all
        for dim in dims
        for set_ in SETS
    ]
    cols = ["judge", "set", "dimension", "trimmed_mean", "n", "n_unscored", "n_unpaired"]
    return _order(pd.DataFrame(rows, columns=cols), dims)


def _grid_axes(
    grid: pd.DataFrame, scores: pd.DataFrame, dimensions: Iterable[str] | None
) -> tuple[list[Any], list[str]]:
    """The judges (in order of appearance: unique(), a Python loop over the rows was slow) and the
    dimensions of the grid; of the scores and the configured dimensions when it is empty."""
    if len(grid):
        return list(grid["judge"].unique()), dimension_order(grid["dimension"].unique())
    judges = sorted(scores["judge"].unique(), key=str)
    return judges, list(dict.fromkeys(dimensions or scores["dimension"]))


def _trimmed_row(
    judge: Any,
    set_: str,
    dim: str,
    at: np.ndarray | None,
    values: np.ndarray,
    ok: np.ndarray,
    proportion: float,
) -> dict[str, Any]:
    """One (judge, set, dimension)'s trimmed mean over the kept questions (scored, and paired
    when `ok` says so) with the counts; NaN and zeros without any score row. `at`: the positions
    of its questions in `values` (the set's column of the unstacked grid) and `ok`."""
    row = {"judge": judge, "set": set_, "dimension": dim}
    if at is None:
        return {**row, "trimmed_mean": float("nan"), "n": 0, "n_unscored": 0, "n_unpaired": 0}
    v = values[at]
    keep = ok[at] & ~np.isnan(v)
    tm = float(stats.trim_mean(v[keep], proportion)) if keep.any() else float("nan")
    return {
        **row,
        "trimmed_mean": tm,
        "n": int(keep.sum()),
        "n_unscored": int(np.isnan(v).sum()),
        "n_unpaired": int((~keep & ~np.isnan(v)).sum()),
    }


JURY_W_METRICS = (
    "weighted_score",
    "cube_score",
)  # undefined for the jury when a member's W is noise


def jury_summary(cube_table: pd.DataFrame) -> pd.DataFrame:
    """Mean and SD (ddof = 1) across judges of every numeric column (Table 4's last row),
    over the judges that passed the validity gate when the table has an `in_jury` column.

    A column undefined (NaN) for a member of the jury is undefined for the jury (issue 20): the
    mean of the others would be reported as the whole jury's (`n_judges` judges) when fewer stand
    behind it, and the decision's weakest dimensions read these means. W and CuBE are undefined
    for the jury when a member kept by the gate has `gate_w_unusable` (its W is noise: the
    per-judge values stay in the cube table, the cause in its `gate_withhold` / `gate_evidence`).

    Returns a frame indexed `mean`, `sd` (SD is NaN with a single judge, everything NaN with
    none), with `n_judges`: how many judges the mean averages."""
    table = (
        cube_table[cube_table["in_jury"].astype(bool)] if "in_jury" in cube_table else cube_table
    )
    skip = [
        c
        for c in cube_table
        if c.startswith(("flag_", "gate_"))
        or c in ("failure_rate", "judging_failed", "content_blind")
    ]
    num = table.select_dtypes(include="number").drop(columns=skip, errors="ignore")
    out = pd.DataFrame({"mean": num.mean(skipna=False), "sd": num.std(ddof=1, skipna=False)}).T
    if "gate_w_unusable" in table and table["gate_w_unusable"].fillna(False).astype(bool).any():
        # a kept member's W fails rule (f) for a cause that is not the judge's (noise weights, too
        # few questions): that W is noise, so the jury's W and CuBE are undefined, never a mean of
        # it
        out.loc[["mean", "sd"], [c for c in JURY_W_METRICS if c in out]] = np.nan
    out["n_judges"] = [len(table), np.nan]
    return out


def judge_summary(scores: pd.DataFrame, set_: str | None = "rag") -> pd.DataFrame:
    """Paper Table 1: mean and SD (ddof = 1) per judge and dimension (of one set, default `rag`).

    Returns `judge, dimension, mean, sd, n, n_unscored`."""
    validate_scores(scores)
    items = _per_item(scores if set_ is None else scores[scores["set"] == set_])
    return summary_of(items, dimension_order(scores["dimension"]))


def summary_of(items: pd.DataFrame, dims: list[str]) -> pd.DataFrame:
    """`judge_summary` of per-item scores (`_per_item` of one set), rows in `dims`' order."""
    g = items.groupby(["judge", "dimension"], sort=True)["score"]
    out = g.agg(mean="mean", sd=lambda s: s.std(ddof=1), n="count").reset_index()
    out["n_unscored"] = (g.size() - g.count()).to_numpy()  # the rows without a score
    return _order(out, dims)


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
    grouped = s.groupby(keys, sort=False)["score"]
    per_item = grouped.count().rename("samples").to_frame()
    # The SD only where an item has two valid samples (else it is NaN below anyway): with one
    # sample per judgment, the usual case, no per-item Python call is made.
    several = s[grouped.transform("count") >= 2]
    sd = (
        several.groupby(keys, sort=False)["score"].agg(lambda v: v.std(ddof=1))
        if len(several)
        else None
    )
    per_item["sd"] = sd.reindex(per_item.index) if sd is not None else np.nan
    per_item = per_item.reset_index()
    per_item["compared"] = per_item["samples"] >= 2
    per_item.loc[~per_item["compared"], "sd"] = np.nan
    per_item["disagree"] = (per_item["sd"] > 0).astype(float).where(per_item["compared"])
    out = (
        per_item.groupby(["judge", "dimension"])
        .agg(
            items=("samples", "size"),
            samples=("samples", "max"),
            items_compared=("compared", "sum"),
            mean_within_sd=("sd", "mean"),
            share_disagreeing=("disagree", "mean"),
        )
        .reset_index()
    )
    out["items_single"] = out["items"] - out["items_compared"]
    out = out[
        [
            "judge",
            "dimension",
            "items",
            "samples",
            "items_compared",
            "items_single",
            "mean_within_sd",
            "share_disagreeing",
        ]
    ]
    return _order(out, dimension_order(out["dimension"]))


P_FLOOR = 1e-4  # a p-value below it is printed as "< 0.0001", never as 1.7e-53


def format_p(p: Any) -> str:
    """A p-value as the report prints it (the one formatter: `cube.pages.display.format_p` is this
    function): "< 0.0001" below `P_FLOOR` (a smaller p says no more, and 1.7e-53 reads as a
    precision the test does not have), 4 decimals below 0.001, else 3; "n/a" when missing."""
    try:
        v = float(p)
    except (TypeError, ValueError):
        return "n/a"
    if v != v:
        return "n/a"
    if v < P_FLOOR:
        return "< 0.0001"
    return f"{v:.4f}" if v < 0.001 else f"{v:.3f}"


def p_is(p: Any) -> str:
    """A p-value after its name in a sentence: "= 0.012", "< 0.0001" (never "p = < 0.0001")."""
    text = format_p(p)
    return text if text.startswith("<") else f"= {text}"
