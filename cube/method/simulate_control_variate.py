"""The cheap-judge control variate simulated (issue 40, item 2): coverage at every look, variance
cut and calls per verdict of a sequential run, against the jury alone and a Neyman allocation.

A replicate is one question set of `n` questions drawn from `cube.method.simulate`'s model (its two
judges are the jury), with cheap judges added beside them (`CheapJudge`): on every (set,
dimension, question) a cheap judge scores

    offset + scale * (m + s * (rho * z + sqrt(1 - rho^2) * e)),  e ~ N(0, 1)

with z the jury's per-question score (the mean of its judges) standardised over the set's questions
(m, s its mean and SD), so its correlation with the jury's score is rho, and `offset` / `scale`
/ `bias_rag` (added to rag answers only) make it lenient, compressed or partial to the system:
the control variate must stay unbiased all the same. Not rounded nor clipped, so rho is the set
value. Every question is answered and scored by the cheap judges up front (the answered set A, the
whole set); the jury judges them in the design's order, one question per family in a seeded
round-robin (families in a random order, the k-th member of each in round k: the order the issue
proposes for the driver), a look every `rule.batch` judged questions from `rule.min_questions` on.

At each look every estimator is computed from one `cube_from_counts` call of the whole replicate
(`control_variate.look_rows` of every look stacked): `jury` (the jury CuBE on J alone, lambda = 0)
and one control-variate estimate per cheap judge (`control_variate.control_variate_look`), with the
same jackknife groups (`sequential.jackknife_groups` over A's families), under each boundary of the
design (a callable: today's AsympCS and a finite-horizon constant). The stop is
`sequential.decide` on the look (at least `MIN_GROUPS` judged groups, `MIN_RETRIEVED` retrieved
judged questions), so the run stops at the first look whose interval lies in one band.

`neyman_variance` compares another design at one fixed n: the jury's questions drawn by a Neyman
allocation over strata of the cheap judge's per-question influence on its CuBE (the surrogate's
leave-one-out values, quartiles; n_h proportional to N_h x the stratum's SD of them), the jury
CuBE weighted by N_h / n_h (counts), against a simple random subset of the same size, with and
without the control variate. Pure: numpy, scipy and pandas only.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from cube.method import control_variate as cv
from cube.method import sequential as seq
from cube.method.bootstrap import Prepared, cube_from_counts
from cube.method.simulate import RunModel, draw_questions, prepared_run
from cube.method.simulate_sequential import round_robin_order
from cube.method.simulate_study import mc_rate, replicate_seed

THRESHOLDS = {"excellent": 80.0, "good": 60.0, "fair": 40.0}
RHOS = (0.0, 0.3, 0.5, 0.7, 0.9)
WORLDS: dict[str, dict[str, Any]] = {
    "independent": {},
    "families of 5": {  # benchmarks/sequential_cube.py's fam5 world
        "family_size": 5,
        "family_retrieval_share": 0.5,
        "family_correctness_share": 1.0,
        "answer_sd": 0.25,
    },
}
JURY = "jury"  # the estimator name of the jury alone


@dataclass(frozen=True)
class CheapJudge:
    """A simulated cheap judge: correlation `rho` with the jury's per-question score, and its
    leniency (`offset`), scale and partiality to the system's answers (`bias_rag`)."""

    name: str
    rho: float
    offset: float = 0.0
    scale: float = 1.0
    bias_rag: float = 0.0
    llm: bool = False  # its calls are counted (a cheap LLM) or free (the offline rubric judge)


def default_cheap() -> tuple[CheapJudge, ...]:
    """One unbiased cheap judge per rho of `RHOS`, and a biased one at 0.7 (offset 2, scale 0.6,
    +1.5 on rag answers)."""
    plain = tuple(CheapJudge(f"cheap rho {r:g}", r) for r in RHOS)
    return (*plain, CheapJudge("cheap rho 0.7 biased", 0.7, 2.0, 0.6, 1.5))


