"""Finite-horizon group-sequential boundaries: the critical values of a run over a known set.

The anytime-valid confidence sequence (`cube.method.sequential`) covers at every sample size up to
infinity, and pays for it: about +-3.0-3.1 standard errors at every look of a 40-to-300-question
run. The sequential driver's question set is known before the first look and the run ends at its
last question, so the only looks at which a run may stop are those of one finite schedule. A
**group-sequential boundary** for that schedule spends the error level on those looks alone
(Jennison and Turnbull, "Group Sequential Methods with Applications to Clinical Trials", 2000,
ch. 2-3): +-2.58 for the 14 looks 40, 60, ..., 300.

Model. At look k after n_k of N questions the studentised estimate Z_k = (estimate_k - truth) /
SE_k is asymptotically normal, and the Z_k are jointly normal with corr(Z_i, Z_j) =
sqrt(t_i / t_j) for t_i <= t_j, t = n / N the information fraction (the canonical joint
distribution of a mean's running estimates, Jennison and Turnbull Thm. 3.1): Z_k sqrt(t_k) is a
Brownian motion observed at t_1 < ... < t_K. A boundary c_1..c_K covers at every look with
probability 1 - alpha when P(|Z_k| < c_k for every k) = 1 - alpha.

- `pocock_constant`: one constant c for every look of a planned schedule (Pocock 1977): 2.413 for
  five equally spaced looks at two-sided 0.05, 2.178 for two (tests/method/test_group_sequential.py
  checks the tabulated values, and the same probability from `scipy.stats.multivariate_normal.cdf`).
- `spending_bounds`: Lan and DeMets' alpha-spending (Biometrika 1983) with the Pocock-type spending
  function alpha(t) = alpha log(1 + (e - 1) t) (Kim and DeMets 1987): look k's c_k makes the
  probability of leaving the band by look k equal alpha(t_k), so it depends on the looks made so far
  only, not on the ones to come: looks may be irregular (a batch of varying size) and the last
  look at the set's end (t = 1) spends what is left. The driver spends at every look from its
  minimum on, also at one a guard of `sequential.not_yet` holds (one boundary for every system,
  drawn before any system's guards are read): more than needed, so conservative, never liberal.

The probability is computed by the recursive numerical integration of Armitage, McPherson and Rowe
(1969) on a grid of the Brownian motion's value inside the continuation region (scipy's normal
density and Simpson's rule): deterministic, smooth in c (brentq needs that; the randomised
quasi-Monte Carlo of `multivariate_normal.cdf` is not, and took 40-60 s for 14 looks here against
0.2 s), and accurate to 1e-6 in c at 201 points per look against the tabulated constants.

Information fraction by questions. With families (questions of one family correlated) and the
driver's order spreading each family over the run (`spread_order`), a later look adds less
information per question than an earlier one: the true information grows concavely in n, so the
true correlation of an early and a late look is higher than sqrt(n_i / n_j) and the boundary
computed with t = n/N leaves the band less often than alpha (conservative), never more. This is
about the variance only: the estimate at every look must also be unbiased, which is what
`spread_order` is built for.

The order (`spread_order`): systematic sampling within each family. Family f of size s_f draws a
seeded uniform start U_f in [0, 1) and a seeded random order of its questions j = 0..s_f - 1;
question (f, j) gets the key (j + U_f) / s_f, and the questions are judged in increasing key (ties,
of probability zero, by a seeded random number). The first n questions judged are those with a key
below some t, and question (f, j) has a key below t with probability clip(t s_f - j, 0, 1), whose
average over j is min(t, 1) whatever s_f: for a fixed t every question of the set is in the sample
with the same probability. A look takes the first n questions, i.e. t is the n-th key, which depends
on the draws: the equality then holds to within O(1/n) (at n = 1 a lone question beside a family of
99 is first with probability 0.0055, not 0.01; from 20 questions on the effect on W was under 0.1
point in adversarial worlds, review of issue 40), so a look's unweighted W (and R@k of the questions
judged) estimates the set's without the family-size bias of a round robin; and family f has t s_f
questions judged, +-1 (spread as a round robin spreads them: with families of five the first fifth
of the order is one question per family). A round robin (the r-th question of every family in round
r) includes a question of a family of size m by round r with probability min(r, m) / m: small
families over-represented at every look before the last round, a bias the jackknife SE does not see
(benchmarks/sequential_design.py's `unequal` world measures it). Pure: numpy and scipy only.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy.integrate import simpson
from scipy.optimize import brentq
from scipy.stats import norm

BOUNDARIES = ("spending", "pocock", "anytime")  # analysis.sequential.boundary
GRID = 201  # grid points per look of the recursive integration (1e-6 in c: module docstring)


def _fractions(sizes: tuple[float, ...], horizon: float) -> np.ndarray:
    t = np.asarray(sizes, dtype=float) / float(horizon)
    if t.size == 0 or (np.diff(t) <= 0).any() or t[0] <= 0 or t[-1] > 1 + 1e-12:
        raise ValueError(
            f"group-sequential looks {list(sizes)} of {horizon}: expected increasing sizes in "
            "(0, horizon]"
        )
    return t


def stay_probability(c: np.ndarray | float, t: np.ndarray, points: int = GRID) -> float:
    """P(|Z_k| < c_k at every look k) for Z_k = B(t_k) / sqrt(t_k), B a standard Brownian motion
    (the recursive integration of the module docstring)."""
    t = np.asarray(t, dtype=float)
    c = np.broadcast_to(np.asarray(c, dtype=float), t.shape)
    x_prev = f_prev = None
    t_prev = 0.0
    for ck, tk in zip(c, t, strict=True):
        x = np.linspace(-ck * math.sqrt(tk), ck * math.sqrt(tk), points)
        if x_prev is None:
            f = norm.pdf(x, scale=math.sqrt(tk))
        else:
            kernel = norm.pdf(x[:, None] - x_prev[None, :], scale=math.sqrt(tk - t_prev))
            f = simpson(kernel * f_prev[None, :], x=x_prev, axis=1)
        x_prev, f_prev, t_prev = x, f, tk
    return float(simpson(f_prev, x=x_prev))


@lru_cache(maxsize=256)
def pocock_constant(sizes: tuple[float, ...], alpha: float, horizon: float | None = None) -> float:
    """The one critical value c for every look at `sizes` (questions; the last the horizon unless
    given) with two-sided level `alpha`: P(|Z_k| < c for every k) = 1 - alpha."""
    t = _fractions(sizes, horizon or sizes[-1])
    z = float(norm.ppf(1 - alpha / 2))
    return float(brentq(lambda c: stay_probability(c, t) - (1 - alpha), z, z + 4, xtol=1e-7))


def pocock_by_paths(
    t: np.ndarray | tuple[float, ...], alpha: float, paths: int = 200_000, seed: int = 7
) -> float:
    """Pocock's constant for looks at information fractions `t` (increasing, the last 1) by
    simulated Brownian paths, Z_k = B(t_k) / sqrt(t_k): P(|Z_k| < c at every look) = 1 - alpha to
    about +-0.01 at 200,000 paths. For looks so close together (information that barely grows,
    as with families once every family is in) that `pocock_constant`'s grid breaks down; with
    information fractions rather than n / N it gives the boundary an information-based design
    would use (benchmarks/sequential_oracle.py's `info_true`)."""
    t = np.asarray(t, dtype=float)
    if t.size == 0 or (np.diff(t) <= 0).any() or t[0] <= 0 or t[-1] > 1 + 1e-12:
        raise ValueError(
            f"information fractions {t.tolist()}: expected increasing values in (0, 1]"
        )
    rng = np.random.default_rng(seed)
    steps = np.diff(np.r_[0.0, t])
    b = np.cumsum(rng.standard_normal((paths, t.size)) * np.sqrt(steps), axis=1)
    return float(np.quantile(np.abs(b / np.sqrt(t)).max(axis=1), 1 - alpha))


def pocock_spending(t: np.ndarray | float, alpha: float) -> np.ndarray:
    """The Pocock-type spending function alpha log(1 + (e - 1) t) (Kim and DeMets 1987)."""
    return alpha * np.log1p((math.e - 1) * np.minimum(np.asarray(t, dtype=float), 1.0))


@lru_cache(maxsize=256)
def spending_bounds(sizes: tuple[float, ...], horizon: float, alpha: float) -> tuple[float, ...]:
    """The critical value of each look at `sizes` of a run over `horizon` questions, by
    Lan-DeMets alpha-spending with the Pocock-type function: c_k makes P(leaving the band by look
    k) = alpha(n_k / horizon), given the looks before it. A look whose share to spend is
    (numerically) nothing gets an infinite value: it cannot stop a run."""
    t = _fractions(sizes, horizon)
    spent = pocock_spending(t, alpha)
    out: list[float] = []
    for k in range(t.size):
        target = 1 - float(spent[k])
        previous = stay_probability(np.array(out), t[:k]) if k else 1.0
        if previous - target < 1e-9:
            out.append(math.inf)
            continue
        z = float(norm.ppf(1 - (previous - target) / 2))  # the value were looks independent

        def gap(c: float, k: int = k, target: float = target) -> float:
            return stay_probability(np.array([*out, c]), t[: k + 1]) - target

        hi = z + 1.0
        while gap(hi) < 0:
            hi += 1.0
        out.append(float(brentq(gap, max(z - 1.0, 0.1), hi, xtol=1e-7)))
    return tuple(out)


def spread_order(units: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The positions of the questions (one family code per question in `units`) in the order they
    are judged: systematic sampling within each family (module docstring), every draw from `rng`
    (the same generator state gives the same order)."""
    codes, inverse = np.unique(np.asarray(units), return_inverse=True)
    n = inverse.size
    size = np.bincount(inverse, minlength=codes.size)
    start = rng.random(codes.size)
    # j: each question's place in its family's seeded random order
    shuffled = rng.permutation(n)
    by_family = shuffled[np.argsort(inverse[shuffled], kind="stable")]
    first = np.r_[0, np.cumsum(size)[:-1]]
    j = np.empty(n, dtype=float)
    j[by_family] = np.arange(n) - first[inverse[by_family]]
    key = (j + start[inverse]) / size[inverse]
    return np.lexsort((rng.random(n), key))


def critical_value(
    boundary: str, looks: list[int], planned: list[int], horizon: int, alpha: float
) -> float | None:
    """The critical value of the last of `looks` (the sizes of the looks at which the run could
    stop so far, in order) of a run over `horizon` questions: `spending` from those looks alone,
    `pocock` the constant of the `planned` schedule (every look at which the run may stop, its
    last at the set's end), None for `anytime` (the confidence sequence has no critical value)."""
    if boundary not in BOUNDARIES:
        raise ValueError(f"boundary is {boundary!r}, expected one of {', '.join(BOUNDARIES)}")
    if boundary == "anytime" or not looks:
        return None
    if boundary == "spending":
        return spending_bounds(tuple(float(s) for s in looks), float(horizon), alpha)[-1]
    # the planned looks, with the one at the set's end
    plan = sorted({float(s) for s in planned if s <= horizon} | {float(horizon)})
    return pocock_constant(tuple(plan), alpha, float(horizon))


__all__ = [
    "BOUNDARIES",
    "critical_value",
    "pocock_by_paths",
    "pocock_constant",
    "pocock_spending",
    "spending_bounds",
    "spread_order",
    "stay_probability",
]
