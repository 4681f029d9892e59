"""The leaner paths of issue 41 item 3 give what the paths they replace gave, bit for bit:
`evaluate_headline` (the per-category evaluations) against `evaluate`, the bootstrap on the
ranks its caller made against the ranks it makes itself, the per-category report on either, and
the judges' correlation grid made from one set of ranks against a matrix per judge made alone.
The tables are small and generated, with ties, NaN and absent scores, failed system calls, a
judge without scores, one category, an empty category and categories too small to evaluate."""

from __future__ import annotations

import warnings

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from cube.config.sections import AnalysisParams  # noqa: E402
from cube.diagnose import categories  # noqa: E402
from cube.method import analysis as A  # noqa: E402
from cube.method import bootstrap, gate, normalise  # noqa: E402
from cube.method import evaluation as E  # noqa: E402
from cube.method.evaluation import evaluate, evaluate_headline  # noqa: E402
from cube.pages import plots  # noqa: E402
from tests.factories import make_tables  # noqa: E402


def _awkward(seed: int, n: int = 60) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Generated tables with what the fast paths must not change: NaN scores, absent rows, tied
    scores (rounded to whole points), two failed system calls and a judge without any score."""
    answers, scores = make_tables(
        n_questions=n, judges=("judge-a", "judge-b", "judge-c"), seed=seed
    )
    rng = np.random.default_rng(seed)
    scores.loc[rng.random(len(scores)) < 0.05, "score"] = np.nan
    scores = scores.drop(scores.index[rng.random(len(scores)) < 0.03]).reset_index(drop=True)
    scores = scores[scores["judge"] != "judge-c"].reset_index(drop=True)
    answers["retrieval_ok"] = True
    answers["error"] = ""
    failed = answers["question_id"].isin(["q001", "q007"]) & (answers["set"] == "rag")
    answers.loc[failed, "retrieval_ok"] = False
    answers.loc[failed, "error"] = "system call failed"
    return answers, scores


def _frames_identical(a: pd.DataFrame, b: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert a.to_csv() == b.to_csv()  # every digit, as the published tables write them


_KEPT = (
    "correlations_all",
    "weights",
    "trimmed_means",
    "weighted_totals",
    "cube_table",
    "jury",
    "flags",
    "ranks",
)


# What bc1bbd2's `evaluate` (before the lean paths and this file's fast paths) gave on each case:
# its jury's CuBE score, judge-a's weighted totals (zero, rag, full) and a digest of the CSV of
# every `_KEPT` table and the bootstrap's (`_digest`). Both paths must still give them: comparing
# the headline path with today's whole one alone would pass if both had drifted together.
_BEFORE = {
    0: (65.27078243659528, [2.587464, 6.759899, 7.458666], "0cf42621245f3a17"),
    1: (65.66407214101802, [2.373434, 6.929139, 7.51444], "521b9295950656e9"),
    2: (66.3280192573346, [2.499873, 6.799404, 7.476185], "a3e3f34996778053"),
    3: (70.51559205408225, [2.547108, 6.965709, 7.525525], "fda4a6b7be03e2ee"),
    4: (float("nan"), [2.303663, 6.955852, 7.557956], "e05e49456b72f764"),
}


def _digest(r) -> str:
    import hashlib

    h = hashlib.sha256()
    for name in _KEPT:
        h.update(getattr(r, name).to_csv().encode())
    if r.bootstrap is not None:
        h.update(r.bootstrap.to_csv().encode())
    return h.hexdigest()[:16]


_SOME = ["relevance", "quality"]
_UNSCORED = [*_SOME, "extra"]  # a configured dimension without a score: every judge fails


@pytest.mark.parametrize(
    ("seed", "update", "dims"),
    [
        (0, {"bootstrap": 60}, _SOME),
        (1, {"bootstrap": 60, "interval": "percentile"}, _SOME),
        (2, {"bootstrap": 0}, _SOME),
        (3, {"bootstrap": 40, "weights": "equal"}, _SOME),
        (4, {"bootstrap": 40}, _UNSCORED),
    ],
)
def test_headline_evaluation_equals_the_whole_evaluation(seed, update, dims):
    answers, scores = _awkward(seed)
    ap = AnalysisParams(**update)
    judges = ["judge-a", "judge-b", "judge-c"]
    with warnings.catch_warnings(record=True) as w_full:
        warnings.simplefilter("always")
        full = evaluate(answers, scores, ap, 8, judges=judges, dimensions=dims)
    with warnings.catch_warnings(record=True) as w_lean:
        warnings.simplefilter("always")
        lean = evaluate_headline(answers, scores, ap, 8, judges=judges, dimensions=dims)
    cube, totals, digest = _BEFORE[seed]
    np.testing.assert_array_equal(full.jury_cube(), cube)
    a_totals = full.weighted_totals.query("judge == 'judge-a'")["weighted_total"]
    assert a_totals.round(6).tolist() == totals
    assert _digest(full) == digest
    for name in _KEPT:
        _frames_identical(getattr(full, name), getattr(lean, name))
    assert (lean.recall_at_k, lean.n_questions, lean.n_retrieved) == (
        full.recall_at_k,
        full.n_questions,
        full.n_retrieved,
    )
    assert lean.warnings == full.warnings and lean.settings == full.settings
    assert [str(x.message) for x in w_lean] == [str(x.message) for x in w_full]
    assert lean.unknown_retrieval == full.unknown_retrieval == ["q001", "q007"]
    assert lean.jury_judges == full.jury_judges
    assert (
        lean.jury_cube() == full.jury_cube() or np.isnan([lean.jury_cube(), full.jury_cube()]).all()
    )
    assert bool(lean.jury_judges) == (dims == _SOME)
    if full.bootstrap is None:
        assert lean.bootstrap is None
    else:  # the intervals without the design's columns
        _frames_identical(full.bootstrap[list(lean.bootstrap.columns)], lean.bootstrap)
        for judge in ["jury", *full.jury_judges]:
            for metric in ("cube_score", "weighted_score"):
                np.testing.assert_array_equal(
                    lean.interval(judge, metric), full.interval(judge, metric)
                )
    assert lean.design == {} and lean.judge_summary.empty and lean.retrieved_summary.empty


def test_bootstrap_on_the_callers_ranks_equals_the_bootstrap_on_its_own():
    answers, scores = _awkward(4)
    known = answers[~answers["question_id"].isin(["q001", "q007"])]
    ranks = A.retrieval_outcomes(answers, 8).ranks  # evaluate's: before the unknown left out
    kw = {"n_resamples": 80, "seed": 5, "method": "bca", "judges": ["judge-a", "judge-b"]}
    own = bootstrap.bootstrap_cube(known, scores, **kw)
    given = bootstrap.bootstrap_cube(known, scores, ranks=ranks, **kw)
    shuffled = bootstrap.bootstrap_cube(
        known, scores, ranks=ranks.sample(frac=1.0, random_state=1), **kw
    )
    _frames_identical(own, given)
    _frames_identical(own, shuffled)  # sorted by question id either way


def _report_inputs(seed: int) -> tuple:
    answers, scores = _awkward(seed, n=90)
    qids = sorted(answers["question_id"].unique())
    groups = pd.DataFrame(
        {
            "question_id": qids,
            # A and B evaluated, C too small; "one" is a single category
            "department": ["A"] * 45 + ["B"] * 35 + ["C"] * 10,
            "one": "x",
        }
    )
    classified = pd.DataFrame(
        {
            "question_id": qids,
            "low": [i % 5 == 0 for i in range(90)],
            "primary": ["retrieval_miss" if i % 2 else "wrong_answer" for i in range(90)],
        }
    )
    return answers, scores, groups, classified


@pytest.mark.parametrize("by", ["department", "one"])
def test_category_report_on_headline_evaluations_equals_it_on_whole_ones(monkeypatch, by):
    answers, scores, groups, classified = _report_inputs(6)
    ap = AnalysisParams(bootstrap=50)
    kw = {"judges": ["judge-a", "judge-b"], "dimensions": ["relevance", "quality"]}
    lean = categories.category_report(
        answers, scores, groups, classified, "sys", 8, by, ap, min_questions=20, **kw
    )
    monkeypatch.setattr(categories, "evaluate_headline", evaluate)  # the path before issue 41
    whole = categories.category_report(
        answers, scores, groups, classified, "sys", 8, by, ap, min_questions=20, **kw
    )
    _frames_identical(whole, lean)
    assert lean[by].tolist() == (["A", "B", "C"] if by == "department" else ["x"])
    assert lean["W"].notna().sum() >= 1


def test_category_report_with_a_judge_absent_from_a_category_equals_the_whole_path(monkeypatch):
    """A category where one judge has no score row at all (it fails the gate there only)."""
    answers, scores, groups, classified = _report_inputs(7)
    b_questions = set(groups.loc[groups["department"] == "B", "question_id"])
    absent = scores["question_id"].isin(b_questions) & (scores["judge"] == "judge-b")
    scores = scores[~absent].reset_index(drop=True)
    ap = AnalysisParams(bootstrap=30)
    lean = categories.category_report(
        answers, scores, groups, classified, "sys", 8, "department", ap
    )
    monkeypatch.setattr(categories, "evaluate_headline", evaluate)
    whole = categories.category_report(
        answers, scores, groups, classified, "sys", 8, "department", ap
    )
    _frames_identical(whole, lean)
    lean = lean.set_index("department")
    assert lean.at["B", "questions"] == 35 and lean.at["C", "note"].startswith("W and CuBE not")


@pytest.mark.parametrize("subset", ["all", "retrieved"])
def test_correlation_grid_matrices_equal_each_judges_matrix_made_alone(subset):
    answers, scores = _awkward(8)
    scores.loc[scores["judge"] == "judge-b", "score"] = scores["score"].round(0)  # ties
    system_rag = plots._rag_of_system(scores, answers, subset, 8)
    for judge in ("judge-a", "judge-b"):
        alone = plots._correlation_matrix(scores, answers, judge, subset, 8)
        _frames_identical(alone, plots._judge_matrix(system_rag, scores, judge))
    with pytest.raises(ValueError, match="no 'rag' scores of judge 'judge-z'"):
        plots._judge_matrix(system_rag, scores, "judge-z")
    with pytest.raises(ValueError, match="subset must be"):
        plots._rag_of_system(scores, answers, "some", 8)


# ------------------------------------ the gate's and normalise's counts without groupings


def _constant_sets_before(grid: pd.DataFrame, judge) -> list[str]:
    """`cube.method.gate.constant_sets` as it was (a grouping per judge)."""
    g = grid[(grid["judge"] == judge)].dropna(subset=["score"])
    if g.empty:
        return []
    per = g.groupby(["set", "dimension"], sort=False)["score"].agg(["nunique", "size", "first"])
    out = []
    for set_ in g["set"].unique():
        per_dim = per.xs(set_, level="set")
        if (per_dim["size"] >= gate.VARY_MIN_QUESTIONS).all() and (per_dim["nunique"] <= 1).all():
            out.append(f"{set_} = {per_dim['first'].iloc[0]:g}")
    return out


def _failure_table_before(scores: pd.DataFrame, grid: pd.DataFrame, judges: list) -> pd.DataFrame:
    """`cube.method.gate.failure_table` as it was (counts by a grouping)."""
    keys = ["judge", "set", "dimension", "question_id"]
    by_kind = "error_kind" in scores and len(scores) > 0
    g = grid[keys + ["score"]]
    k = pd.Series("", index=g.index)
    if by_kind:
        kinds = scores["error_kind"].fillna("").astype(str)
        failed = kinds != ""
        if failed.any():
            kind = scores.loc[failed, keys].assign(kind=kinds[failed]).drop_duplicates(keys)
            g = g.merge(kind, on=keys, how="left")
            k = g["kind"].fillna("")
    unscored = g["score"].isna()
    tmp = pd.DataFrame(
        {
            "judge": g["judge"],
            "scored": ~unscored,
            "skipped": unscored & k.isin(("skipped", "pilot")),
            "pilot": unscored & (k == "pilot"),
            "call": unscored & (k == "call"),
            "parse": unscored & (k == "parse"),
        }
    )
    tmp["other"] = unscored & ~tmp["skipped"] & ~tmp["call"] & ~tmp["parse"]
    agg = tmp.groupby("judge").agg(
        rows=("scored", "size"),
        scored_items=("scored", "sum"),
        skipped=("skipped", "sum"),
        pilot_not_sent=("pilot", "sum"),
        call_failures=("call", "sum"),
        parse_failures=("parse", "sum"),
        other_failures=("other", "sum"),
    )
    out = agg.reindex(pd.Index(judges, name="judge")).fillna(0).astype(int)
    out["judged"] = out["rows"] - out["skipped"]
    failures = out["call_failures"] + out["parse_failures"] + out["other_failures"]
    with np.errstate(divide="ignore", invalid="ignore"):
        out["failure_rate"] = failures / out["judged"].where(out["judged"] > 0)
    out["by_kind"] = by_kind
    return out


def _weighted_totals_before(trimmed, weights, effective):
    m = trimmed.merge(effective, on=["judge", "dimension"], how="left")
    m["wtm"] = np.where(m["effective_weight"] == 0, 0.0, m["effective_weight"] * m["trimmed_mean"])
    return m.groupby(["judge", "set"], as_index=False, sort=False).agg(
        weighted_total=("wtm", lambda s: s.sum(skipna=False))
    )


def _grid_with_kinds(seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A score grid (three judges, one absent) and its scores with every failure kind, NaN
    scores, a constant judge (judge-b: 5 everywhere, one set 7) and a nearly constant one."""
    answers, scores = _awkward(seed, n=30)
    rng = np.random.default_rng(seed)
    scores.loc[scores["judge"] == "judge-b", "score"] = 5.0
    scores.loc[(scores["judge"] == "judge-b") & (scores["set"] == "full"), "score"] = 7.0
    scores.loc[scores.index[:3], "score"] = -0.0 if seed % 2 else 0.0
    kinds = rng.choice(["", "", "", "call", "parse", "skipped", "pilot"], size=len(scores))
    scores["error_kind"] = np.where(scores["score"].isna(), kinds, "")
    qids = sorted(answers["question_id"].unique())
    grid = A.score_grid(scores, judges=["judge-a", "judge-b", "judge-c"], questions=qids)
    return grid, scores


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_constant_sets_and_failure_counts_equal_the_groupings(seed):
    grid, scores = _grid_with_kinds(seed)
    judges = ["judge-a", "judge-b", "judge-c", "judge-z"]
    for judge in judges:
        assert gate.constant_sets(grid, judge) == _constant_sets_before(grid, judge)
        own = grid[grid["judge"] == judge]
        scored = set(own.loc[own["score"].notna(), "set"].unique())
        assert gate._constant_and_scored(grid, judge)[1] == scored
    assert gate.constant_sets(grid, "judge-b") == ["zero = 5", "rag = 5", "full = 7"]
    _frames_identical(
        gate.failure_table(scores, grid, judges), _failure_table_before(scores, grid, judges)
    )
    no_kind = scores.drop(columns="error_kind")
    _frames_identical(
        gate.failure_table(no_kind, grid, judges), _failure_table_before(no_kind, grid, judges)
    )
    empty = grid.iloc[:0]
    _frames_identical(
        gate.failure_table(scores.iloc[:0], empty, judges),
        _failure_table_before(scores.iloc[:0], empty, judges),
    )


