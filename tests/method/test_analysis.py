"""The CuBE mathematics: properties (docs/explanation/method.md), edge cases and bad input."""

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cube.config.schema import SchemaError
from cube.config.sections import AnalysisParams
from cube.method import analysis as A
from cube.method import evaluation as E
from cube.method import normalise as N
from cube.method.bootstrap import bootstrap_cube, cube_from_counts, prepare
from cube.systems.base import rank_of
from tests.factories import DIMS, make_tables

NO_BOOT = AnalysisParams(bootstrap=0)


def _quiet_evaluate(answers, scores, ap=NO_BOOT):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", A.CubeWarning)
        return E.evaluate(answers, scores, ap)


# ------------------------------------------------------------------------------------ rank
@pytest.mark.parametrize(
    ("gold", "docs", "want"),
    [
        ("g", ["a", "g", "b"], 2),
        ("g", ["g"], 1),
        ("g", ["a", "b"], 0),
        ("g", [], 0),
        ("g", None, 0),
        ("g", ["a", "g", "g"], 2),
    ],
)
def test_rank_of(gold, docs, want):
    assert rank_of(gold, docs) == want


def test_rank_score_paper_transform():
    assert [A.rank_score(r, 8) for r in range(1, 9)] == [9, 8, 7, 6, 5, 4, 3, 2]  # 10 - rank
    assert A.rank_score(0, 8) == 0  # not retrieved
    assert A.rank_score(1, 1) == 10  # the gold document retrieved alone
    assert A.rank_score(1, 4, top_n=4) == 5 and A.rank_score(1, 1, top_n=4) == 6  # (N + 2) - rank
    with pytest.raises(ValueError, match="exceeds top_n"):
        A.rank_score(9, 9, top_n=8)
    with pytest.raises(ValueError, match=">= 0"):
        A.rank_score(-1, 8)


def test_recall_at_k():
    answers, _ = make_tables(n_questions=50, seed=1)
    rag = answers[answers.set == "rag"]
    assert A.recall_at_k(answers) == pytest.approx((rag["rank"] > 0).mean())
    assert A.recall_at_k(answers, k=1) == pytest.approx((rag["rank"] == 1).mean())
    assert A.recall_at_k(answers, k=1) <= A.recall_at_k(answers, k=3) <= A.recall_at_k(answers)


# ------------------------------------------------------------------------------ properties
def _affine(scores, judge, a, b):
    out = scores.copy()
    m = out["judge"] == judge
    out.loc[m, "score"] = a * out.loc[m, "score"] + b
    return out


@settings(max_examples=25, deadline=None)
@given(a=st.floats(0.2, 1.0), b_share=st.floats(0.0, 1.0), seed=st.integers(0, 10_000))
def test_positive_affine_invariance(a, b_share, seed):
    """s -> a s + b (a > 0, inside 0-10) changes none of a judge's r, w, N_d, W, CuBE."""
    answers, scores = make_tables(n_questions=40, seed=seed)
    b = b_share * (10 - 10 * a)  # keeps a*s + b inside [0, 10]: no clipping
    before = _quiet_evaluate(answers, scores)
    after = _quiet_evaluate(answers, _affine(scores, "judge-a", a, b))
    pd.testing.assert_frame_equal(
        before.correlations_all, after.correlations_all, rtol=1e-7, atol=1e-9
    )
    pd.testing.assert_frame_equal(before.weights, after.weights, rtol=1e-7, atol=1e-9)
    cols = [*DIMS, "weighted_score", "cube_score"]
    np.testing.assert_allclose(
        before.cube_table[cols].to_numpy(float),
        after.cube_table[cols].to_numpy(float),
        rtol=1e-7,
        atol=1e-7,
    )


def _copy_set(scores, source, target):
    out = scores[scores["set"] != target]
    copy = scores[scores["set"] == source].assign(set=target)
    return pd.concat([out, copy], ignore_index=True)


def test_rag_identical_to_full_gives_100_and_to_zero_gives_0():
    answers, scores = make_tables(n_questions=60, seed=3)
    top = _quiet_evaluate(answers, _copy_set(scores, "full", "rag")).cube_table
    assert np.allclose(top[[*DIMS, "weighted_score"]].to_numpy(float), 100.0)
    bottom = _quiet_evaluate(answers, _copy_set(scores, "zero", "rag")).cube_table
    assert np.allclose(bottom[[*DIMS, "weighted_score", "cube_score"]].to_numpy(float), 0.0)


