"""Paired comparison of two systems (or two versions) on the same questions (issue 13 items 1-2).

Two sides A and B (each: one system's answers and scores, from the same run or from two runs
sharing question ids and judges) are compared on the questions both know the retrieval
outcome of; questions present in only one side are counted (`only_a`, `only_b`) and left out.
Every statistic is the whole CuBE chain of `cube.method.bootstrap.cube_from_counts` (the function
the bootstrap uses, which reproduces `cube.method.analysis.evaluate` exactly), so Δ is B − A of the
very numbers the two reports publish when they are restricted to the common questions.

- **Paired bootstrap**: one counts matrix C (resamples x questions) drives both sides, so a
  resample draws the same questions for A and B (the three sets and the retrieval outcome of a
  question travel together). It draws the resampling units of `analysis.cluster`: families of
  near-duplicate questions by default (`clusters`: question -> family; questions of one family
  share retrieval confusions and answer errors, so they are not independent draws), else single
  questions. The interval is the percentile interval of Δ.
- **Paired permutation test**: under H0 (A and B are exchangeable) the side labels can be
  swapped, one coin per resampling unit: every question of a family swaps together. A swap of a
  single question would not keep the null distribution where a system's outcomes correlate
  within a family (system A retrieving a whole family, B missing it: a per-question swap mixes
  the family's outcomes between the sides, which the null never produces, and its permutation
  spread is too narrow); swapping whole families is exact under exchangeable systems whatever the
  correlation inside a family. A swap is again a counts matrix, over the 2n questions of A
  then B (row of A' = [1 − M, M], of B' = [M, 1 − M] for a swap mask M), so every permutation
  is computed in one vectorised pass. Two-sided p = (1 + #{|Δ*| >= |Δ|}) / (1 + P); `p_holm_rows`
  is each row's p adjusted by Holm's step-down method over every (judge, metric) row with a
  p-value (the rows the comparison page shows).
- **Jury**: the mean over the judges that pass the validity gate (`cube.method.gate`) on both sides,
  as the decision does; judges present on one side only are listed and left out. As in
  `cube.method.bootstrap.bootstrap_cube`, a resample or permutation where one jury member is
  undefined is undefined for the jury (never a mean of fewer judges); the share of defined resamples
  and permutations is reported (`valid_resample_share`, `valid_permutation_share`) and flagged when
  below `MIN_VALID_SHARE` (the interval and p-value then rest on a selection of resamples).
- **Power** (`mde`, `questions_needed`): the bootstrap standard error of ΔCuBE, se (of the
  family bootstrap: the design effect of the families is in it), gives the per-question standard
  deviation σ = se·√n of the paired difference (a CuBE difference behaves
  like a mean of n per-question contributions). A two-sided test at level α (default
  1 − `analysis.confidence`, the interval's) with power 1 − β detects
  |Δ| >= (z_{1−α/2} + z_{1−β}) · σ / √n (the minimum detectable difference, MDE), and needs
  n = ((z_{1−α/2} + z_{1−β}) · σ / Δ)² questions for a given Δ. The power is 1 − β only if the SE at
  a difference of the MDE is the SE measured on the data, which one comparison cannot check: a
  system's CuBE varies more the higher it is, so on simulated pairs at 100 questions
  (benchmarks/simulation_coverage.py --compare 1000 --better) a B worse by the printed MDE is
  detected in 87 %, a B better by it in 73 % (docs/measurements.md). The MDE is the size of
  difference the comparison resolves, not a guarantee of 80 %. With families as the unit, σ is
  an effective one (σ² = deff x the independent-question variance) and `questions_needed`
  assumes new questions come in families of the sizes measured (`families_needed` divides it by
  their mean size): adding near-duplicates of the same families buys less than it says.
- **Several systems**: `compare_all` compares every pair and adjusts the jury ΔCuBE p-values
  over the pairs with Holm's step-down correction (`p_holm_pairs`, a name distinct from the rows'
  `p_holm_rows`). With m pairs each jury ΔCuBE also gets a **simultaneous** interval
  (`delta_cube_ci_simultaneous`: Bonferroni, each at level 1 − α/m, so all m cover together with
  probability >= 1 − α). The interval is a bootstrap percentile one and the p-value a permutation
  test's, so the two can disagree at the margin: read each for what it is.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from cube.method import analysis as A
from cube.method import evaluation as E
from cube.method.bootstrap import (
    MIN_VALID_SHARE,
    Prepared,
    cube_from_counts,
    prepare,
    resample_unit_counts,
)

HEADLINE = ("cube_score", "weighted_score", "recall_at_k")
_CHUNK = 200  # resamples / permutations per vectorised pass (memory at paper scale)


@dataclass
class PairComparison:
    """B − A for every judge (and the jury) and metric, with interval, p-value and power."""

    a: str
    b: str
    n_questions: int
    only_a: list[Any]
    only_b: list[Any]
    judges: list[str]
    jury_judges: list[str]
    excluded_judges: dict[str, str]
    # judge, metric, a, b, delta, lo, hi, lo_simultaneous, hi_simultaneous, se, p_value, n_valid,
    # p_holm_rows
    deltas: pd.DataFrame
    settings: dict[str, Any] = field(default_factory=dict)
    power: dict[str, float] = field(default_factory=dict)
    valid_share: dict[str, float | None] = field(default_factory=dict)  # resamples / permutations
    flags: list[str] = field(default_factory=list)

    def row(self, judge: str = "jury", metric: str = "cube_score") -> dict[str, Any]:
        d = self.deltas[(self.deltas["judge"] == judge) & (self.deltas["metric"] == metric)]
        return d.iloc[0].to_dict() if len(d) else {}

    def headline(self) -> dict[str, Any]:
        r = self.row()
        return {
            "a": self.a,
            "b": self.b,
            "delta_cube": _num(r.get("delta")),
            "delta_cube_ci": [_num(r.get("lo")), _num(r.get("hi"))],
            "delta_cube_ci_simultaneous": [
                _num(r.get("lo_simultaneous")),
                _num(r.get("hi_simultaneous")),
            ],
            "n_pairs": self.settings.get("n_pairs", 1),
            "p_value": _num(r.get("p_value")),
            "mde": _num(self.power.get("mde")),
            "n_questions": self.n_questions,
            "n_only_a": len(self.only_a),
            "n_only_b": len(self.only_b),
            "jury_judges": self.jury_judges,
            "excluded_judges": self.excluded_judges,
            "valid_resample_share": _num(self.valid_share.get("resamples")),
            "valid_permutation_share": _num(self.valid_share.get("permutations")),
            "flags": self.flags,
        }


def _num(x: Any) -> float | None:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


# ------------------------------------------------------------------------------------- power
def mde(se: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """Minimum detectable |Δ| of a two-sided test at level `alpha` with `power`, given the SE
    of Δ."""
    return float((stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)) * se)


def questions_needed(
    delta: float, sd_per_question: float, alpha: float = 0.05, power: float = 0.8
) -> int:
    """Questions needed to detect `delta` (two-sided, level `alpha`, `power`) when the paired
    difference has per-question SD `sd_per_question` (σ = se·√n of a run)."""
    if not (math.isfinite(delta) and math.isfinite(sd_per_question)) or delta == 0:
        raise ValueError(
            f"questions_needed: need a finite non-zero delta and SD, got {delta!r}, "
            f"{sd_per_question!r}"
        )
    z = stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)
    return int(math.ceil((z * sd_per_question / abs(delta)) ** 2))


def holm(p_values: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values (NaN stays NaN and does not count)."""
    p = np.asarray(p_values, float)
    ok = np.flatnonzero(np.isfinite(p))
    out = np.full(len(p), np.nan)
    order = ok[np.argsort(p[ok], kind="stable")]
    m, running = len(order), 0.0
    for i, idx in enumerate(order):
        running = max(running, min(1.0, (m - i) * p[idx]))
        out[idx] = running
    return out.tolist()


