"""The sequential design simulated (issue 31, item 3): does the jury CuBE's confidence sequence
cover, and what does stopping save, on runs of `cube.method.simulate`'s model with a known truth.

A replicate is one simulated run of up to `n` questions taken as the sequential driver takes them:
its families in a seeded random order (a family's questions together), in batches of whole families
of at least `rule.batch` questions, a look after each batch from `rule.min_questions` on. At each
look the jury CuBE of the questions reached is the method's own arithmetic,
`cube.method.bootstrap.cube_from_counts` (which reproduces `evaluate`, tested): a counts row of 1
on the questions reached and 0 elsewhere is the run of those questions, and rows with one
jackknife group (`sequential.jackknife_groups` over the families reached) also set to 0 are its
leave-group-out values, so every look of a replicate is one matrix call. The sequence is
`sequential.functional_look` (the AsympCS boundary around the estimate, sd = sqrt(n) x the grouped
jackknife SE, on the design's `scale`: the square root by default, as the driver builds it) and the
stop `sequential.decide`: the functions the driver uses.

Beside it, per replicate: the fixed-n normal interval estimate +- z SE with the same jackknife SE
(what a run that re-uses a fixed-n interval at every look would act on: its coverage at every look,
and the run that stops as soon as it lies in one band, `peek`), and the verdict of a fixed-n run of
every look size (the band of its point estimate), so the summary can say which fixed n gives the
sequential run's wrong-verdict rate.

The jury is every simulated judge (as `simulate_study.jury_truth`; the gate is not simulated
here). The truth is placed by the system's R@k (`recall_for`): CuBE = W x R@k, and moving the
retriever's recall leaves the answers' W nearly as it is, down to R@k 0.15 (moving the answer
quality instead cannot go below a CuBE of about 16, where the correlation weights vanish).
Pure: numpy, scipy and pandas only.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import optimize
from scipy.stats import norm

from cube.method import sequential as seq
from cube.method.bootstrap import Prepared, cube_from_counts
from cube.method.simulate import RunModel, draw_questions, prepared_run
from cube.method.simulate_study import jury_truth, mc_rate, replicate_seed

THRESHOLDS = {"excellent": 80.0, "good": 60.0, "fair": 40.0}  # analysis.thresholds' defaults
DISTANCES = (0.0, 5.0, 10.0, 15.0, 20.0, 30.0)  # points below the lowest edge (`fair`'s 40)


@dataclass(frozen=True)
class Design:
    """One simulated sequential design: the run model (its truth placed), the set size, the stop
    rule, the verdict thresholds, the estimator's trimming and weights, the jury's true CuBE."""

    model: RunModel
    n: int
    rule: seq.StopRule
    truth: float
    thresholds: tuple[tuple[str, float], ...] = tuple(THRESHOLDS.items())
    proportion: float = 0.1
    weights: str = "rank_correlation"
    max_groups: int = 40
    scale: str = seq.DEFAULT_SCALE  # the sequence's (`sequential.functional_look`)

    @property
    def edge(self) -> float:
        """The lowest verdict edge: the truths sit below it, in the band under it (`poor`, 0-40
        by default: the only band 30 points wide)."""
        return min(t for _, t in self.thresholds)

    def bands(self, x: np.ndarray) -> np.ndarray:
        """The verdict band index of each score (0 poor ...; a score at t is in t's band); -1 when
        undefined."""
        edges = sorted(t for _, t in self.thresholds)
        x = np.asarray(x, dtype=float)
        return np.where(np.isfinite(x), np.searchsorted(edges, x, side="right"), -1)


def calls_per_question(model: RunModel) -> int:
    """LLM calls one question costs: three answers (zero, rag, full) and one judge call per judge,
    set and dimension (one sample each, as the simulated judges)."""
    return 3 + 3 * len(model.judges) * len(model.dimensions)


def recall_for(model: RunModel, target: float, analysis_params: Any, n: int = 50_000) -> float:
    """The system R@k that puts the true jury CuBE at `target` (on `n` truth questions)."""

    def gap(r: float) -> float:
        return jury_truth(model.with_system(recall=r), analysis_params, n) - target

    lo, hi = 0.02, 1.0
    if gap(lo) * gap(hi) > 0:
        raise ValueError(
            f"simulation: no R@k in [{lo}, {hi}] puts the true jury CuBE at {target:g} points"
        )
    return float(optimize.brentq(gap, lo, hi, xtol=1e-5))


def driver_order(units: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The questions in the driver's order: families in a seeded random order, the questions of a
    family together (a batch is then whole families, never one family's questions split)."""
    codes, inverse = np.unique(units, return_inverse=True)
    rank = np.empty(codes.size, dtype=int)
    rank[rng.permutation(codes.size)] = np.arange(codes.size)
    return np.lexsort((np.arange(units.size), rank[inverse]))


def look_sizes(units_in_order: np.ndarray, batch: int, min_questions: int) -> np.ndarray:
    """The questions reached at each look: batches of whole families of at least `batch`
    questions; looks from `min_questions` on, and the last at the set's end."""
    ends, start = [], 0
    n = units_in_order.size
    family_end = np.flatnonzero(np.r_[units_in_order[1:] != units_in_order[:-1], True]) + 1
    for end in family_end:
        if end - start >= batch or end == n:
            ends.append(int(end))
            start = int(end)
    sizes = np.array([m for m in ends if m >= min_questions] or ends[-1:], dtype=int)
    return sizes


def look_counts(
    units_in_order: np.ndarray, sizes: np.ndarray, max_groups: int, seed: int
) -> tuple[np.ndarray, list[slice]]:
    """The counts rows of every look (questions in the driver's order): per look, a row of 1 on the
    questions reached, then one row per jackknife group with that group also at 0; and each look's
    slice of rows."""
    n = units_in_order.size
    rows, slices, start = [], [], 0
    for m in sizes:
        groups = seq.jackknife_groups(units_in_order[:m], max_groups, seed)
        reached = np.zeros((1, n))
        reached[0, :m] = 1.0
        keep = np.zeros((int(groups.max()) + 1, n))
        keep[:, :m] = groups[None, :] != np.arange(keep.shape[0])[:, None]
        slices.append(slice(start, start + 1 + len(keep)))
        start += 1 + len(keep)
        rows += [reached, keep]
    return np.vstack(rows), slices


def jury_cube(p: Prepared, counts: np.ndarray) -> np.ndarray:
    """The jury CuBE (the mean of every judge's; undefined when one judge's is) of each counts
    row."""
    return cube_from_counts(p, counts)["cube_score"].mean(axis=0)


def replicate_looks(design: Design, replicate: int, seed: int = 0) -> pd.DataFrame:
    """One simulated run, looked at as the driver looks: one row per look with `n`, `estimate`, the
    sequence's `lower`/`upper`, the fixed-n normal interval `fixed_lo`/`fixed_hi` (same SE) and
    `stop` (the stop rule's decision at that look; every look is computed, also after a stop)."""
    rep_seed = replicate_seed(seed, design.n, replicate, 31)
    model = design.model
    q = draw_questions(model, design.n, np.random.default_rng(rep_seed))
    p = prepared_run(model, design.n, rep_seed + 1, questions=q)
    order = driver_order(q.families(), np.random.default_rng(rep_seed + 2))
    p = dataclasses.replace(reordered(p, order), proportion=design.proportion, mode=design.weights)
    units = p.unit_codes()
    sizes = look_sizes(units, design.rule.batch, design.rule.min_questions)
    counts, slices = look_counts(units, sizes, design.max_groups, rep_seed + 3)
    values = jury_cube(p, counts)
    z = norm.ppf(1 - design.rule.alpha / 2)
    rows = []
    for m, part in zip(sizes, slices, strict=True):
        est, leave_out = values[part][0], values[part][1:]
        hits = int(np.asarray(p.retrieved[:m]).sum())
        look = seq.functional_look(
            est, leave_out, int(m), design.rule, retrieved=hits, scale=design.scale
        )
        half = z * seq.jackknife_se(leave_out)
        stop = seq.decide(look, design.rule, dict(design.thresholds)).stop
        may = seq.not_yet(look, design.rule) is None
        rows.append((int(m), est, look.lower, look.upper, est - half, est + half, stop, may))
    cols = ["n", "estimate", "lower", "upper", "fixed_lo", "fixed_hi", "stop", "may_stop"]
    return pd.DataFrame(rows, columns=cols)


def reordered(p: Prepared, order: np.ndarray) -> Prepared:
    """The prepared arrays with the questions in `order` (the driver's)."""
    return dataclasses.replace(
        p,
        rank_score=p.rank_score[order],
        retrieved=p.retrieved[order],
        scores=p.scores[..., order],
        units=p.unit_codes()[order],
    )


def replicate_summary(design: Design, looks: pd.DataFrame) -> dict[str, Any]:
    """What one replicate says: whether the sequence (and the fixed-n interval re-used at every
    look) held the truth at every defined look, whether the sequence missed it at the first look,
    where the sequential run stopped and the band it gave, where a run stopping on the re-used
    fixed-n interval would have, and the band of the point estimate at every look size (`band_at`:
    a fixed-n run of that size)."""
    t = design.truth
    # coverage over the looks at which the run may stop (`sequential.not_yet`): the others act on
    # nothing; a run that never reaches one has no sequence to judge (`undefined_look`)
    defined = looks["may_stop"].astype(bool)
    held = (looks["lower"] <= t) & (t <= looks["upper"])
    fixed_held = (looks["fixed_lo"] <= t) & (t <= looks["fixed_hi"])
    band_at = design.bands(looks["estimate"].to_numpy())
    at = int(np.argmax(looks["stop"])) if looks["stop"].any() else len(looks) - 1
    fixed_bands = design.bands(looks[["fixed_lo", "fixed_hi"]].to_numpy())
    peek_ok = defined.to_numpy() & (
        (fixed_bands[:, 0] == fixed_bands[:, 1]) & (fixed_bands[:, 0] >= 0)
    )
    peek = int(np.argmax(peek_ok)) if peek_ok.any() else len(looks) - 1
    return {
        "covered": bool(held[defined].all()),
        "missed_first_look": bool(defined.any() and not held[defined].iloc[0]),
        "fixed_covered": bool(fixed_held[defined].all()),
        "fixed_covered_full": bool(fixed_held.iloc[-1]),
        "undefined_look": bool(not defined.any()),
        "stopped": bool(looks["stop"].any()),
        "n_used": int(looks["n"].iloc[at]),
        "band": int(band_at[at]),
        "peek_n": int(looks["n"].iloc[peek]),
        "peek_band": int(band_at[peek]),
        "band_at": band_at,
        "sizes": looks["n"].to_numpy(),
    }


def run_design(design: Design, replicates: Iterable[int], seed: int = 0) -> list[dict[str, Any]]:
    """The summaries of the replicates numbered `replicates` (each has its own seed, so a share
    of them run in one process gives what the whole would: `cube.run.simulate` spreads them)."""
    return [replicate_summary(design, replicate_looks(design, r, seed)) for r in replicates]


def summary_row(design: Design, reps: list[dict[str, Any]]) -> dict[str, Any]:
    """The design's figures over its replicates, each rate with its Monte Carlo SE (`mc_rate`):
    coverage, questions and calls used against the full set, wrong verdicts of the sequential run,
    of the fixed-n run of the full set, of a fixed-n run at the sequential run's mean n (the first
    look size at or above it), of the peeking run, and `n_same_error`: the look size from which on
    every fixed-n run errs no more often than the sequential run (NaN when the full set's does;
    read it beside the rates: on a band's edge every verdict is a coin toss and this is noise)."""
    df = pd.DataFrame([{k: v for k, v in r.items() if k not in ("band_at", "sizes")} for r in reps])
    truth_band = int(design.bands(np.array([design.truth]))[0])
    used = df["n_used"].astype(float)
    # replicates x looks: families of unequal size make a replicate's look sizes differ a little
    # (42 or 43 questions) and their number too; looks are lined up by their order, a shorter
    # replicate's last (its whole set) repeated, and a look's size is its median over replicates
    looks = max(len(r["sizes"]) for r in reps)
    bands = np.vstack([np.pad(r["band_at"], (0, looks - len(r["band_at"])), "edge") for r in reps])
    sizes = np.median(
        np.vstack([np.pad(r["sizes"], (0, looks - len(r["sizes"])), "edge") for r in reps]), axis=0
    ).astype(int)
    wrong_by_n = (bands != truth_band).mean(axis=0)
    wrong_seq = mc_rate(df["band"] != truth_band)
    at_mean = int(np.searchsorted(sizes, used.mean() - 1e-9))
    at_mean = min(at_mean, len(sizes) - 1)
    # from this look size on, every fixed-n run errs no more often than the sequential run
    worse = np.flatnonzero(wrong_by_n > wrong_seq[0])
    same_from = 0 if not worse.size else int(worse[-1]) + 1
    per_q = calls_per_question(design.model)
    row = {
        "truth": design.truth,
        "inside": abs(design.truth - design.edge),
        "recall": design.model.system.recall,
        "family_size": design.model.family_size,
        "replicates": len(df),
        "max_questions": design.n,
        "calls_per_question": per_q,
    }
    for key, flags in (
        # coverage over the replicates that had a look where a stop was allowed (the others had
        # no sequence to judge: their share is `undefined_look`; all of them: NaN, not 1)
        ("coverage", df.loc[~df["undefined_look"], "covered"]),
        ("missed_first_look", df["missed_first_look"]),
        ("fixed_coverage_every_look", df.loc[~df["undefined_look"], "fixed_covered"]),
        ("fixed_coverage_full", df["fixed_covered_full"]),
        ("undefined_look", df["undefined_look"]),
        ("settled", df["stopped"]),
        ("wrong_full", pd.Series(bands[:, -1] != truth_band)),
        ("wrong_at_mean_n", pd.Series(bands[:, at_mean] != truth_band)),
        ("wrong_peek", df["peek_band"] != truth_band),
    ):
        rate, se, _ = mc_rate(flags)
        row[key], row[f"{key}_mc_se"] = rate, se
    row["wrong_sequential"], row["wrong_sequential_mc_se"] = wrong_seq[0], wrong_seq[1]
    row.update(
        {
            "mean_questions": float(used.mean()),
            "mean_questions_mc_se": float(used.std(ddof=1) / math.sqrt(len(used))),
            "mean_calls": float(used.mean()) * per_q,
            "full_calls": design.n * per_q,
            "calls_saved": design.n / float(used.mean()),
            "fixed_n_at_mean": int(sizes[at_mean]),
            "n_same_error": int(sizes[same_from]) if same_from < len(sizes) else math.nan,
            "peek_mean_questions": float(df["peek_n"].mean()),
        }
    )
    return row


__all__ = [
    "DISTANCES",
    "THRESHOLDS",
    "Design",
    "calls_per_question",
    "driver_order",
    "look_counts",
    "look_sizes",
    "recall_for",
    "reordered",
    "replicate_looks",
    "replicate_summary",
    "run_design",
    "summary_row",
]
