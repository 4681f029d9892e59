"""One look of the sequential driver (`cube.run.sequential`, step 3 of its docstring): a system's
jury CuBE, each judge's CuBE and R@k on the questions judged so far, each with its sequential
interval (`cube.method.sequential.functional_look`, the finite-horizon boundary's value or the
anytime-valid sequence) and the fixed-n interval beside it, all from one grouped jackknife over
families (`jackknife_groups`, at most `JACKKNIFE_GROUPS` groups). Under `recall: all`
(`cube.run.sequential_design`) W is that of the questions judged and R@k that of every question,
a group left out of both."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import norm

from cube.config.params import Params
from cube.method.sequential import (
    Look,
    StopRule,
    functional_look,
    jackknife_groups,
    jackknife_se,
)

JACKKNIFE_GROUPS = 40  # leave-out groups of a look (`cube.method.sequential.jackknife_groups`)


@dataclass(frozen=True)
class Quantity:
    """One sequence after a look: the sequential interval and the fixed-n one beside it."""

    name: str  # "CuBE", "CuBE · <judge>", "R@k"
    current: Look
    fixed_lower: float
    fixed_upper: float


def _fixed(estimate: float, se: float, alpha: float) -> tuple[float, float]:
    half = norm.ppf(1 - alpha / 2) * se
    return float(estimate - half), float(estimate + half)


def _prepared(params: Params, answers: pd.DataFrame, scores: pd.DataFrame, system: str, units):
    from cube.method.bootstrap import prepare

    ap = params.analysis
    top_n = ap.top_n or next(s.top_n for s in params.systems if s.name == system)
    return prepare(
        answers[answers["system"] == system],
        scores[scores["system"] == system],
        proportion=ap.trim_proportion,
        subset=ap.subset,
        mode=ap.weights,
        custom=ap.custom_weights,
        top_n=top_n,
        paired=ap.paired,
        judges=[j.name for j in params.judges],
        dimensions=params.dimension_names(),
        fallback=ap.weights_fallback,
        clusters=units,
    )


def system_look(
    params: Params,
    answers: pd.DataFrame,
    scores: pd.DataFrame,
    system: str,
    units,
    rule: StopRule,
    jury: list[str] | None = None,
    *,
    hits: dict[str, bool] | None = None,
    critical: float | None = None,
) -> list[Quantity]:
    """One system's sequences after a look: the jury CuBE (the mean over `jury`, default every
    judge), each judge's CuBE, R@k (all with the same grouped jackknife: questions of one family
    share their retrieval too). `hits`: every question's retrieval outcome (`recall: all`,
    `cube.run.sequential_design.free_hits`): R@k is then that of the whole set, W's of the questions
    judged, and a group left out leaves out its judged questions from W and all its questions from
    R@k; None: R@k of the questions judged. `critical`: the finite-horizon boundary's value at this
    look (None: the anytime-valid sequence)."""
    from cube.method.bootstrap import cube_from_counts

    p = _prepared(params, answers, scores, system, units)
    n = len(p.rank_score)
    if n == 0:
        empty = Look(0, float("nan"), float("nan"), float("nan"))
        return [Quantity("CuBE", empty, float("nan"), float("nan"))]
    groups, hit, hit_groups = _look_groups(p, answers, system, units, hits, params)
    labels = np.unique(np.r_[groups, hit_groups])
    keep = np.vstack([np.ones(n), *[groups != g for g in labels]]).astype(float)
    recall = np.array([hit.mean(), *[hit[hit_groups != g].mean() for g in labels]]) / 100.0
    in_jury = np.array([j in (jury if jury is not None else p.judges) for j in p.judges])
    with np.errstate(all="ignore"):
        w = cube_from_counts(p, keep)["weighted_score"]  # (judges, 1 + groups)
        cube = np.where(recall[None, :] == 0, 0.0, w * recall[None, :])
        jury_cube = cube[in_jury].mean(axis=0) if in_jury.any() else np.full(keep.shape[0], np.nan)
        series = [("CuBE", jury_cube)] + [(f"CuBE · {j}", cube[i]) for i, j in enumerate(p.judges)]
    out, hits_n = [], int(np.asarray(p.retrieved).sum())
    # the families behind W: the groups holding a judged question (under `recall: all` the
    # leave-out values run over every group of the set, most of them W's without a question out)
    judged_groups = len(np.unique(groups))
    for name, values in series:
        current = functional_look(
            float(values[0]),
            values[1:],
            n,
            rule,
            retrieved=hits_n,
            critical=critical,
            groups=judged_groups,
        )
        out.append(
            Quantity(name, current, *_fixed(current.estimate, jackknife_se(values[1:]), rule.alpha))
        )
    left = 100.0 * recall[1:]
    rk = functional_look(float(hit.mean()), left, len(hit), rule, clip=True, critical=critical)
    out.append(Quantity("R@k", rk, *_fixed(rk.estimate, jackknife_se(left), rule.alpha)))
    return out


def _judged_ids(params: Params, answers: pd.DataFrame, system: str) -> list[str]:
    """The question ids behind the prepared arrays, in their order: those of known retrieval
    (`retrieval_outcomes`, as `cube.method.bootstrap.prepare` takes them: a failed system call
    is no question of W), sorted as `prepare` sorts them."""
    from cube.method.analysis import retrieval_outcomes

    top_n = params.analysis.top_n or next(s.top_n for s in params.systems if s.name == system)
    ranks = retrieval_outcomes(answers[answers["system"] == system], top_n).ranks
    return ranks.sort_values("question_id", kind="stable")["question_id"].astype(str).tolist()


def _look_groups(p, answers: pd.DataFrame, system: str, units, hits, params: Params):
    """(the judged questions' jackknife groups, the 0/100 hits R@k is the mean of, their groups).
    With `hits` (every question's retrieval) the groups are those of every family of the set,
    dealt as `jackknife_groups` deals them, and the judged questions (those of `p`, known
    retrieval only: `_judged_ids`) take their family's group; without, the judged questions'
    own."""
    seed = params.analysis.sequential.seed
    if not hits:
        groups = jackknife_groups(p.unit_codes(), JACKKNIFE_GROUPS, seed)
        return groups, 100.0 * np.asarray(p.retrieved, dtype=float), groups
    judged = _judged_ids(params, answers, system)
    everyone = sorted(set(hits) | set(judged))  # a judged question R@k does not count still has W
    all_groups = jackknife_groups(
        np.array([str(units.get(q, q)) for q in everyone]), JACKKNIFE_GROUPS, seed
    )
    group_of = dict(zip(everyone, all_groups.tolist(), strict=True))
    groups = np.array([group_of[q] for q in judged])
    in_hits = sorted(hits)
    hit_groups = np.array([group_of[q] for q in in_hits])
    return groups, 100.0 * np.array([hits[q] for q in in_hits], dtype=float), hit_groups


__all__ = ["JACKKNIFE_GROUPS", "Quantity", "system_look"]
