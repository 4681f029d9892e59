"""Issue 9: no silent wrong figure, and a verdict a bad judge cannot fool.

Metamorphic and property tests on the public analysis API: absent rows vs NaN rows, inverted
bounds, zero range, the causes of undefined weights, the judge validity gate, the withheld
verdict and one R@k everywhere."""

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cube.config.params import parse_params
from cube.config.sections import AnalysisParams
from cube.diagnose import assessment
from cube.method import analysis as A
from cube.method import evaluation as E
from cube.method import normalise as N
from cube.method import tables
from cube.method.bootstrap import cube_from_counts, prepare
from cube.pages import plots
from cube.pages.decision import decision_markdown
from tests.factories import DIMS, make_tables

NO_BOOT = AnalysisParams(bootstrap=0)
JUDGES = [{"name": "judge-a", "model": {"provider": "offline", "model": "rubric-lenient"}}]


def _eval(answers, scores, ap=NO_BOOT, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return E.evaluate(answers, scores, ap, **kw)


def _params(**analysis):
    return parse_params(
        {
            "run": "t",
            "judges": JUDGES,
            "systems": [{"kind": "builtin", "name": "sys"}],
            "analysis": analysis,
        }
    )


def _random_judge(scores, seed, name="judge-r"):
    one = scores[scores["judge"] == "judge-a"]
    rng = np.random.default_rng(seed)
    return pd.concat(
        [scores, one.assign(judge=name, score=rng.integers(0, 11, len(one)).astype(float))],
        ignore_index=True,
    )


# ------------------------------------------------------------------------------ one grid
def test_absent_rows_and_nan_rows_give_identical_results_including_the_bootstrap():
    answers, scores = make_tables(n_questions=40, seed=21)
    lost = (
        (scores.judge == "judge-a")
        & (scores.set == "zero")
        & (scores.dimension == "relevance")
        & scores.question_id.isin(["q001", "q004", "q007", "q010", "q013"])
    ) | (
        (scores.judge == "judge-b")
        & (scores.set == "full")
        & (scores.dimension == "quality")
        & scores.question_id.isin(["q002", "q003"])
    )
    as_nan = scores.assign(score=scores["score"].where(~lost))
    absent = scores[~lost]
    ap = AnalysisParams(bootstrap=150, seed=4)
    a, b = _eval(answers, as_nan, ap), _eval(answers, absent, ap)
    pd.testing.assert_frame_equal(a.cube_table, b.cube_table)
    pd.testing.assert_frame_equal(a.trimmed_means, b.trimmed_means)
    pd.testing.assert_frame_equal(a.bootstrap, b.bootstrap)
    tm = b.trimmed_means.set_index(["judge", "set", "dimension"])
    assert (
        tm.at[("judge-a", "zero", "relevance"), "n_unscored"] >= 1
    )  # absent rows are counted as unscored
    boot = b.bootstrap[b.bootstrap.metric == "cube_score"].set_index("judge")
    for judge in ["judge-a", "judge-b", "jury"]:  # the point estimate lies inside its interval
        assert boot.at[judge, "lo"] <= boot.at[judge, "estimate"] <= boot.at[judge, "hi"]
        est = b.jury_cube() if judge == "jury" else b.cube_table.at[judge, "cube_score"]
        assert boot.at[judge, "estimate"] == pytest.approx(est)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), share=st.floats(0.0, 0.3))
def test_property_absent_rows_are_nan_rows(seed, share):
    """Metamorphic: deleting any set of score rows == setting their scores to NaN (point and
    interval)."""
    answers, scores = make_tables(n_questions=25, seed=seed)
    lost = np.random.default_rng(seed).random(len(scores)) < share
    ap = AnalysisParams(bootstrap=40, seed=seed)
    a = _eval(answers, scores.assign(score=scores["score"].where(~lost)), ap)
    b = _eval(answers, scores[~lost], ap)
    pd.testing.assert_frame_equal(a.cube_table, b.cube_table)
    pd.testing.assert_frame_equal(a.bootstrap, b.bootstrap)
    est = b.bootstrap.set_index(["judge", "metric"])["estimate"]
    for judge in b.cube_table.index:  # the bootstrap's point estimate is evaluate()'s, NaN included
        np.testing.assert_allclose(
            est[(judge, "weighted_score")], b.cube_table.at[judge, "weighted_score"]
        )