# ---------------------------------------------------------------------------------- alignment
def _known_questions(answers: pd.DataFrame, top_n: int) -> set[Any]:
    return set(A.retrieval_outcomes(answers, top_n).ranks["question_id"])


def _concat(pa: Prepared, pb: Prepared) -> Prepared:
    return dataclasses.replace(
        pa,
        rank_score=np.concatenate([pa.rank_score, pb.rank_score]),
        retrieved=np.concatenate([pa.retrieved, pb.retrieved]),
        scores=np.concatenate([pa.scores, pb.scores], axis=3),
    )


def _stats(p: Prepared, C: np.ndarray, jury: list[int]) -> dict[tuple[str, str], np.ndarray]:
    """Every (judge, metric) as a vector over the rows of C; metrics: the headline three
    and `N_<dim>`."""
    out: dict[tuple[str, str], list[np.ndarray]] = {}
    for start in range(0, C.shape[0], _CHUNK):
        res = cube_from_counts(p, C[start : start + _CHUNK])
        part = _judge_vectors(p, res)
        part.update(_jury_vectors(p, part, jury, len(res["recall_at_k"])))
        part[("jury", "recall_at_k")] = res["recall_at_k"]
        for k, v in part.items():
            out.setdefault(k, []).append(np.asarray(v, float))
    return {k: np.concatenate(v) for k, v in out.items()}


