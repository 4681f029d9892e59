"""A cheap judge as a control variate for the jury CuBE of a sequential look (issue 40, item 2).

A look of the sequential driver estimates the jury CuBE from the questions the jury judged so far,
J. A cheap judge (the offline rubric judge, free; or a small LLM) can score every answered
question A (J a subset of A) at little or no cost. Its CuBE on A and on J differ only by sampling
noise (they estimate the same cheap-judge CuBE), and where that noise moves with the jury's on J,
subtracting it removes part of the jury's noise:

    theta = CuBE_jury(J) + lambda * (CuBE_cheap(A) - CuBE_cheap(J))

This is the PPI++ estimator (Angelopoulos, Duchi and Zrnic 2023, "PPI++: Efficient
prediction-powered inference", arXiv:2311.01453) in its *statistic* form: PPI++ rectifies a mean,
here the rectified quantity is the whole CuBE (a smooth function of means: trimmed means, rank
correlations, their ratios and R@k), each side computed by the method's own arithmetic
(`cube.method.bootstrap.cube_from_counts`). To first order every CuBE is the mean of its
per-question influence values, so the statistic form is PPI++ on those influence values, with two
gains over rectifying each (set, dimension) mean as `cube.method.ppi` does for human ratings:
nothing per-dimension needs the two judges to share a scale or weights (CuBE removes each judge's
leniency and scale through its bounds, and its weights are its own), and the retrieval part of
CuBE (R@k, which the jury and the cheap judge share on the same questions) is a control too, so
the variance falls even with a cheap judge uncorrelated with the jury. `ppi.py`'s per-mean form is
not reused because its `lambda = Cov / Var` is the optimum only for means of independent questions;
here the estimator is read through a jackknife over families.

**Unbiased whatever the cheap judge.** The correction has expectation zero (both terms estimate the
cheap judge's CuBE; the only bias is the O(1/n) difference of a smooth statistic at two sample
sizes), so a cheap judge that is lenient, strict, compressed or partial to the system biases
nothing; it only helps less. `lambda = 0` is the jury's estimate exactly.

**Power tuning.** With the leave-group-out values of the three statistics (`d` = a leave-out value
minus their mean; Delta = cheap(A) - cheap(J)) the jackknife variance of theta is proportional to
sum_g (d_jury[g] + lambda d_Delta[g])^2, least at

    lambda = - sum_g d_jury[g] d_Delta[g] / sum_g d_Delta[g]^2

(PPI++'s lambda = -Cov(jury, Delta) / Var(Delta), estimated from the groups). For means of
independent questions with J a random subset of A this is Cov(y, f) / Var(f) whatever |J| / |A|
(the `cube.method.ppi` derivation); read from the jackknife it also holds when J takes one question
per family and A the rest of each family, where the subset and its complement are not independent.
It is clipped to `LAMBDA_RANGE` = [0, 1]: a negative lambda (the cheap judge moving against the
jury) or one above 1 (the cheap judge's CuBE less variable than the jury's) is where an estimate
from a few dozen groups is least trustworthy, and 0 only gives back the jury's estimate.

**Its estimation in the SE.** Each leave-out value of theta re-estimates lambda without that group
(`lambda_-g` from the other groups' values: the delete-one jackknife of the tuning, one level of a
leave-two-out without its G^2 CuBE computations), so the SE carries the tuning's own noise; the
jackknife is over families on A and J together (a family left out leaves the judged and the
answered set at once, as the driver's grouped jackknife does). The interval is the look's boundary
times that SE, on the square-root scale by default (`cube.method.sequential.functional_look`
explains why for CuBE); the boundary is a callable (`Boundary`), so the same look works with the
unlimited-horizon confidence sequence of today's driver (`asympcs_boundary`) and with a
finite-horizon constant (`constant_boundary(2.58)`, Pocock's for 14 looks at 5 %).

**What it can buy.** To first order the variance at n judged of N answered is the jury's times
1 - rho^2 (1 - n / N), rho the correlation of the two CuBEs' influence values (`CVLook.rho` at a
look, where it reads as rho sqrt(1 - n / N)). A verdict that needs the jury's precision at n_j
questions is reached at n = n_j (1 - rho^2) / (1 - rho^2 n_j / N): half the jury's questions needs
rho^2 = 1 / (2 - n_j / N), i.e. rho 1 when the jury alone needs the whole set, 0.82 when the
cheap judge scores twice the questions the jury needs, 0.71 at the limit of an unlimited set.

**The driver** (not wired: `cube.run.sequential`), per look and system: `bootstrap.prepare` on
every answered question with the cheap judge's scores on all of them and the jury's where it
judged (absent rows are NaN and carry no weight); `prepared_look(p, judged, groups, jury, cheap,
boundary)` with `groups = sequential.jackknife_groups(p.unit_codes(), 40, seed)` over the answered
questions; the stop on `sequential.Look(n_judged, estimate, lower, upper, groups with a judged
question, judged retrieved questions)`.

Coverage, variance reduction and calls per verdict are measured by simulation
(`cube.method.simulate_control_variate`, benchmarks/sequential_control_variate.py). Pure: numpy and
scipy only (and the method's own CuBE arithmetic for `prepared_look`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from cube.method.bootstrap import Prepared, cube_from_counts
from cube.method.sequential import StopRule, jackknife_se, margin, rho_squared, t_allowance

LAMBDA_RANGE = (0.0, 1.0)  # the power-tuning parameter's safe range (module docstring)
SCALES = ("sqrt", "linear")

# A look's critical value: (questions the jury judged, jackknife groups) -> c, the interval being
# estimate +- c x SE (on the look's scale)
Boundary = Callable[[int, int], float]


def asympcs_boundary(rule: StopRule) -> Boundary:
    """Today's boundary: the AsympCS half-width per unit SE at n judged questions, widened by
    Student's t for the groups behind the SE (`cube.method.sequential.functional_look`'s)."""
    rho2 = rho_squared(rule.target_questions, rule.alpha)

    def c(n: int, groups: int) -> float:
        return float(margin(n, np.sqrt(n), rule.alpha, rho2)) * t_allowance(groups, rule)

    return c


def constant_boundary(value: float, rule: StopRule | None = None) -> Boundary:
    """A finite-horizon constant (e.g. Pocock's 2.58 for 14 looks at 5 %), widened by Student's t
    for the groups behind the SE when `rule` is given (its alpha)."""

    def c(n: int, groups: int) -> float:
        return value * (t_allowance(groups, rule) if rule is not None else 1.0)

    return c


def power_tuned_lambda(
    jury: np.ndarray, delta: np.ndarray, lam_range: tuple[float, float] = LAMBDA_RANGE
) -> float:
    """The lambda that minimises the jackknife variance of jury + lambda delta, from their
    leave-group-out values (clipped to `lam_range`; 0 when delta does not vary or a value is
    undefined)."""
    y, d = np.asarray(jury, dtype=float), np.asarray(delta, dtype=float)
    if y.size < 2 or not (np.isfinite(y).all() and np.isfinite(d).all()):
        return 0.0
    dy, dd = y - y.mean(), d - d.mean()
    den = float((dd * dd).sum())
    scale = max(1.0, float(np.abs(d).max())) ** 2
    if den <= 1e-12 * scale:
        return 0.0
    return float(np.clip(-(dy * dd).sum() / den, *lam_range))


def _without_each(y: np.ndarray, d: np.ndarray, lam_range: tuple[float, float]) -> np.ndarray:
    """`power_tuned_lambda` of the values without each one in turn (G values; 0 where undefined),
    from the sums less each term: exact, and G operations instead of G^2."""
    G = y.size
    if G < 3 or not (np.isfinite(y).all() and np.isfinite(d).all()):
        return np.zeros(G)
    k = G - 1
    sy, sd = y.sum() - y, d.sum() - d
    syd = (y * d).sum() - y * d - sy * sd / k
    sdd = (d * d).sum() - d * d - sd * sd / k
    scale = max(1.0, float(np.abs(d).max())) ** 2
    ok = sdd > 1e-12 * scale
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(ok, np.clip(-syd / np.where(ok, sdd, 1.0), *lam_range), 0.0)


@dataclass(frozen=True)
class CVValues:
    """theta and its leave-group-out values, the lambda of the estimate and of each leave-out."""

    estimate: float
    leave_out: np.ndarray  # (G,)
    lam: float
    lam_leave_out: np.ndarray  # (G,)


def control_variate_values(
    jury_judged: Sequence[float] | np.ndarray,
    cheap_answered: Sequence[float] | np.ndarray,
    cheap_judged: Sequence[float] | np.ndarray,
    lam: float | str = "auto",
    lam_range: tuple[float, float] = LAMBDA_RANGE,
) -> CVValues:
    """theta = jury(J) + lambda (cheap(A) - cheap(J)) and its leave-group-out values.

    Each argument is 1 + G values: the statistic on every question, then with each jackknife group
    left out (the same groups for the three, over the answered questions' families: a group with
    no judged question leaves the judged statistics as they are). `lam`: "auto" (power-tuned, and
    re-tuned without each group for its leave-out value) or a fixed number."""
    y, fa, fj = (np.asarray(v, dtype=float) for v in (jury_judged, cheap_answered, cheap_judged))
    if not (y.shape == fa.shape == fj.shape) or y.ndim != 1 or y.size < 1:
        raise ValueError(
            "control_variate_values: jury_judged, cheap_answered and cheap_judged must be 1-D "
            f"arrays of the same length 1 + groups, got shapes {y.shape}, {fa.shape}, {fj.shape}"
        )
    delta = fa - fj
    G = y.size - 1
    if lam == "auto":
        lam0 = power_tuned_lambda(y[1:], delta[1:], lam_range)
        lams = _without_each(y[1:], delta[1:], lam_range)
    else:
        lam0 = float(lam)
        lams = np.full(G, lam0)
    # lambda = 0 must give the jury's values exactly, whatever the cheap judge's (NaN included)
    fix = np.where(lams == 0.0, 0.0, lams * delta[1:])
    est = float(y[0] + (lam0 * delta[0] if lam0 != 0.0 else 0.0))
    return CVValues(est, y[1:] + fix, lam0, lams)


@dataclass(frozen=True)
class CVLook:
    """A control-variate look: the estimate and interval, the jury's own beside it, and what the
    cheap judge bought (`variance_ratio` = SE^2 / the jury's SE^2 on the linear scale; `rho`, the
    correlation of the jury's and the correction's leave-out values: the effective correlation,
    retrieval included)."""

    n_judged: int
    n_answered: int | None
    groups: int
    estimate: float
    lower: float
    upper: float
    se: float
    jury_estimate: float
    jury_se: float
    lam: float
    variance_ratio: float
    rho: float
    scale: str

    @property
    def width(self) -> float:
        return self.upper - self.lower


def interval(
    estimate: float,
    leave_out: np.ndarray,
    n: int,
    boundary: Boundary,
    scale: str = "sqrt",
) -> tuple[float, float, str]:
    """(lower, upper, scale used) of estimate +- c SE, c = boundary(n, groups), SE the grouped
    jackknife's on `scale` (the square root's, mapped back; linear when the estimate or a
    leave-out value is not positive). NaN bounds when the SE or estimate is undefined."""
    if scale not in SCALES:
        raise ValueError(f"control variate interval: scale is {scale!r}, expected one of {SCALES}")
    values = np.asarray(leave_out, dtype=float)
    if not (estimate > 0 and bool((values > 0).all())):
        scale = "linear"
    fwd = np.sqrt if scale == "sqrt" else (lambda x: x)
    se = jackknife_se(fwd(values))
    if n == 0 or not (np.isfinite(se) and np.isfinite(estimate)):
        return float("nan"), float("nan"), scale
    half = boundary(n, values.size) * se
    centre = float(fwd(estimate))
    if scale == "sqrt":
        return max(centre - half, 0.0) ** 2, (centre + half) ** 2, scale
    return centre - half, centre + half, scale


def control_variate_look(
    jury_judged: Sequence[float] | np.ndarray,
    cheap_answered: Sequence[float] | np.ndarray,
    cheap_judged: Sequence[float] | np.ndarray,
    n_judged: int,
    boundary: Boundary,
    *,
    n_answered: int | None = None,
    lam: float | str = "auto",
    lam_range: tuple[float, float] = LAMBDA_RANGE,
    scale: str = "sqrt",
) -> CVLook:
    """One look's control-variate estimate and interval from the three statistics' values (each
    1 + G: all questions, then each group left out; `control_variate_values`)."""
    v = control_variate_values(jury_judged, cheap_answered, cheap_judged, lam, lam_range)
    lo, hi, used = interval(v.estimate, v.leave_out, n_judged, boundary, scale)
    y = np.asarray(jury_judged, dtype=float)
    corr = np.asarray(cheap_answered, dtype=float)[1:] - np.asarray(cheap_judged, dtype=float)[1:]
    jury_se, se = jackknife_se(y[1:]), jackknife_se(v.leave_out)
    with np.errstate(all="ignore"):
        ok = np.isfinite(y[1:]).all() and np.isfinite(corr).all() and y.size > 2
        rho = float(-np.corrcoef(y[1:], corr)[0, 1]) if ok and corr.std() > 0 else float("nan")
        ratio = se**2 / jury_se**2 if jury_se > 0 else float("nan")
    return CVLook(
        n_judged,
        n_answered,
        y.size - 1,
        v.estimate,
        lo,
        hi,
        se,
        float(y[0]),
        jury_se,
        v.lam,
        float(ratio),
        rho,
        used,
    )


def look_rows(judged: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """The counts rows of one look over the answered questions (`cube_from_counts`): the answered
    set A and A with each group left out (1 + G rows), then the judged set J and J with each
    group left out (1 + G rows). `judged`: bool per answered question; `groups`: each answered
    question's jackknife group 0..G-1 (`cube.method.sequential.jackknife_groups` of its family)."""
    judged = np.asarray(judged, dtype=bool)
    groups = np.asarray(groups)
    G = int(groups.max()) + 1 if groups.size else 0
    keep = (groups[None, :] != np.arange(G)[:, None]).astype(float)
    on_a = np.vstack([np.ones((1, groups.size)), keep])
    return np.vstack([on_a, on_a * judged[None, :]])


