"""The simulation study: the run's own estimator on R replicates of `cube.method.simulate`'s model.

For each number of questions n and replicate r, one run is drawn and passed to
`cube.method.evaluation.evaluate` (the gate as it is, the bootstrap of `analysis.bootstrap`
resamples); every interval the report prints is checked against the truth:

- `bootstrap` intervals of each judge's and the jury's CuBE and W, and of R@k (the decision page);
- the `wilson` interval of R@k (the diagnostics and the TOP-N sweep; scipy's Wilson score interval);
- compare's interval of the jury ΔCuBE (`cube.method.compare.compare_pair`) for two systems drawn on
  the same questions, under no difference (truth 0) and, for power, with system B worse by the
  printed minimum detectable difference (MDE; the truth of Δ computed from the model).

Every summary carries its Monte Carlo error: the binomial standard error sqrt(c (1 - c) / R) of a
coverage or rejection rate c, the standard error of a mean (bias, width) and the delta-method one of
an RMSE. A coverage `misses` when it is further from the nominal level than twice the Monte Carlo
error at the nominal level (2 sqrt(0.95 x 0.05 / R)). The p-values under no difference are compared
with the uniform distribution by the Kolmogorov-Smirnov test (`scipy.stats.kstest`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from scipy import optimize, stats

from cube.method.analysis import CubeWarning
from cube.method.simulate import RunModel, draw_questions, simulate_run, truth

JURY = "jury"


def _quiet(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CubeWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(*args, **kwargs)


def wilson_interval(hits: int, n: int, confidence: float) -> tuple[float, float]:
    ci = stats.binomtest(int(hits), int(n)).proportion_ci(
        confidence_level=confidence, method="wilson"
    )
    return float(ci.low), float(ci.high)


def replicate_seed(seed: int, *key: int) -> int:
    """The seed of one replicate: the same whatever order or process runs it."""
    return int(np.random.SeedSequence([seed, *key]).generate_state(1)[0])


def study_units(model: RunModel, analysis_params: Any) -> tuple[str, ...]:
    """The resampling units the study runs: question and family side by side where the model has
    families (so the failure family resampling fixes shows), else the params' own."""
    return ("question", "family") if model.family_size > 1 else (analysis_params.cluster,)


def coverage_replicate(
    model: RunModel,
    n: int,
    replicate: int,
    analysis_params: Any,
    true: pd.DataFrame,
    seed: int = 0,
    units: tuple[str, ...] | None = None,
) -> list[dict[str, Any]]:
    """One simulated run through `evaluate`, once per resampling unit of `units` (default
    `study_units`): one row per (unit, judge, metric, interval) with `estimate, lo, hi, truth,
    in_jury, design_effect`. `true` is `truth(model)`; the jury's truth is the mean of the truths
    of that replicate's jury members (the gate decides who they are)."""
    rep_seed = replicate_seed(seed, n, replicate)
    run = simulate_run(model, n, rep_seed)
    rows = []
    for unit in units or study_units(model, analysis_params):
        ap = analysis_params.model_copy(update={"cluster": unit})
        rows += _coverage_rows(model, run, n, replicate, ap, true, seed)
    return rows


def _coverage_rows(
    model: RunModel,
    run: Any,
    n: int,
    replicate: int,
    analysis_params: Any,
    true: pd.DataFrame,
    seed: int,
) -> list[dict[str, Any]]:
    from cube.method.evaluation import evaluate

    # the bootstrap's own seed: seeded with the data's, its first draws would be the bits that made
    # the questions' difficulties, so which questions a resample draws would depend on the data it
    # resamples
    res = _quiet(
        evaluate,
        run.answers,
        run.scores,
        analysis_params.model_copy(update={"seed": replicate_seed(seed, n, replicate, 1)}),
        model.system.top_n,
        dimensions=list(model.dimensions),
        clusters=run.families,
    )
    true = true.set_index("judge")
    jury = res.jury_judges
    unit = analysis_params.cluster
    base = {"n_questions": n, "replicate": replicate, "unit": unit}
    deff = {"recall_at_k": res.design.get("deff_retrieval", math.nan)}
    rows = []
    for judge in [*true.index, JURY]:
        members = jury if judge == JURY else [judge]
        for metric in ("cube_score", "weighted_score"):
            est = (
                float(res.jury.at["mean", metric])
                if judge == JURY
                else float(res.cube_table.at[judge, metric])
            )
            lo, hi = res.interval(judge, metric)
            rows.append(
                {
                    **base,
                    "judge": judge,
                    "metric": metric,
                    "interval": "bootstrap",
                    "estimate": est,
                    "lo": lo,
                    "hi": hi,
                    "truth": float(true.loc[members, metric].mean()) if members else math.nan,
                    "in_jury": bool(jury) if judge == JURY else judge in jury,
                    "design_effect": res.design.get("deff_rag_score", math.nan),
                }
            )
    hits, k = int(res.ranks["retrieved"].sum()), len(res.ranks)
    for kind, (lo, hi) in (
        ("bootstrap", res.interval(JURY, "recall_at_k")),
        ("wilson", recall_interval(res, unit, analysis_params.confidence)),
    ):
        rows.append(
            {
                **base,
                "judge": JURY,
                "metric": "recall_at_k",
                "interval": kind,
                "estimate": hits / k,
                "lo": lo,
                "hi": hi,
                "truth": model.system.recall,
                "in_jury": True,
                "design_effect": deff["recall_at_k"],
            }
        )
    return rows


