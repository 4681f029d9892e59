"""Anytime-valid sequential evaluation: a confidence sequence for a bounded mean and a stop rule.

A fixed-n interval (the bootstrap, or mean +- z sd / sqrt(n)) covers the truth with 95 % only at
the one sample size chosen in advance; looked at after every batch of questions and acted on when
it looks settled, it misses far more often (every look is another chance to stop on a fluke). A
**confidence sequence** is a sequence of intervals that covers the truth at every sample size at
once with probability 1 - alpha, so a run may look after every batch and stop whenever it likes.

The construction is the asymptotic confidence sequence (AsympCS) of Waudby-Smith, Arbour, Sinha,
Kennedy and Ramdas, "Time-uniform central limit theory and asymptotic confidence sequences"
(Annals of Statistics, 2024; arXiv:2103.06476), Section 2, the two-sided Gaussian-mixture
boundary:

    mean_n +- sd_n * sqrt( 2 (n rho^2 + 1) / (n^2 rho^2) * log( sqrt(n rho^2 + 1) / alpha ) )

with sd_n the running standard deviation (divisor n), and rho tuned so that the boundary is
tightest at a target sample size n* (their closed-form approximation, after Howard, Ramdas,
McAuliffe and Sekhon, "Time-uniform, nonparametric, nonasymptotic confidence sequences", Annals of
Statistics 2021): rho^2 = (-2 log alpha + log(-2 log alpha + 1)) / n*. It is asymptotic: its
guarantee is that of the central limit theorem made time-uniform, so it is checked here by
simulation (tests/method/test_sequential.py, benchmarks/sequential_coverage.py) on bounded
per-question scores from `min_questions` on, the sample sizes at which a run may stop.

Why not a library: `confseq` (Howard and Waudby-Smith's package, PyPI 0.0.11, 2023) ships only a
source distribution whose C++ build needs the Boost headers; it does not install here (nor for a
user without a compiler and Boost), so the boundary, a closed form, is written with numpy.

Batched form: the boundary needs only n, the running mean and the running variance, so a run
merges each batch's moments into the running ones (`Moments.merge`, Chan et al.'s pairwise update)
and looks once per batch; looking at fewer sample sizes than every n keeps the guarantee.

The stop rule (`decide`): never before `min_questions`; then `verdict` stops when the sequence lies
inside one verdict band (no threshold t with lower < t <= upper, the band rule of
`cube.diagnose.verdict.verdict`: a score at t belongs to the band starting at t), `width` when it is
no wider than `max_width`. Pure: numpy and scipy only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm
from scipy.stats import t as student_t

from cube.method.group_sequential import BOUNDARIES

STOP_RULES = ("verdict", "width")
MIN_GROUPS = 20  # jackknife groups (families) before a smooth statistic's look may stop a run
MIN_RETRIEVED = 10  # retrieved questions behind W before a CuBE look may stop a run (as W's CI)


@dataclass(frozen=True)
class StopRule:
    """When a sequential run may stop: the rule (`verdict` or `width`), the fewest questions before
    any stop, the batch size, the level, the target width (`width` only), the sample size the
    boundary is tuned for, and the range the per-question scores lie on (0-100 for CuBE)."""

    stop: str = "verdict"
    min_questions: int = 40
    batch: int = 20
    alpha: float = 0.05
    max_width: float | None = None
    target_questions: int = 100
    low: float = 0.0
    high: float = 100.0
    boundary: str = "anytime"  # or a finite-horizon one (`cube.method.group_sequential`)
    require_band: bool = False  # `width`: stop only when the interval also lies in one band

    def __post_init__(self) -> None:
        problems = rule_problems(self)
        if problems:
            raise ValueError("analysis.sequential: " + "; ".join(problems))


def rule_problems(rule: StopRule) -> list[str]:
    """Every problem with a stop rule at once, each naming the key and what was expected."""
    out = []
    if rule.stop not in STOP_RULES:
        out.append(f"stop is {rule.stop!r}, expected one of {', '.join(STOP_RULES)}")
    for key in ("min_questions", "batch", "target_questions"):
        value = getattr(rule, key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            out.append(f"{key} is {value!r}, expected a whole number >= 1")
    if not 0.0 < rule.alpha < 1.0:
        out.append(f"alpha is {rule.alpha!r}, expected a number strictly between 0 and 1")
    if rule.stop == "width" and (rule.max_width is None or not rule.max_width > 0):
        out.append(f"max_width is {rule.max_width!r}, expected a positive number with stop: width")
    if not rule.low < rule.high:
        out.append(f"low {rule.low!r} is not below high {rule.high!r}")
    if rule.require_band and rule.stop != "width":  # a verdict stop is one band already
        out.append(f"require_band applies only with stop: width (stop is {rule.stop!r})")
    return out + _boundary_problems(rule)


def _boundary_problems(rule: StopRule) -> list[str]:
    if rule.boundary in BOUNDARIES:
        return []
    return [f"boundary is {rule.boundary!r}, expected one of {', '.join(BOUNDARIES)}"]


def rho_squared(target_questions: int, alpha: float) -> float:
    """The mixture's rho^2 that makes the boundary tightest near `target_questions` (the closed-form
    approximation used by Waudby-Smith et al. 2024, from Howard et al. 2021)."""
    log_term = -2.0 * np.log(alpha)
    return float((log_term + np.log(log_term + 1.0)) / target_questions)


def margin(n: np.ndarray | int, sd: np.ndarray | float, alpha: float, rho2: float) -> np.ndarray:
    """The half-width of the two-sided Gaussian-mixture AsympCS at sample size(s) n for running
    standard deviation(s) sd (arrays broadcast: one simulation computes every look at once)."""
    n = np.asarray(n, dtype=float)
    scale = n * rho2 + 1.0
    return np.asarray(sd) * np.sqrt(2.0 * scale / (n**2 * rho2) * np.log(np.sqrt(scale) / alpha))


def sequence(values: np.ndarray, rule: StopRule, axis: int = -1) -> dict[str, np.ndarray]:
    """The confidence sequence at every sample size 1..n along `axis` (a row of a 2-D array is one
    run): `n`, `estimate`, `lower`, `upper`, the bounds clipped to the scores' range."""
    x = _checked(values, rule)
    n = np.arange(1, x.shape[axis] + 1, dtype=float)
    shape = [1] * x.ndim
    shape[axis] = -1
    n = n.reshape(shape)
    mean = np.cumsum(x, axis=axis) / n
    var = np.maximum(np.cumsum(x**2, axis=axis) / n - mean**2, 0.0)
    half = margin(n, np.sqrt(var), rule.alpha, rho_squared(rule.target_questions, rule.alpha))
    return {
        "n": np.broadcast_to(n, mean.shape),
        "estimate": mean,
        "lower": np.clip(mean - half, rule.low, rule.high),
        "upper": np.clip(mean + half, rule.low, rule.high),
    }


