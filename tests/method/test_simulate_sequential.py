"""The sequential design simulated (issue 31, item 3): the looks are the method's own arithmetic,
the driver's order keeps families whole, and on a small seeded simulation the jury CuBE's
confidence sequence holds the truth at every look where the fixed-n interval re-used at every look
does not. The full figures are measured by benchmarks/sequential_cube.py, not asserted here."""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from cube.config.params import load_params
from cube.method import sequential as seq
from cube.method import simulate_sequential as SS
from cube.method.bootstrap import prepare
from cube.method.evaluation import evaluate
from cube.method.simulate import RunModel, simulate_run
from cube.method.simulate_study import jury_truth
from tests import ROOT

FAM3 = RunModel(family_size=3, family_retrieval_share=0.5)


def _jury_of_subset(run, keep_qids) -> float:
    """The jury CuBE (every judge's mean) `evaluate` gives on the questions `keep_qids` only."""
    answers = run.answers[run.answers["question_id"].isin(keep_qids)]
    scores = run.scores[run.scores["question_id"].isin(keep_qids)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = evaluate(answers, scores, None, 8, clusters=run.families)
    return float(res.cube_table["cube_score"].mean())


def test_every_look_row_is_the_methods_point_estimate_on_the_questions_it_keeps():
    """One counts row per look (and per group left out) equals `evaluate` on those questions."""
    run = simulate_run(FAM3, 60, seed=4)
    p = prepare(run.answers, run.scores, proportion=0.1, subset="retrieved",
                mode="rank_correlation", custom=None, top_n=8, clusters=run.families)  # fmt: skip
    qids = np.array(sorted(run.answers["question_id"].unique()))
    order = SS.driver_order(p.unit_codes(), np.random.default_rng(9))
    p = SS.reordered(p, order)
    sizes = SS.look_sizes(p.unit_codes(), batch=20, min_questions=40)
    counts, _, slices = SS.look_counts(p.unit_codes(), sizes, max_groups=40, seed=2)
    values = SS.jury_cube(p, counts)
    for m, part in zip(sizes, slices, strict=True):
        reached = qids[order[:m]]
        assert values[part][0] == pytest.approx(_jury_of_subset(run, reached), abs=1e-9)
        # the first leave-group-out row: the reached questions minus that group's
        left = counts[part][1].astype(bool)
        assert values[part][1] == pytest.approx(_jury_of_subset(run, qids[order][left]), abs=1e-9)


def test_the_driver_order_takes_whole_families_in_batches_of_at_least_the_batch():
    units = np.repeat(np.arange(30), 3)  # 30 families of 3
    order = SS.driver_order(units, np.random.default_rng(1))
    in_order = units[order]
    assert sorted(order.tolist()) == list(range(90))
    # a family's questions are together
    assert all(len(set(in_order[i : i + 3])) == 1 for i in range(0, 90, 3))
    assert not np.array_equal(in_order, units)  # the families' order is shuffled
    sizes = SS.look_sizes(in_order, batch=20, min_questions=40)
    assert sizes.tolist() == [42, 63, 84, 90]  # 7 families a batch, the last look at the end
    assert all(m % 3 == 0 for m in sizes)


def test_the_jury_cube_sequence_covers_where_the_reused_fixed_n_interval_does_not():
    """300 seeded runs of up to 300 questions, true jury CuBE 10 points below the `fair` edge:
    the sequence holds the truth at every look from 40 on in at least 95 % of runs less twice the
    Monte Carlo SE at the nominal level; the fixed-n interval re-used at every look is below 95 %
    by more than twice that SE."""
    ap = load_params(ROOT / "params" / "default.yaml").analysis
    model = RunModel()
    placed = model.with_system(recall=SS.recall_for(model, 30.0, ap, n=20_000))
    design = SS.Design(placed, 300, seq.StopRule(), jury_truth(placed, ap, 50_000))
    replicates = 300
    with threadpool_limits(1):
        row = SS.summary_row(design, SS.run_design(design, range(replicates), seed=5))
    margin = 2 * math.sqrt(0.95 * 0.05 / replicates)
    assert row["replicates"] == replicates and row["undefined_look"] == 0
    assert row["coverage"] >= 0.95 - margin, row
    assert row["fixed_coverage_every_look"] < 0.95 - margin, row
    # and the run stopped before the set's end: fewer questions than the fixed-n run of them all
    assert row["mean_questions"] < 300 and row["calls_saved"] > 1


def test_summary_counts_a_wrong_verdict_and_the_fixed_n_that_matches_it():
    design = SS.Design(RunModel(), 80, seq.StopRule(), truth=30.0)
    sizes = np.array([40, 60, 80])
    reps = [
        # stopped at 40 in `poor` (right), estimates poor at every size
        {"covered": True, "missed_first_look": False, "fixed_covered": False,
         "fixed_covered_full": True, "undefined_look": False, "stopped": True, "n_used": 40,
         "band": 0, "peek_n": 40, "peek_band": 0, "band_at": np.array([0, 0, 0]), "sizes": sizes},
        # ran to the end, `fair` at 40 (wrong), right from 60 on
        {"covered": False, "missed_first_look": True, "fixed_covered": False,
         "fixed_covered_full": True, "undefined_look": False, "stopped": False, "n_used": 80,
         "band": 0, "peek_n": 40, "peek_band": 1, "band_at": np.array([1, 0, 0]), "sizes": sizes},
    ]  # fmt: skip
    row = SS.summary_row(design, reps)
    assert row["coverage"] == 0.5 and row["fixed_coverage_every_look"] == 0.0
    assert row["missed_first_look"] == 0.5
    assert row["mean_questions"] == 60 and row["calls_saved"] == pytest.approx(80 / 60)
    assert row["wrong_sequential"] == 0 and row["wrong_peek"] == 0.5 and row["wrong_full"] == 0
    assert row["fixed_n_at_mean"] == 60 and row["wrong_at_mean_n"] == 0
    assert row["n_same_error"] == 60  # the fixed-n run of 40 errs in 1 of 2
    assert row["mean_calls"] == 60 * SS.calls_per_question(RunModel()) == 60 * 27
    assert row["inside"] == 10.0


def test_the_truth_is_placed_where_asked_and_an_impossible_one_is_refused():
    ap = load_params(ROOT / "params" / "default.yaml").analysis
    model = RunModel()
    r = SS.recall_for(model, 25.0, ap, n=20_000)
    assert jury_truth(model.with_system(recall=r), ap, 20_000) == pytest.approx(25.0, abs=1e-3)
    with pytest.raises(ValueError, match="no R@k"):
        SS.recall_for(dataclasses.replace(model), 95.0, ap, n=20_000)


def test_a_design_where_no_look_may_stop_reports_no_coverage_not_a_perfect_one():
    """Replicates without a look where a stop is allowed (too few families) judge nothing: their
    coverage is NaN and their share `undefined_look`, never a vacuous 1.0 (a truth of -500 would
    otherwise read as covered)."""
    reps = [
        {"covered": True, "missed_first_look": False, "fixed_covered": True,
         "fixed_covered_full": False, "undefined_look": True, "stopped": False, "n_used": 60,
         "band": 0, "peek_n": 60, "peek_band": 0, "band_at": np.array([0, 0]),
         "sizes": np.array([40, 60])},
        {"covered": True, "missed_first_look": False, "fixed_covered": True,
         "fixed_covered_full": False, "undefined_look": True, "stopped": False, "n_used": 60,
         "band": 0, "peek_n": 60, "peek_band": 0, "band_at": np.array([0, 0, 0]),
         "sizes": np.array([41, 50, 60])},
    ]  # fmt: skip
    design = SS.Design(RunModel(), 60, seq.StopRule(), -500.0)
    row = SS.summary_row(design, reps)
    assert np.isnan(row["coverage"]) and np.isnan(row["fixed_coverage_every_look"])
    assert row["undefined_look"] == 1.0