def recall_interval(res: Any, unit: str, confidence: float) -> tuple[float, float]:
    """R@k's Wilson interval as the diagnostics print it (`cube.diagnose.retrieval.wilson`): at
    the effective n of the families' design effect when the unit is the family."""
    from cube.method.design import wilson_effective

    hits, k = int(res.ranks["retrieved"].sum()), len(res.ranks)
    deff = res.design.get("deff_retrieval", 1.0) if unit == "family" else 1.0
    if deff > 1.0:
        return wilson_effective(hits / k, k / deff, confidence, res.design.get("units"))
    return wilson_interval(hits, k, confidence)


def jury_truth(model: RunModel, analysis_params: Any, n: int | None = None) -> float:
    """The true jury CuBE when every simulated judge is in the jury."""
    kw = {"n": n} if n else {}
    t = truth(
        model, proportion=analysis_params.trim_proportion, weights=analysis_params.weights, **kw
    )
    return float(t["cube_score"].mean())


def quality_shift_for(
    model: RunModel, delta: float, analysis_params: Any, n: int = 50_000
) -> float:
    """The change of system B's `answer_quality` that makes its true jury CuBE differ from A's by
    `delta` (both truths on the same `n` questions, so the search sees a smooth function). A
    negative `delta` (B worse) has the most room: the quality can fall to just above a missed
    document's (below that the rag scores no longer rise with rank and the correlation weights
    vanish), while it rises only to 1."""
    base = jury_truth(model, analysis_params, n)
    aq = model.system.answer_quality

    def gap(x: float) -> float:
        return (
            jury_truth(model.with_system(answer_quality=aq + x), analysis_params, n) - base - delta
        )

    lo, hi = (model.system.miss_quality + 0.05 - aq, 0.0) if delta < 0 else (0.0, 1.0 - aq)
    if gap(lo) * gap(hi) > 0:
        raise ValueError(
            f"simulation: no answer quality in [{aq + lo:.2f}, {aq + hi:.2f}] moves the true jury "
            f"CuBE by {delta:.2f} points"
        )
    return float(optimize.brentq(gap, lo, hi, xtol=1e-4))


def compare_replicate(
    model: RunModel,
    n: int,
    replicate: int,
    analysis_params: Any,
    *,
    shift: float = 0.0,
    true_delta: float = 0.0,
    n_permutations: int = 1000,
    seed: int = 0,
    unit: str | None = None,
) -> dict[str, Any]:
    """Compare's jury ΔCuBE (B − A) for one pair of systems drawn on the same questions: B is A's
    model (no difference, `shift` 0) or A's with `answer_quality` changed by `shift` (true ΔCuBE
    `true_delta`). Returns `n_questions, replicate, delta, lo, hi, p_value, mde, se, truth, shift`
    (`se`: the bootstrap SE of ΔCuBE that the MDE rests on) and `unit`, the resampling unit
    (`unit`; default the params' `analysis.cluster`): families resampled and swapped together."""
    from cube.method.compare import compare_pair

    model_b = model.with_system(name="sys-b", answer_quality=model.system.answer_quality + shift)
    rep_seed = replicate_seed(seed, n, replicate, 7)
    q = draw_questions(model, n, np.random.default_rng(rep_seed))
    a = simulate_run(model, n, rep_seed + 1, questions=q)
    b = simulate_run(model_b, n, rep_seed + 2, questions=q)
    c = _quiet(
        compare_pair,
        a.answers,
        a.scores,
        b.answers,
        b.scores,
        analysis_params.model_copy(
            update={
                "seed": replicate_seed(seed, n, replicate, 8),
                "cluster": unit or analysis_params.cluster,
            }
        ),
        top_n_a=model.system.top_n,
        top_n_b=model.system.top_n,
        dimensions=list(model.dimensions),
        n_permutations=n_permutations,
        clusters=a.families,
    )
    row = c.row()
    return {
        "n_questions": n,
        "unit": unit or analysis_params.cluster,
        "replicate": replicate,
        "delta": row.get("delta"),
        "lo": row.get("lo"),
        "hi": row.get("hi"),
        "p_value": row.get("p_value"),
        "mde": c.power.get("mde"),
        "se": c.power.get("se"),
        "truth": true_delta,
        "shift": shift,
    }


