"""The sequential design simulated (issue 31, item 3): does the jury CuBE's confidence sequence
cover, and what does stopping save, on runs of `cube.method.simulate`'s model with a known truth.

A replicate is one simulated run of up to `n` questions taken as the sequential driver takes them
(`Design.order`): `spread` (the driver's default, `group_sequential.spread_order`) or the round
robin it replaced (`round_robin_order`, kept to measure its family-size bias) in batches of exactly
`rule.batch` questions, or `families`, its families in a seeded random order (a family's questions
together) in batches of whole families of at least `rule.batch` questions; a look after each batch
from `rule.min_questions` on. A world of unequal families (`Design.singletons`: one-question
families of their own system beside the model's families, `drawn_run`, its truth `mixed_truth`)
makes the score go with family size. At each
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
from cube.method.group_sequential import critical_value, spread_order
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
    order: str = "families"  # "spread" (`group_sequential.spread_order`), "round_robin" (below)
    recall_from: str = "judged"  # or "all": R@k from every question's retrieval (free)
    # unequal families: `singleton_questions` of the n questions drawn from `singletons` (a model
    # of one-question families, its own system), the rest from `model` (`mixed_truth`)
    singletons: RunModel | None = None
    singleton_questions: int = 0

    @property
    def edge(self) -> float:
        """The lowest verdict edge: the truths sit below it, in the band under it (`poor`, 0-40
        by default: the only band 30 points wide)."""
        return min(t for _, t in self.thresholds)

    @property
    def nearest_edge(self) -> float:
        """Points from the truth to the nearest verdict edge (10 at the centre of a 20-point
        band)."""
        return min(abs(self.truth - t) for _, t in self.thresholds)

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


def round_robin_order(units: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The questions one per family per round: the families in a seeded random order, each
    family's questions in a seeded random order, round r taking the r-th question of every family
    that has one. The driver's order of the first issue-40 merge, kept to measure its family-size
    bias against `spread` (`group_sequential.spread_order`, the driver's now)."""
    codes, inverse = np.unique(units, return_inverse=True)
    rank = np.empty(codes.size, dtype=int)
    rank[rng.permutation(codes.size)] = np.arange(codes.size)
    shuffled = rng.permutation(units.size)
    within = np.empty(units.size, dtype=int)  # each question's round: its place in its family
    seen = np.zeros(codes.size, dtype=int)
    for q in shuffled:
        within[q] = seen[inverse[q]]
        seen[inverse[q]] += 1
    return np.lexsort((rank[inverse], within))


def regular_sizes(n: int, batch: int, min_questions: int) -> np.ndarray:
    """The looks of a spread (or round-robin) run: every `batch` questions (a batch need not
    close a family) from `min_questions` on, and the last at the set's end."""
    ends = list(range(batch, n, batch)) + [n]
    return np.array([m for m in ends if m >= min_questions] or ends[-1:], dtype=int)


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
    units_in_order: np.ndarray,
    sizes: np.ndarray,
    max_groups: int,
    seed: int,
    recall_all: bool = False,
) -> tuple[np.ndarray, np.ndarray, list[slice]]:
    """The counts rows of every look (questions in the driver's order): per look, a row of 1 on the
    questions reached, then one row per jackknife group with that group also at 0; and each look's
    slice of rows. Two matrices: the judged questions behind W, and the questions behind R@k (the
    same, or with `recall_all` every question of the set: its retrieval is known before any
    judging; the jackknife groups are then those of every family of the set, so a left-out group
    leaves out its judged questions from W and all its questions from R@k)."""
    n = units_in_order.size
    w_rows, r_rows, slices, start = [], [], [], 0
    every = seq.jackknife_groups(units_in_order, max_groups, seed) if recall_all else None
    for m in sizes:
        groups = (
            every
            if every is not None
            else seq.jackknife_groups(units_in_order[:m], max_groups, seed)
        )
        g = int(groups.max()) + 1
        reached = np.zeros((1, n))
        reached[0, :m] = 1.0
        left = groups[None, :] != np.arange(g)[:, None]
        keep = np.zeros((g, n))
        keep[:, :m] = left[:, :m]
        w_rows += [reached, keep]
        if every is not None:
            r_rows += [np.ones((1, n)), left.astype(float)]
        else:
            r_rows += [reached, keep]
        slices.append(slice(start, start + 1 + g))
        start += 1 + g
    return np.vstack(w_rows), np.vstack(r_rows), slices


