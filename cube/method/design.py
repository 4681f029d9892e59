"""The design effect of resampling families: how much the near-duplicate families of a knowledge
base widen an interval beside one that treats questions as independent.

Questions about one family of near-duplicate documents (the same service across regions or
variants: the corpus `family_id`) share retrieval confusions and answer errors, so their outcomes
correlate. With the intraclass correlation rho of an outcome within families and families of sizes
m_1..m_G (n questions), the variance of a mean is Kish's design effect
deff = 1 + (sum m_g^2 / n - 1) rho times the independent-question one: an interval that resamples
questions is sqrt(deff) too narrow, one that resamples families is not (`cube.method.bootstrap`).
The intraclass correlation is the one-way ANOVA estimator for unequal group sizes (ICC(1) with
Snedecor-Cochran's n0; Donner 1986, "A review of inference procedures for the intraclass
correlation coefficient in the one-way random effects model"), reported as estimated (it can fall
below 0 by chance) and floored at 0 for the design effect.
"""

from __future__ import annotations

import math

import numpy as np

# The design effect at which the decision page says the family resampling widened the interval
# noticeably: sqrt(1.1) = 1.05, a twentieth wider.
NOTICEABLE_DEFF = 1.1


def unit_sizes(units: np.ndarray) -> np.ndarray:
    """The number of questions of each unit (`units`: the unit code 0..G-1 of each question)."""
    return np.bincount(units) if len(units) else np.zeros(0, dtype=int)


def icc_oneway(values: np.ndarray, units: np.ndarray) -> float:
    """The intraclass correlation of `values` within `units` (NaN values left out): (MSB - MSW) /
    (MSB + (n0 - 1) MSW) with n0 = (n - sum m_g^2 / n) / (G - 1). NaN when no unit has two values
    or the values do not vary."""
    ok = np.isfinite(values)
    v, u = np.asarray(values, float)[ok], np.asarray(units)[ok]
    if not len(v):
        return math.nan
    _, u = np.unique(u, return_inverse=True)
    m = np.bincount(u).astype(float)
    G, n = len(m), len(v)
    if G < 2 or n <= G:
        return math.nan
    means = np.bincount(u, weights=v) / m
    msb = float(np.sum(m * (means - v.mean()) ** 2) / (G - 1))
    msw = float(np.sum((v - means[u]) ** 2) / (n - G))
    n0 = (n - float(np.sum(m**2)) / n) / (G - 1)
    den = msb + (n0 - 1) * msw
    return (msb - msw) / den if den > 0 else math.nan


def design_effect(rho: float, units: np.ndarray) -> float:
    """Kish's design effect 1 + (sum m_g^2 / n - 1) max(rho, 0) of units of these sizes (1 when
    rho is undefined or every unit holds one question)."""
    m = unit_sizes(units).astype(float)
    n = m.sum()
    if not n or not math.isfinite(rho):
        return 1.0
    return float(1.0 + (float(np.sum(m**2)) / n - 1.0) * max(rho, 0.0))


def design_summary(retrieved: np.ndarray, rag_score: np.ndarray, units: np.ndarray) -> dict:
    """The intraclass correlation of retrieval (0/1) and of the rag score (a question's mean over
    the jury's judges and dimensions) within units, each with its design effect, and the units'
    count and mean size: what `CubeResult.design` holds and the pages print beside each interval."""
    m = unit_sizes(units)
    out: dict = {
        "questions": int(len(units)),
        "units": int(len(m)),
        "mean_unit_size": float(m.mean()) if len(m) else math.nan,
        "largest_unit": int(m.max()) if len(m) else 0,
    }
    for name, values in (("retrieval", retrieved.astype(float)), ("rag_score", rag_score)):
        rho = icc_oneway(values, units)
        out[f"icc_{name}"] = rho
        out[f"deff_{name}"] = design_effect(rho, units)
    return out


def wilson_effective(
    p: float, n_eff: float, confidence: float, units: int | None = None
) -> tuple[float, float]:
    """Wilson's score interval (p + z^2/2n +- z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n) of a
    proportion p at a fractional n (the effective sample n / deff: Kish's adjustment of a
    proportion's interval for clustered questions); at a whole n it equals scipy's
    `binomtest(...).proportion_ci(method="wilson")` (tested), which takes whole counts only.
    `units`: the number of families the design effect was estimated from; z is then Student's t
    with units - 1 degrees of freedom (the design effect is itself estimated from few families,
    as the bootstrap's t levels, `cube.method.bootstrap.expanded_alpha`)."""
    from scipy.stats import norm, t

    if not n_eff > 0:
        return (math.nan, math.nan)
    q = 0.5 + confidence / 2
    z = float(t.ppf(q, units - 1) if units is not None and units >= 3 else norm.ppf(q))
    z2n = z * z / n_eff
    centre = (p + z2n / 2) / (1 + z2n)
    half = z * math.sqrt(p * (1 - p) / n_eff + z2n / (4 * n_eff)) / (1 + z2n)
    # the score interval always holds p; at p = 0 or 1 rounding can leave a bound 1e-16 on the
    # wrong side of it (a negative error bar: matplotlib refused the R@N-by-group figure)
    return (max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half)))


def _known(design: dict, key: str) -> bool:
    return math.isfinite(design.get(key, math.nan))


def _design_effects(design: dict) -> list[str]:
    """ "<deff> for <outcome> (intraclass correlation <icc>)" of each outcome with both known."""
    return [
        f"{design[f'deff_{k}']:.2f} for {name} (intraclass correlation {design[f'icc_{k}']:.2f})"
        for k, name in (("rag_score", "the rag score"), ("retrieval", "retrieval"))
        if _known(design, f"deff_{k}") and _known(design, f"icc_{k}")
    ]


def _largest_design_effect(design: dict) -> float:
    """The larger known design effect of the two outcomes (NaN when neither is known)."""
    known = [design[f"deff_{k}"] for k in ("rag_score", "retrieval") if _known(design, f"deff_{k}")]
    return max(known, default=math.nan)


def design_note(design: dict) -> str:
    """The decision page's sentence on the families ('' without families or a design effect
    below `NOTICEABLE_DEFF`): the design effects measured (Kish's, for a mean: an interval that
    treats a family's questions as independent is about sqrt(deff) too narrow for a mean) and which
    unit the intervals resample. It claims no widening of this run's CuBE interval: the design
    effect is a mean's, and on the default run (deff of retrieval 1.22) the family interval of
    CuBE was as wide as the question one (docs/measurements.md). NaN figures are left out."""
    if not design or design.get("units", 0) >= design.get("questions", 0):
        return ""
    parts = _design_effects(design)
    deff = _largest_design_effect(design)
    if not parts or not deff >= NOTICEABLE_DEFF:
        return ""
    head = (
        f"The {design['questions']} questions come in {design['units']} families of "
        f"near-duplicates whose outcomes go together (design effect {' and '.join(parts)}; a mean "
        f"over questions treated as independent would have an interval about "
        f"{1 - 1 / math.sqrt(deff):.0%} too narrow)"
    )
    if design.get("unit") == "family":
        return f"{head}: the intervals resample whole families, so they allow for it."
    return f"{head}, and analysis.cluster is question: the intervals treat them as independent."