def test_a_dimension_absent_from_one_set_makes_w_nan_with_its_name_not_a_mixed_sum():
    answers, scores = make_tables(n_questions=40, seed=22)
    gone = (
        (scores.judge == "judge-a") & (scores.set == "zero") & (scores.dimension == "completeness")
    )
    res = _eval(answers, scores[~gone], AnalysisParams(bootstrap=60))
    assert np.isnan(res.cube_table.at["judge-a", "weighted_score"])
    flags = res.flags[res.flags.judge == "judge-a"]
    assert "w_missing_dimension" in set(flags.code)
    assert (
        flags.message.str.contains("completeness").any()
        and flags.message.str.contains("no trimmed mean").any()
    )
    boot = res.bootstrap.set_index(["judge", "metric"])
    assert np.isnan(
        boot.at[("judge-a", "weighted_score"), "estimate"]
    )  # the bootstrap agrees: NaN as well
    assert (
        not res.cube_table.at["judge-a", "in_jury"]
        and "W undefined" in res.cube_table.at["judge-a", "excluded_reason"]
    )


def test_a_judge_without_scores_is_named_not_a_key_error():
    answers, scores = make_tables(n_questions=30, seed=23)
    dead = scores[scores.judge == "judge-a"].assign(
        judge="judge-c", score=np.nan, error_kind="call"
    )
    scores = pd.concat([scores.assign(error_kind=""), dead], ignore_index=True)
    res = _eval(answers, scores, judges=["judge-a", "judge-b", "judge-c", "judge-d"])
    t = res.cube_table
    assert "judge judge-c has no scores" in t.at["judge-c", "excluded_reason"]
    assert "call" in t.at["judge-c", "excluded_reason"]
    assert "judge judge-d has no scores (no score rows" in t.at["judge-d", "excluded_reason"]
    assert res.jury.at["mean", "n_judges"] == 2 and res.jury_judges == ["judge-a", "judge-b"]
    results = {"sys": res}
    t2 = tables.table2_trimmed_means(results)  # issue 10 died here with a KeyError
    assert set(t2.judge) == {"judge-a", "judge-b", "judge-c", "judge-d"}
    assert t2[t2.judge == "judge-c"][list(DIMS)].isna().all().all()
    t4 = tables.table4_cube_scores(results).set_index("judge")
    assert t4.at["Jury mean", "n_judges"] == 2 and not t4.at["judge-c", "in_jury"]


# --------------------------------------------------------------------------- flags, causes
def test_inverting_a_judges_zero_and_full_sets_is_flagged_and_the_judge_excluded():
    answers, scores = make_tables(n_questions=40, seed=24)
    a = scores.judge == "judge-a"
    swapped = scores.assign(
        set=np.where(
            a & (scores.set == "zero"),
            "full",
            np.where(a & (scores.set == "full"), "zero", scores.set),
        )
    )
    res = _eval(answers, swapped)
    f = res.flags[res.flags.judge == "judge-a"]
    assert set(f[f.code == "inverted_bounds"].dimension) == set(DIMS)
    assert (
        f[f.code == "inverted_bounds"]
        .message.str.match(r"judge judge-a · \w+: inverted bounds \(full")
        .all()
    )
    assert res.cube_table.loc["judge-a", list(DIMS)].isna().all()
    assert (
        res.cube_table.at["judge-a", "flag_inverted_bounds"]
        and not res.cube_table.at["judge-a", "in_jury"]
    )
    assert res.jury_judges == ["judge-b"]


