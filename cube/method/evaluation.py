"""One system's whole CuBE evaluation (`evaluate`) and its result (`CubeResult`).

Re-exported by `cube.method.analysis`, whose pure functions it composes: retrieval outcomes, the
score grid, correlations and weights, trimmed means, `cube.method.normalise` (N_d, W and the flags),
the judge validity gate (`cube.method.gate`), the jury and the bootstrap.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from cube.method.analysis import (
    CubeWarning,
    correlations_of,
    dimension_order,
    dimension_weights,
    judge_summary,
    jury_summary,
    rag_items_and_grid,
    retrieval_outcomes,
    score_grid,
    single_system,
    summary_of,
    trimmed_means_of_grid,
    validate_answers,
    validate_scores,
)
from cube.method.gate import made_items
from cube.method.normalise import (
    FLAG_COLUMNS,
    cube_scores_with_flags,
    effective_weight_table,
    trimmed_wide,
    weighted_totals,
)


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
    flags: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=FLAG_COLUMNS))
    unknown_retrieval: list[Any] = field(default_factory=list)
    # the resampling unit and the design effect of the families (`cube.method.design`)
    design: dict[str, Any] = field(default_factory=dict)
    # question id -> resampling unit the intervals used (None: each question its own), so the
    # human-calibrated interval (`cube.method.ppi.calibrate_systems`) resamples the same units
    clusters: dict[Any, Any] | None = None

    def jury_cube(self) -> float:
        return float(self.jury.at["mean", "cube_score"])

    @property
    def jury_judges(self) -> list[str]:
        """The judges the jury mean averages (those that passed the validity gate)."""
        return jury_judges_of(self.cube_table)

    @property
    def excluded_judges(self) -> dict[str, str]:
        """Judges left out of the jury, with the reason."""
        return excluded_judges_of(self.cube_table)

    def interval(self, judge: str = "jury", metric: str = "cube_score") -> tuple[float, float]:
        if self.bootstrap is None:
            return (float("nan"), float("nan"))
        row = self.bootstrap[
            (self.bootstrap["judge"] == judge) & (self.bootstrap["metric"] == metric)
        ]
        return (
            (float(row["lo"].iloc[0]), float(row["hi"].iloc[0]))
            if len(row)
            else (float("nan"),) * 2
        )


def w_interval_note(n_retrieved: int) -> str:
    """The warning on W's interval below `MIN_RETRIEVED_FOR_W` retrieved questions (issue 30)."""
    from cube.method.bootstrap import MIN_RETRIEVED_FOR_W

    return (
        f"W's interval rests on only {n_retrieved} questions with the gold document retrieved "
        f"(fewer than {MIN_RETRIEVED_FOR_W}): in simulation, intervals on 6-8 retrieved questions "
        "covered 89-93 % instead of 95 %; read it as approximate"
    )