@pytest.mark.parametrize("seed", [0, 5])
def test_weighted_totals_equal_the_grouping(seed):
    answers, scores = _awkward(seed)
    r = evaluate(answers, scores, AnalysisParams(bootstrap=0), 8, judges=["judge-a", "judge-b"])
    tm = r.trimmed_means
    eff = normalise.effective_weight_table(tm, r.weights)
    _frames_identical(
        normalise.weighted_totals(tm, r.weights, eff), _weighted_totals_before(tm, r.weights, eff)
    )
    # NaN trimmed means, weight 0 beside NaN and rows out of order
    odd = tm.sample(frac=1.0, random_state=seed).reset_index(drop=True)
    odd.loc[odd.index[::5], "trimmed_mean"] = np.nan
    eff_odd = eff.copy()
    eff_odd.loc[eff_odd.index[::3], "effective_weight"] = 0.0
    _frames_identical(
        normalise.weighted_totals(odd, r.weights, eff_odd),
        _weighted_totals_before(odd, r.weights, eff_odd),
    )


def test_weighted_totals_and_constant_sets_leave_out_nan_keys_as_the_groupings_did():
    # a NaN judge, set or dimension is no group (the groupings' dropna): no `NaN, set, NaN` row
    # among the totals, and a NaN dimension's rows do not merge into another set's last dimension
    answers, scores = _awkward(0)
    r = evaluate(answers, scores, AnalysisParams(bootstrap=0), 8, judges=["judge-a", "judge-b"])
    tm = r.trimmed_means.copy()
    eff = normalise.effective_weight_table(tm, r.weights)
    tm.loc[tm.index[::7], "judge"] = np.nan
    tm.loc[tm.index[3::11], "set"] = np.nan
    totals = normalise.weighted_totals(tm, r.weights, eff)
    _frames_identical(totals, _weighted_totals_before(tm, r.weights, eff))
    assert totals[["judge", "set"]].notna().all().all()
    grid, _ = _grid_with_kinds(0)
    for col in ("dimension", "set"):
        odd = grid.copy()
        odd.loc[odd.index[(odd["judge"] == "judge-b")][::7], col] = np.nan
        keyed = odd.dropna(subset=["set", "dimension"])
        for judge in ("judge-a", "judge-b"):
            assert gate.constant_sets(odd, judge) == _constant_sets_before(keyed, judge)
            own = keyed[(keyed["judge"] == judge) & keyed["score"].notna()]
            assert gate._constant_and_scored(odd, judge)[1] == set(own["set"].unique())
    assert gate.constant_sets(odd, "judge-b") == ["zero = 5", "rag = 5", "full = 7"]