def test_row_order_and_question_labels_change_nothing():
    answers, scores = make_tables(n_questions=50, seed=4)
    base = _quiet_evaluate(answers, scores).cube_table
    shuffled = _quiet_evaluate(
        answers.sample(frac=1, random_state=1), scores.sample(frac=1, random_state=2)
    )
    relabel = {q: f"renamed-{i}" for i, q in enumerate(reversed(answers["question_id"].unique()))}
    renamed = _quiet_evaluate(
        answers.assign(question_id=answers.question_id.map(relabel)),
        scores.assign(question_id=scores.question_id.map(relabel)),
    )
    pd.testing.assert_frame_equal(base, shuffled.cube_table)
    pd.testing.assert_frame_equal(base, renamed.cube_table)


# ------------------------------------------------------------------------------ edge cases
def test_negative_correlation_gives_zero_weight_and_a_warning():
    corr = pd.DataFrame(
        {"judge": ["j"] * 4, "dimension": list(DIMS), "r": [0.5, -0.2, np.nan, 0.3]}
    )
    with pytest.warns(A.CubeWarning, match="weight is set to 0"):
        w = A.dimension_weights(corr).set_index("dimension")["weight"]
    assert w["specificity"] == 0 and w["completeness"] == 0
    assert w["relevance"] == pytest.approx(0.5 / 0.8) and w.sum() == pytest.approx(1.0)


def test_weight_modes():
    corr = pd.DataFrame({"judge": ["j"] * 4, "dimension": list(DIMS), "r": [0.4, 0.3, 0.2, 0.1]})
    assert A.dimension_weights(corr, "equal")["weight"].tolist() == [0.25] * 4
    custom = A.dimension_weights(corr, "custom", dict(zip(DIMS, [2, 1, 1, 0], strict=True)))
    assert custom["weight"].tolist() == [0.5, 0.25, 0.25, 0.0]
    with pytest.raises(ValueError, match="no weight for dimension"):
        A.dimension_weights(corr, "custom", {"relevance": 1.0})


def test_zero_denominator_is_nan_and_flagged():
    tm = pd.DataFrame(
        [
            {"judge": "j", "set": s, "dimension": "relevance", "trimmed_mean": v}
            for s, v in (("zero", 5.0), ("rag", 6.0), ("full", 5.0))
        ]
    )
    w = pd.DataFrame({"judge": ["j"], "dimension": ["relevance"], "weight": [1.0]})
    with pytest.warns(A.CubeWarning, match="zero denominator"):
        t = N.cube_scores(tm, w, 0.9)
    assert np.isnan(t.at["j", "relevance"]) and np.isnan(t.at["j", "cube_score"])
    assert t.at["j", "flag_zero_denominator"]


def test_out_of_bounds_is_kept_and_flagged():
    tm = pd.DataFrame(
        [
            {"judge": "j", "set": s, "dimension": "relevance", "trimmed_mean": v}
            for s, v in (("zero", 5.0), ("rag", 9.0), ("full", 8.0))
        ]
    )
    w = pd.DataFrame({"judge": ["j"], "dimension": ["relevance"], "weight": [1.0]})
    with pytest.warns(A.CubeWarning, match="outside"):
        t = N.cube_scores(tm, w, 1.0)
    assert t.at["j", "relevance"] == pytest.approx(400 / 3) and t.at["j", "flag_out_of_bounds"]


def test_nan_scores_are_excluded_and_counted():
    answers, scores = make_tables(n_questions=30, seed=5)
    scores = scores.copy()
    hit = (scores.judge == "judge-a") & (scores.set == "rag") & (scores.dimension == "quality")
    idx = scores.index[hit][:4]
    scores.loc[idx, "score"] = np.nan
    tm = A.trimmed_means(scores).set_index(["judge", "set", "dimension"])
    assert tm.at[("judge-a", "rag", "quality"), "n_unscored"] == 4
    assert tm.at[("judge-a", "rag", "quality"), "n"] == 26
    kept = scores.drop(idx)
    assert tm.at[("judge-a", "rag", "quality"), "trimmed_mean"] == pytest.approx(
        A.trimmed_means(kept)
        .set_index(["judge", "set", "dimension"])
        .at[("judge-a", "rag", "quality"), "trimmed_mean"]
    )


def test_samples_are_averaged_before_trimming():
    answers, scores = make_tables(n_questions=20, seed=6)
    twice = pd.concat([scores, scores.assign(sample=1)], ignore_index=True)
    pd.testing.assert_frame_equal(A.trimmed_means(scores), A.trimmed_means(twice))


def test_judge_summary_is_mean_and_sd_ddof1():
    _, scores = make_tables(n_questions=30, seed=7)
    t = A.judge_summary(scores).set_index(["judge", "dimension"])
    raw = scores[
        (scores.set == "rag") & (scores.judge == "judge-b") & (scores.dimension == "quality")
    ]["score"]
    assert t.at[("judge-b", "quality"), "mean"] == pytest.approx(raw.mean())
    assert t.at[("judge-b", "quality"), "sd"] == pytest.approx(raw.std(ddof=1))