def _undefined_jury_interval(boot: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """The jury's W and CuBE intervals are undefined when `jury_summary` leaves the jury's W and
    CuBE undefined (a kept member's W is noise): resamples of a mean over noise are no interval."""
    from cube.method.analysis import JURY_W_METRICS

    member = table["in_jury"].astype(bool) & table["gate_w_unusable"].fillna(False).astype(bool)
    if not member.any():
        return boot
    boot = boot.copy()
    rows = (boot["judge"] == "jury") & boot["metric"].isin(JURY_W_METRICS)
    boot.loc[rows, [c for c in ("estimate", "lo", "hi") if c in boot]] = np.nan
    return boot


def weight_causes(ranks: pd.DataFrame, correlations: pd.DataFrame) -> dict[str, str]:
    """Why a judge's rank-correlation weights are all undefined (no positive r), one line
    per judge."""
    out: dict[str, str] = {}
    undefined = correlations.groupby("judge")["r"].apply(lambda r: not (r.fillna(0) > 0).any())
    n = len(ranks)
    rs = ranks["rank_score"]
    for judge in undefined.index[undefined]:
        c = correlations[correlations["judge"] == judge]
        if n < 3:
            out[str(judge)] = f"too few questions ({n}; a correlation with rank needs at least 3)"
        elif rs.nunique() <= 1:
            what = (
                "no gold document retrieved"
                if rs.iloc[0] == 0
                else f"every gold document at rank {ranks['rank'].iloc[0]}"
            )
            out[str(judge)] = (
                f"rank_score is constant ({rs.iloc[0]:g} for all {n} questions: {what}), so no "
                "correlation with rank exists"
            )
        elif (c["n"] == 0).all():
            out[str(judge)] = f"judge {judge} has no scores on the rag set"
        elif c["r"].isna().all():
            out[str(judge)] = (
                "every dimension's rag-set score is constant or has fewer than 3 scored questions"
            )
        else:
            rs_txt = ", ".join(
                f"{d} r = {r:.2f}" if np.isfinite(r) else f"{d} r undefined"
                for d, r in zip(c["dimension"], c["r"], strict=True)
            )
            out[str(judge)] = f"every correlation with rank is <= 0 or undefined ({rs_txt})"
    return out


def jury_judges_of(table: pd.DataFrame) -> list[str]:
    """The judges a CuBE table's jury averages (`CubeResult.jury_judges`)."""
    t = table
    return [str(j) for j in (t.index[t["in_jury"].astype(bool)] if "in_jury" in t else t.index)]


def excluded_judges_of(table: pd.DataFrame) -> dict[str, str]:
    """The judges a CuBE table leaves out of the jury, with the reason."""
    t = table
    if "in_jury" not in t:
        return {}
    return {str(j): str(t.at[j, "excluded_reason"]) for j in t.index[~t["in_jury"].astype(bool)]}


def judge_verdicts(
    answers: pd.DataFrame,
    scores: pd.DataFrame,
    analysis_params: Any = None,
    top_n: int | None = None,
    *,
    judges: Sequence[str] | None = None,
    dimensions: Sequence[str] | None = None,
) -> pd.DataFrame:
    """`evaluate(...).cube_table` without what the table does not read (the correlations on the
    retrieved questions, the summaries, the design effect, the intervals): the gate's verdicts
    for a caller that reads only them (`cube.method.compare`, for its jury). Warnings are
    raised, not recorded; no audit or twins."""
    return gate_verdicts(
        answers, scores, analysis_params, top_n, judges=judges, dimensions=dimensions
    ).table


class Verdicts(NamedTuple):
    """`gate_verdicts`: the CuBE table with the gate's verdicts, and the score grid and retrieval
    ranks it rests on (both None when no question has a known retrieval outcome)."""

    table: pd.DataFrame
    grid: pd.DataFrame | None
    ranks: pd.DataFrame | None


def gate_verdicts(
    answers: pd.DataFrame,
    scores: pd.DataFrame,
    analysis_params: Any = None,
    top_n: int | None = None,
    *,
    judges: Sequence[str] | None = None,
    dimensions: Sequence[str] | None = None,
) -> Verdicts:
    """`judge_verdicts` with the score grid (of the configured judges and dimensions, on the
    questions of known retrieval) and the ranks it made, which a caller resampling the same
    tables reads instead of making them again (`cube.method.bootstrap.prepare`'s `grid` and
    `ranks`: `cube.method.compare`)."""
    ap = _checked_params(analysis_params)
    n_top = ap.top_n or top_n or 8
    _checked_system(answers, scores)
    judge_names = _judge_names(judges, scores)
    outcomes = retrieval_outcomes(answers, n_top)
    if _every_retrieval_unknown(outcomes.ranks, outcomes):
        table = evaluate(answers, scores, ap, top_n, judges=judges, dimensions=dimensions)
        return Verdicts(table.cube_table, None, None)
    known_answers, known_scores = _without_unknown_retrieval(answers, scores, outcomes)
    g = _gated(
        known_answers,
        known_scores,
        ap,
        outcomes.ranks,
        outcomes.recall(),
        (judge_names, dimensions),
        (None, 10, None),
        retrieved_correlations=False,
    )
    return Verdicts(g.table, g.grid, outcomes.ranks)


def evaluate(
    answers: pd.DataFrame,
    scores: pd.DataFrame,
    analysis_params: Any = None,
    top_n: int | None = None,
    *,
    judges: Sequence[str] | None = None,
    dimensions: Sequence[str] | None = None,
    audit: pd.DataFrame | None = None,
    audit_min_pairs: int = 10,
    clusters: Mapping[Any, Any] | None = None,
    twins: pd.DataFrame | None = None,
) -> CubeResult:
    """The whole CuBE computation for one system, so a notebook makes one call.

    `analysis_params` is a `cube.config.params.AnalysisParams` (defaults when None); `top_n` is the
    system's list length N for `rank_score` (params' `analysis.top_n` wins, default 8).
    `judges` / `dimensions`: the configured ones, so a judge or dimension without any score row
    still gets its (NaN, flagged) rows. Scores are read on the full judge x set x dimension x
    question grid (questions: the rag questions of known retrieval outcome), so absent rows
    count as unscored; each judge then passes or fails the validity gate (`cube.method.gate`), which
    reads the judge audit's probe scores when given (`audit`: the input of `cube.method.audit`;
    None: the audit did not run, and the gate says so). `clusters`: question id -> family (the
    corpus `family_id` of its gold document, `cube.run.evaluate.question_families`); the
    bootstrap resamples families when `analysis.cluster` is `family` (a question without one is
    its own unit; None: every question is), and `design` reports the families' design effect.
    `twins`: the ablation twins' summary per judge (`cube.method.injection.twin_summary`, over every
    system's flagged answers; None: no answer was flagged or the twins were not judged)."""
    return _evaluation(
        answers,
        scores,
        analysis_params,
        top_n,
        (judges, dimensions),
        (audit, audit_min_pairs, twins),
        clusters,
    )


def intervals_alone(result: CubeResult, analysis_params: Any = None) -> bool:
    """Whether `with_intervals` adds only the intervals to `result` (else it evaluates in full, and
    reads the audit and the twins): a bootstrap asked for, a question of known retrieval, and not
    3 to `MIN_RETRIEVED_FOR_W` retrieved questions (W's warning, raised among the others)."""
    from cube.method.bootstrap import MIN_RETRIEVED_FOR_W

    ap = _checked_params(analysis_params)
    retrieved = len(set(result.ranks.loc[result.ranks["retrieved"], "question_id"]))
    return bool(ap.bootstrap > 0 and not result.ranks.empty) and not (
        3 <= retrieved < MIN_RETRIEVED_FOR_W
    )


def with_intervals(
    result: CubeResult,
    answers: pd.DataFrame,
    scores: pd.DataFrame,
    analysis_params: Any = None,
    top_n: int | None = None,
    *,
    judges: Sequence[str] | None = None,
    dimensions: Sequence[str] | None = None,
    audit: pd.DataFrame | None = None,
    audit_min_pairs: int = 10,
    clusters: Mapping[Any, Any] | None = None,
    twins: pd.DataFrame | None = None,
) -> CubeResult:
    """`evaluate` of the same inputs, from `result`: their `evaluate` with `analysis.bootstrap` 0
    (every other setting the same), to which only the intervals are added (a run's no-bootstrap
    evaluation, `cube.run.evaluate`, then the one with intervals: ~1 s of CPU at the paper's
    scale not spent twice). Nothing but the bootstrap and `settings["bootstrap"]` depends on
    `analysis.bootstrap`, with one exception: the warning that W's interval is approximate (3 to
    `MIN_RETRIEVED_FOR_W` retrieved questions), raised among the others, so that case (and a
    result with no question of known retrieval) is evaluated in full."""
    ap = _checked_params(analysis_params)
    unknown = set(result.unknown_retrieval)
    if not intervals_alone(result, ap):
        return evaluate(
            answers, scores, ap, top_n, judges=judges, dimensions=dimensions, audit=audit,
            audit_min_pairs=audit_min_pairs, clusters=clusters, twins=twins,
        )  # fmt: skip
    _checked_system(answers, scores)
    judge_names = _judge_names(judges, scores)  # of every score, as `_evaluation` takes them
    if unknown:  # as `_without_unknown_retrieval` leaves them (its warning is in `result`)
        answers = answers[~answers["question_id"].isin(unknown)]
        scores = scores[~scores["question_id"].isin(unknown)]
    grid = score_grid(
        scores,
        judges=judge_names,
        dimensions=dimensions,
        questions=list(result.ranks["question_id"]),
    )
    n_top = result.settings["top_n"]
    names = (judge_names, dimensions)
    boot = _intervals(
        answers, scores, ap, n_top, names, result.cube_table, clusters, result.design, grid,
        result.ranks,
    )  # fmt: skip
    return replace(result, bootstrap=boot, settings={**result.settings, "bootstrap": ap.bootstrap})


def evaluate_headline(
    answers: pd.DataFrame,
    scores: pd.DataFrame,
    analysis_params: Any = None,
    top_n: int | None = None,
    *,
    judges: Sequence[str] | None = None,
    dimensions: Sequence[str] | None = None,
) -> CubeResult:
    """`evaluate` (no audit, twins or families) without what a headline figure does not read, for a
    caller that evaluates many small subsets (`cube.diagnose.categories`, 20 per-category
    evaluations at the paper's scale): the correlations on the retrieved questions, the judge and
    retrieved summaries (empty tables here) and the design effect (`design` empty; the intervals
    without their `unit`, `n_units` and `design_effect` columns). Every other field is
    `evaluate`'s own, computed the same way."""
    return _evaluation(
        answers,
        scores,
        analysis_params,
        top_n,
        (judges, dimensions),
        (None, 10, None),
        None,
        full=False,
    )


def _evaluation(
    answers: pd.DataFrame,
    scores: pd.DataFrame,
    analysis_params: Any,
    top_n: int | None,
    names: tuple[Sequence[str] | None, Sequence[str] | None],
    gate_inputs: tuple[pd.DataFrame | None, int, pd.DataFrame | None],
    clusters: Mapping[Any, Any] | None,
    *,
    full: bool = True,
) -> CubeResult:
    """`evaluate` (`full`) or `evaluate_headline`. `names`: the judges and dimensions;
    `gate_inputs`: the audit, its minimum pairs and the twins."""
    judges, dimensions = names
    ap = _checked_params(analysis_params)
    n_top = ap.top_n or top_n or 8
    system = _checked_system(answers, scores)
    judge_names = _judge_names(judges, scores)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CubeWarning)
        outcomes = retrieval_outcomes(answers, n_top)
        seen_dims = [*(dimensions or []), *scores["dimension"].unique()]
        answers, scores = _without_unknown_retrieval(answers, scores, outcomes)
        ranks = outcomes.ranks
        if _every_retrieval_unknown(ranks, outcomes):  # every system call failed
            return _all_retrieval_unknown(
                system, outcomes, scores, judge_names, seen_dims, ap, n_top, caught
            )
        recall = outcomes.recall()
        g = _gated(
            answers,
            scores,
            ap,
            ranks,
            recall,
            (judge_names, dimensions),
            gate_inputs,
            retrieved_correlations=full,
        )
    rag, corr_all, corr_ret, weights, tm, totals, table, flags, grid, retrieved_ids = g
    for w in caught:  # recorded in the result and still shown to the reader
        warnings.warn(w.message, CubeWarning, stacklevel=3)
    design = _design(ranks, grid, table, clusters, ap.cluster) if full else {}
    boot = _intervals(
        answers, scores, ap, n_top, (judge_names, dimensions), table, clusters, design, grid, ranks
    )
    return CubeResult(
        system=system,
        recall_at_k=recall,
        n_questions=len(ranks),
        n_retrieved=int(ranks["retrieved"].sum()),
        ranks=ranks,
        correlations_all=corr_all,
        correlations_retrieved=corr_ret if corr_ret is not None else pd.DataFrame(),
        weights=weights,
        trimmed_means=tm,
        weighted_totals=totals,
        cube_table=table,
        jury=jury_summary(table),
        **_summaries(rag, scores, retrieved_ids, full),
        bootstrap=boot,
        settings=_settings(ap, n_top, outcomes),
        warnings=[str(w.message) for w in caught],
        flags=flags,
        unknown_retrieval=outcomes.unknown,
        design=design,
        clusters=_copied_families(clusters, ap),
    )