# ------------------------------------------ compare's resampling on the grid of its verdicts


@pytest.mark.parametrize(("seed", "cluster"), [(0, "question"), (1, "family"), (2, "question")])
def test_compare_pair_on_its_verdicts_grid_equals_it_on_grids_made_again(
    monkeypatch, seed, cluster
):
    from cube.method import compare

    a_ans, a_sc = _awkward(seed)
    b_ans, b_sc = _awkward(seed + 10)
    b_ans["system"], b_sc["system"] = "other", "other"
    b_sc = b_sc[b_sc["question_id"] != "q010"]  # a question side B never scored
    families = {q: f"f{int(q[1:]) // 3}" for q in a_ans["question_id"].unique()}
    ap = AnalysisParams(bootstrap=60, cluster=cluster)
    kw = {"n_permutations": 59, "clusters": families, "dimensions": ["relevance", "quality"]}
    lean = compare.compare_pair(a_ans, a_sc, b_ans, b_sc, ap, **kw)
    made = compare.prepare

    def prepare_anew(answers, scores, *, grid=None, ranks=None, **rest):
        return made(answers, scores, **rest)  # the path before: grid and ranks made again

    monkeypatch.setattr(compare, "prepare", prepare_anew)
    again = compare.compare_pair(a_ans, a_sc, b_ans, b_sc, ap, **kw)
    _frames_identical(lean.deltas, again.deltas)
    assert (lean.jury_judges, lean.excluded_judges, lean.settings, lean.power, lean.flags) == (
        again.jury_judges,
        again.excluded_judges,
        again.settings,
        again.power,
        again.flags,
    )
    assert lean.n_questions == again.n_questions and lean.deltas["delta"].notna().any()
    verdict = E.gate_verdicts(a_ans, a_sc, ap, 8)
    _frames_identical(verdict.table, E.judge_verdicts(a_ans, a_sc, ap, 8))
    assert set(verdict.grid["question_id"]) == set(verdict.ranks["question_id"])