def test_the_issues_inverted_dimension_is_not_100():
    tm = pd.DataFrame(
        [
            {"judge": "j", "set": s, "dimension": "relevance", "trimmed_mean": v}
            for s, v in (("zero", 8.0), ("rag", 7.0), ("full", 7.0))
        ]
    )
    w = pd.DataFrame({"judge": ["j"], "dimension": ["relevance"], "weight": [1.0]})
    with pytest.warns(A.CubeWarning, match="inverted bounds"):
        t = N.cube_scores(tm, w, 1.0)
    assert np.isnan(t.at["j", "relevance"]) and t.at["j", "flag_inverted_bounds"]


def test_a_zero_range_dimension_leaves_w_and_the_bootstrap_agrees():
    answers, scores = make_tables(n_questions=50, seed=25)
    flat = (
        (scores.judge == "judge-a")
        & (scores.dimension == "quality")
        & scores.set.isin(["zero", "full"])
    )
    scores = scores.assign(score=scores["score"].where(~flat, 5.0))
    res = _eval(answers, scores, AnalysisParams(bootstrap=0, weights="equal"))
    t = res.cube_table
    assert np.isnan(t.at["judge-a", "quality"])
    others = [d for d in DIMS if d != "quality"]
    tm = res.trimmed_means[res.trimmed_means.judge == "judge-a"].set_index(["set", "dimension"])[
        "trimmed_mean"
    ]
    T = {s: np.mean([tm[(s, d)] for d in others]) for s in ("zero", "rag", "full")}
    assert t.at["judge-a", "weighted_score"] == pytest.approx(
        100 * (T["rag"] - T["zero"]) / (T["full"] - T["zero"])
    )
    msg = res.flags[
        (res.flags.judge == "judge-a") & (res.flags.code == "w_dimension_left_out")
    ].message.iloc[0]
    assert "quality left W" in msg
    assert "zero range" in " ".join(res.flags[res.flags.dimension == "quality"].message)
    p = prepare(
        answers, scores, proportion=0.1, subset="retrieved", mode="equal", custom=None, top_n=8
    )
    point = cube_from_counts(p, np.ones((1, len(p.rank_score))))
    assert point["weighted_score"][p.judges.index("judge-a"), 0] == pytest.approx(
        t.at["judge-a", "weighted_score"]
    )


def test_undefined_weights_name_their_cause():
    answers, scores = make_tables(n_questions=40, seed=26)
    # gold document always at rank 1: rank_score constant
    res = _eval(answers.assign(rank=np.where(answers["rank"] > 0, 1, 1)), scores)
    msg = " ".join(res.flags[res.flags.code == "weights_undefined"].message)
    assert "rank_score is constant" in msg and "every gold document at rank 1" in msg
    assert "has no trimmed mean" not in msg
    # every correlation <= 0: judge-a's rag scores fall as the rank improves
    rank = answers[answers.set == "rag"].set_index("question_id")["rank"]
    anti = (scores.judge == "judge-a") & (scores.set == "rag")
    r = scores["question_id"].map(rank)
    scores2 = scores.assign(
        score=np.where(anti, np.where(r > 0, r, 9), scores["score"]).astype(float)
    )
    res = _eval(answers, scores2)
    f = res.flags[(res.flags.judge == "judge-a") & (res.flags.code == "weights_undefined")]
    assert len(f) == 1 and "every correlation with rank is <= 0" in f.message.iloc[0]
    assert np.isnan(res.cube_table.at["judge-a", "weighted_score"])
    eq = _eval(answers, scores2, AnalysisParams(bootstrap=40, weights_fallback="equal"))
    assert np.isfinite(eq.cube_table.at["judge-a", "weighted_score"])
    assert "equal weights used" in eq.cube_table.at["judge-a", "flags"]
    boot = eq.bootstrap.set_index(["judge", "metric"])
    assert boot.at[("judge-a", "weighted_score"), "estimate"] == pytest.approx(
        eq.cube_table.at["judge-a", "weighted_score"]
    )
    # too few questions
    few_q = ["q000", "q001"]
    res = _eval(answers[answers.question_id.isin(few_q)], scores[scores.question_id.isin(few_q)])
    assert res.flags.message.str.contains(r"too few questions \(2").any()
    assert (
        "too_few_questions" in set(res.flags.code)
        and "too few questions" in res.cube_table.at["judge-a", "flags"]
    )


