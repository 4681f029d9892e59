"""The cheap-judge control variate (cube.method.control_variate): lambda = 0 is the jury's estimate,
a biased cheap judge biases nothing, the SE falls with the cheap judge's correlation, the interval
covers, and its boundary is the driver's."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cube.method import control_variate as cv
from cube.method import sequential as seq
from cube.method import simulate_control_variate as S
from cube.method.bootstrap import cube_from_counts
from cube.method.simulate import RunModel, prepared_run

RULE = seq.StopRule(min_questions=40, batch=20)


def mean_values(x: np.ndarray, keep: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """The mean of x over `keep`, then with each group left out (1 + G values)."""
    G = int(groups.max()) + 1
    rows = [keep] + [keep & (groups != g) for g in range(G)]
    return np.array([x[r].mean() for r in rows])


def draw(rng: np.random.Generator, rho: float, n_all: int = 300, n_judged: int = 100):
    """Jury and cheap per-question scores (cheap: lenient, compressed, partial: 3 + 0.5 f + 1),
    the judged subset, and 30 jackknife groups; the jury's true mean is 5."""
    z = rng.standard_normal(n_all)
    y = 5 + 2 * z
    f = 3 + 0.5 * (5 + 2 * (rho * z + np.sqrt(1 - rho**2) * rng.standard_normal(n_all))) + 1
    judged = np.zeros(n_all, dtype=bool)
    judged[rng.choice(n_all, n_judged, replace=False)] = True
    groups = rng.permutation(n_all) % 30
    everyone = np.ones(n_all, dtype=bool)
    return (
        mean_values(y, judged, groups),
        mean_values(f, everyone, groups),
        mean_values(f, judged, groups),
    )


def test_lambda_zero_is_the_jury_estimate_exactly() -> None:
    y, fa, fj = draw(np.random.default_rng(1), 0.8)
    v = cv.control_variate_values(y, fa, fj, lam=0.0)
    assert v.estimate == y[0]
    np.testing.assert_array_equal(v.leave_out, y[1:])
    # a cheap judge undefined everywhere changes nothing at lambda 0 either
    nan = np.full_like(fa, np.nan)
    assert cv.control_variate_values(y, nan, nan, lam=0.0).estimate == y[0]
    # and on the method's own CuBE: the look's jury estimate is cube_from_counts on J alone
    model = dataclasses.replace(RunModel(), **S.WORLDS["families of 5"])
    p = prepared_run(model, 60, 3)
    p = S.with_cheap(p, (S.CheapJudge("cheap", 0.7),), np.random.default_rng(0))
    judged = np.arange(60) % 2 == 0
    groups = seq.jackknife_groups(p.unit_codes(), 40)
    look = cv.prepared_look(
        p, judged, groups, ["judge-a", "judge-b"], "cheap", cv.asympcs_boundary(RULE), lam=0.0
    )
    jury = cube_from_counts(p, judged[None, :].astype(float))["cube_score"][:2, 0].mean()
    assert look.estimate == pytest.approx(jury, abs=1e-12)
    assert look.jury_estimate == pytest.approx(jury, abs=1e-12)


def test_power_tuned_lambda_is_clipped_and_tuned() -> None:
    y, fa, fj = draw(np.random.default_rng(2), 0.9)
    v = cv.control_variate_values(y, fa, fj)
    lo, hi = cv.LAMBDA_RANGE
    assert lo <= v.lam <= hi and lo <= v.lam_leave_out.min() and v.lam_leave_out.max() <= hi
    # the cheap judge's scale is 0.5 x the jury's: the unclipped optimum rho x 2 / 0.5 ~ 3.6
    assert v.lam == hi
    # the leave-one-out re-tuning equals the tuning on the other groups, computed directly
    d = (fa - fj)[1:]
    direct = [cv.power_tuned_lambda(np.delete(y[1:], g), np.delete(d, g)) for g in range(5)]
    np.testing.assert_allclose(v.lam_leave_out[:5], direct, atol=1e-12)


def test_biased_cheap_judge_leaves_the_estimate_unbiased() -> None:
    rng = np.random.default_rng(40)
    est = np.array([cv.control_variate_values(*draw(rng, 0.7)).estimate for _ in range(400)])
    mc_se = est.std(ddof=1) / np.sqrt(est.size)
    assert abs(est.mean() - 5.0) < 3 * mc_se + 0.01