def fixed_n_interval(values: np.ndarray, alpha: float, axis: int = -1) -> dict[str, np.ndarray]:
    """The normal interval mean +- z sd / sqrt(n), valid at one sample size fixed in advance,
    computed at every sample size: what a run that re-uses it at every look would act on."""
    x = np.asarray(values, dtype=float)
    n = np.arange(1, x.shape[axis] + 1, dtype=float)
    shape = [1] * x.ndim
    shape[axis] = -1
    n = n.reshape(shape)
    mean = np.cumsum(x, axis=axis) / n
    var = np.maximum(np.cumsum(x**2, axis=axis) / n - mean**2, 0.0) * n / np.maximum(n - 1, 1)
    half = norm.ppf(1 - alpha / 2) * np.sqrt(var / n)
    return {"n": np.broadcast_to(n, mean.shape), "estimate": mean, "lower": mean - half,
            "upper": mean + half}  # fmt: skip


def _checked(values: np.ndarray, rule: StopRule) -> np.ndarray:
    """The scores as floats, refusing any that is undefined or outside the rule's range (the
    boundary assumes a bounded score; a failed call is not a score and must not reach here)."""
    x = np.asarray(values, dtype=float)
    bad = ~np.isfinite(x) | (x < rule.low) | (x > rule.high)
    if bad.any():
        where = np.argwhere(bad)[:5].tolist()
        raise ValueError(
            f"sequential scores: {int(bad.sum())} value(s) undefined or outside "
            f"[{rule.low}, {rule.high}], first at index {where}"
        )
    return x