@pytest.mark.parametrize("seed", [0, 3])
def test_the_shared_wide_table_gives_the_tables_each_makes_alone(seed):
    answers, scores = _awkward(seed)
    r = evaluate(answers, scores, AnalysisParams(bootstrap=0), 8, judges=["judge-a", "judge-b"])
    tm = r.trimmed_means.copy()
    tm.loc[tm.index[::7], "trimmed_mean"] = np.nan  # a dimension without a mean in some set
    wide = normalise.trimmed_wide(tm)
    alone = normalise.effective_weight_table(tm, r.weights)
    shared = normalise.effective_weight_table(tm, r.weights, wide=wide)
    _frames_identical(alone, shared)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_alone, f_alone = normalise.cube_scores_with_flags(tm, r.weights, 0.7, None, alone)
        t_shared, f_shared = normalise.cube_scores_with_flags(
            tm, r.weights, 0.7, None, shared, wide=wide
        )
    _frames_identical(t_alone, t_shared)
    _frames_identical(f_alone, f_shared)
    assert f_alone["code"].eq("no_trimmed_mean").any()


# ------------------------------------------- the bootstrap's correlations sharing rank_score's sums


def _pearson_before(C, x, y):
    """`cube.method.bootstrap._weighted_pearson` as it was (every sum made for each y)."""
    m = ~np.isnan(y)
    y0 = np.where(m, y, 0.0)
    xm = np.where(m, x, 0.0)
    n = C @ m.astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        sx, sy = C @ xm / n, C @ y0 / n
        vx = C @ (xm * xm) / n - sx**2
        vy = C @ (y0 * y0) / n - sy**2
        cov = C @ (xm * y0) / n - sx * sy
        r = cov / np.sqrt(vx * vy)
    scale = np.maximum(1.0, np.maximum(np.abs(sx), np.abs(sy))) ** 2
    r[(n < 3) | (vx <= 1e-12 * scale) | (vy <= 1e-12 * scale)] = np.nan
    return r