def _summaries(
    rag: pd.DataFrame, scores: pd.DataFrame, retrieved_ids: set[Any], full: bool
) -> dict[str, pd.DataFrame]:
    """The judge summary on the rag set and on its retrieved questions (empty tables when not
    `full`)."""
    if not full:
        return {"judge_summary": pd.DataFrame(), "retrieved_summary": pd.DataFrame()}
    return {
        "judge_summary": summary_of(rag, dimension_order(scores["dimension"])),
        "retrieved_summary": summary_of(
            rag[rag["question_id"].isin(retrieved_ids)].reset_index(drop=True),
            dimension_order(scores.loc[scores["question_id"].isin(retrieved_ids), "dimension"]),
        ),
    }


# --------------------------------------------------------------------------- evaluate's steps


class _Gated(NamedTuple):
    """What `evaluate` derives up to the validity gate's verdicts (`_gated`)."""

    rag: pd.DataFrame
    corr_all: pd.DataFrame
    corr_ret: pd.DataFrame | None
    weights: Any
    trimmed_means: pd.DataFrame
    totals: pd.DataFrame
    table: pd.DataFrame  # the CuBE table joined with the gate's columns
    flags: list[str]
    grid: Any
    retrieved_ids: set[Any]


def _gated(
    answers: pd.DataFrame,
    scores: pd.DataFrame,
    ap: Any,
    ranks: pd.DataFrame,
    recall: float,
    names: tuple[list[str], Sequence[str] | None],
    gate_inputs: tuple[pd.DataFrame | None, int, pd.DataFrame | None],
    *,
    retrieved_correlations: bool = True,
) -> _Gated:
    """The CuBE table with the gate's verdicts and what it rests on (`evaluate`'s first part).
    `retrieved_correlations` False leaves out the correlations on the retrieved questions,
    which neither the table nor the gate reads (`judge_verdicts`)."""
    judge_names, dimensions = names
    audit, audit_min_pairs, twins = gate_inputs
    qids = list(ranks["question_id"])
    # the tables are validated once (`_checked_system`) and each derived table made once:
    # the rag set's per-item scores feed both correlations and Table 1, the grid the trimmed
    # means, the gate and the bootstrap (the public functions, each on its own, validate
    # and derive them again)
    rag, grid = rag_items_and_grid(
        scores, judges=judge_names, dimensions=dimensions, questions=qids
    )
    pairs = _pairs(judge_names, dimensions, scores)
    corr_all = correlations_of(rag, ranks, "rank_score", *pairs)
    corr_ret = (
        correlations_of(rag, ranks[ranks["retrieved"]], "rank_score", *pairs)
        if retrieved_correlations
        else None
    )
    weights = dimension_weights(corr_all, ap.weights, ap.custom_weights, ap.weights_fallback)
    causes = _weight_causes_if_ranked(ranks, corr_all, ap)
    retrieved_ids = set(ranks.loc[ranks["retrieved"], "question_id"])
    _check_trim(ap.trim_proportion)
    tm = trimmed_means_of_grid(
        grid, scores, ap.trim_proportion, retrieved_ids, ap.paired, dimensions
    )
    weights = _weights_for(weights, tm)
    wide = trimmed_wide(tm)  # read by the effective weights and the table
    effective = effective_weight_table(tm, weights, wide=wide)  # read by the table, totals, gate
    table, flags = _flagged_table(
        tm, (weights, effective, wide), recall, causes, corr_all, retrieved_ids, ap
    )
    _warn_if_w_interval_approximate(ap, len(retrieved_ids))
    totals = weighted_totals(tm, weights, effective)
    gate = _gate(
        made_items(grid, answers),  # a bound not made is no item (`cube.systems.bounds`)
        scores,
        table,
        tm,
        effective,
        totals,
        retrieved_ids,
        ap,
        ranks,
        causes,
        audit=audit,
        audit_min_pairs=audit_min_pairs,
        twins=twins,
    )
    return _Gated(
        rag, corr_all, corr_ret, weights, tm, totals, table.join(gate), flags, grid, retrieved_ids
    )


