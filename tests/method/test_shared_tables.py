"""`evaluate` validates its tables once and makes each derived table once (issue 41): the rag
set's per-item scores for both correlations and Table 1, the score grid for the trimmed means, the
gate and the bootstrap. Each shared path gives what the public function gives on its own, to the
last bit."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cube.config.sections import AnalysisParams
from cube.method import analysis as A
from cube.method import bootstrap as B
from cube.method import gate as G
from cube.method.evaluation import evaluate
from tests.factories import make_tables


@pytest.fixture(scope="module")
def tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    answers, scores = make_tables(60, judges=("judge-a", "judge-b", "judge-c"), seed=4)
    # unscored and absent rows, and a second sample of some judgments
    scores.loc[scores.index[::17], "score"] = np.nan
    scores = scores.drop(scores.index[5::41])
    twice = scores.iloc[::7].assign(sample=1, score=lambda d: (d["score"] + 1).clip(0, 10))
    return answers, pd.concat([scores, twice], ignore_index=True).sample(frac=1, random_state=1)


def test_evaluate_tables_equal_the_public_functions(tables) -> None:
    answers, scores = tables
    ap = AnalysisParams(bootstrap=50)
    r = evaluate(answers, scores, ap, 8, judges=["judge-a", "judge-b", "judge-c", "judge-d"])
    judges = ["judge-a", "judge-b", "judge-c", "judge-d"]
    for subset, got in (("all", r.correlations_all), ("retrieved", r.correlations_retrieved)):
        want = A.rank_correlations(scores, answers, subset, 8, judges=judges)
        pd.testing.assert_frame_equal(got, want, check_exact=True)
    retrieved = set(r.ranks.loc[r.ranks["retrieved"], "question_id"])
    pd.testing.assert_frame_equal(r.judge_summary, A.judge_summary(scores), check_exact=True)
    pd.testing.assert_frame_equal(
        r.retrieved_summary,
        A.judge_summary(scores[scores["question_id"].isin(retrieved)]),
        check_exact=True,
    )
    qids = list(r.ranks["question_id"])
    tm = A.trimmed_means(scores, 0.1, retrieved, questions=qids, judges=judges)
    pd.testing.assert_frame_equal(r.trimmed_means, tm, check_exact=True)
    # the bootstrap on a grid made by the caller (its questions in rank order, as evaluate's)
    # draws the same intervals as on its own grid
    kw = {"n_resamples": 50, "judges": judges, "jury_judges": r.jury_judges, "method": "bca"}
    own = B.bootstrap_cube(answers, scores, **kw)
    given = A.score_grid(scores, judges=judges, questions=qids[::-1])
    pd.testing.assert_frame_equal(
        B.bootstrap_cube(answers, scores, grid=given, **kw), own, check_exact=True
    )


def test_grid_array_by_position_equals_the_reindex(tables) -> None:
    answers, scores = tables
    judges = ["judge-b", "judge-a", "judge-c", "judge-z"]  # one judge without scores
    qids = sorted(answers["question_id"].unique())
    grid = A.score_grid(scores, judges=judges, questions=qids[::-1])  # questions reversed
    dims = list(grid["dimension"].unique())
    reference = (
        grid.set_index(["judge", "set", "dimension", "question_id"])["score"]
        .reindex(pd.MultiIndex.from_product([sorted(judges), list(A.SETS), dims, qids]))
        .to_numpy(float)
        .reshape(len(judges), len(A.SETS), len(dims), len(qids))
    )
    assert B._nested_axes(grid, reference.shape) is not None  # the positional path is taken
    got = B._grid_array(grid, sorted(judges), dims, qids)
    np.testing.assert_array_equal(got, reference)
    # rows out of their nesting: reindexed by label, the same array
    shuffled = grid.sample(frac=1, random_state=2).reset_index(drop=True)
    assert B._nested_axes(shuffled, reference.shape) is None
    np.testing.assert_array_equal(B._grid_array(shuffled, sorted(judges), dims, qids), reference)


def test_gate_on_each_judges_rows_equals_the_whole_grid(tables) -> None:
    answers, scores = tables
    grid = A.score_grid(scores, judges=["judge-a", "judge-b", "judge-c"])
    ranks = A.question_ranks(answers)
    w = pd.Series(0.25, index=pd.Index(list(A.PAPER_DIMENSIONS), name="dimension"))
    for judge, own in G.judge_rows(grid).items():
        assert G.bounds_test(own, judge, w) == G.bounds_test(grid, judge, w)
        assert G.retrieval_test(own, judge, w, ranks) == G.retrieval_test(grid, judge, w, ranks)
        assert G.constant_sets(own, judge) == G.constant_sets(grid, judge)
        # the judge's rows unstacked once, read by both tests (some dimensions only, too)
        wide = G.judge_wide(own, judge)
        some = w.iloc[[0, 2]]
        for weights in (w, some):
            got = G.bounds_test(own, judge, weights, wide=wide)
            assert got == G.bounds_test(grid, judge, weights)
            got_r = G.retrieval_test(own, judge, weights, ranks, wide=wide)
            assert got_r == G.retrieval_test(grid, judge, weights, ranks)
            pd.testing.assert_frame_equal(
                G._wide(own, judge, weights.index, wide), G._wide(grid, judge, weights.index)
            )


@pytest.mark.parametrize(("whole", "cells"), [(True, None), (True, 300 * 25), (False, None)])
def test_judge_trim_means_at_once_equal_each_pair(whole, cells, monkeypatch) -> None:
    """A judge's trimmed means from one product with all its one-hot columns (or a few batches of
    them: `cells`) are, to the last bit, those of a product per (set, dimension) when the counts
    are whole numbers; other counts (weights) take the per-pair path."""
    if cells:
        monkeypatch.setattr(B, "_ONEHOT_CELLS", cells)
    rng = np.random.default_rng(3)
    n, b = 300, 40
    scores = rng.integers(0, 11, size=(3, 4, n)).astype(float)
    scores[0, 1, ::7] = np.nan
    scores[2, 3] = rng.normal(5, 2, n)  # many distinct values: the per-element path
    keeps = [rng.random(n) < 0.8 for _ in range(4)]
    C = B.resample_counts(n, b, rng) if whole else rng.random((b, n)) * 2
    assert B._whole_counts(C) is whole
    got = B._judge_trim_means(C, scores, keeps, 0.1, B._whole_counts(C))
    for s in range(3):
        for d in range(4):
            want = B._weighted_trim_mean(C, scores[s, d], keeps[d], 0.1)
            np.testing.assert_array_equal(got[s, d], want)
