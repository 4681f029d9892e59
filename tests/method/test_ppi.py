"""Human-calibrated CuBE (cube.method.ppi): prediction-powered means, interval, ratings needed."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cube.config.schema import SchemaError
from cube.method.ppi import ppi_cube, ratings_needed, ratings_plan

DIMS = ("relevance", "quality")
TRUE = {
    "zero": 3.0,
    "rag": 6.0,
    "full": 8.0,
}  # human-scale means: W = 100 * 3 / 5 = 60 on both dimensions


def _world(
    n: int = 400, n_rated: int = 100, seed: int = 0, recall: float = 0.8, lenient_rag: float = 1.5
):
    """A system with known human-scale truth (W = 60, CuBE = 60 * R@k) and a judge that is
    lenient on the rag set only (+`lenient_rag` points): a bias the bounds cannot cancel."""
    rng = np.random.default_rng(seed)
    qids = [f"q{i:04d}" for i in range(n)]
    rank = np.where(rng.random(n) < recall, 1, 0)
    answers = pd.DataFrame(
        [
            {"question_id": q, "system": "s", "set": s, "rank": int(r), "n_retrieved": 8}
            for q, r in zip(qids, rank, strict=True)
            for s in TRUE
        ]
    )
    truth = {(q, s, d): TRUE[s] + rng.normal(0, 1.0) for q in qids for s in TRUE for d in DIMS}
    scores = pd.DataFrame(
        [
            {
                "question_id": q,
                "system": "s",
                "set": s,
                "judge": "j",
                "dimension": d,
                "score": t + (lenient_rag if s == "rag" else 0.0) + rng.normal(0, 0.7),
            }
            for (q, s, d), t in truth.items()
        ]
    )
    rated = set(rng.choice(qids, n_rated, replace=False))
    human = pd.DataFrame(
        [
            {
                "question_id": q,
                "system": "s",
                "set": s,
                "judge": "human",
                "dimension": d,
                "score": float(np.clip(t + rng.normal(0, 0.5), 0, 10)),
            }
            for (q, s, d), t in truth.items()
            if q in rated
        ]
    )
    return answers, scores, human, float(np.mean(rank > 0))


def test_ppi_removes_a_judge_bias_the_bounds_cannot():
    answers, scores, human, r = _world()
    res = ppi_cube(answers, scores, human, n_resamples=300, seed=1)
    truth = 60.0 * r
    lo, hi = res.interval["cube_score"]
    # judge-only: rag means 7.5 on the 3..8 bounds -> W = 90, CuBE = 90 R@k; far outside the PPI
    # interval
    assert res.judge_only["cube_score"] == pytest.approx(90 * r, abs=4)
    assert lo <= truth <= hi
    assert not lo <= res.judge_only["cube_score"] <= hi
    assert res.recall_at_k == pytest.approx(r)
    assert res.n_rated == int(
        human.loc[
            human["question_id"].isin(answers.loc[(answers["rank"] > 0), "question_id"]),
            "question_id",
        ].nunique()
    )


def test_lambda_zero_is_the_human_ratings_alone():
    answers, scores, human, r = _world(n=120, n_rated=40, seed=3)
    res = ppi_cube(answers, scores, human, lam=0.0, n_resamples=0)
    hit = set(answers.loc[answers["rank"] > 0, "question_id"])
    h = human[human["question_id"].isin(hit)].groupby(["set", "dimension"])["score"].mean()
    W = [100 * (h["rag", d] - h["zero", d]) / (h["full", d] - h["zero", d]) for d in DIMS]
    T = {s: np.mean([h[s, d] for d in DIMS]) for s in TRUE}  # equal weights
    assert res.dimensions == pytest.approx(dict(zip(DIMS, W, strict=True)))
    assert res.cube_score == pytest.approx(
        100 * (T["rag"] - T["zero"]) / (T["full"] - T["zero"]) * r
    )
    assert np.isnan(res.interval["cube_score"]).all()  # no resamples: NaN interval, not a guess


def test_plain_ppi_equals_the_rectified_mean_formula():
    answers, scores, human, _ = _world(n=100, n_rated=30, seed=4)
    res = ppi_cube(answers, scores, human, lam=1.0, n_resamples=0)
    hit = set(answers.loc[answers["rank"] > 0, "question_id"])
    rated = set(human["question_id"]) & hit
    f = scores[scores["question_id"].isin(hit)].groupby(["set", "dimension"])["score"].mean()
    fl = scores[scores["question_id"].isin(rated)].groupby(["set", "dimension"])["score"].mean()
    y = human[human["question_id"].isin(rated)].groupby(["set", "dimension"])["score"].mean()
    expect = (y + f - fl).rename("expect").reset_index()
    got = res.means.merge(expect, on=["set", "dimension"])
    assert np.allclose(got["ppi_mean"], got["expect"])


def _squeezed_world(n: int, n_rated: int, seed: int):
    """R@k = 1 (every question retrieved) and a judge that squeezes the human scale (2 + 0.5 t,
    little noise): the judge's mean over all questions then carries much of the estimate's
    variance."""
    rng = np.random.default_rng(seed)
    q = np.array([f"q{i:04d}" for i in range(n)])
    answers = pd.DataFrame(
        {
            "question_id": np.repeat(q, 3),
            "system": "s",
            "set": list(TRUE) * n,
            "rank": 1,
            "n_retrieved": 8,
        }
    )
    rated = np.zeros(n, bool)
    rated[rng.choice(n, n_rated, replace=False)] = True
    scores, human = [], []
    for s, mu in TRUE.items():
        for d in DIMS:
            t = mu + rng.normal(0, 1.0, n)
            scores.append(
                pd.DataFrame(
                    {
                        "question_id": q,
                        "set": s,
                        "judge": "j",
                        "dimension": d,
                        "score": 2 + 0.5 * t + rng.normal(0, 0.1, n),
                    }
                )
            )
            human.append(
                pd.DataFrame(
                    {
                        "question_id": q[rated],
                        "set": s,
                        "judge": "h",
                        "dimension": d,
                        "score": np.clip(t[rated] + rng.normal(0, 0.3, n_rated), 0, 10),
                    }
                )
            )
    return answers, pd.concat(scores, ignore_index=True), pd.concat(human, ignore_index=True)


def test_interval_width_matches_the_spread_of_the_estimate_across_replicates():
    # 100 replicates, 80 of 120 questions rated (n/N = 2/3), R@k = 1 (truth: CuBE = W = 60): the
    # mean 95 % width should be about 2 x 1.96 x the SD of the estimate across replicates. The rated
    # sample drawn independently of the questions gave 0.71 of it (coverage too low); the joint draw
    # 0.91.
    points, widths, misses = [], [], 0
    for seed in range(100):
        res = ppi_cube(*_squeezed_world(120, 80, seed), n_resamples=200, seed=seed)
        lo, hi = res.interval["cube_score"]
        points.append(res.cube_score)
        widths.append(hi - lo)
        misses += not lo <= 60.0 <= hi
    ratio = np.mean(widths) / (2 * 1.959964 * np.std(points, ddof=1))
    assert 0.85 <= ratio <= 1.25, ratio
    assert misses <= 10  # binomial(100, 0.05): P(more than 10) ~ 1 %


def test_ratings_needed_shrinks_with_the_width_and_matches_the_current_width():
    answers, scores, human, _ = _world(n=300, n_rated=40, seed=5)
    res = ppi_cube(answers, scores, human, n_resamples=400, seed=0)
    lo, hi = res.interval["cube_score"]
    now = ratings_needed(res, hi - lo)
    assert (
        0.5 * res.n_rated <= now <= 2 * res.n_rated
    )  # the current width needs about the current ratings
    assert ratings_needed(res, (hi - lo) / 2) > now > ratings_needed(res, 2 * (hi - lo))
    assert ratings_needed(res, 1e-3) == float("inf")  # the questions alone are wider than that
    with pytest.raises(ValueError):
        ratings_needed(res, 0)


def test_ratings_needed_never_exceeds_the_retrieved_questions():
    # 11 of 161 retrieved questions rated: a 9-point interval needed 343 ratings (issue 21 review:
    # 58, 100, 277, 1500 before the joint draw), more than there are questions to rate
    answers, scores, human, _ = _world(n=200, n_rated=15, seed=5)
    res = ppi_cube(answers, scores, human, n_resamples=400, seed=0)
    needs = {w: ratings_needed(res, w) for w in (14, 12, 10, 9, 8, 7.5)}
    assert all(v <= res.n_retrieved or v == float("inf") for v in needs.values()), needs
    assert needs[9] == float("inf") and needs[14] < res.n_retrieved
    need, why = ratings_plan(res, 9)
    assert need == float("inf") and f"all {res.n_retrieved} retrieved questions" in why
    assert ratings_plan(res, 14)[1] == ""
    assert "questions alone" in ratings_plan(res, 1e-3)[1]


def test_no_rated_retrieved_question_is_flagged_not_guessed():
    answers, scores, human, _ = _world(n=60, n_rated=10, seed=6)
    missed = set(answers.loc[answers["rank"] == 0, "question_id"])
    res = ppi_cube(answers, scores, human[human["question_id"].isin(missed)], n_resamples=50)
    assert np.isnan(res.cube_score) and res.n_rated == 0
    assert "no retrieved question has a human rating" in res.flags[0]
    assert np.isnan(ratings_needed(res, 10))


def test_bad_human_rows_are_all_named():
    answers, scores, human, _ = _world(n=30, n_rated=5, seed=7)
    bad = human.copy()
    bad.loc[bad.index[0], "score"] = 11
    bad.loc[bad.index[3], "set"] = "gold"
    with pytest.raises(SchemaError, match=rf"{bad.index[0]}, {bad.index[3]}"):
        ppi_cube(answers, scores, bad)


def test_every_question_rated_plain_ppi_interval_is_the_human_only_interval():
    # rated = all retrieved questions: theta = mean(y) + mean_N(f) - mean_n(f) = mean(y) exactly,
    # and in every resample too when the rated columns come from the same draw of the questions
    # (issue 21 review: the rated sample was drawn independently of the questions, so f's two means
    # did not cancel)
    answers, scores, human, _ = _world(n=80, n_rated=80, seed=8)
    plain = ppi_cube(answers, scores, human, lam=1.0, n_resamples=200, seed=3)
    alone = ppi_cube(answers, scores, human, lam=0.0, n_resamples=200, seed=3)
    assert plain.cube_score == pytest.approx(alone.cube_score)
    assert plain.interval["cube_score"] == pytest.approx(alone.interval["cube_score"], abs=1e-9)


def test_auto_lambda_is_cov_over_var_for_a_rated_subset_of_the_questions():
    # nested samples (rated within all): theta = ybar_n - c fbar_n + c fbar_u, c = lam (1 - n/N),
    # has its least variance at c = Cov (N - n) / (N Var f), i.e. lam = Cov(y, f) / Var(f): no (1 +
    # n/N)
    answers, scores, human, _ = _world(n=200, n_rated=120, seed=9)
    res = ppi_cube(answers, scores, human, n_resamples=0)
    hit = set(answers.loc[answers["rank"] > 0, "question_id"])
    h = (
        human[human["question_id"].isin(hit)]
        .groupby(["set", "dimension", "question_id"])["score"]
        .mean()
    )
    f = scores.groupby(["set", "dimension", "question_id"])["score"].mean().reindex(h.index)
    for (s, d), y in h.groupby(level=[0, 1]):
        x = f.loc[y.index].to_numpy()
        y = y.to_numpy()
        lam = np.clip(np.mean(x * y) - x.mean() * y.mean(), 0, None) / np.var(x)
        got = res.means.set_index(["set", "dimension"]).loc[(s, d), "lam"]
        assert got == pytest.approx(min(lam, 1.0))


def test_a_weighted_dimension_without_human_range_is_flagged_as_left_out_of_w():
    # the raters score every full answer 0 on quality: full <= zero on the human scale, so W is over
    # relevance alone; it was computed silently (issue 21 review, drop.py), normalise flags it
    answers, scores, human, _ = _world(n=200, n_rated=60, seed=5)
    bad = (human["dimension"] == "quality") & (human["set"] == "full")
    res = ppi_cube(
        answers, scores, human.assign(score=human["score"].mask(bad, 0.0)), n_resamples=0
    )
    assert np.isfinite(res.weighted_score) and np.isnan(res.dimensions["quality"])
    assert res.weighted_score == pytest.approx(res.dimensions["relevance"])
    left = [f for f in res.flags if f.startswith("w_dimension_left_out")]
    assert len(left) == 1 and "quality" in left[0] and "over relevance" in left[0]


def test_the_human_sentence_shows_the_flags_of_a_defined_score():
    from cube.diagnose.assessment import human_sentence

    answers, scores, human, _ = _world(n=200, n_rated=60, seed=5)
    bad = (human["dimension"] == "quality") & (human["set"] == "full")
    head = ppi_cube(
        answers, scores, human.assign(score=human["score"].mask(bad, 0.0)), n_resamples=50
    ).headline()
    text = human_sentence(head)
    assert head["cube_score"] is not None and text.startswith(
        f"With {head['n_rated']} of {head['n_retrieved']} retrieved questions rated by humans: "
        "CuBE "
    )
    assert "w_dimension_left_out" in text and "quality" in text
    assert "Note" not in human_sentence(head | {"flags": []})


def test_bca_interval_reads_the_leave_one_question_out_estimates(monkeypatch: pytest.MonkeyPatch):
    """BCa (the default, as `analysis.interval`): its acceleration comes from the jackknife of the
    PPI estimate itself, i.e. ppi_cube's point estimate with one question removed (all its rows,
    rated or not), computed here independently; the interval is the bootstrap's quantiles at the BCa
    levels."""
    import cube.method.ppi as P
    from cube.method.bootstrap import bca_levels

    answers, scores, human, _ = _world(n=60, n_rated=25, seed=5)
    seen = {}

    def spy(est, sample, jack, alpha):
        seen.setdefault("calls", []).append((est, np.sort(sample), np.asarray(jack)))
        return bca_levels(est, sample, jack, alpha)

    monkeypatch.setattr(P, "bca_levels", spy)
    res = ppi_cube(answers, scores, human, n_resamples=300, seed=2)
    est, sample, jack = seen["calls"][0]  # cube_score first
    assert est == pytest.approx(res.cube_score)
    qids = sorted(answers["question_id"].unique())
    loo = [
        ppi_cube(
            *(t[t["question_id"] != q] for t in (answers, scores, human)), n_resamples=0
        ).cube_score
        for q in qids
    ]
    np.testing.assert_allclose(jack, loo, rtol=1e-9, atol=1e-9)
    lo, hi = np.quantile(sample, bca_levels(est, sample, jack, 0.025))
    assert res.interval["cube_score"] == pytest.approx((lo, hi))
    pct = ppi_cube(answers, scores, human, n_resamples=300, seed=2, method="percentile").interval[
        "cube_score"
    ]
    assert pct == pytest.approx(tuple(np.quantile(sample, [0.025, 0.975])))
    assert pct != pytest.approx(
        res.interval["cube_score"]
    )  # the levels moved (z0 and the acceleration)