def test_evaluate_uses_the_retrieved_subset_by_default():
    answers, scores = make_tables(n_questions=60, seed=8)
    res = _quiet_evaluate(answers, scores)
    assert res.n_retrieved == int((answers[answers.set == "rag"]["rank"] > 0).sum())
    assert (res.trimmed_means["n"] <= res.n_retrieved).all()
    # subset 'all' is refused: W over all questions already counts the misses, CuBE = W x R@k would
    # count them twice
    with pytest.raises(
        ValueError, match=r"analysis.subset: 'all' is refused for CuBE.*count retrieval twice"
    ):
        AnalysisParams(bootstrap=0, subset="all")
    every = A.trimmed_means(scores)  # the trimmed means themselves can still use every question
    assert (every["n"] == 60).all()
    assert res.cube_table.at["judge-a", "cube_score"] == pytest.approx(
        res.cube_table.at["judge-a", "weighted_score"] * res.recall_at_k
    )


# ------------------------------------------------------------------------------- bad input
def test_bad_inputs_are_clear_errors():
    answers, scores = make_tables(n_questions=10, seed=9)
    with pytest.raises(SchemaError, match=r"scores: missing column\(s\) \['dimension'\]"):
        A.validate_scores(scores.drop(columns="dimension"))
    with pytest.raises(SchemaError, match=r"'score' must be a number in \[0, 10\]"):
        A.validate_scores(scores.assign(score=scores.score + 11))
    with pytest.raises(SchemaError, match=r"unknown set name\(s\) \['perfect'\]"):
        A.validate_scores(scores.replace({"set": {"full": "perfect"}}))
    with pytest.raises(SchemaError, match="duplicated"):
        A.validate_scores(pd.concat([scores, scores.head(1)]))
    with pytest.raises(SchemaError, match="rank"):
        A.validate_answers(answers.assign(rank=-1))
    with pytest.raises(SchemaError, match="2 systems"):
        A.recall_at_k(pd.concat([answers, answers.assign(system="other")]))


# -------------------------------------------------------------------------------- bootstrap
def test_bootstrap_identity_resample_reproduces_evaluate():
    answers, scores = make_tables(n_questions=70, seed=10)
    res = _quiet_evaluate(answers, scores)
    p = prepare(
        answers,
        scores,
        proportion=0.1,
        subset="retrieved",
        mode="rank_correlation",
        custom=None,
        top_n=8,
    )
    point = cube_from_counts(p, np.ones((1, len(p.rank_score))))
    for j, judge in enumerate(p.judges):
        assert point["cube_score"][j, 0] == pytest.approx(
            res.cube_table.at[judge, "cube_score"], abs=1e-8
        )
        assert point["weighted_score"][j, 0] == pytest.approx(
            res.cube_table.at[judge, "weighted_score"], abs=1e-8
        )


def test_bootstrap_matches_a_direct_resample():
    """One resample through the counts matrix equals evaluate() on the duplicated questions."""
    answers, scores = make_tables(n_questions=40, seed=11)
    rng = np.random.default_rng(0)
    qids = answers[answers.set == "rag"]["question_id"].tolist()
    draw = rng.integers(0, len(qids), len(qids))
    p = prepare(
        answers,
        scores,
        proportion=0.1,
        subset="retrieved",
        mode="rank_correlation",
        custom=None,
        top_n=8,
    )
    C = np.bincount(draw, minlength=len(qids))[None, :].astype(float)
    via_counts = cube_from_counts(p, C)["cube_score"][:, 0]
    parts_a, parts_s = [], []
    for k, i in enumerate(draw):
        q, new = qids[i], f"copy{k}"
        parts_a.append(answers[answers.question_id == q].assign(question_id=new))
        parts_s.append(scores[scores.question_id == q].assign(question_id=new))
    direct = _quiet_evaluate(pd.concat(parts_a), pd.concat(parts_s)).cube_table["cube_score"]
    np.testing.assert_allclose(via_counts, direct.loc[p.judges].to_numpy(), atol=1e-8)


def test_bootstrap_intervals_are_seeded_and_contain_the_estimate():
    answers, scores = make_tables(n_questions=60, seed=12)
    kw = {"n_resamples": 200, "seed": 3}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a, b = bootstrap_cube(answers, scores, **kw), bootstrap_cube(answers, scores, **kw)
    pd.testing.assert_frame_equal(a, b)
    jury = a[(a.judge == "jury") & (a.metric == "cube_score")].iloc[0]
    assert jury.lo <= jury.estimate <= jury.hi and jury.lo < jury.hi
    assert set(a.judge) == {"judge-a", "judge-b", "jury"}