def test_correlations_sharing_the_masks_sums_equal_each_made_alone():
    rng = np.random.default_rng(3)
    n = 57
    x = rng.choice([0.0, 0.125, 0.5, 0.875, 1.0], size=n)
    counts = [
        bootstrap.resample_counts(n, 40, rng),
        1.0 - bootstrap.leave_out_rows(n),
        np.ones((1, n)),
        rng.random((5, n)),  # not whole counts
    ]
    ys = [np.round(rng.normal(5, 2, n)) for _ in range(6)]
    ys[1][[3, 9]] = np.nan  # another mask
    ys[2][:] = 4.0  # constant: r undefined
    ys[3][[3, 9]] = np.nan  # the first mask again
    ys[4][:] = np.nan
    for C in counts:
        memo: dict = {}
        for y in ys:
            np.testing.assert_array_equal(
                bootstrap._weighted_pearson(C, x, y, memo), _pearson_before(C, x, y)
            )
        assert len(memo) == 3


def test_cube_from_counts_with_shared_sums_equals_it_without(monkeypatch):
    answers, scores = _awkward(9)
    scores.loc[scores.index[::11], "score"] = np.nan
    p = bootstrap.prepare(
        answers[~answers["question_id"].isin(["q001", "q007"])],
        scores,
        proportion=0.1,
        subset="retrieved",
        mode="rank_correlation",
        custom=None,
        top_n=8,
        judges=["judge-a", "judge-b", "judge-c"],
    )
    n = len(p.rank_score)
    C = bootstrap.resample_counts(n, 50, np.random.default_rng(1))
    shared = bootstrap.cube_from_counts(p, C)
    monkeypatch.setattr(bootstrap, "_memo_x_sums", lambda memo, C, x, m: bootstrap._x_sums(C, x, m))
    alone = bootstrap.cube_from_counts(p, C)
    for key in shared:
        np.testing.assert_array_equal(shared[key], alone[key])