def jury_cube(
    p: Prepared, counts: np.ndarray, recall_counts: np.ndarray | None = None
) -> np.ndarray:
    """The jury CuBE (the mean of every judge's; undefined when one judge's is) of each counts
    row; `recall_counts`: the rows R@k is taken over when not the same as W's (every question)."""
    out = cube_from_counts(p, counts)
    if recall_counts is None:
        return out["cube_score"].mean(axis=0)
    recall = recall_counts @ p.retrieved.astype(float) / recall_counts.sum(axis=1)
    cube = np.where(recall[None, :] == 0, 0.0, out["weighted_score"] * recall[None, :])
    return cube.mean(axis=0)


def critical_at(design: Design, sizes: np.ndarray) -> list[float | None]:
    """The finite-horizon boundary's critical value at each look (None: the anytime sequence)."""
    looks = [int(m) for m in sizes]
    return [
        critical_value(design.rule.boundary, looks[: k + 1], looks, design.n, design.rule.alpha)
        for k in range(len(looks))
    ]


def question_calls(model: RunModel, retrieved: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each question's LLM calls as a run counts them today (`calls_per_question`) and with no
    unread call (issue 40.1: a missed question's zero and full answers and their judgments are not
    made, two thirds of its calls)."""
    per_q = calls_per_question(model)
    today = np.full(retrieved.size, float(per_q))
    return today, np.where(np.asarray(retrieved, dtype=bool), per_q, per_q / 3.0)


def replicate_looks(design: Design, replicate: int, seed: int = 0) -> pd.DataFrame:
    """One simulated run, looked at as the driver looks: one row per look with `n`, `estimate`, the
    sequence's `lower`/`upper`, the fixed-n normal interval `fixed_lo`/`fixed_hi` (same SE) and
    `stop` (the stop rule's decision at that look; every look is computed, also after a stop)."""
    rep_seed = replicate_seed(seed, design.n, replicate, 31)
    p = drawn_run(design, design.n, rep_seed)
    arrange = ORDERS[design.order]
    order = arrange(p.unit_codes(), np.random.default_rng(rep_seed + 2))
    p = dataclasses.replace(reordered(p, order), proportion=design.proportion, mode=design.weights)
    units = p.unit_codes()
    if design.order != "families":
        sizes = regular_sizes(design.n, design.rule.batch, design.rule.min_questions)
    else:
        sizes = look_sizes(units, design.rule.batch, design.rule.min_questions)
    recall_all = design.recall_from == "all"
    counts, recall_counts, slices = look_counts(
        units, sizes, design.max_groups, rep_seed + 3, recall_all
    )
    values = jury_cube(p, counts, recall_counts if recall_all else None)
    # under recall_all the leave-out values run over every family's group: the families behind W
    # are the groups holding a judged question (as the driver counts them, `sequential_look`)
    every = seq.jackknife_groups(units, design.max_groups, rep_seed + 3) if recall_all else None
    z = norm.ppf(1 - design.rule.alpha / 2)
    today, skipping = (np.cumsum(c) for c in question_calls(design.model, p.retrieved))
    rows = []
    for m, part, crit in zip(sizes, slices, critical_at(design, sizes), strict=True):
        est, leave_out = values[part][0], values[part][1:]
        hits = int(np.asarray(p.retrieved[:m]).sum())
        judged = None if every is None else len(np.unique(every[:m]))
        look = seq.functional_look(
            est, leave_out, int(m), design.rule, retrieved=hits, scale=design.scale,
            critical=crit, groups=judged,
        )  # fmt: skip
        half = z * seq.jackknife_se(leave_out)
        stop = seq.decide(look, design.rule, dict(design.thresholds)).stop
        may = seq.not_yet(look, design.rule) is None
        rows.append(
            (int(m), est, look.lower, look.upper, est - half, est + half, stop, may,
             today[m - 1], skipping[m - 1], today[-1], skipping[-1])
        )  # fmt: skip
    cols = ["n", "estimate", "lower", "upper", "fixed_lo", "fixed_hi", "stop", "may_stop",
            "calls", "calls_skipping", "full_calls", "full_calls_skipping"]  # fmt: skip
    return pd.DataFrame(rows, columns=cols)


ORDERS = {"families": driver_order, "round_robin": round_robin_order, "spread": spread_order}


def drawn_run(design: Design, n: int, seed: int) -> Prepared:
    """One simulated run of `n` questions of the design's world: `model`'s, or with `singletons`
    its first n - `singleton_questions` (scaled to n) from `model` and the rest one-question
    families of the `singletons` model (its own system: a score that depends on family size)."""
    extra = 0 if design.singletons is None else round(design.singleton_questions * n / design.n)
    q = draw_questions(design.model, n - extra, np.random.default_rng(seed))
    p = prepared_run(design.model, n - extra, seed + 1, questions=q)
    if not extra:
        return p
    p1 = prepared_run(design.singletons, extra, seed + 5, by_family=False)
    return dataclasses.replace(
        p,
        rank_score=np.r_[p.rank_score, p1.rank_score],
        retrieved=np.r_[p.retrieved, p1.retrieved],
        scores=np.concatenate([p.scores, p1.scores], axis=-1),
        units=np.r_[p.unit_codes(), p.unit_codes().max() + 1 + np.arange(extra)],
    )


def mixed_truth(design: Design, n: int = 60_000) -> float:
    """The true jury CuBE of a world with `singletons`: every judge's W on `n` questions drawn in
    the design's mix (the estimator's own arithmetic, as `simulate.truth`) times the mix's R@k."""
    p = dataclasses.replace(
        drawn_run(design, n, 12345), proportion=design.proportion, mode=design.weights
    )
    share = design.singleton_questions / design.n
    recall = (1 - share) * design.model.system.recall + share * design.singletons.system.recall
    return float(cube_from_counts(p, np.ones((1, n)))["weighted_score"][:, 0].mean() * recall)


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
        "calls": float(looks["calls"].iloc[at]),
        "calls_skipping": float(looks["calls_skipping"].iloc[at]),
        "full_calls": float(looks["full_calls"].iloc[-1]),
        "full_calls_skipping": float(looks["full_calls_skipping"].iloc[-1]),
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


def _calls_ratios(df: pd.DataFrame) -> dict[str, float]:
    """Calls against the fixed-n run of the whole set, counted two more ways (issue 40) beside
    `calls_saved` (both as a run counts them today): `calls_saved_skipping_both`, both with no
    unread call (40.1: a missed question's bound answers and their judgments not made); and
    `calls_saved_with_skipping`, the fixed-n run as today against the sequential run with no unread
    call (both changes together). NaN for replicates that did not count calls."""
    if "calls_skipping" not in df:
        return {"calls_saved_skipping_both": math.nan, "calls_saved_with_skipping": math.nan}
    used = float(df["calls_skipping"].mean())
    return {
        "calls_saved_skipping_both": float(df["full_calls_skipping"].mean()) / used,
        "calls_saved_with_skipping": float(df["full_calls"].mean()) / used,
    }


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
        "inside": design.nearest_edge,
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
            **_calls_ratios(df),
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
    "drawn_run",
    "driver_order",
    "look_counts",
    "look_sizes",
    "mixed_truth",
    "recall_for",
    "regular_sizes",
    "reordered",
    "round_robin_order",
    "question_calls",
    "replicate_looks",
    "replicate_summary",
    "run_design",
    "spread_order",
    "summary_row",
]