def _pairs(
    judges: list[str], dimensions: Sequence[str] | None, scores: pd.DataFrame
) -> tuple[list[Any], list[str]]:
    """The judges and dimensions `rank_correlations` gives a row each (of the scores and the
    configured ones)."""
    return (
        sorted({*judges, *scores["judge"].unique()}, key=str),
        dimension_order([*(dimensions or []), *scores["dimension"].unique()]),
    )


def _check_trim(proportion: float) -> None:
    """The trim proportion `trimmed_means` accepts."""
    if not 0 <= proportion < 0.5:
        raise ValueError(f"trim proportion must be in [0, 0.5), got {proportion}")


def _checked_params(analysis_params: Any) -> Any:
    """The analysis params (defaults when None); only the `retrieved` subset is CuBE's."""
    from cube.config.sections import AnalysisParams

    ap = analysis_params or AnalysisParams()
    if ap.subset != "retrieved":
        raise ValueError(
            "analysis.subset: only 'retrieved' is supported for CuBE ('all' would count retrieval "
            "twice: W over all questions already includes the non-retrieved answers)"
        )
    return ap


def _checked_system(answers: pd.DataFrame, scores: pd.DataFrame) -> str:
    """The one system both tables are of ("" without answers); a bad table raises."""
    validate_answers(answers)
    validate_scores(scores)
    single_system(answers, "answers")
    single_system(scores, "scores")
    return str(answers["system"].iloc[0]) if len(answers) else ""