@dataclass(frozen=True)
class Moments:
    """The running count, mean and sum of squared deviations of the scores seen so far."""

    n: int = 0
    mean: float = 0.0
    m2: float = 0.0

    def merge(self, batch: np.ndarray) -> Moments:
        """These moments with a batch's added (Chan, Golub and LeVeque's pairwise update)."""
        x = np.asarray(batch, dtype=float)
        if x.size == 0:
            return self
        n_b, mean_b = x.size, float(x.mean())
        m2_b = float(((x - mean_b) ** 2).sum())
        n = self.n + n_b
        delta = mean_b - self.mean
        return Moments(
            n=n,
            mean=self.mean + delta * n_b / n,
            m2=self.m2 + m2_b + delta**2 * self.n * n_b / n,
        )


@dataclass(frozen=True)
class Look:
    """The confidence sequence after one batch: questions judged, estimate and bounds."""

    n: int
    estimate: float
    lower: float
    upper: float
    groups: int | None = None  # jackknife groups behind the SE (a smooth statistic's look only)
    retrieved: int | None = None  # retrieved questions behind W (the CuBE score's look only)
    scale: str | None = None  # "sqrt", "log" or "linear": the scale a smooth statistic's look is on

    @property
    def width(self) -> float:
        return self.upper - self.lower


def look(moments: Moments, rule: StopRule) -> Look:
    """The sequence's interval for the scores the moments summarise."""
    if moments.n == 0:
        return Look(0, float("nan"), rule.low, rule.high)
    sd = np.sqrt(moments.m2 / moments.n)
    half = float(margin(moments.n, sd, rule.alpha, rho_squared(rule.target_questions, rule.alpha)))
    lo = float(np.clip(moments.mean - half, rule.low, rule.high))
    hi = float(np.clip(moments.mean + half, rule.low, rule.high))
    return Look(moments.n, moments.mean, lo, hi)


def jackknife_se(leave_out: np.ndarray) -> float:
    """The grouped (delete-a-group) jackknife standard error of an estimate from its G values with
    one group left out each: sqrt((G - 1) / G * sum (theta_-g - mean)^2). NaN below 2 groups or when
    a left-out value is undefined (a verdict is then withheld, not guessed)."""
    x = np.asarray(leave_out, dtype=float)
    if x.size < 2 or not np.isfinite(x).all():
        return float("nan")
    return float(np.sqrt((x.size - 1) / x.size * ((x - x.mean()) ** 2).sum()))


def jackknife_groups(units: np.ndarray, max_groups: int = 40, seed: int = 0) -> np.ndarray:
    """Group codes 0..G-1 for the delete-a-group jackknife: one group per resampling unit (a family,
    or a question when the run clusters by question), or, above `max_groups` units, the units dealt
    in a seeded random order into `max_groups` groups (a unit is never split), so that a look costs
    at most `max_groups` re-computations of the statistic whatever the run's size."""
    codes, inverse = np.unique(np.asarray(units), return_inverse=True)
    if codes.size <= max_groups:
        return inverse
    deal = np.random.default_rng(seed).permutation(codes.size) % max_groups
    return deal[inverse]


def leave_group_out(statistic: Callable[[np.ndarray], float], groups: np.ndarray) -> np.ndarray:
    """The statistic recomputed with each group left out: `statistic(keep)` takes a boolean mask of
    the questions to keep (the same function that gives the estimate with every question kept)."""
    groups = np.asarray(groups)
    return np.array([statistic(groups != g) for g in np.unique(groups)], dtype=float)


def t_allowance(groups: int, rule: StopRule) -> float:
    """How much wider the boundary is drawn because its SE is itself estimated from only `groups`
    jackknife groups (G - 1 degrees of freedom): Student's t quantile over the normal one at the
    rule's level, 1 for many groups. Without it a run of few families (8 groups at 40 questions in
    families of five) misses at its first look far more often than at later ones."""
    if groups < 2:
        return float("nan")
    level = 1 - rule.alpha / 2
    return float(student_t.ppf(level, groups - 1) / norm.ppf(level))


# the scales a smooth statistic's sequence may be built on (functional_look): the transformation
# applied to the estimate and its leave-out values, and its inverse for the bounds (both monotone)
SCALES = {
    "sqrt": (np.sqrt, np.square),
    "log": (np.log, np.exp),
    "linear": (lambda x: x, lambda x: x),
}
DEFAULT_SCALE = "sqrt"  # the driver's and the simulation's (functional_look explains why)