def _jackknife_before(p, chunk=256):
    """`cube.method.bootstrap._jackknife` as it was: every leave-out row multiplied out."""
    leave_out = bootstrap.leave_out_rows(len(p.rank_score), p.units)
    parts = [
        bootstrap.cube_from_counts(p, 1.0 - leave_out[s : s + chunk])
        for s in range(0, len(leave_out), chunk)
    ]
    return {k: np.concatenate([x[k] for x in parts], axis=-1) for k in parts[0]}


@pytest.mark.parametrize(
    ("n", "families", "chunk"),
    [(60, False, 256), (60, True, 256), (450, False, 64), (450, True, 40), (450, True, 7)],
)
def test_jackknife_summing_the_left_out_equals_multiplying_it_out(n, families, chunk):
    answers, scores = _awkward(11, n=n)
    scores.loc[scores.index[::9], "score"] = np.nan
    qids = sorted(answers["question_id"].unique())
    clusters = {q: f"f{i // 4}" for i, q in enumerate(qids)} if families else None
    p = bootstrap.prepare(
        answers[~answers["question_id"].isin(["q001", "q007"])],
        scores,
        proportion=0.1,
        subset="retrieved",
        mode="rank_correlation",
        custom=None,
        top_n=8,
        judges=["judge-a", "judge-b"],
        clusters=clusters,
    )
    new = bootstrap._jackknife(p, chunk=chunk)
    old = _jackknife_before(p, chunk=chunk)
    assert new.keys() == {"cube_score", "weighted_score", "recall_at_k"}
    for key in new:
        np.testing.assert_array_equal(new[key], old[key])
    assert np.isfinite(new["weighted_score"]).any()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rag_items_and_grid_from_one_table_equal_each_made_alone(seed):
    answers, scores = _awkward(seed)
    rng = np.random.default_rng(seed)
    scores["sample"] = rng.integers(0, 2, len(scores))  # repeated samples averaged
    scores = scores.drop_duplicates(
        ["question_id", "system", "set", "judge", "dimension", "sample"]
    ).sample(frac=1.0, random_state=seed)  # rows out of order
    kw = {"judges": ["judge-c", "judge-a"], "dimensions": ["quality", "extra"], "questions": None}
    for questions in (None, sorted(answers["question_id"].unique())[5:40]):
        kw["questions"] = questions
        rag, grid = A.rag_items_and_grid(scores, **kw)
        _frames_identical(rag, A.rag_items(scores))
        _frames_identical(grid, A.score_grid(scores, **kw))
    no_rag = scores[scores["set"] != "rag"]
    rag, grid = A.rag_items_and_grid(no_rag, **kw)
    _frames_identical(rag, A.rag_items(no_rag))
    _frames_identical(grid, A.score_grid(no_rag, **kw))