# ------------------------------------------------------------------------------------ gate
@pytest.mark.parametrize("seed", range(12))
def test_a_random_judge_is_excluded_and_the_jury_stays_in_the_two_judge_interval(seed):
    answers, scores = make_tables(n_questions=60, seed=100 + seed)
    ap = AnalysisParams(bootstrap=200, seed=seed)
    two = _eval(answers, scores, ap)
    three = _eval(answers, _random_judge(scores, seed), ap)
    assert not three.cube_table.at["judge-r", "in_jury"], three.cube_table.at[
        "judge-r", "excluded_reason"
    ]
    assert three.cube_table.loc[["judge-a", "judge-b"], "in_jury"].all()
    # the jury is exactly the two-judge jury: the random judge moves neither the point nor the
    # interval (before, "lo <= three.jury_cube() <= hi" held for any jury whose point stayed in its
    # own interval)
    assert three.jury_cube() == pytest.approx(two.jury_cube(), abs=1e-9)
    assert three.interval() == pytest.approx(two.interval(), abs=1e-9)
    assert three.jury.at["mean", "n_judges"] == 2
    # and the test can tell: with the random judge in the jury (when its CuBE is defined) the mean
    # would move
    random_cube = three.cube_table.at["judge-r", "cube_score"]
    if np.isfinite(random_cube):
        assert three.cube_table["cube_score"].mean() != pytest.approx(two.jury_cube(), abs=1e-6)
    # the bootstrap's jury averages the gated judges only
    pd.testing.assert_frame_equal(
        two.bootstrap[two.bootstrap.judge == "jury"].reset_index(drop=True),
        three.bootstrap[three.bootstrap.judge == "jury"].reset_index(drop=True),
    )