def _normalised_dimensions(tm: np.ndarray) -> np.ndarray:
    """N_d of every judge, dimension and resample (J, D, B) from the trimmed means (J, sets, D, B);
    NaN where full - zero is not positive."""
    zero, rag, full = (A.SETS.index(s) for s in ("zero", "rag", "full"))
    with np.errstate(divide="ignore", invalid="ignore"):
        den = tm[:, full] - tm[:, zero]
        return np.where(den > 1e-12, 100 * (tm[:, rag] - tm[:, zero]) / den, np.nan)


def _judge_vectors(p: Prepared, res: dict[str, Any]) -> dict[tuple[str, str], np.ndarray]:
    """(judge, metric) -> its vector over the resamples: CuBE, W and each N_<dim>."""
    nd = _normalised_dimensions(res["trimmed_means"])
    part: dict[tuple[str, str], np.ndarray] = {}
    for j, judge in enumerate(p.judges):
        part[(judge, "cube_score")] = res["cube_score"][j]
        part[(judge, "weighted_score")] = res["weighted_score"][j]
        for d, dim in enumerate(p.dims):
            part[(judge, f"N_{dim}")] = nd[j, d]
    return part


def _jury_vectors(
    p: Prepared, part: dict[tuple[str, str], np.ndarray], jury: list[int], n: int
) -> dict[tuple[str, str], np.ndarray]:
    """("jury", metric) -> the mean of the jury's vectors (NaN without a jury). As in
    `cube.method.bootstrap.bootstrap_cube`: the jury always averages the same judges, so a
    resample (or permutation) where one member is undefined is undefined for the jury."""
    metrics = ["cube_score", "weighted_score", *(f"N_{d}" for d in p.dims)]
    if not jury:
        return {("jury", m): np.full(n, np.nan) for m in metrics}
    return {
        ("jury", m): np.mean(np.array([part[(p.judges[j], m)] for j in jury]), axis=0)
        for m in metrics
    }


# Settings of the judge gate's sample of missed questions' bounds (`cube.systems.bounds`): not
# part of CuBE's definition (given the same jury, W and CuBE are identical either way), but the gate
# reads other items on each side, so a difference is said on the page (`_gate_sample_flag`).
_GATE_SAMPLE = ("bounds_of_missed", "gate_bounds_questions")

# Analysis settings that do not enter the numbers being compared: resampling settings of the
# comparison itself (taken from side A), presentation thresholds and the gate's sample; `top_n` is
# per side.
_NOT_DEFINITION = frozenset(
    {
        *_GATE_SAMPLE,
        "top_n",
        "bootstrap",
        "cluster",
        "confidence",
        "interval",
        "seed",
        "verdict_thresholds",
        "weak_dimension_below",
        "low_recall_below",
        "max_interval_width",
    }
)


def definition_differences(ap_a: Any, ap_b: Any) -> list[str]:
    """The analysis keys (other than per-side `top_n` and resampling/presentation settings) whose
    values differ between the two sides, as `key: A=.. B=..` lines (empty: one definition
    of CuBE)."""
    da, db = ap_a.model_dump(), ap_b.model_dump()
    return [
        f"{k}: A={da[k]!r} B={db.get(k)!r}"
        for k in da
        if k not in _NOT_DEFINITION and da[k] != db.get(k)
    ]


def _gate_sample_flag(ap_a: Any, ap_b: Any) -> list[str]:
    """The page's sentence when the two sides' judge gates read different samples of missed
    questions' bounds (empty when their settings agree)."""
    da, db = ap_a.model_dump(), ap_b.model_dump()
    diff = [f"{k}: A={da.get(k)!r} B={db.get(k)!r}" for k in _GATE_SAMPLE if da.get(k) != db.get(k)]
    if not diff:
        return []
    return [
        "the two runs' judge gates read different samples of missed questions' bounds ("
        + "; ".join(diff)
        + "): W and CuBE are one definition, but each side's bounds test, failure rates and audit "
        "read other items and may have excluded other judges (the jury compared is the judges "
        "both gates kept)"
    ]