def test_sample_variance_measures_run_to_run_noise():
    _, scores = make_tables(n_questions=10, seed=13)
    once = A.sample_variance(scores)
    assert once["samples"].eq(1).all() and once["mean_within_sd"].isna().all()
    again = scores.assign(
        sample=1,
        score=lambda d: np.where(d.judge == "judge-a", np.clip(d.score + 1, 0, 10), d.score),
    )
    both = A.sample_variance(pd.concat([scores, again], ignore_index=True)).set_index(
        ["judge", "dimension"]
    )
    assert (
        both.loc["judge-b", "mean_within_sd"].eq(0).all()
        and both.loc["judge-b", "share_disagreeing"].eq(0).all()
    )
    assert (both.loc["judge-a", "mean_within_sd"] > 0).all() and both.at[
        ("judge-a", "quality"), "samples"
    ] == 2


# --------------------------------------------------------- failure paths (independent review)
def test_a_weighted_dimension_without_scores_makes_w_undefined_not_smaller():
    answers, scores = make_tables(n_questions=40, seed=14)
    scores = scores.copy()
    scores.loc[(scores.set == "rag") & (scores.dimension == "quality"), "score"] = np.nan
    ap = AnalysisParams(bootstrap=0, weights="equal")
    res = _quiet_evaluate(answers, scores, ap)
    assert np.isnan(res.cube_table.at["judge-a", "weighted_score"])
    assert "undefined" in res.cube_table.at["judge-a", "flags"]
    boot = bootstrap_cube(answers, scores, n_resamples=20, weights="equal")
    assert np.isnan(
        boot[(boot.judge == "judge-a") & (boot.metric == "weighted_score")]["estimate"].iloc[0]
    )
    # a dimension of weight 0 contributes nothing, with or without scores
    custom = AnalysisParams(
        bootstrap=0,
        weights="custom",
        custom_weights={"relevance": 1, "specificity": 1, "completeness": 1, "quality": 0},
    )
    assert np.isfinite(
        _quiet_evaluate(answers, scores, custom).cube_table.at["judge-a", "weighted_score"]
    )


def test_nothing_retrieved_gives_cube_zero_with_a_flag():
    answers, scores = make_tables(n_questions=30, seed=15)
    res = _quiet_evaluate(answers.assign(rank=0), scores)
    assert res.recall_at_k == 0 and (res.cube_table["cube_score"] == 0).all()
    assert res.cube_table["flags"].str.contains("nothing retrieved").all()


def test_pairing_uses_only_questions_scored_in_all_three_sets():
    answers, scores = make_tables(n_questions=30, seed=16)
    scores = scores.copy()
    lost = (
        (scores.judge == "judge-a")
        & (scores.dimension == "relevance")
        & (scores.set == "rag")
        & scores.question_id.isin(["q000", "q001"])
    )
    scores.loc[lost, "score"] = np.nan
    tm = A.trimmed_means(scores).set_index(["judge", "set", "dimension"])
    assert (
        tm.at[("judge-a", "zero", "relevance"), "n"] == 28
        and tm.at[("judge-a", "zero", "relevance"), "n_unpaired"] == 2
    )
    assert tm.at[("judge-a", "rag", "relevance"), "n_unscored"] == 2
    assert tm.at[("judge-b", "zero", "relevance"), "n"] == 30  # other judges keep every question
    unpaired = A.trimmed_means(scores, paired=False).set_index(["judge", "set", "dimension"])
    assert unpaired.at[("judge-a", "zero", "relevance"), "n"] == 30


def test_failed_system_calls_are_not_retrieval_misses():
    answers, scores = make_tables(n_questions=40, seed=17)
    failed = answers.question_id.isin(["q000", "q001", "q002"])
    answers = answers.assign(retrieval_ok=~failed, rank=np.where(failed, 0, answers["rank"]))
    res = _quiet_evaluate(answers, scores)
    kept = answers[~failed & (answers.set == "rag")]
    assert res.n_questions == 37 and res.recall_at_k == pytest.approx((kept["rank"] > 0).mean())
    assert res.settings["retrieval_unknown"] == 3


def test_bootstrap_does_not_depend_on_row_order():
    answers, scores = make_tables(n_questions=40, seed=18)
    a = bootstrap_cube(answers, scores, n_resamples=100, seed=1)
    b = bootstrap_cube(
        answers.sample(frac=1, random_state=3),
        scores.sample(frac=1, random_state=4),
        n_resamples=100,
        seed=1,
    )
    pd.testing.assert_frame_equal(a, b)
