"""The simulation study (issue 21 A): the generative model, its truth, the summaries and `cube
simulate`.

The study's own figures (coverage, power) are measured, not asserted: `cube simulate` and
benchmarks/simulation_coverage.py print them. These tests check the pieces on cases whose answer is
known by construction or by hand.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import pandas as pd
import pytest

from cube.method.bootstrap import (
    bootstrap_cube,
    bootstrap_prepared,
    cube_from_counts,
    resample_counts,
)
from cube.method.evaluation import evaluate
from cube.method.simulate import JudgeModel, RunModel, simulate_run, truth
from cube.method.simulate_study import (
    coverage_table,
    gate_table,
    jury_truth,
    pvalue_table,
    quality_shift_for,
    se_check,
)


def test_a_simulated_run_is_a_run_the_estimator_reads_with_its_drawn_recall():
    model = RunModel()
    run = simulate_run(model, 60, seed=3, human_questions=10)
    assert set(run.answers["set"]) == {"zero", "rag", "full"} and len(run.answers) == 180
    assert len(run.scores) == 2 * 3 * 4 * 60 and run.scores["score"].between(0, 10).all()
    assert (run.scores["score"] == run.scores["score"].round()).all()  # integer judges
    # ratings by 2 raters of 10 questions in 3 sets and 4 dimensions, named human:<rater>
    assert len(run.human) == 2 * 10 * 3 * 4 and set(run.human["judge"]) == {
        "human:rater-1",
        "human:rater-2",
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = evaluate(run.answers, run.scores, None, 8)
    assert res.recall_at_k == pytest.approx(float((run.rank > 0).mean()))
    assert res.n_questions == 60


def test_same_questions_give_two_systems_the_same_difficulties_and_seeds_reproduce():
    from cube.method.simulate import draw_questions

    model = RunModel()
    q = draw_questions(model, 30, np.random.default_rng(1))
    a = simulate_run(model, 30, 5, questions=q)
    b = simulate_run(model.with_system(name="b"), 30, 6, questions=q)
    # the zero set's true level depends on the question only, not on the system
    np.testing.assert_allclose(a.levels[0], b.levels[0])
    pd.testing.assert_frame_equal(
        simulate_run(model, 30, 5).scores, simulate_run(model, 30, 5).scores
    )


def test_truth_of_a_system_as_good_as_the_gold_document_is_100_and_cube_is_w_times_recall():
    # answer_quality 1, full gain, no rank effect: a retrieved rag answer has the full answer's
    # level, so every judge's rag and full scores have one distribution and W's estimand is 100 (up
    # to the truth's MC error)
    model = dataclasses.replace(RunModel(), retrieval_gain=(1.0,) * 4).with_system(
        answer_quality=1.0, rank_effect=0.0, recall=0.6
    )
    t = truth(model, n=100_000)
    assert t["weighted_score"].to_numpy() == pytest.approx([100.0, 100.0], abs=0.6)
    assert t["cube_score"].to_numpy() == pytest.approx(0.6 * t["weighted_score"].to_numpy())
    assert (t["recall_at_k"] == 0.6).all()


def test_leniency_and_scale_leave_the_truth_nearly_unchanged_but_a_rag_bias_does_not():
    # the bounds remove leniency and scale (up to the rounding and clipping of integer scores);
    # a judge that adds points to rag answers only is not corrected
    fair = JudgeModel("fair", 0.0, 1.0, 1.0)
    model = RunModel(
        judges=(
            fair,
            JudgeModel("lenient", 1.5, 0.8, 1.0),
            JudgeModel("biased", 0.0, 1.0, 1.0, 1.0),
        )
    )
    w = truth(model, n=100_000).set_index("judge")["weighted_score"]
    assert abs(w["lenient"] - w["fair"]) < 3.0
    assert w["biased"] - w["fair"] > 10.0  # one point of 5 between the bounds: about 20 W points


def test_model_errors_are_reported_together():
    with pytest.raises(ValueError) as err:
        RunModel(
            judges=(JudgeModel("a"), JudgeModel("a")),
            dimension_offset=(0.0,),
            system=RunModel().system.__class__(recall=1.5),
        )
    msg = str(err.value)
    assert "names must be distinct" in msg and "dimension_offset" in msg and "system.recall" in msg


def test_coverage_table_by_hand():
    # 4 replicates of one interval: truth 10 covered by 3 of them (the last is [11, 12])
    reps = pd.DataFrame(
        {
            "n_questions": 40,
            "judge": "jury",
            "metric": "cube_score",
            "interval": "bootstrap",
            "replicate": range(4),
            "estimate": [9.0, 10.0, 11.0, 12.0],
            "lo": [8.0, 9.0, 10.0, 11.0],
            "hi": [12.0, 11.0, 12.0, 12.0],
            "truth": 10.0,
            "in_jury": True,
        }
    )
    row = coverage_table(reps).iloc[0]
    assert row["coverage"] == 0.75
    assert row["coverage_mc_se"] == pytest.approx(
        math.sqrt(0.625 * 0.375 / 8)
    )  # Agresti-Coull: (3 + 2) / (4 + 4)
    assert row["mean_width"] == pytest.approx((4 + 2 + 2 + 1) / 4)
    assert row["bias"] == pytest.approx((-1 + 0 + 1 + 2) / 4)  # errors -1, 0, 1, 2
    assert row["rmse"] == pytest.approx(math.sqrt((1 + 0 + 1 + 4) / 4))
    # 2 x MC SE at the nominal level: 2 sqrt(0.95 x 0.05 / 4) = 0.218 < |0.75 - 0.95| = 0.20? no:
    # 0.20 < 0.218
    assert not row["misses"]
    reps.loc[1, "hi"] = 9.5  # now 2 of 4: 0.5 is 0.45 from 0.95, more than 0.218
    assert coverage_table(reps).iloc[0]["misses"]


def test_coverage_leaves_out_undefined_intervals_and_judges_outside_the_jury():
    reps = pd.DataFrame(
        {
            "n_questions": 40,
            "judge": "a",
            "metric": "cube_score",
            "interval": "bootstrap",
            "replicate": range(3),
            "estimate": [1.0, 2.0, 3.0],
            "lo": [0.0, np.nan, 0.0],
            "hi": [5.0, np.nan, 5.0],
            "truth": 2.0,
            "in_jury": [True, True, False],
        }
    )
    row = coverage_table(reps).iloc[0]
    assert (row["replicates"], row["undefined"], row["coverage"]) == (1, 1, 1.0)
    gate = gate_table(reps).iloc[0]
    assert gate["excluded_rate"] == pytest.approx(1 / 3) and gate["replicates"] == 3


def test_pvalue_table_ks_rejection_and_delta_coverage():
    p = np.linspace(0.01, 0.99, 50)  # evenly spread: uniform, 2 of 50 at or below 0.05
    null = pd.DataFrame(
        {
            "n_questions": 100,
            "p_value": p,
            "lo": -1.0,
            "hi": np.where(p < 0.1, -0.5, 1.0),
            "truth": 0.0,
            "mde": 5.0,
        }
    )
    row = pvalue_table(null, 0.05).iloc[0]
    assert row["ks_p_value"] > 0.9 and row["rejection_rate"] == pytest.approx(
        3 / 50
    )  # 0.01, 0.03, 0.05
    assert row["delta_coverage"] == pytest.approx(1 - 5 / 50) and row["mean_mde"] == 5.0
    skewed = null.assign(p_value=p**3)
    assert pvalue_table(skewed, 0.05).iloc[0]["ks_p_value"] < 1e-3


def test_se_check_sets_the_spread_of_delta_beside_the_bootstrap_se():
    # deltas -1, 0, 1, 2: SD = sqrt(5/3) = 1.291; its MC error 1.291 / sqrt(2 x 3) = 0.527; mean SE
    # 1.5
    pairs = pd.DataFrame({"delta": [-1.0, 0.0, 1.0, 2.0], "se": [1.0, 2.0, 1.0, 2.0]})
    got = se_check(pairs)
    assert got["delta_sd"] == pytest.approx(math.sqrt(5 / 3))
    assert got["delta_sd_mc_se"] == pytest.approx(math.sqrt(5 / 3) / math.sqrt(6))
    assert got["mean_se"] == pytest.approx(1.5)
    assert math.isnan(se_check(pairs.drop(columns="se"))["mean_se"])


def test_quality_shift_reaches_the_asked_true_difference():
    model = RunModel()
    ap = _ap()
    shift = quality_shift_for(model, -10.0, ap, n=20_000)
    moved = model.with_system(answer_quality=model.system.answer_quality + shift)
    assert jury_truth(moved, ap, 20_000) - jury_truth(model, ap, 20_000) == pytest.approx(
        -10.0, abs=0.05
    )


def test_bca_interval_of_recall_matches_scipy_and_keeps_the_estimates():
    from scipy import stats

    from tests.factories import make_tables

    answers, scores = make_tables(n_questions=60, seed=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pct = bootstrap_cube(answers, scores, n_resamples=4000, seed=1)
        bca = bootstrap_cube(
            answers, scores, n_resamples=4000, seed=1, method="bca", expand=False
        )  # scipy's levels
    assert (pct["estimate"].fillna(-1) == bca["estimate"].fillna(-1)).all()
    # R@k is a mean of 0/1 outcomes: our BCa from counts and scipy's BCa agree up to resampling
    # noise
    hits = answers[answers["set"] == "rag"].sort_values("question_id")["rank"].gt(0).to_numpy(float)
    ref = stats.bootstrap(
        (hits,), np.mean, n_resamples=20000, method="BCa", rng=np.random.default_rng(0)
    )
    row = bca[(bca["judge"] == "jury") & (bca["metric"] == "recall_at_k")].iloc[0]
    assert row["lo"] == pytest.approx(ref.confidence_interval.low, abs=0.02)
    assert row["hi"] == pytest.approx(ref.confidence_interval.high, abs=0.02)
    with pytest.raises(ValueError, match="percentile"):
        bootstrap_cube(answers, scores, n_resamples=10, method="studentised")


def test_cube_simulate_prints_every_interval_and_writes_its_tables(tmp_path, capsys):
    from cube.cli import main

    out = tmp_path / "sim"
    assert (
        main(
            [
                "simulate",
                "params/default.yaml",
                "--replicates",
                "2",
                "--questions",
                "20",
                "--bootstrap",
                "20",
                "--permutations",
                "20",
                "--no-power",
                "--workers",
                "1",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    for label in ("judge-a", "judge-b", "jury", "wilson", "KS p", "left out of the jury"):
        assert label in text
    cov = pd.read_csv(out / "sim_coverage.csv")
    assert (
        set(cov["metric"]) == {"cube_score", "weighted_score", "recall_at_k"}
        and (cov["replicates"] <= 2).all()
    )
    assert (out / "fig_sim_coverage.png").stat().st_size > 0 and (out / "sim_pvalues.csv").exists()


def _ap():
    from cube.config.sections import AnalysisParams

    return AnalysisParams()


def test_analysis_interval_bca_changes_only_the_interval_of_the_evaluation():
    from cube.config.sections import AnalysisParams
    from tests.factories import make_tables

    answers, scores = make_tables(n_questions=50, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pct = evaluate(answers, scores, AnalysisParams(bootstrap=300, interval="percentile"), 8)
        bca = evaluate(answers, scores, AnalysisParams(bootstrap=300), 8)  # bca is the default
    pd.testing.assert_frame_equal(pct.cube_table, bca.cube_table)
    pd.testing.assert_frame_equal(
        pct.bootstrap[["judge", "metric", "estimate", "n_valid"]],
        bca.bootstrap[["judge", "metric", "estimate", "n_valid"]],
    )
    assert not np.allclose(
        pct.bootstrap["lo"], bca.bootstrap["lo"]
    )  # the same resamples, other quantiles
    assert bca.settings["interval"] == "bca"


def test_custom_run_weights_do_not_crash_the_study_which_weights_its_own_dimensions_equally():
    """Review C2: `analysis.weights: custom` crashed notebook 12 (a bare KeyError), so every such
    run failed."""
    from cube.config.params import parse_params
    from cube.run.simulate import study

    params = parse_params(
        {
            "run": "t",
            "judges": [{"name": "r", "model": {"provider": "offline", "model": "rubric"}}],
            "dimensions": ["relevance", "completeness"],
            "analysis": {
                "weights": "custom",
                "custom_weights": {"relevance": 1, "completeness": 2},
            },
        }
    )
    result = study(params, replicates=2, questions=[20], bootstrap=20, permutations=20, power=False)
    assert "weights them equally" in result.settings["weights_note"]


def test_a_monte_carlo_error_is_never_zero_at_0_or_100_percent():
    """Review C3: 8 of 8 covered was published with Monte Carlo SE 0.000."""
    from cube.method.simulate_study import mc_rate

    share, se, n = mc_rate(pd.Series([1.0] * 8))
    assert share == 1.0 and n == 8 and 0.05 < se < 0.2
    share, se, _ = mc_rate(pd.Series([0.0] * 8))
    assert share == 0.0 and se > 0.05
    assert mc_rate(pd.Series([1.0, 0.0] * 200))[1] == pytest.approx(math.sqrt(0.25 / 404))


def test_basic_interval_is_the_percentile_interval_reflected_about_the_estimate():
    """`basic` (benchmarks/simulation_coverage.py --methods basic) moves a biased estimator's
    interval back over the truth: from the same resamples it is [2 est - hi, 2 est - lo] of the
    percentile one."""
    from tests.factories import make_tables

    answers, scores = make_tables(n_questions=40, seed=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pct = bootstrap_cube(answers, scores, n_resamples=300, seed=2)
        basic = bootstrap_cube(answers, scores, n_resamples=300, seed=2, method="basic")
    ok = pct["lo"].notna()
    assert ok.sum() >= 5
    assert np.allclose(basic.loc[ok, "lo"], 2 * pct.loc[ok, "estimate"] - pct.loc[ok, "hi"])
    assert np.allclose(basic.loc[ok, "hi"], 2 * pct.loc[ok, "estimate"] - pct.loc[ok, "lo"])
    skewed = ok & ((pct["hi"] - pct["estimate"]) - (pct["estimate"] - pct["lo"])).abs().gt(1e-6)
    assert skewed.any()  # the reflection differs from the percentile interval, not a copy of it
    assert not np.allclose(basic.loc[skewed, "lo"], pct.loc[skewed, "lo"])


def test_bca_with_the_grouped_jackknife_gives_the_full_jackknifes_interval(monkeypatch):
    from cube.method import bootstrap as BS
    from tests.factories import make_tables

    answers, scores = make_tables(n_questions=400, seed=5)
    assert list(BS.jackknife_groups(5, 200)) == [
        0,
        1,
        2,
        3,
        4,
    ]  # up to 200 questions: one per group
    assert sorted(np.bincount(BS.jackknife_groups(401, 200)).tolist()) == [2] * 199 + [3]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        monkeypatch.setattr(
            BS, "JACKKNIFE_GROUPS", 400
        )  # one question per group: the full jackknife
        full = bootstrap_cube(answers, scores, n_resamples=2000, seed=3, method="bca")
        monkeypatch.setattr(BS, "JACKKNIFE_GROUPS", 200)  # pairs of questions
        grouped = bootstrap_cube(answers, scores, n_resamples=2000, seed=3, method="bca")
    width = full["hi"] - full["lo"]
    shift = (grouped[["lo", "hi"]] - full[["lo", "hi"]]).abs().max(axis=1)
    # measured: at most 0.4 % of the width with 200 groups; 20 groups move it up to 3.6 %, the
    # percentile interval is up to 3.2 % away
    assert (shift <= 0.01 * width).all(), shift / width


def test_the_t_levels_bring_a_small_samples_bootstrap_interval_toward_its_confidence():
    """`expanded_alpha` (Student's t levels): on 4,000 samples of 12 normal values the percentile
    interval of the mean covers 90.5 % (a z interval with the plug-in SE), at the t levels 93.4 %
    (Hesterberg's sqrt(n / (n - 1)) on top would give 94.4 %; MC SE 0.4 points); from the resamples'
    counts, as `bootstrap_prepared` draws them."""
    from cube.method.bootstrap import expanded_alpha, resample_counts

    n, runs, B = 12, 4000, 400
    rng = np.random.default_rng(7)
    x = rng.normal(size=(runs, n))
    C = resample_counts(
        n, B, np.random.default_rng(8)
    )  # one draw of counts for every sample: B x n
    means = x @ C.T / n  # runs x B
    a = expanded_alpha(0.025, n)
    assert (
        0.013 < a < 0.015
        and expanded_alpha(0.025, 2) == 0.025
        and expanded_alpha(0.025, 300) < 0.025
    )
    plain = np.quantile(means, [0.025, 0.975], axis=1)
    wide = np.quantile(means, [a, 1 - a], axis=1)
    cover = lambda q: float(np.mean((q[0] <= 0) & (0 <= q[1])))  # noqa: E731
    assert cover(plain) < 0.915 and 0.925 < cover(wide) < 0.945, (cover(plain), cover(wide))


@pytest.mark.parametrize("recall", [0.8, 0.3])
def test_bootstrap_intervals_of_cube_and_w_are_expanded_by_the_questions_they_rest_on(recall):
    """CuBE's level is `expanded_alpha` of the n questions, W's of the retrieved questions it is
    computed on (issue 30: at R@k 0.3 of 40, t at 40 left jury W at 93.0 % coverage); the interval
    holds the plain one (the same estimates and resamples); R@k's are the plain 2.5 / 97.5 % (it
    covered within its MC error)."""
    from cube.method.bootstrap import expanded_alpha, prepare, t_level_units
    from tests.factories import make_tables

    answers, scores = make_tables(n_questions=40, seed=4, recall=recall)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = prepare(
            answers,
            scores,
            proportion=0.1,
            subset="retrieved",
            mode="rank_correlation",
            custom=None,
            top_n=8,
        )
        wide = bootstrap_prepared(p, n_resamples=400, seed=3)
        plain = bootstrap_prepared(p, n_resamples=400, seed=3, expand=False)
        res = cube_from_counts(p, resample_counts(len(p.rank_score), 400, np.random.default_rng(3)))
    assert (wide["estimate"].fillna(-1) == plain["estimate"].fillna(-1)).all()
    n, k = len(p.rank_score), int(p.retrieved.sum())
    assert k < n and t_level_units(p) == k
    a = {"cube_score": expanded_alpha(0.025, n), "weighted_score": expanded_alpha(0.025, k)}
    for metric in ("cube_score", "weighted_score", "recall_at_k"):
        j = list(p.judges).index(p.judges[0])
        row = wide[(wide["judge"] == p.judges[0]) & (wide["metric"] == metric)].iloc[0]
        sample = res[metric][j] if metric != "recall_at_k" else res[metric]
        sample = sample[np.isfinite(sample)]
        level = a.get(metric, 0.025)
        assert (row["lo"], row["hi"]) == pytest.approx(
            tuple(np.quantile(sample, [level, 1 - level]))
        ), metric
    ok = plain["lo"].notna() & (plain["metric"] != "recall_at_k")
    assert (
        ok.sum() >= 4
        and (
            wide.loc[ok, "hi"] - wide.loc[ok, "lo"] > plain.loc[ok, "hi"] - plain.loc[ok, "lo"]
        ).all()
    )


def test_bca_moves_from_the_widened_tails_of_cube_and_w_and_the_plain_tails_of_recall(monkeypatch):
    """The default (BCa, widened): `bca_levels` gets CuBE's tail `expanded_alpha(0.025, n)`, W's
    that of the retrieved questions, and R@k's 0.025; with `expand=False` every figure's 0.025."""
    import cube.method.bootstrap as Bm
    from cube.method.bootstrap import expanded_alpha, prepare
    from tests.factories import make_tables

    answers, scores = make_tables(n_questions=30, seed=4)
    seen: list[float] = []
    real = Bm.bca_levels
    monkeypatch.setattr(
        Bm,
        "bca_levels",
        lambda est, sample, jack, alpha: seen.append(alpha) or real(est, sample, jack, alpha),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = prepare(
            answers,
            scores,
            proportion=0.1,
            subset="retrieved",
            mode="rank_correlation",
            custom=None,
            top_n=8,
        )
        out = bootstrap_prepared(p, n_resamples=200, seed=1, method="bca")
        called = list(seen)
        seen.clear()
        bootstrap_prepared(p, n_resamples=200, seed=1, method="bca", expand=False)
    tail = {
        "cube_score": expanded_alpha(0.025, 30),
        "weighted_score": expanded_alpha(0.025, int(p.retrieved.sum())),  # W rests on these
        "recall_at_k": 0.025,
    }
    expected = out.loc[out["lo"].notna(), "metric"].map(tail)
    assert (out["metric"] == "recall_at_k").any() and int(p.retrieved.sum()) < 30
    assert sorted(np.round(called, 12)) == sorted(np.round(expected, 12)), called
    assert seen and set(np.round(seen, 12)) == {0.025}