@dataclass(frozen=True)
class CVDesign:
    """One simulated world: the model (truth placed), set size, stop rule, truth, cheap judges and
    boundaries (name -> `control_variate.Boundary`)."""

    model: RunModel
    n: int
    rule: seq.StopRule
    truth: float
    cheap: tuple[CheapJudge, ...] = field(default_factory=default_cheap)
    boundaries: Mapping[str, cv.Boundary] = field(default_factory=dict)
    thresholds: tuple[tuple[str, float], ...] = tuple(THRESHOLDS.items())
    max_groups: int = 40

    def band(self, x: float) -> int:
        """The verdict band index of a score (-1 when undefined)."""
        if not math.isfinite(x):
            return -1
        return int(np.searchsorted(sorted(t for _, t in self.thresholds), x, side="right"))


def cheap_scores(
    jury_scores: np.ndarray, judge: CheapJudge, rng: np.random.Generator
) -> np.ndarray:
    """A cheap judge's scores (sets, dims, n) from the jury's (judges, sets, dims, n)."""
    y = jury_scores.mean(axis=0)
    m = y.mean(axis=-1, keepdims=True)
    s = y.std(axis=-1, keepdims=True)
    z = np.where(s > 0, (y - m) / np.where(s > 0, s, 1.0), 0.0)
    e = rng.standard_normal(y.shape)
    out = judge.offset + judge.scale * (m + s * (judge.rho * z + math.sqrt(1 - judge.rho**2) * e))
    out[1] += judge.bias_rag  # sets are zero, rag, full (cube.method.analysis.SETS)
    # on a 0.1 grid: a few dozen distinct values keep the trimmed means on their fast path
    return np.round(out, 1)


def with_cheap(p: Prepared, cheap: tuple[CheapJudge, ...], rng: np.random.Generator) -> Prepared:
    """The prepared run with the cheap judges added after the jury's judges."""
    extra = np.stack([cheap_scores(p.scores, c, rng) for c in cheap])
    return dataclasses.replace(
        p, judges=[*p.judges, *(c.name for c in cheap)], scores=np.concatenate([p.scores, extra])
    )


def look_sizes(n: int, rule: seq.StopRule) -> list[int]:
    """Judged questions at each look: every `batch` from `min_questions` on, and the whole set."""
    sizes = list(range(rule.min_questions, n, rule.batch))
    return [*sizes, n]