def functional_look(
    estimate: float,
    leave_out: np.ndarray,
    n: int,
    rule: StopRule,
    clip: bool = False,
    retrieved: int | None = None,
    scale: str = DEFAULT_SCALE,
    critical: float | None = None,
    groups: int | None = None,
) -> Look:
    """The sequence's interval for a smooth statistic of the n questions judged (the CuBE score, a
    ratio of trimmed means times R@k, is not a mean of per-question scores): the AsympCS boundary
    around the estimate with the per-question spread sd = sqrt(n) * SE, the SE from the grouped
    jackknife over `leave_out` (one value per left-out group: a family, so that questions sharing a
    family are not taken as independent). This is the influence-function form of the asymptotic
    sequence (the statistic behaves as the mean of its influence values); its coverage is checked by
    simulation (`cube simulate --sequential`), not assumed. Undefined SE or estimate: bounds NaN.

    `scale` builds the sequence for a monotone transformation of the statistic (itself a smooth
    statistic: its jackknife SE from the transformed leave-out values) and maps the bounds back, so
    a look holds the truth exactly when it holds the transformed truth. The default, `sqrt`, is the
    variance-stabilising one for CuBE = W x R@k: to first order Var(CuBE) = (R/n) (W^2 (1 - R) +
    var(W per retrieved question)), proportional to R@k, so on the linear scale a run that
    retrieved few questions gets a low estimate *and* a small SE (correlation 0.5-0.8 over
    simulated runs with families of 5) and the boundary missed the truth from below (the
    studentised estimate's 0.5 % quantile -4.0 against +2.2 above, 30 points inside a band,
    `benchmarks/sequential_diagnosis.py`). `log` (Var proportional to the square) over-corrects
    there; `linear` is the sequence as first built. A statistic or a left-out value <= 0 (no
    square root or log) gets the linear scale at that look; `Look.scale` says which was used.

    `critical`: a finite-horizon group-sequential boundary's value at this look
    (`cube.method.group_sequential.critical_value`): the interval is then estimate +- critical x SE
    (on the scale, with the same Student's t allowance) instead of the AsympCS margin; None keeps
    the anytime-valid sequence.

    `groups`: the families behind the estimate when fewer than the leave-out values (R@k of the
    whole set with W of the questions judged: a group with no question judged still has a
    leave-out value); it is `Look.groups` (the 20-family guard of `not_yet`) and the Student's t
    allowance's degrees of freedom. None: one per leave-out value."""
    if scale not in SCALES:
        raise ValueError(f"functional_look: scale is {scale!r}, expected one of {sorted(SCALES)}")
    values = np.asarray(leave_out, dtype=float)
    if not (estimate > 0 and bool((values > 0).all())):
        scale = "linear"
    forward, back = SCALES[scale]
    se = jackknife_se(forward(values))
    groups = len(values) if groups is None else groups
    if n == 0 or not (np.isfinite(se) and np.isfinite(estimate)):
        nan = float("nan")
        return Look(n, float(estimate), nan, nan, groups, retrieved, scale)
    half = _half_width(se, n, rule, critical) * t_allowance(groups, rule)
    centre = float(forward(estimate))
    # the square root's inverse on the whole line: a lower bound below 0 maps to 0, not above it
    low_end = max(centre - half, 0.0) if scale == "sqrt" else centre - half
    lo, hi = float(back(low_end)), float(back(centre + half))
    if clip:
        lo, hi = max(lo, rule.low), min(hi, rule.high)
    return Look(n, float(estimate), lo, hi, groups, retrieved, scale)


def _half_width(se: float, n: int, rule: StopRule, critical: float | None) -> float:
    """critical x SE for a finite-horizon boundary, else the AsympCS margin with sd = sqrt(n) SE
    (`functional_look`), before the Student's t allowance."""
    if critical is not None:
        return critical * se
    rho2 = rho_squared(rule.target_questions, rule.alpha)
    return float(margin(n, se * np.sqrt(n), rule.alpha, rho2))


def thresholds_inside(lower: float, upper: float, thresholds: dict[str, float]) -> list[float]:
    """The band edges the interval straddles (lower < t <= upper): empty when it lies in one band
    (a score exactly at t is in the band that starts at t, as `cube.diagnose.verdict` has it)."""
    return sorted(t for t in thresholds.values() if lower < t <= upper)


def bands_named(edges: list[float], thresholds: dict[str, float]) -> str:
    """The verdict bands an interval spanning the band edges `edges` touches, 'good or excellent'
    (the band below the lowest edge spanned, then the band each edge starts; `poor` below every
    threshold, as `cube.diagnose.verdict` names it)."""
    ordered = sorted(thresholds.items(), key=lambda kv: kv[1])
    starts = {t: name for name, t in ordered}
    below = [name for name, t in ordered if t < min(edges)]
    touched = [below[-1] if below else "poor", *(starts[t] for t in sorted(edges))]
    return ", ".join(touched[:-1]) + " or " + touched[-1]