def _require_one_definition(ap: Any, ap_b: Any) -> None:
    diff = definition_differences(ap, ap_b)
    if diff:
        raise ValueError(
            "compare: the two sides' analysis settings differ, so their CuBE scores are not "
            "one definition and a paired delta would mix them; align these keys in the params "
            "(analysis section): " + "; ".join(diff)
        )


def _common_questions(
    a_answers: pd.DataFrame, b_answers: pd.DataFrame, na: int, nb: int, label_a: str, label_b: str
) -> tuple[set[Any], list[Any], list[Any]]:
    qa, qb = _known_questions(a_answers, na), _known_questions(b_answers, nb)
    common = qa & qb
    if not common:
        raise ValueError(
            f"compare {label_a} vs {label_b}: no question id in common (A has {len(qa)}, "
            f"B has {len(qb)} questions of known retrieval)"
        )
    return common, sorted(qa - qb, key=str), sorted(qb - qa, key=str)


def _common_judges(
    a_scores: pd.DataFrame, b_scores: pd.DataFrame, label_a: str, label_b: str
) -> tuple[list[Any], dict[str, str]]:
    ja, jb = set(a_scores["judge"].unique()), set(b_scores["judge"].unique())
    judges = sorted(ja & jb, key=str)
    excluded = {
        str(j): f"scored only side {'A' if j in ja else 'B'}" for j in sorted(ja ^ jb, key=str)
    }
    if not judges:
        raise ValueError(
            f"compare {label_a} vs {label_b}: no judge in common (A: {sorted(ja)}, B: {sorted(jb)})"
        )
    return judges, excluded