def replicate_looks(design: CVDesign, replicate: int, seed: int = 0) -> pd.DataFrame:
    """One replicate: a row per (look, estimator, boundary) with the estimate, bounds, lambda, the
    jackknife's variance ratio and effective rho, and whether the run may and would stop there."""
    rs = replicate_seed(seed, design.n, replicate, 40)
    q = draw_questions(design.model, design.n, np.random.default_rng(rs))
    p = prepared_run(design.model, design.n, rs + 1, questions=q)
    p = with_cheap(p, design.cheap, np.random.default_rng(rs + 2))
    units = p.unit_codes()
    order = round_robin_order(units, np.random.default_rng(rs + 3))
    groups = seq.jackknife_groups(units, design.max_groups, rs + 4)
    sizes = look_sizes(design.n, design.rule)
    rows = []
    for m in sizes:
        judged = np.zeros(design.n, dtype=bool)
        judged[order[:m]] = True
        both = cv.look_rows(judged, groups)  # A is the whole set at every look: its rows once
        rows += [both[: len(both) // 2]] if not rows else []
        rows.append(both[len(both) // 2 :])
    counts = np.vstack(rows)
    with np.errstate(all="ignore"):
        cube = cube_from_counts(p, counts)["cube_score"]
    jury = cube[: len(design.model.judges)].mean(axis=0)  # the model's judges are the jury
    return _looks_table(design, p, cube, jury, sizes, order, groups)


def _looks_table(
    design: CVDesign,
    p: Prepared,
    cube: np.ndarray,
    jury: np.ndarray,
    sizes: list[int],
    order: np.ndarray,
    groups: np.ndarray,
) -> pd.DataFrame:
    G = int(groups.max()) + 1
    per = 1 + G  # the rows of A (once), then of J at each look
    out = []
    thresholds = dict(design.thresholds)
    for k, m in enumerate(sizes):
        base = (k + 1) * per
        y = jury[base : base + per]
        judged_groups = int(np.unique(groups[order[:m]]).size)
        hits = int(p.retrieved[order[:m]].sum())
        crit = {b: _fixed_at(f, m, judged_groups) for b, f in design.boundaries.items()}
        estimators = [(JURY, y, y, y, 0.0)]
        for c_i, c in enumerate(design.cheap, start=len(p.judges) - len(design.cheap)):
            f = cube[c_i]
            estimators.append((c.name, y, f[:per], f[base : base + per], "auto"))
        for name, yy, fa, fj, lam in estimators:
            for b_name, c_value in crit.items():
                look = cv.control_variate_look(yy, fa, fj, m, c_value, lam=lam)
                s_look = seq.Look(m, look.estimate, look.lower, look.upper, judged_groups, hits)
                may = seq.not_yet(s_look, design.rule) is None
                stop = seq.decide(s_look, design.rule, thresholds).stop
                out.append(
                    (m, name, b_name, look.estimate, look.lower, look.upper, look.lam,
                     look.variance_ratio, look.rho, may, stop)
                )  # fmt: skip
    cols = ["n", "estimator", "boundary", "estimate", "lower", "upper", "lam", "var_ratio", "rho",
            "may_stop", "stop"]  # fmt: skip
    return pd.DataFrame(out, columns=cols)


def _fixed_at(boundary: cv.Boundary, n: int, groups: int) -> cv.Boundary:
    """The boundary's value at this look, its t allowance at the groups that hold a judged
    question (a group without one adds nothing to the jury's jackknife), computed once."""
    value = boundary(n, groups)
    return lambda _n, _g: value


def run_design(design: CVDesign, replicates: range, seed: int = 0) -> pd.DataFrame:
    """Every look of the replicates, one table (`replicate` column added)."""
    parts = [replicate_looks(design, r, seed).assign(replicate=r) for r in replicates]
    return pd.concat(parts, ignore_index=True)


def calls_per_question(model: RunModel) -> tuple[int, int]:
    """(answer calls, jury judge calls) per question: three answers; one call per jury judge, set
    and dimension."""
    return 3, 3 * len(model.judges) * len(model.dimensions)


def summary(design: CVDesign, looks: pd.DataFrame) -> pd.DataFrame:
    """Per estimator and boundary: coverage at every look (where a stop was allowed), bias and
    variance ratio at the 100-question look (empirical, over replicates, against the jury's),
    lambda, effective rho, questions and calls at the stop, wrong verdicts, calls saved against
    the fixed-n run of the whole set (jury calls; answers of every question; a cheap LLM judge's
    calls counted, 3 x dimensions per question)."""
    t = design.truth
    answer, judge = calls_per_question(design.model)
    fixed = design.n * (answer + judge)
    at = min(looks["n"].unique(), key=lambda m: abs(m - 100))
    ref = looks[(looks["estimator"] == JURY) & (looks["n"] == at)]
    ref_var = ref.groupby("boundary")["estimate"].var().mean()
    rows = []
    for (name, b_name), g in looks.groupby(["estimator", "boundary"], sort=False):
        may = g[g["may_stop"]]
        held = ((may["lower"] <= t) & (t <= may["upper"])).groupby(may["replicate"]).all()
        stops = g.sort_values("n").groupby("replicate").apply(_stop_row, include_groups=False)
        n_used = stops["n"].astype(float)
        wrong = stops["estimate"].map(design.band) != design.band(t)
        at_n = g[g["n"] == at]
        cheap = next((c for c in design.cheap if c.name == name), None)
        up_front = design.n * answer if cheap is not None else 0.0
        llm = design.n * 3 * len(design.model.dimensions) if cheap and cheap.llm else 0.0
        calls = up_front + llm + n_used.mean() * (judge + (0 if cheap else answer))
        cov, cov_se, _ = mc_rate(held)
        wr, wr_se, _ = mc_rate(wrong)
        rows.append(
            {
                "estimator": name,
                "boundary": b_name,
                "coverage": cov,
                "coverage_mc_se": cov_se,
                "bias_at_100": float(at_n["estimate"].mean() - t),
                "var_ratio_at_100": float(at_n["estimate"].var() / ref_var),
                "jackknife_var_ratio": float(g["var_ratio"].median()),
                "lam": float(g["lam"].median()),
                "rho_effective": float(g["rho"].median()),
                "questions": float(n_used.mean()),
                "wrong": wr,
                "wrong_mc_se": wr_se,
                "calls": float(calls),
                "saved": fixed / float(calls),
            }
        )
    return pd.DataFrame(rows)


def _stop_row(g: pd.DataFrame) -> pd.Series:
    """A replicate's look where it stopped (its last when it never did)."""
    hit = g[g["stop"]]
    return (hit.iloc[0] if len(hit) else g.iloc[-1])[["n", "estimate"]]


def neyman_variance(
    design: CVDesign, n_judged: int, replicates: range, seed: int = 0, strata: int = 4
) -> pd.DataFrame:
    """The other design at one fixed n: per replicate the jury CuBE from n questions taken one per
    family first (`uniform`, the round-robin order's first n), the control variate on them
    (`uniform + cv`), and a Neyman allocation by each cheap judge's influence (`neyman`: strata of
    its leave-one-question-out CuBE values, quartiles; n_h proportional to N_h x their SD, at
    least 2; the jury CuBE weighted by N_h / n_h as counts). One row per replicate, design and
    cheap judge with the estimate (the caller compares their variances)."""
    out = []
    n_jury = len(design.model.judges)
    for r in replicates:
        rs = replicate_seed(seed, design.n, r, 41)
        q = draw_questions(design.model, design.n, np.random.default_rng(rs))
        p = prepared_run(design.model, design.n, rs + 1, questions=q)
        p = with_cheap(p, design.cheap, np.random.default_rng(rs + 2))
        rng = np.random.default_rng(rs + 3)
        groups = seq.jackknife_groups(p.unit_codes(), design.max_groups, rs + 4)
        uni = np.zeros(design.n, dtype=bool)
        uni[round_robin_order(p.unit_codes(), rng)[:n_judged]] = True
        rows = cv.look_rows(uni, groups)
        loo = 1.0 - np.eye(design.n)  # the cheap judges' influence: leave one question out
        with np.errstate(all="ignore"):
            cube = cube_from_counts(p, np.vstack([rows, loo]))["cube_score"]
        per = rows.shape[0] // 2
        y = cube[:n_jury, per : 2 * per].mean(axis=0)
        out.append((r, "uniform", "", float(y[0])))
        weights = []
        for c_i, c in enumerate(design.cheap, start=n_jury):
            f = cube[c_i]
            est = cv.control_variate_values(y, f[:per], f[per : 2 * per]).estimate
            out.append((r, "uniform + cv", c.name, est))
            weights.append(_neyman_counts(f[2 * per :], n_judged, strata, rng))
        with np.errstate(all="ignore"):
            ney = cube_from_counts(p, np.vstack(weights))["cube_score"][:n_jury].mean(axis=0)
        out += [(r, "neyman", c.name, float(v)) for c, v in zip(design.cheap, ney, strict=True)]
    return pd.DataFrame(out, columns=["replicate", "design", "cheap", "estimate"])


def _neyman_counts(loo: np.ndarray, n: int, strata: int, rng: np.random.Generator) -> np.ndarray:
    """The counts of a Neyman sample of n questions over strata of a surrogate's leave-one-out
    values (its influence), each drawn question weighted N_h / n_h."""
    infl = np.nan_to_num(np.nanmean(loo) - loo)
    edges = np.quantile(infl, np.linspace(0, 1, strata + 1)[1:-1])
    h = np.searchsorted(edges, infl, side="right")
    size = np.bincount(h, minlength=strata).astype(float)
    sd = np.array([infl[h == k].std() if size[k] > 1 else 0.0 for k in range(strata)])
    want = size * np.maximum(sd, 1e-9)
    alloc = np.clip(np.round(n * want / want.sum()), 2, size).astype(int)
    counts = np.zeros(loo.size)
    for k in range(strata):
        members = np.flatnonzero(h == k)
        if members.size:
            pick = rng.choice(members, size=min(alloc[k], members.size), replace=False)
            counts[pick] = members.size / pick.size
    return counts


__all__ = [
    "JURY",
    "RHOS",
    "THRESHOLDS",
    "WORLDS",
    "CVDesign",
    "CheapJudge",
    "calls_per_question",
    "cheap_scores",
    "default_cheap",
    "look_sizes",
    "neyman_variance",
    "replicate_looks",
    "run_design",
    "summary",
    "with_cheap",
]