@dataclass(frozen=True)
class LookDecision:
    """Whether a sequential run stops after a look, and why (a sentence for the report); not the
    run's decision about the system, which is `cube.diagnose.decision_record.Decision`."""

    stop: bool
    reason: str


def not_yet(current: Look, rule: StopRule) -> str | None:
    """Why a run may not stop at this look whatever its interval (None when it may): fewer than
    `min_questions`; an undefined interval; for a smooth statistic, fewer than `MIN_GROUPS`
    jackknife groups (the SE of a few families is itself too uncertain: simulated runs in families
    of five missed the truth at a 40-question look, 8 families, 5-8 % of the time) or fewer than
    `MIN_RETRIEVED` retrieved questions behind W (trimmed means of a handful of questions are far
    from normal). The looks at which a run may stop are those the coverage is measured on."""
    if current.n < rule.min_questions:
        return f"{current.n} of the {rule.min_questions} questions needed first"
    if not (np.isfinite(current.lower) and np.isfinite(current.upper)):
        return f"the interval is undefined at {current.n} questions"
    if current.groups is not None and current.groups < MIN_GROUPS:
        return f"{current.groups} of the {MIN_GROUPS} families (jackknife groups) needed first"
    if current.retrieved is not None and current.retrieved < MIN_RETRIEVED:
        return f"{current.retrieved} of the {MIN_RETRIEVED} retrieved questions needed first"
    return None


def decide(current: Look, rule: StopRule, thresholds: dict[str, float]) -> LookDecision:
    """Stop or go on after a look: never before `not_yet` allows it, then by the rule."""
    wait = not_yet(current, rule)
    if wait:
        return LookDecision(False, wait)
    edges = thresholds_inside(current.lower, current.upper, thresholds)
    if rule.stop == "width":
        return _width_decision(current, rule, thresholds, edges)
    if not edges:
        return LookDecision(True, "the interval lies inside one verdict band")
    shown = ", ".join(f"{t:g}" for t in edges)
    return LookDecision(
        False, f"the interval {current.lower:.1f}-{current.upper:.1f} spans {shown}"
    )


def _width_decision(
    current: Look, rule: StopRule, thresholds: dict[str, float], edges: list[float]
) -> LookDecision:
    """`stop: width`: narrow enough; an interval across a band edge names the bands it spans
    ('good or excellent'), and does not stop when `require_band` asks for one band too."""
    if current.width > rule.max_width:
        return LookDecision(False, f"the interval is {current.width:.1f} wide, > {rule.max_width}")
    if not edges:
        return LookDecision(True, f"the interval is {current.width:.1f} wide, <= {rule.max_width}")
    spans = f"{current.lower:.1f}-{current.upper:.1f}: {bands_named(edges, thresholds)}"
    if rule.require_band:  # width and one band, both
        return LookDecision(
            False, f"the interval is narrow enough but spans a verdict edge ({spans})"
        )
    return LookDecision(
        True, f"the interval is {current.width:.1f} wide, <= {rule.max_width} ({spans})"
    )


@dataclass(frozen=True)
class SequentialRun:
    """A sequential run over given scores: every look, the last, and why it ended there."""

    looks: list[Look]
    stopped_early: bool
    reason: str

    @property
    def final(self) -> Look:
        return self.looks[-1]


def run(scores: np.ndarray, rule: StopRule, thresholds: dict[str, float]) -> SequentialRun:
    """Take the scores batch by batch in the order given, look after each, stop when `decide`
    says so or the scores end (then the reason says why the sequence never settled)."""
    x = _checked(scores, rule)
    moments, looks = Moments(), []
    decision = LookDecision(False, "no questions")
    for start in range(0, x.size, rule.batch):
        moments = moments.merge(x[start : start + rule.batch])
        looks.append(look(moments, rule))
        decision = decide(looks[-1], rule, thresholds)
        if decision.stop:
            return SequentialRun(looks, True, f"stopped at {moments.n}: {decision.reason}")
    if not looks:
        return SequentialRun([look(moments, rule)], False, "no questions to judge")
    return SequentialRun(looks, False, f"question set ended at {moments.n}: {decision.reason}")