def test_gate_failure_rate_counts_call_and_parse_not_skipped():
    answers, scores = make_tables(n_questions=40, seed=27)
    scores = scores.assign(error_kind="")
    a = scores.index[scores.judge == "judge-a"]
    n = len(a)  # 480 rows: 48 call and 48 parse failures, 96 skipped (not the judge's failures)
    kinds = np.array(
        ["call"] * (n // 10)
        + ["parse"] * (n // 10)
        + ["skipped"] * (n // 5)
        + [""] * (n - 2 * (n // 10) - n // 5)
    )
    scores.loc[a, "error_kind"] = kinds
    scores.loc[a[kinds != ""], "score"] = np.nan
    res = _eval(answers, scores)
    assert res.cube_table.at["judge-a", "failure_rate"] == pytest.approx(0.25)
    assert "failure rate 25% > 20%" in res.cube_table.at["judge-a", "excluded_reason"]
    ok = _eval(answers, scores, AnalysisParams(bootstrap=0, gate_max_failure_rate=0.3))
    assert ok.cube_table.at["judge-a", "in_jury"]


# ------------------------------------------------------------------------------ withheld
def _assess(res, **analysis):
    return assessment.assess({"sys": res}, _params(**analysis))


def test_the_verdict_is_withheld_when_the_interval_is_wider_than_the_limit():
    answers, scores = make_tables(n_questions=40, seed=28)
    res = _eval(answers, scores, AnalysisParams(bootstrap=200))
    lo, hi = res.interval()
    wide = _assess(res, max_interval_width=(hi - lo) * 0.9)
    assert wide.verdict == "withheld" and not wide.judging_failed
    assert any(
        "points wide, more than analysis.max_interval_width" in r for r in wide.withheld_reasons
    )
    assert "verdict withheld" in wide.sentence
    fine = _assess(res, max_interval_width=(hi - lo) * 1.1)
    assert fine.verdict != "withheld" and fine.withheld_reasons == []


def test_no_verdict_outside_the_bounds_beyond_tolerance_and_none_without_gated_judges():
    answers, scores = make_tables(n_questions=40, seed=29)
    res = _eval(answers, scores, AnalysisParams(bootstrap=100))
    res.jury.loc["mean", "cube_score"] = 112.0
    out = _assess(res)
    assert out.verdict == "withheld" and any("leaves [0, 100]" in r for r in out.withheld_reasons)
    res.jury.loc["mean", "cube_score"] = 103.0  # within the 5-point tolerance: read as 100
    res.bootstrap.loc[
        (res.bootstrap.judge == "jury") & (res.bootstrap.metric == "cube_score"), ["lo", "hi"]
    ] = [90.0, 104.0]
    out = _assess(res)
    assert out.verdict == "excellent" and "nearest bound" in out.sentence
    dead = scores.assign(score=np.nan, error_kind="call")
    none = _eval(answers, dead, AnalysisParams(bootstrap=50))
    out = _assess(none)
    assert out.verdict == "withheld" and out.judging_failed and out.n_judges == 0
    assert any(
        "no judge passed the validity gate" in r and "has no scores" in r
        for r in out.withheld_reasons
    )
    md = decision_markdown(out.model_copy(update={"suggestions": []}))
    assert "<span style=" in md and "WITHHELD" in md and "excluded: judge-a" in md


def test_the_decision_page_lists_used_and_excluded_judges_with_a_badge():
    answers, scores = make_tables(n_questions=60, seed=30)
    res = _eval(answers, _random_judge(scores, 1), AnalysisParams(bootstrap=100))
    out = _assess(res)
    md = decision_markdown(out)
    assert out.judges_used == ["judge-a", "judge-b"] and "judge-r" in out.judges_excluded
    assert "Judges in the jury (2): judge-a, judge-b." in md and "- excluded: judge-r (" in md
    assert f"{out.verdict.upper()}</span>" in md


# ---------------------------------------------------------------------------------- one R@k
def test_the_same_r_at_k_in_the_retrieval_table_figure_2_data_and_the_decision():
    answers, scores = make_tables(n_questions=40, seed=31)
    failed = answers.question_id.isin(["q000", "q001", "q002", "q003", "q004"])
    answers = answers.assign(retrieval_ok=~failed, rank=np.where(failed, 0, answers["rank"]))
    naive = float((answers[answers.set == "rag"]["rank"] > 0).mean())  # failures counted as misses
    res = _eval(answers, scores)
    table = tables.retrieval_table(answers, {"sys": 8}).set_index("system")
    fig = plots.rank_distribution(answers, top_n=8)
    heights = np.array([p.get_height() for p in fig.axes[0].patches])
    fig_recall = 1 - heights[0] / heights.sum()
    decision = _assess(res)
    style = tables.retrieval_by_style(
        answers,
        pd.DataFrame({"question_id": answers.question_id.unique(), "style": "named"}),
        {"sys": 8},
    )
    assert table.at["sys", "retrieval_unknown"] == 5 and table.at["sys", "questions"] == 35
    for value in (
        table.at["sys", "R@8"],
        fig_recall,
        decision.recall_at_k,
        style["R@N"].iloc[0],
    ):
        assert value == pytest.approx(res.recall_at_k)
    assert res.recall_at_k != pytest.approx(naive)
    assert (
        "5 left out" in fig._suptitle.get_text()
        if fig._suptitle
        else "5 left out" in fig.axes[0].get_title()
    )
