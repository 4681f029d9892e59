"""The release decision's rule (`cube.method.release_rule.decide`) on hand-made comparison rows.

Hand-worked: with margin 5 and a dimension's Δ = -8, se = 1, p = Φ((-8 + 5) / 1) = Φ(-3) = 0.00135;
with Δ = -5.5, se = 1, p = Φ(-0.5) = 0.309 (not significant).
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from cube.method.release_rule import HOLD, RELEASE, UNDECIDED, below_margin_p, decide

DIMS = ("relevance", "quality")


def _deltas(
    cube=(0.0, -2.0, 2.0), dims=((0.0, 1.0), (0.0, 1.0)), recall=(0.0, 0.01, 1.0)
) -> pd.DataFrame:
    """Jury rows: ΔCuBE (delta, lo, hi), each dimension (delta, se), R@k (delta, se, p)."""
    rows = [
        {
            "judge": "jury",
            "metric": "cube_score",
            "delta": cube[0],
            "lo": cube[1],
            "hi": cube[2],
            "se": 1.0,
            "p_value": 0.5,
        }
    ]
    rows += [
        {
            "judge": "jury",
            "metric": f"N_{d}",
            "delta": v,
            "lo": v - 2 * s,
            "hi": v + 2 * s,
            "se": s,
            "p_value": 0.5,
        }
        for d, (v, s) in zip(DIMS, dims, strict=True)
    ]
    rows.append(
        {
            "judge": "jury",
            "metric": "recall_at_k",
            "delta": recall[0],
            "lo": math.nan,
            "hi": math.nan,
            "se": recall[1],
            "p_value": recall[2],
        }
    )
    rows.append(
        {
            "judge": "judge-a",
            "metric": "N_quality",
            "delta": -50.0,
            "lo": -60.0,
            "hi": -40.0,
            "se": 1.0,
            "p_value": 0.001,
        }
    )  # a single judge never decides
    return pd.DataFrame(rows)


def test_below_margin_p_hand_worked():
    assert below_margin_p(-8.0, 1.0, 5.0) == pytest.approx(0.0013499, rel=1e-4)
    assert below_margin_p(-5.5, 1.0, 5.0) == pytest.approx(0.3085, rel=1e-3)
    assert below_margin_p(-6.0, 0.0, 5.0) == 0.0 and below_margin_p(0.0, 0.0, 5.0) == 1.0
    assert math.isnan(below_margin_p(-6.0, math.nan, 5.0))


def test_equal_versions_are_released():
    r = decide(_deltas(), 100)
    assert r.decision == RELEASE
    assert {c.status for c in r.conditions} == {"pass"}


def test_interval_wholly_below_the_margin_holds():
    r = decide(_deltas(cube=(-9.0, -12.0, -6.0)), 100)
    assert r.decision == HOLD
    assert any("whole interval is below" in x for x in r.reasons)


def test_a_dimension_significantly_beyond_the_margin_holds_even_with_cube_non_inferior():
    r = decide(_deltas(dims=((0.0, 1.0), (-8.0, 1.0))), 100)
    assert r.decision == HOLD
    assert [c.name for c in r.conditions if c.status == "fail"] == ["quality_beyond_margin"]


def test_a_dimension_just_past_the_margin_but_not_significantly_does_not_hold():
    r = decide(_deltas(dims=((0.0, 1.0), (-5.5, 1.0))), 100)
    assert r.decision == RELEASE


def test_interval_reaching_below_the_margin_is_undecided():
    r = decide(_deltas(cube=(-3.0, -7.0, 1.0)), 100)
    assert r.decision == UNDECIDED
    assert "reaches below" in r.reasons[0]


def test_recall_significantly_lower_within_the_margin_is_undecided():
    r = decide(_deltas(recall=(-0.02, 0.005, 0.001)), 100)  # 2 points lower, margin 5 points
    assert r.decision == UNDECIDED
    assert any("R@k is lower" in x for x in r.reasons)


def test_recall_significantly_lower_beyond_the_margin_holds():
    r = decide(_deltas(recall=(-0.12, 0.01, 0.001)), 100)  # 12 points lower, se 1 point
    assert r.decision == HOLD


def test_too_few_questions_or_no_interval_is_undecided():
    assert decide(_deltas(), 19).decision == UNDECIDED
    assert decide(_deltas(), 19, min_questions=10).decision == RELEASE
    r = decide(_deltas(cube=(math.nan, math.nan, math.nan)), 100)
    assert r.decision == UNDECIDED and "undefined" in r.reasons[0]


def test_cube_bounds_widen_the_percentile_interval_to_t_with_units_minus_one_df():
    from cube.method.release_rule import cube_bounds

    # hand-worked: t_9(0.975) = 2.2622, se 1, sqrt(10 / 9) = 1.0541: reach 2.3845
    lo, hi = cube_bounds({"delta": 0.0, "lo": -2.0, "hi": 2.0, "se": 1.0}, 0.05, 10)
    assert (lo, hi) == (pytest.approx(-2.3845, abs=1e-4), pytest.approx(2.3845, abs=1e-4))
    # a percentile interval wider than the t reach is kept (a skewed bootstrap distribution)
    assert cube_bounds({"delta": 0.0, "lo": -3.0, "hi": 2.0, "se": 1.0}, 0.05, 10)[0] == -3.0
    assert all(math.isnan(x) for x in cube_bounds({"delta": 0.0, "se": 1.0}, 0.05, 10))


def test_a_percentile_bound_above_the_margin_is_not_enough_on_few_units():
    # lower percentile bound -4.9 > -5, but -2.5 - t_9 * 1.2 * sqrt(10/9) = -5.36 < -5
    deltas = _deltas(cube=(-2.5, -4.9, 0.0))
    deltas.loc[deltas["metric"] == "cube_score", "se"] = 1.2
    few = decide(deltas, 40, n_units=10)
    assert few.decision == UNDECIDED and "10 units" in few.reasons[0]
    # on 1,000 units t * se * sqrt(G / (G-1)) = 2.36: the percentile bound -4.9 decides
    assert decide(deltas, 1000, n_units=1000).decision == RELEASE


def test_one_or_two_families_are_undecided_however_large_delta():
    # a degenerate bootstrap on 2 families: se 0, lo = hi = Δ; Δ > -m alone would release
    deltas = _deltas(cube=(1.0, 1.0, 1.0))
    deltas.loc[deltas["metric"] == "cube_score", "se"] = 0.0
    for g in (1, 2, 9):
        r = decide(deltas, 100, n_units=g)
        assert r.decision == UNDECIDED and "too few resampled families" in r.reasons[0]
        assert f"{g} resampled units" in r.reasons[0]
    assert decide(deltas, 100, n_units=10).decision == RELEASE


def test_cube_bounds_use_t_from_two_units():
    from cube.method.release_rule import cube_bounds

    # hand-worked: t_1(0.975) = 12.7062, se 1, sqrt(2 / 1) = 1.4142: reach 17.969
    lo, hi = cube_bounds({"delta": 0.0, "lo": -1.0, "hi": 1.0, "se": 1.0}, 0.05, 2)
    assert (lo, hi) == (pytest.approx(-17.969, abs=1e-3), pytest.approx(17.969, abs=1e-3))


def test_baseline_questions_missing_from_the_new_run_are_undecided():
    r = decide(_deltas(), 100, baseline_only=3)
    assert r.decision == UNDECIDED and "lacks 3 of the baseline's questions" in r.reasons[0]
    assert decide(_deltas(), 100, baseline_only=1).reasons[0].startswith("this run lacks 1 of")