def test_se_shrinks_with_rho() -> None:
    ratios = []
    for rho in (0.0, 0.5, 0.9):
        rng = np.random.default_rng(7)
        looks = [
            cv.control_variate_look(*draw(rng, rho), 100, cv.constant_boundary(2.0), scale="linear")
            for _ in range(60)
        ]
        ratios.append(np.median([lk.variance_ratio for lk in looks]))
    assert ratios[0] > 0.95  # nothing to gain from an uncorrelated judge, little lost
    assert ratios[0] > ratios[1] > ratios[2]
    # the cheap judge's scale is half the jury's, so lambda stops at its clip, 1: the ratio is
    # 1 - (1 - n / N)(2 Cov - Var f) / Var y = 1 - (2/3)(3.6 - 1) / 4 = 0.57 at rho 0.9
    assert ratios[2] == pytest.approx(0.57, abs=0.06)
    # unclipped, the optimum 1 - rho^2 (1 - n / N) = 0.46 (100 of 300 judged), plus the cost of
    # tuning lambda on 30 groups that the leave-out re-tuning puts in the SE
    rng = np.random.default_rng(7)
    wide = [
        cv.control_variate_look(
            *draw(rng, 0.9), 100, cv.constant_boundary(2.0), lam_range=(0.0, 5.0), scale="linear"
        ).variance_ratio
        for _ in range(60)
    ]
    assert 0.42 < np.median(wide) < min(0.56, ratios[2])


def test_interval_covers_in_a_seeded_simulation() -> None:
    rng = np.random.default_rng(11)
    held = []
    for _ in range(300):
        look = cv.control_variate_look(
            *draw(rng, 0.7), 100, cv.constant_boundary(1.96, RULE), scale="linear"
        )
        held.append(look.lower <= 5.0 <= look.upper)
    assert 0.92 <= np.mean(held) <= 0.99  # 95 % nominal; 300 runs: MC SE 0.013


def test_boundary_is_the_drivers_functional_look() -> None:
    y, fa, fj = draw(np.random.default_rng(5), 0.5)
    for scale in ("linear", "sqrt"):
        lo, hi, used = cv.interval(y[0], y[1:], 100, cv.asympcs_boundary(RULE), scale)
        ref = seq.functional_look(float(y[0]), y[1:], 100, RULE, scale=scale)
        assert used == ref.scale
        assert (lo, hi) == pytest.approx((ref.lower, ref.upper), abs=1e-9)


def test_bad_shapes_and_judges_are_refused() -> None:
    with pytest.raises(ValueError, match="same length"):
        cv.control_variate_values([1.0, 2.0], [1.0], [1.0, 2.0])
    p = prepared_run(RunModel(), 20, 1)
    with pytest.raises(ValueError, match="cheap judge 'nope'"):
        cv.prepared_look(p, np.ones(20, bool), np.arange(20) % 5, ["judge-a"], "nope", len)


def test_simulated_looks_cover_and_the_cheap_judge_helps() -> None:
    model = RunModel().with_system(recall=0.6)
    cheap = (S.CheapJudge("cheap", 0.9), S.CheapJudge("biased", 0.9, 2.0, 0.6, 1.0))
    d = S.CVDesign(
        model, 120, RULE, 0.0, cheap=cheap, boundaries={"pocock": cv.constant_boundary(2.58, RULE)}
    )
    looks = S.run_design(d, range(4))
    assert set(looks["estimator"]) == {S.JURY, "cheap", "biased"}
    assert list(looks["n"].unique()) == [40, 60, 80, 100, 120]
    # the last look judged every question: the correction is 0 and the estimate the jury's
    last = looks[looks["n"] == 120].pivot(index="replicate", columns="estimator", values="estimate")
    np.testing.assert_allclose(last["cheap"], last[S.JURY], atol=1e-9)
    mid = looks[(looks["n"] == 60) & (looks["estimator"] == "cheap")]
    assert (mid["var_ratio"] < 1.0).all()


def test_jury_scores_absent_outside_the_judged_questions_change_nothing() -> None:
    # the driver's arrays: the jury's scores exist only where it judged (NaN elsewhere)
    p = prepared_run(RunModel(), 80, 9)
    p = S.with_cheap(p, (S.CheapJudge("cheap", 0.8),), np.random.default_rng(1))
    judged = np.random.default_rng(2).random(80) < 0.5
    groups = seq.jackknife_groups(p.unit_codes(), 40)
    blank = p.scores.copy()
    blank[:2, ..., ~judged] = np.nan
    args = (groups, ["judge-a", "judge-b"], "cheap", cv.constant_boundary(2.58, RULE))
    full = cv.prepared_look(p, judged, *args)
    absent = cv.prepared_look(dataclasses.replace(p, scores=blank), judged, *args)
    assert absent.estimate == pytest.approx(full.estimate, abs=1e-9)
    assert (absent.lower, absent.upper) == pytest.approx((full.lower, full.upper), abs=1e-9)
    assert absent.n_judged == int(judged.sum()) and absent.n_answered == 80