def _restrict(
    ans: pd.DataFrame, sc: pd.DataFrame, common: set[Any], judges: list[Any], dims: list[str]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    sc = sc[sc["question_id"].isin(common) & sc["judge"].isin(judges) & sc["dimension"].isin(dims)]
    return ans[ans["question_id"].isin(common)], sc


def _exclude_gate_failures(
    judges: list[Any], ta: pd.DataFrame, tb: pd.DataFrame, excluded: dict[str, str]
) -> list[Any]:
    """The judges in both sides' juries (`ta`, `tb`: each side's CuBE table with the gate's
    verdicts); each other one named in `excluded` with its sides' reasons."""
    in_a, in_b = E.jury_judges_of(ta), E.jury_judges_of(tb)
    out_a, out_b = E.excluded_judges_of(ta), E.excluded_judges_of(tb)
    jury_judges = [j for j in judges if j in in_a and j in in_b]
    for j in judges:
        if j not in jury_judges:
            why = "; ".join(f"{s}: {out[j]}" for s, out in (("A", out_a), ("B", out_b)) if j in out)
            excluded[str(j)] = f"fails the validity gate ({why})"
    return jury_judges


def _paired_bootstrap(
    pa: Prepared, pb: Prepared, jury: list[int], n_resamples: int, rng: np.random.Generator
) -> dict[tuple[str, str], np.ndarray]:
    if n_resamples <= 0:
        return {}
    C = resample_unit_counts(pa.unit_codes(), n_resamples, rng)  # families (or questions) drawn
    ba, bb = _stats(pa, C, jury), _stats(pb, C, jury)
    return {k: bb[k] - ba[k] for k in ba}


def _paired_permutations(
    pa: Prepared, pb: Prepared, jury: list[int], n_permutations: int, rng: np.random.Generator
) -> dict[tuple[str, str], np.ndarray]:
    if n_permutations <= 0:
        return {}
    units = pa.unit_codes()  # one coin per family: its questions swap together
    n_units = int(units.max()) + 1 if len(units) else 0
    M = (rng.random((n_permutations, n_units)) < 0.5).astype(float)[:, units]
    pab = _concat(pa, pb)
    sa, sb = _stats(pab, np.hstack([1 - M, M]), jury), _stats(pab, np.hstack([M, 1 - M]), jury)
    return {k: sb[k] - sa[k] for k in sa}


def _delta_row(
    key: tuple[str, str],
    va: float,
    vb: float,
    boot_d: dict[tuple[str, str], np.ndarray],
    perm_d: dict[tuple[str, str], np.ndarray],
    confidence: float,
    tail: float | None = None,
    tail_simultaneous: float | None = None,
) -> dict[str, Any]:
    """One (judge, metric) row: Δ, its percentile interval (each tail at `tail`, default
    (1 - confidence) / 2) and the simultaneous one (at `tail_simultaneous`, default `tail`),
    bootstrap SE and permutation p-value."""
    lo_q = (1 - confidence) / 2 if tail is None else tail
    hi_q = 1 - lo_q
    sim_q = lo_q if tail_simultaneous is None else tail_simultaneous
    judge, metric = key
    delta = vb - va
    row = {
        "judge": judge,
        "metric": metric,
        "a": va,
        "b": vb,
        "delta": delta,
        "lo": np.nan,
        "hi": np.nan,
        "lo_simultaneous": np.nan,
        "hi_simultaneous": np.nan,
        "se": np.nan,
        "p_value": np.nan,
        "n_valid": 0,
    }
    if key in boot_d:
        ok = boot_d[key][np.isfinite(boot_d[key])]
        row["n_valid"] = int(len(ok))
        if len(ok) >= 2:
            row["lo"], row["hi"] = (float(x) for x in np.quantile(ok, [lo_q, hi_q]))
            row["lo_simultaneous"], row["hi_simultaneous"] = (
                float(x) for x in np.quantile(ok, [sim_q, 1 - sim_q])
            )
            row["se"] = float(ok.std(ddof=1))
    if key in perm_d and math.isfinite(delta):
        d = perm_d[key][np.isfinite(perm_d[key])]
        tol = 1e-9 * max(1.0, abs(delta))
        row["p_value"] = (
            float((1 + np.sum(np.abs(d) >= abs(delta) - tol)) / (1 + len(d))) if len(d) else np.nan
        )
    return row


def interval_tail(confidence: float, n: int, n_units: int) -> float:
    """One tail's level of compare's percentile interval: (1 - confidence) / 2 on independent
    questions (measured: 95.7 % at 100 questions, docs/measurements.md), and the t level of
    `cube.method.bootstrap.expanded_alpha` at the number of families when fewer families than
    questions are resampled (at 20 families of 5 the plain percentile interval covered 91.9 %)."""
    from cube.method.bootstrap import expanded_alpha

    alpha = (1 - confidence) / 2
    return expanded_alpha(alpha, n_units) if 0 < n_units < n else alpha


def _deltas_table(rows: list[dict[str, Any]], dims: list[str]) -> pd.DataFrame:
    deltas = pd.DataFrame(rows)
    order = {m: i for i, m in enumerate([*HEADLINE, *(f"N_{d}" for d in dims)])}
    deltas = (
        deltas.assign(
            _j=deltas["judge"].map(lambda j: (j != "jury", str(j))), _m=deltas["metric"].map(order)
        )
        .sort_values(["_j", "_m"])
        .drop(columns=["_j", "_m"])
    )
    deltas = deltas.reset_index(drop=True)
    # the comparison page shows every row's p-value: adjusted over all of them (the family it shows)
    deltas["p_holm_rows"] = holm(deltas["p_value"].astype(float).tolist())
    return deltas


def _withhold_jury(
    cmp: PairComparison,
    ta: pd.DataFrame,
    tb: pd.DataFrame,
    boot_d: dict[tuple[str, str], np.ndarray],
    perm_d: dict[tuple[str, str], np.ndarray],
) -> None:
    withheld = False
    # a kept judge the verdict is withheld for (gate_withhold)
    for side, t in (("A", ta), ("B", tb)):
        for j in cmp.jury_judges:
            cause = str(t.at[j, "gate_withhold"]) if "gate_withhold" in t and j in t.index else ""
            if cause and cause != "nan":
                cmp.flags.append(f"{side}: judge {j}: {cause}")
                withheld = True
    if not withheld:
        return
    # the jury delta rests on a judge no test validated or a W that is noise: not published
    jury = (cmp.deltas["judge"] == "jury") & cmp.deltas["metric"].isin(
        ("cube_score", "weighted_score")
    )
    cmp.deltas.loc[
        jury,
        [
            c
            for c in ("delta", "lo", "hi", "lo_simultaneous", "hi_simultaneous", "se", "p_value")
            if c in cmp.deltas
        ],
    ] = np.nan
    cmp.deltas["p_holm_rows"] = holm(cmp.deltas["p_value"].astype(float).tolist())
    cmp.flags.append(
        "jury ΔCuBE and ΔW undefined: a jury judge's verdict is withheld on a side (the causes "
        "above); the per-judge deltas are shown per judge"
    )
    boot_d.pop(("jury", "cube_score"), None)
    perm_d.pop(("jury", "cube_score"), None)


def _flag_valid_share(
    cmp: PairComparison,
    boot_d: dict[tuple[str, str], np.ndarray],
    perm_d: dict[tuple[str, str], np.ndarray],
) -> None:
    jury_boot = boot_d.get(("jury", "cube_score"))
    jury_perm = perm_d.get(("jury", "cube_score"))
    cmp.valid_share = {
        "resamples": float(np.isfinite(jury_boot).mean()) if jury_boot is not None else None,
        "permutations": float(np.isfinite(jury_perm).mean()) if jury_perm is not None else None,
    }
    for what, share in cmp.valid_share.items():
        if share is not None and share < MIN_VALID_SHARE:
            cmp.flags.append(
                f"jury ΔCuBE defined in only {share:.0%} of the {what} (fewer than "
                f"{MIN_VALID_SHARE:.0%}): the {'interval' if what == 'resamples' else 'p-value'} "
                "rests on a selection of them"
            )


def _power_figures(
    cmp: PairComparison, n: int, alpha: float, power: float, n_units: int | None = None
) -> dict[str, Any]:
    se = cmp.row().get("se", np.nan)
    units = {"units": n_units or n, "mean_unit_size": n / (n_units or n) if n else math.nan}
    if se is not None and math.isfinite(se) and se > 0:
        sd_q = float(se * math.sqrt(n))
        need = (
            questions_needed(cmp.row()["delta"], sd_q, alpha, power)
            if np.isfinite(cmp.row()["delta"]) and cmp.row()["delta"]
            else None
        )
        return {
            **units,
            "families_needed": (
                math.ceil(need / units["mean_unit_size"]) if need is not None else None
            ),
            "se": float(se),
            "sd_per_question": sd_q,
            "mde": mde(se, alpha, power),
            "alpha": alpha,
            "power": power,
            "n_questions": n,
            "questions_for_observed_delta": need,
        }
    return {
        **units,
        "se": float("nan"),
        "mde": float("nan"),
        "alpha": alpha,
        "power": power,
        "n_questions": n,
        "note": (
            "no bootstrap spread of the jury ΔCuBE (no resamples, identical sides or undefined "
            "CuBE)"
        ),
    }


def compare_pair(
    a_answers: pd.DataFrame,
    a_scores: pd.DataFrame,
    b_answers: pd.DataFrame,
    b_scores: pd.DataFrame,
    analysis_params: Any = None,
    *,
    analysis_params_b: Any = None,
    top_n_a: int | None = None,
    top_n_b: int | None = None,
    labels: tuple[str, str] | None = None,
    dimensions: list[str] | None = None,
    n_resamples: int | None = None,
    n_permutations: int = 1000,
    seed: int | None = None,
    alpha: float | None = None,
    power: float = 0.8,
    clusters: Mapping[Any, Any] | None = None,
    n_pairs: int = 1,
) -> PairComparison:
    """ΔCuBE, ΔW, ΔR@k and every ΔN_d (B − A) per judge and jury, with a paired bootstrap
    interval, a paired permutation p-value and the power figures (see the module docstring).

    `analysis_params` are side A's analysis settings, `analysis_params_b` side B's (default: the
    same, e.g. two systems of one run). Each side uses its own TOP-N (`top_n_a` / `top_n_b`: the
    N the side was evaluated at, else its params' `top_n`, else 8); every other setting that
    enters CuBE (trim, subset, weights, gate, ...) must be the same on both sides, otherwise a
    `ValueError` names the differing keys (a paired Δ needs one definition of CuBE). Resampling
    settings (`bootstrap`, `confidence`, `seed`) are side A's. The MDE's level `alpha` defaults
    to the interval's, `1 - confidence`, so the MDE and the printed interval answer the same
    question. `clusters`: question id -> family, the resampling and swapping unit when side A's
    `analysis.cluster` is `family` (None: every question its own). `n_pairs`: the number of pairs
    shown together (the run's comparison table), for the simultaneous intervals at 1 − α/m."""
    from cube.config.sections import AnalysisParams

    ap = analysis_params or AnalysisParams()
    alpha = _default(alpha, 1 - ap.confidence)
    ap_b = analysis_params_b or ap
    _require_one_definition(ap, ap_b)
    n_resamples = _default(n_resamples, ap.bootstrap)
    seed = _default(seed, ap.seed)
    A.validate_answers(a_answers, "answers (A)")
    A.validate_answers(b_answers, "answers (B)")
    label_a, label_b = _labels(labels, a_answers, b_answers)
    na, nb = _side_top_n(top_n_a, ap), _side_top_n(top_n_b, ap_b)
    common, only_a, only_b = _common_questions(a_answers, b_answers, na, nb, label_a, label_b)
    judges, excluded = _common_judges(a_scores, b_scores, label_a, label_b)
    dims = dimensions or _shared_dimensions(a_scores, b_scores)
    a_ans, a_sc = _restrict(a_answers, a_scores, common, judges, dims)
    b_ans, b_sc = _restrict(b_answers, b_scores, common, judges, dims)
    verdicts = _verdicts_quietly((a_ans, a_sc, na), (b_ans, b_sc, nb), ap, judges, dims)
    ta, tb = verdicts[0].table, verdicts[1].table
    jury_judges = _exclude_gate_failures(judges, ta, tb, excluded)
    pa, pb = _prepared_pair(
        (a_ans, a_sc, na), (b_ans, b_sc, nb), ap, judges, dims, clusters, verdicts
    )
    n = len(pa.rank_score)
    jury = [pa.judges.index(j) for j in jury_judges]
    point_a, point_b = _stats(pa, np.ones((1, n)), jury), _stats(pb, np.ones((1, n)), jury)
    rng = np.random.default_rng(seed)
    boot_d = _paired_bootstrap(pa, pb, jury, n_resamples, rng)
    perm_d = _paired_permutations(pa, pb, jury, n_permutations, rng)
    n_units = _unit_count(pa, n)
    tail = interval_tail(ap.confidence, n, n_units)
    tail_sim = interval_tail(1 - (1 - ap.confidence) / max(n_pairs, 1), n, n_units)
    rows = [
        _delta_row(
            key,
            float(point_a[key][0]),
            float(point_b[key][0]),
            boot_d,
            perm_d,
            ap.confidence,
            tail,
            tail_sim,
        )
        for key in point_a
    ]
    cmp = PairComparison(
        label_a,
        label_b,
        n,
        only_a,
        only_b,
        judges,
        jury_judges,
        excluded,
        _deltas_table(rows, dims),
        settings={
            "n_resamples": n_resamples,
            "n_permutations": n_permutations,
            "seed": seed,
            "confidence": ap.confidence,
            "alpha": alpha,
            "power": power,
            "top_n_a": na,
            "top_n_b": nb,
            "dimensions": dims,
            "cluster": ap.cluster,
            "n_units": n_units,
            "n_pairs": n_pairs,
        },
    )
    _withhold_jury(cmp, ta, tb, boot_d, perm_d)
    _flag_valid_share(cmp, boot_d, perm_d)
    cmp.flags += _gate_sample_flag(ap, ap_b)
    cmp.power = _power_figures(cmp, n, alpha, power, cmp.settings["n_units"])
    return cmp


# --------------------------------------------------------------------------- compare_pair's steps


def _default(value: Any, default: Any) -> Any:
    """`value`, or `default` when it is None (0 and other falsy values are kept)."""
    return default if value is None else value


def _labels(
    labels: tuple[str, str] | None, a_answers: pd.DataFrame, b_answers: pd.DataFrame
) -> tuple[str, str]:
    """The sides' names: those given, else each side's system."""
    if labels:
        return labels[0], labels[1]
    return str(a_answers["system"].iloc[0]), str(b_answers["system"].iloc[0])


def _side_top_n(top_n: int | None, ap: Any) -> int:
    """A side's N: the one it was evaluated at, else its params' `top_n`, else 8."""
    return top_n or ap.top_n or 8


def _shared_dimensions(a_scores: pd.DataFrame, b_scores: pd.DataFrame) -> list[str]:
    """The dimensions both sides scored, in side A's dimension order."""
    in_b = set(b_scores["dimension"].unique())
    return [d for d in A.dimension_order(a_scores["dimension"].unique()) if d in in_b]


def _verdicts_quietly(
    a: tuple[pd.DataFrame, pd.DataFrame, int],
    b: tuple[pd.DataFrame, pd.DataFrame, int],
    ap: Any,
    judges: list[str],
    dims: list[str],
) -> tuple[E.Verdicts, E.Verdicts]:
    """Each side's CuBE table with the gate's verdicts (`evaluate`'s, without the parts the
    table does not read: `cube.method.evaluation.gate_verdicts`) on the shared questions,
    without warnings: the verdicts decide the jury of the comparison. With each, the score grid
    and ranks it rests on, which `_prepared_pair` reads."""
    quiet = ap.model_copy(update={"bootstrap": 0, "top_n": None})  # each side's N is explicit
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", A.CubeWarning)
        return tuple(  # type: ignore[return-value]
            E.gate_verdicts(answers, scores, quiet, n, judges=judges, dimensions=dims)
            for answers, scores, n in (a, b)
        )


def _prepared_pair(
    a: tuple[pd.DataFrame, pd.DataFrame, int],
    b: tuple[pd.DataFrame, pd.DataFrame, int],
    ap: Any,
    judges: list[str],
    dims: list[str],
    clusters: Mapping[Any, Any] | None,
    verdicts: tuple[E.Verdicts, E.Verdicts],
) -> tuple[Prepared, Prepared]:
    """Each side's (answers, scores, N) prepared for resampling under side A's settings, on the
    score grid and ranks of its `verdicts` (`_verdicts_quietly`: the same tables, judges,
    dimensions and N, so the same grid and ranks as `prepare` would make; made there when the
    side had no question of known retrieval)."""
    kw = dict(
        proportion=ap.trim_proportion,
        subset=ap.subset,
        mode=ap.weights,
        custom=ap.custom_weights,
        paired=ap.paired,
        judges=judges,
        dimensions=dims,
        fallback=ap.weights_fallback,
        clusters=clusters if ap.cluster == "family" else None,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", A.CubeWarning)
        return tuple(  # type: ignore[return-value]
            prepare(answers, scores, top_n=n, grid=v.grid, ranks=v.ranks, **kw)
            for (answers, scores, n), v in zip((a, b), verdicts, strict=True)
        )


def _unit_count(prepared: Prepared, n: int) -> int:
    """The number of resampling units (families or questions) of `n` shared questions."""
    return int(prepared.unit_codes().max()) + 1 if n else 0


def compare_all(
    answers: pd.DataFrame,
    scores: pd.DataFrame,
    analysis_params: Any = None,
    *,
    top_n: dict[str, int] | None = None,
    systems: list[str] | None = None,
    **kwargs: Any,
) -> tuple[dict[tuple[str, str], PairComparison], pd.DataFrame]:
    """Every pair of systems of one run (in the given order: A = earlier), and a summary table of
    the jury ΔCuBE with Holm-adjusted p-values over the pairs (`p_holm_pairs`) and simultaneous
    intervals over them (`delta_cube_ci_simultaneous`)."""
    systems = systems or list(dict.fromkeys(answers["system"].dropna()))
    out: dict[tuple[str, str], PairComparison] = {}
    # the run's `analysis.top_n` wins over each system's N
    run_n = getattr(analysis_params, "top_n", None)
    pairs = list(itertools.combinations(systems, 2))
    for a, b in pairs:
        out[(a, b)] = compare_pair(
            answers[answers["system"] == a],
            scores[scores["system"] == a],
            answers[answers["system"] == b],
            scores[scores["system"] == b],
            analysis_params,
            top_n_a=_system_top_n(run_n, top_n, a),
            top_n_b=_system_top_n(run_n, top_n, b),
            **{"n_pairs": len(pairs), **kwargs},
        )
    summary = pd.DataFrame([_summary_row(c) for c in out.values()])
    if len(summary):
        summary["p_holm_pairs"] = holm(summary["p_value"].astype(float).tolist())
    return out, summary


def _system_top_n(run_n: int | None, top_n: dict[str, int] | None, system: str) -> int | None:
    """A system's N in a run's comparison: the run's `analysis.top_n`, else the system's own."""
    return run_n or (top_n or {}).get(system)


def _summary_row(comparison: PairComparison) -> dict[str, Any]:
    """A pair's headline for the summary table (without the judge lists)."""
    return {
        k: v
        for k, v in comparison.headline().items()
        if k not in ("jury_judges", "excluded_judges")
    }