# ---------------------------------------------------------------------------------- summaries
def mc_rate(x: pd.Series) -> tuple[float, float, int]:
    """The share of hits, its Monte Carlo SE and the runs behind it. The SE is Agresti-Coull's (two
    hits and two misses added): the plain sqrt(c(1 - c)/R) is 0 at 0 % or 100 %, which a study of 8
    runs reaches most of the time and which would read as an exact figure (8 of 8 is [68 %,
    100 %])."""
    x = x.dropna().astype(float)
    if not len(x):
        return math.nan, math.nan, 0
    c, n = float(x.mean()), len(x)
    adj = (c * n + 2) / (n + 4)
    return c, math.sqrt(adj * (1 - adj) / (n + 4)), n


def coverage_table(reps: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """Per (n, judge, metric, interval): coverage with its Monte Carlo error, mean width, bias and
    RMSE of the estimate (each with its MC error), and `misses` (coverage further from `confidence`
    than twice the MC error at the nominal level). Replicates whose interval is undefined are
    counted in `undefined` and left out of the coverage; a judge's rows count the replicates where
    it was in the jury."""
    out = []
    if "unit" not in reps:
        reps = reps.assign(unit="question")
    keys = ["n_questions", "unit", "judge", "metric", "interval"]
    for key, g in reps.groupby(keys, sort=False):
        g = g[g["in_jury"]]
        ok = g[np.isfinite(g["lo"]) & np.isfinite(g["hi"]) & np.isfinite(g["truth"])]
        cover, cover_se, k = mc_rate((ok["lo"] <= ok["truth"]) & (ok["truth"] <= ok["hi"]))
        err = (g["estimate"] - g["truth"]).dropna()
        width = ok["hi"] - ok["lo"]
        nominal_se = math.sqrt(confidence * (1 - confidence) / k) if k else math.nan
        out.append(
            {
                **dict(zip(keys, key, strict=True)),
                "replicates": k,
                "undefined": len(g) - k,
                "coverage": cover,
                "coverage_mc_se": cover_se,
                "misses": bool(k and abs(cover - confidence) > 2 * nominal_se),
                "mean_width": float(width.mean()) if k else math.nan,
                "width_mc_se": _mc_se(width) if k > 1 else math.nan,
                **_error_figures(err),
                "design_effect": float(g["design_effect"].mean())
                if "design_effect" in g
                else math.nan,
            }
        )
    return pd.DataFrame(out)


def _mc_se(values: pd.Series) -> float:
    """The Monte Carlo error of a mean: SD / sqrt(n)."""
    return float(values.std(ddof=1) / math.sqrt(len(values)))


def _error_figures(err: pd.Series) -> dict[str, float]:
    """Bias and RMSE of the estimates' errors, each with its Monte Carlo error (NaN where too few
    replicates define it; RMSE's by the delta method)."""
    n = len(err)
    rmse = float(np.sqrt((err**2).mean())) if n else math.nan
    rmse_se = (
        float((err**2).std(ddof=1) / math.sqrt(n) / (2 * rmse)) if n > 1 and rmse > 0 else math.nan
    )
    return {
        "bias": float(err.mean()) if n else math.nan,
        "bias_mc_se": _mc_se(err) if n > 1 else math.nan,
        "rmse": rmse,
        "rmse_mc_se": rmse_se,
    }


def gate_table(reps: pd.DataFrame) -> pd.DataFrame:
    """Per (n, judge): the share of replicates the validity gate left the judge out of the jury."""
    g = reps[(reps["judge"] != JURY) & (reps["metric"] == "cube_score")]
    if "unit" in g:  # the gate does not depend on the unit: one unit's rows
        g = g[g["unit"] == g["unit"].iloc[0]] if len(g) else g
    rows = []
    for (n, judge), x in g.groupby(["n_questions", "judge"], sort=False):
        rate, se, k = mc_rate(~x["in_jury"].astype(bool))
        rows.append(
            {
                "n_questions": n,
                "judge": judge,
                "replicates": k,
                "excluded_rate": rate,
                "excluded_mc_se": se,
            }
        )
    return pd.DataFrame(rows)


def se_check(g: pd.DataFrame) -> dict[str, float]:
    """The spread of ΔCuBE over the simulated pairs (`delta_sd`, with its MC error sd / sqrt(2
    (R - 1))) beside the mean bootstrap SE the interval and the MDE rest on (`mean_se`): calibrated
    when they agree."""
    d = g["delta"].dropna().astype(float) if "delta" in g else pd.Series(dtype=float)
    sd = float(d.std(ddof=1)) if len(d) > 1 else math.nan
    se = g["se"].dropna().astype(float) if "se" in g else pd.Series(dtype=float)
    return {
        "delta_sd": sd,
        "delta_sd_mc_se": sd / math.sqrt(2 * (len(d) - 1)) if len(d) > 1 else math.nan,
        "mean_se": float(se.mean()) if len(se) else math.nan,
    }


def pvalue_table(null: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """Per n, under no difference: the KS test of the p-values against uniform, the rejection rate
    at `alpha` (nominal: alpha) and the coverage of compare's ΔCuBE interval (truth 0), with MC
    errors, the SD of ΔCuBE against the mean bootstrap SE (`se_check`), and the mean printed MDE."""
    rows = []
    null = null if "unit" in null else null.assign(unit="question")
    for (n, unit), g in null.groupby(["n_questions", "unit"], sort=False):
        p = g["p_value"].dropna().astype(float)
        ks = stats.kstest(p, "uniform") if len(p) > 1 else None
        rej, rej_se, k = mc_rate(p <= alpha)
        ok = g.dropna(subset=["lo", "hi"])
        cov, cov_se, kc = mc_rate((ok["lo"] <= ok["truth"]) & (ok["truth"] <= ok["hi"]))
        rows.append(
            {
                "n_questions": n,
                "unit": unit,
                "replicates": k,
                "ks_statistic": ks.statistic if ks else math.nan,
                "ks_p_value": ks.pvalue if ks else math.nan,
                "rejection_rate": rej,
                "rejection_mc_se": rej_se,
                "delta_coverage": cov,
                "delta_coverage_mc_se": cov_se,
                **se_check(g),
                "mean_mde": float(g["mde"].mean()),
                "mde_mc_se": float(g["mde"].std(ddof=1) / math.sqrt(len(g))),
            }
        )
    return pd.DataFrame(rows)


def power_table(alt: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """Per n, with B worse by the printed MDE: the rejection rate at `alpha` (the power; nominal
    0.8) and the coverage of the ΔCuBE interval (truth from the model), with MC errors; the SD of
    ΔCuBE against the mean bootstrap SE (`se_check`) and the MDE these pairs print
    (`mde_printed_here`): the MDE of a no-difference comparison assumes the SE at the MDE is the SE
    at 0, and where it is smaller (a worse system's CuBE varies less) the power at that MDE exceeds
    80 %."""
    rows = []
    alt = alt if "unit" in alt else alt.assign(unit="question")
    for (n, unit), g in alt.groupby(["n_questions", "unit"], sort=False):
        pw, pw_se, k = mc_rate(g["p_value"].dropna() <= alpha)
        ok = g.dropna(subset=["lo", "hi"])
        cov, cov_se, _ = mc_rate((ok["lo"] <= ok["truth"]) & (ok["truth"] <= ok["hi"]))
        rows.append(
            {
                "n_questions": n,
                "unit": unit,
                "replicates": k,
                "true_delta": float(g["truth"].iloc[0]),
                "quality_shift": float(g["shift"].iloc[0]),
                "power": pw,
                "power_mc_se": pw_se,
                "delta_coverage": cov,
                "delta_coverage_mc_se": cov_se,
                **se_check(g),
                "mde_printed_here": float(g["mde"].mean()),
            }
        )
    return pd.DataFrame(rows)