def prepared_look(
    p: Prepared,
    judged: np.ndarray,
    groups: np.ndarray,
    jury: Sequence[str],
    cheap: str,
    boundary: Boundary,
    *,
    lam: float | str = "auto",
    lam_range: tuple[float, float] = LAMBDA_RANGE,
    scale: str = "sqrt",
) -> CVLook:
    """The look on one system's prepared arrays: `p` holds every answered question (the jury's
    scores NaN where it did not judge), `judged` marks the jury's questions, `cheap` names the
    cheap judge (not a jury member), `jury` the judges the jury CuBE averages. One
    `cube_from_counts` call of 2 (1 + G) rows."""
    names = list(p.judges)
    missing = [j for j in [*jury, cheap] if j not in names]
    if missing or cheap in jury or not jury:
        raise ValueError(
            f"control variate look: judges {names}; jury {list(jury)} (non-empty, without the "
            f"cheap judge) and cheap judge {cheap!r} must be among them (missing: {missing})"
        )
    rows = look_rows(judged, groups)
    half = rows.shape[0] // 2
    with np.errstate(all="ignore"):
        cube = cube_from_counts(p, rows)["cube_score"]  # (judges, rows)
    members = [names.index(j) for j in jury]
    jury_j = cube[members, half:].mean(axis=0)
    c = names.index(cheap)
    return control_variate_look(
        jury_j,
        cube[c, :half],
        cube[c, half:],
        int(np.asarray(judged, bool).sum()),
        boundary,
        n_answered=int(rows.shape[1]),
        lam=lam,
        lam_range=lam_range,
        scale=scale,
    )


__all__ = [
    "LAMBDA_RANGE",
    "Boundary",
    "CVLook",
    "CVValues",
    "asympcs_boundary",
    "constant_boundary",
    "control_variate_look",
    "control_variate_values",
    "interval",
    "look_rows",
    "power_tuned_lambda",
    "prepared_look",
]