def _judge_names(judges: Sequence[str] | None, scores: pd.DataFrame) -> list[str]:
    """The configured judges first, then any other judge with scores (by name), once each."""
    configured = list(judges or [])
    return list(dict.fromkeys([*configured, *sorted(scores["judge"].unique(), key=str)]))


def _without_unknown_retrieval(
    answers: pd.DataFrame, scores: pd.DataFrame, outcomes: Any
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The tables without the questions of unknown retrieval outcome, with a warning."""
    if not outcomes.n_unknown:
        return answers, scores
    warnings.warn(
        f"{outcomes.n_unknown} question(s) left out: the system call failed or its "
        "retrieval could not be told, so whether it retrieved the gold document is "
        "unknown (not counted as misses)",
        CubeWarning,
        stacklevel=3,
    )
    return (
        answers[~answers["question_id"].isin(outcomes.unknown)],
        scores[~scores["question_id"].isin(outcomes.unknown)],
    )


def _every_retrieval_unknown(ranks: pd.DataFrame, outcomes: Any) -> bool:
    """Nothing to measure: no question left, because every system call failed."""
    return bool(ranks.empty and outcomes.n_unknown)


def _weight_causes_if_ranked(ranks: pd.DataFrame, corr_all: pd.DataFrame, ap: Any) -> dict:
    """`weight_causes` when the weights are rank correlations (no cause otherwise)."""
    return weight_causes(ranks, corr_all) if ap.weights == "rank_correlation" else {}


def _flagged_table(
    tm: pd.DataFrame,
    weighting: tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame],
    recall: float,
    causes: dict[str, str],
    corr_all: pd.DataFrame,
    retrieved_ids: set,
    ap: Any,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """CuBE's table with its flags: the normalised scores' own, then the equal-weights fallback,
    the unweighted dimensions and too few retrieved questions, each also in the judge's row.
    `weighting`: the weights, their `effective_weight_table` and the trimmed means'
    `trimmed_wide`."""
    weights, effective, wide = weighting
    table, flags = cube_scores_with_flags(tm, weights, recall, causes, effective, wide=wide)
    ranked = ap.weights == "rank_correlation"
    if ranked and ap.weights_fallback == "equal" and causes:
        flags = _fallback_flags(flags, causes)
        _note_fallback_in_table(table, flags, causes)
    if ranked:
        flags = _unweighted_flags(table, flags, corr_all, weights)
    if len(retrieved_ids) < 3:  # the trimmed means, the bounds and W rest on almost nothing
        flags = _too_few_retrieved_flags(table, flags, len(retrieved_ids))
    return table, flags


def _joined(*messages: str) -> str:
    """The non-empty messages, joined as a table's `flags` cell."""
    return "; ".join(m for m in messages if m)


def _note_fallback_in_table(
    table: pd.DataFrame, flags: pd.DataFrame, causes: dict[str, str]
) -> None:
    """Each fallen-back judge's row also says it used equal weights (in place)."""
    for j in causes:
        extra = flags.loc[
            (flags["judge"] == j) & (flags["code"] == "weights_fallback_equal"), "message"
        ]
        table.at[j, "flags"] = _joined(table.at[j, "flags"], *extra)


def _too_few_retrieved_flags(table: pd.DataFrame, flags: pd.DataFrame, n: int) -> pd.DataFrame:
    """Flag every judge's W when fewer than 3 questions had the gold document retrieved (in the
    table's rows too)."""
    few = [
        {
            "judge": j,
            "dimension": "W",
            "code": "too_few_questions",
            "message": f"judge {j} · W: only {n} question(s) with the "
            "gold document retrieved: the trimmed means and W rest on too few questions",
        }
        for j in table.index
    ]
    flags = pd.concat([flags, pd.DataFrame(few, columns=FLAG_COLUMNS)], ignore_index=True)
    for f in few:
        table.at[f["judge"], "flags"] = _joined(table.at[f["judge"], "flags"], f["message"])
    return flags


def _warn_if_w_interval_approximate(ap: Any, n_retrieved: int) -> None:
    """Warn that W's interval is approximate on 3 to `MIN_RETRIEVED_FOR_W` retrieved questions."""
    from cube.method.bootstrap import MIN_RETRIEVED_FOR_W

    if ap.bootstrap > 0 and 3 <= n_retrieved < MIN_RETRIEVED_FOR_W:
        warnings.warn(w_interval_note(n_retrieved), CubeWarning, stacklevel=3)


def _gate(
    grid: pd.DataFrame,
    scores: pd.DataFrame,
    table: pd.DataFrame,
    tm: pd.DataFrame,
    effective: pd.DataFrame,
    totals: pd.DataFrame,
    retrieved_ids: set,
    ap: Any,
    ranks: pd.DataFrame,
    causes: dict[str, str],
    *,
    audit: pd.DataFrame | None,
    audit_min_pairs: int,
    twins: pd.DataFrame | None,
) -> pd.DataFrame:
    """The judge validity gate (`cube.method.gate.judge_gate`), with the audit's summary when the
    audit ran and the trimmed means when the weights are rank correlations."""
    from cube.method.audit import audit_summary
    from cube.method.gate import judge_gate

    audited = audit is not None and len(audit) > 0
    ranked = ap.weights == "rank_correlation"
    return judge_gate(
        grid,
        scores,
        table,
        effective,
        totals,
        retrieved_ids,
        ap,
        ranks=ranks,
        audit=audit_summary(audit, ap.confidence) if audited else None,
        audit_min_pairs=audit_min_pairs,
        trimmed=tm if ranked else None,
        weight_causes=causes,
        twins=twins,
    )


def _intervals(
    answers: pd.DataFrame,
    scores: pd.DataFrame,
    ap: Any,
    n_top: int,
    names: tuple[list[str], Sequence[str] | None],
    table: pd.DataFrame,
    clusters: Mapping[Any, Any] | None,
    design: dict[str, Any],
    grid: pd.DataFrame,
    ranks: pd.DataFrame,
) -> pd.DataFrame | None:
    """The bootstrap intervals (None when `analysis.bootstrap` is 0), with the design beside each
    (none when `design` is empty: `evaluate_headline`) and the jury's W and CuBE undefined where
    `jury_summary` leaves them undefined. `names`: the judges and dimensions; `grid` and `ranks`:
    the score grid of the same judges, dimensions and questions and their retrieval ranks, which
    the bootstrap reads."""
    from cube.method.bootstrap import bootstrap_cube

    if ap.bootstrap <= 0:
        return None
    judge_names, dimensions = names
    boot = bootstrap_cube(
        answers,
        scores,
        n_resamples=ap.bootstrap,
        confidence=ap.confidence,
        seed=ap.seed,
        proportion=ap.trim_proportion,
        subset=ap.subset,
        weights=ap.weights,
        custom_weights=ap.custom_weights,
        top_n=n_top,
        paired=ap.paired,
        judges=judge_names,
        dimensions=dimensions,
        jury_judges=[j for j in table.index if table.at[j, "in_jury"]],
        weights_fallback=ap.weights_fallback,
        method=ap.interval,
        clusters=clusters if ap.cluster == "family" else None,
        grid=grid,
        ranks=ranks,
    )
    if design:
        boot = _with_design(boot, design)
    if "gate_w_unusable" in table:
        boot = _undefined_jury_interval(boot, table)
    return boot


def _settings(ap: Any, n_top: int, outcomes: Any) -> dict[str, Any]:
    """The analysis settings the result was computed with (shown beside the tables)."""
    return {
        "trim_proportion": ap.trim_proportion,
        "subset": ap.subset,
        "weights": ap.weights,
        "top_n": n_top,
        "bootstrap": ap.bootstrap,
        "confidence": ap.confidence,
        "interval": ap.interval,
        "paired": ap.paired,
        "cluster": ap.cluster,
        "retrieval_unknown": outcomes.n_unknown,
        "retrieval_failed": outcomes.n_failed,
    }


def _copied_families(clusters: Mapping[Any, Any] | None, ap: Any) -> dict[Any, Any] | None:
    """The families the intervals resampled (None when they resampled questions)."""
    if clusters is None or ap.cluster != "family":
        return None
    return dict(clusters)


def _design(
    ranks: pd.DataFrame,
    grid: pd.DataFrame,
    table: pd.DataFrame,
    clusters: Mapping[Any, Any] | None,
    unit: str,
) -> dict[str, Any]:
    """`cube.method.design.design_summary` of the families (whatever the resampling unit, so a
    question-level run still shows what it ignores), with the unit the intervals resampled."""
    from cube.method.bootstrap import unit_codes
    from cube.method.design import design_summary

    r = ranks.sort_values("question_id", kind="stable")
    qids = r["question_id"].tolist()
    codes = unit_codes(qids, clusters or {})
    jury = table.index[table["in_jury"].astype(bool)] if "in_jury" in table else table.index
    rag = grid[(grid["set"] == "rag") & grid["judge"].isin(jury)]
    per_q = rag.groupby("question_id")["score"].mean().reindex(qids).to_numpy(float)
    out = design_summary(r["retrieved"].to_numpy(bool), per_q, codes)
    return {"unit": unit, "families_known": clusters is not None, **out}


def _with_design(boot: pd.DataFrame, design: dict[str, Any]) -> pd.DataFrame:
    """The unit and the design effect beside each interval: R@k's is retrieval's, CuBE's and W's
    the rag score's."""
    deff = np.where(
        boot["metric"] == "recall_at_k", design["deff_retrieval"], design["deff_rag_score"]
    )
    n_units = design["units"] if design["unit"] == "family" else design["questions"]
    return boot.assign(unit=design["unit"], n_units=n_units, design_effect=deff)


def _all_retrieval_unknown(
    system: str,
    outcomes: Any,
    scores: pd.DataFrame,
    judges: list[str],
    dimensions: Sequence[str] | None,
    ap: Any,
    n_top: int,
    caught: list,
) -> CubeResult:
    """The result when no question has a known retrieval outcome (every system call failed):
    every figure NaN, each judge flagged and kept out of the jury with the cause (a failed
    system is not a failed judge), so the verdict is withheld instead of guessed."""
    from cube.method.analysis import dimension_order
    from cube.method.gate import GATE_COLUMNS

    n = outcomes.n_unknown
    cause = f"retrieval unknown for all {n} questions (system calls failed)"
    dims = dimension_order(dimensions or [])
    pairs = pd.DataFrame([(j, d) for j in judges for d in dims], columns=["judge", "dimension"])
    corr = pairs.assign(r=np.nan, p_value=np.nan, n=0)
    table = pd.DataFrame(index=pd.Index(judges, name="judge"))
    for d in dims:
        table[d] = np.nan
    table = table.assign(
        weighted_score=np.nan,
        recall_at_k=np.nan,
        cube_score=np.nan,
        flag_zero_denominator=True,
        flag_out_of_bounds=False,
        flag_inverted_bounds=False,
        flags=[f"judge {j} · W: undefined: {cause}" for j in judges],
    )
    gate = pd.DataFrame({c: np.nan for c in GATE_COLUMNS[1:]}, index=table.index).assign(
        in_jury=False,
        excluded_reason=cause,
        judging_failed=False,
        gate_questions=0,
        gate_rank_applied=False,
        content_blind=False,
        gate_evidence=cause,
        gate_w_unusable=False,
        gate_validated=False,
    )
    table = table.join(gate[GATE_COLUMNS[1:]])
    flags = pd.DataFrame(
        [
            {"judge": j, "dimension": "W", "code": "retrieval_unknown", "message": m}
            for j, m in zip(judges, table["flags"], strict=True)
        ],
        columns=FLAG_COLUMNS,
    )
    sets = pd.DataFrame({"set": ["zero", "rag", "full"]})
    return CubeResult(
        system=system,
        recall_at_k=float("nan"),
        n_questions=0,
        n_retrieved=0,
        ranks=outcomes.ranks,
        correlations_all=corr,
        correlations_retrieved=corr.copy(),
        weights=pairs.assign(weight=np.nan),
        trimmed_means=pairs.merge(sets, how="cross").assign(
            trimmed_mean=np.nan, n=0, n_unscored=0, n_unpaired=0
        )[["judge", "set", "dimension", "trimmed_mean", "n", "n_unscored", "n_unpaired"]],
        weighted_totals=pd.DataFrame({"judge": judges})
        .merge(sets, how="cross")
        .assign(weighted_total=np.nan),
        cube_table=table,
        jury=jury_summary(table),
        judge_summary=judge_summary(scores),
        retrieved_summary=judge_summary(scores.iloc[:0]),
        bootstrap=None,
        settings={
            "trim_proportion": ap.trim_proportion,
            "subset": ap.subset,
            "weights": ap.weights,
            "top_n": n_top,
            "bootstrap": ap.bootstrap,
            "confidence": ap.confidence,
            "paired": ap.paired,
            "retrieval_unknown": n,
        },
        warnings=[str(w.message) for w in caught],
        flags=flags,
        unknown_retrieval=outcomes.unknown,
    )


def _unweighted_flags(
    table: pd.DataFrame, flags: pd.DataFrame, corr: pd.DataFrame, weights: pd.DataFrame
) -> pd.DataFrame:
    """Flag each dimension that weighs 0 because its correlation with rank is undefined (a judge
    whose weights are all undefined is already flagged): it leaves W, which must say so."""
    w = weights.set_index(["judge", "dimension"])["weight"]
    extra = []
    for row in corr[corr["r"].isna()].itertuples(index=False):
        if row.judge not in table.index or not np.isfinite(table.at[row.judge, "weighted_score"]):
            continue
        if not w.get((row.judge, row.dimension), np.nan) == 0:
            continue
        why = (
            "no rag-set score"
            if row.n == 0
            else f"its rag-set score is constant or has fewer than 3 scored questions (n = {row.n})"
        )
        extra.append(
            {
                "judge": row.judge,
                "dimension": row.dimension,
                "code": "w_dimension_unweighted",
                "message": f"judge {row.judge} · W: {row.dimension} weighs 0 and is not in W: its "
                f"correlation with rank is undefined ({why})",
            }
        )
    for f in extra:
        table.at[f["judge"], "flags"] = "; ".join(
            m for m in [table.at[f["judge"], "flags"], f["message"]] if m
        )
    return (
        pd.concat([flags, pd.DataFrame(extra, columns=FLAG_COLUMNS)], ignore_index=True)
        if extra
        else flags
    )


def _weights_for(weights: pd.DataFrame, tm: pd.DataFrame) -> pd.DataFrame:
    """The weights on every (judge, dimension) of the trimmed means (a dimension the correlations
    did not see weighs NaN, i.e. undefined)."""
    keys = tm[["judge", "dimension"]].drop_duplicates()
    return keys.merge(weights, on=["judge", "dimension"], how="left")[
        ["judge", "dimension", "weight"]
    ]


def _fallback_flags(flags: pd.DataFrame, causes: dict[str, str]) -> pd.DataFrame:
    extra = [
        {
            "judge": j,
            "dimension": "W",
            "code": "weights_fallback_equal",
            "message": f"judge {j} · W: rank-correlation weights undefined ({c}); equal weights "
            "used (analysis.weights_fallback: equal)",
        }
        for j, c in causes.items()
    ]
    return (
        pd.concat([flags, pd.DataFrame(extra, columns=FLAG_COLUMNS)], ignore_index=True)
        if extra
        else flags
    )


def evaluate_systems(
    answers: pd.DataFrame,
    scores: pd.DataFrame,
    analysis_params: Any = None,
    top_n: Mapping[str, int] | int | None = None,
    *,
    judges: Sequence[str] | None = None,
    dimensions: Sequence[str] | None = None,
    audit: pd.DataFrame | None = None,
    audit_min_pairs: int = 10,
    clusters: Mapping[Any, Any] | None = None,
    twins: pd.DataFrame | None = None,
    without_intervals: Mapping[str, CubeResult] | None = None,
) -> dict[str, CubeResult]:
    """`evaluate` for every system of the tables (several systems or versions in one run); `audit`:
    the judge audit's probe scores, one audit of the judges for every system.
    `without_intervals`: the same evaluation with `analysis.bootstrap` 0, whose systems get only
    their intervals added (`with_intervals`)."""
    out = {}
    for system in sorted(answers["system"].dropna().unique()):
        n = top_n.get(system) if isinstance(top_n, Mapping) else top_n
        done = (without_intervals or {}).get(system)
        step = partial(with_intervals, done) if done is not None else evaluate
        out[system] = step(
            answers[answers["system"] == system],
            scores[scores["system"] == system],
            analysis_params,
            n,
            judges=judges,
            dimensions=dimensions,
            audit=audit,
            audit_min_pairs=audit_min_pairs,
            clusters=clusters,
            twins=twins,
        )
    return out
