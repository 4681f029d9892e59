"""Paired comparison statistics (issue 13 items 1-2): hand-computed cases, type-I error, power."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from cube.method import evaluation as E
from cube.method.compare import compare_all, compare_pair, holm, mde, questions_needed
from tests.factories import make_tables


def _side(
    answers: pd.DataFrame, scores: pd.DataFrame, name: str
) -> tuple[pd.DataFrame, pd.DataFrame]:
    return answers.assign(system=name), scores.assign(system=name)


def test_identical_systems_give_zero_delta_and_p_one():
    ans, sc = make_tables(60, seed=1)
    a, b = _side(ans, sc, "a"), _side(ans, sc, "b")
    c = compare_pair(*a, *b, n_resamples=100, n_permutations=99)
    assert c.n_questions == 60 and not c.only_a and not c.only_b
    assert np.allclose(c.deltas["delta"].dropna(), 0.0)
    assert (c.deltas["p_value"].dropna() == 1.0).all()
    assert c.headline()["delta_cube"] == 0.0 and c.headline()["p_value"] == 1.0


def test_constant_shift_of_rag_scores_gives_the_shift():
    ans, sc = make_tables(80, seed=2)
    rag = sc["set"] == "rag"
    sc_a = sc.assign(score=np.where(rag, np.minimum(sc["score"], 9.0), sc["score"]))
    sc_b = sc_a.assign(score=np.where(rag, sc_a["score"] + 1.0, sc_a["score"]))
    c = compare_pair(
        *_side(ans, sc_a, "a"), *_side(ans, sc_b, "b"), n_resamples=300, n_permutations=199
    )
    res = E.evaluate(ans.assign(system="a"), sc_a.assign(system="a"))
    tot = res.weighted_totals.pivot(index="judge", columns="set", values="weighted_total")
    tm = res.trimmed_means.pivot_table(
        index=["judge", "dimension"], columns="set", values="trimmed_mean"
    )
    for judge in ("judge-a", "judge-b"):
        dw = c.row(judge, "weighted_score")
        expected = 100.0 / (tot.at[judge, "full"] - tot.at[judge, "zero"])  # ΔT_rag = 1 exactly
        assert dw["delta"] == pytest.approx(expected, rel=1e-9)
        assert dw["lo"] > 0 and dw["p_value"] < 0.05
        for dim in ("relevance", "quality"):
            dn = c.row(judge, f"N_{dim}")["delta"]
            assert dn == pytest.approx(
                100.0 / (tm.at[(judge, dim), "full"] - tm.at[(judge, dim), "zero"])
            )
        assert c.row(judge, "cube_score")["delta"] == pytest.approx(expected * res.recall_at_k)
    assert c.row("jury", "recall_at_k")["delta"] == 0.0
    head = c.headline()
    assert head["delta_cube_ci"][0] > 0 and head["p_value"] < 0.05


def test_questions_in_one_side_only_are_counted_and_excluded():
    ans, sc = make_tables(50, seed=3)
    drop = {"q000", "q001", "q002"}
    c = compare_pair(
        *_side(ans, sc, "a"),
        *_side(ans[~ans["question_id"].isin(drop)], sc[~sc["question_id"].isin(drop)], "b"),
        n_resamples=50,
        n_permutations=49,
    )
    assert c.n_questions == 47 and c.only_a == sorted(drop) and c.only_b == []
    assert np.allclose(c.deltas["delta"].dropna(), 0.0)


def test_no_common_questions_is_a_clear_error():
    ans, sc = make_tables(10, seed=4)
    other = ans.assign(question_id="x" + ans["question_id"])
    with pytest.raises(ValueError, match="no question id in common"):
        compare_pair(
            *_side(ans, sc, "a"), *_side(other, sc.assign(question_id="x" + sc["question_id"]), "b")
        )


def _null_pair(rng: np.random.Generator, n: int) -> tuple[pd.DataFrame, ...]:
    """Two systems with the same retrieval and bounds whose rag scores are iid draws of one law."""
    ans, sc = make_tables(n, seed=int(rng.integers(1 << 30)))
    rag = sc["set"] == "rag"
    sc_b = sc.copy()
    sc_b.loc[rag, "score"] = np.clip(
        np.round(sc.loc[rag, "score"] + rng.normal(0, 1.0, rag.sum())), 0, 10
    )
    sc_a = sc.copy()
    sc_a.loc[rag, "score"] = np.clip(
        np.round(sc.loc[rag, "score"] + rng.normal(0, 1.0, rag.sum())), 0, 10
    )
    return (*_side(ans, sc_a, "a"), *_side(ans, sc_b, "b"))


def test_permutation_type_one_error_is_near_nominal():
    rng = np.random.default_rng(13)
    p = [
        compare_pair(*_null_pair(rng, 30), n_resamples=0, n_permutations=99).headline()["p_value"]
        for _ in range(80)
    ]
    rate = float(np.mean(np.asarray(p) <= 0.10))
    assert 0.02 <= rate <= 0.22, rate  # nominal 0.10; binomial SD over 80 simulations ~0.034


def test_mde_and_questions_needed_against_simulation():
    rng = np.random.default_rng(0)
    sigma, n = 12.0, 150
    delta = mde(sigma / np.sqrt(n))
    sims = rng.normal(delta, sigma, size=(4000, n))
    z = sims.mean(axis=1) / (sims.std(axis=1, ddof=1) / np.sqrt(n))
    assert np.mean(np.abs(z) > 1.959964) == pytest.approx(0.80, abs=0.03)
    need = questions_needed(3.0, sigma)
    sims = rng.normal(3.0, sigma, size=(4000, need))
    z = sims.mean(axis=1) / (sims.std(axis=1, ddof=1) / np.sqrt(need))
    assert np.mean(np.abs(z) > 1.959964) == pytest.approx(0.80, abs=0.03)
    with pytest.raises(ValueError):
        questions_needed(0.0, sigma)


def test_holm_and_all_pairs():
    assert holm([0.01, 0.04, 0.03, float("nan")])[:3] == pytest.approx([0.03, 0.06, 0.06])
    ans, sc = make_tables(40, seed=5)
    answers = pd.concat([ans.assign(system=s) for s in ("s1", "s2", "s3")])
    scores = pd.concat([sc.assign(system=s) for s in ("s1", "s2", "s3")])
    pairs, summary = compare_all(answers, scores, n_resamples=20, n_permutations=19)
    assert list(pairs) == [("s1", "s2"), ("s1", "s3"), ("s2", "s3")]
    assert list(summary["p_holm_pairs"]) == [1.0, 1.0, 1.0]


def test_the_pairs_get_simultaneous_intervals_wider_than_the_marginal_ones():
    frames = [make_tables(40, seed=s) for s in (5, 6, 7)]
    answers = pd.concat([a.assign(system=f"s{i}") for i, (a, _) in enumerate(frames)])
    scores = pd.concat([sc.assign(system=f"s{i}") for i, (_, sc) in enumerate(frames)])
    pairs, summary = compare_all(answers, scores, n_resamples=300, n_permutations=19)
    for c in pairs.values():
        r = c.row()
        assert c.settings["n_pairs"] == 3
        assert r["lo_simultaneous"] <= r["lo"] <= r["hi"] <= r["hi_simultaneous"]
        assert r["hi_simultaneous"] - r["lo_simultaneous"] > r["hi"] - r["lo"]
    assert summary["delta_cube_ci_simultaneous"].map(len).eq(2).all()
    single = compare_pair(*_side(*frames[0], "a"), *_side(*frames[1], "b"), n_resamples=300)
    r = single.row()
    assert (r["lo_simultaneous"], r["hi_simultaneous"]) == (r["lo"], r["hi"])


def test_regressions_ranked_with_retrieval_change_and_diff():
    from cube.diagnose.regressions import answer_diff, question_changes, ranked

    ans, sc = make_tables(20, seed=6)
    ans_b, sc_b = ans.copy(), sc.copy()
    rag = ans_b["set"] == "rag"
    hit = ans_b.loc[rag & (ans_b["rank"] > 0), "question_id"].iloc[0]
    ans_b.loc[rag & (ans_b["question_id"] == hit), "rank"] = 0  # gold lost
    worst = sc_b["question_id"].eq("q005") & sc_b["set"].eq("rag")
    sc_b.loc[worst, "score"] = 0.0
    ch = question_changes(ans, sc, ans_b, sc_b, ["judge-a", "judge-b"])
    assert ch.set_index("question_id").at[hit, "retrieval_change"] == "lost"
    reg = ranked(ch, "regressions")
    expected = sc[worst].groupby("judge")["score"].mean().mean()
    assert reg.iloc[0]["question_id"] == "q005" and reg.iloc[0]["delta"] == pytest.approx(-expected)
    assert hit in set(reg["question_id"]) and ranked(ch, "improvements").empty
    assert answer_diff("甲。乙。", "甲。丙。") == [
        {"op": " ", "text": "甲。"},
        {"op": "-", "text": "乙。"},
        {"op": "+", "text": "丙。"},
    ]


def test_bootstrap_se_of_delta_cube_matches_its_spread_over_simulated_runs():
    """The MDE rests on se = the bootstrap SE of ΔCuBE (σ = se·√n): it must match the SD of
    ΔCuBE over independent simulated runs of the same design."""
    rng = np.random.default_rng(21)
    deltas, ses = [], []
    for i in range(24):
        pair = _null_pair(rng, 60)
        c = compare_pair(*pair, n_resamples=150 if i < 6 else 0, n_permutations=0, seed=i)
        deltas.append(c.headline()["delta_cube"])
        if i < 6:
            ses.append(c.power["se"])
    ratio = float(np.mean(ses)) / float(np.std(deltas, ddof=1))
    assert 0.6 <= ratio <= 1.6, ratio


def test_jury_resample_is_undefined_when_a_member_is_and_the_valid_share_is_flagged(monkeypatch):
    """A resample where one jury judge is undefined is undefined for the jury (as in
    `bootstrap_cube`), not the mean of the remaining judges; the valid share is reported and
    flagged."""
    import cube.method.compare as C

    real = C.cube_from_counts

    def one_judge_undefined_in_every_fourth(p, counts):
        res = real(p, counts)
        if counts.shape[0] > 1:  # resamples / permutations, not the point estimate
            res["cube_score"] = res["cube_score"].copy()
            res["cube_score"][1, ::4] = np.nan
        return res

    monkeypatch.setattr(C, "cube_from_counts", one_judge_undefined_in_every_fourth)
    ans, sc = make_tables(40, seed=8)
    c = compare_pair(*_side(ans, sc, "a"), *_side(ans, sc, "b"), n_resamples=200, n_permutations=0)
    assert c.jury_judges == ["judge-a", "judge-b"]
    assert c.row("judge-a", "cube_score")["n_valid"] == 200
    assert c.row("jury", "cube_score")["n_valid"] == 150  # nanmean would have kept all 200
    head = c.headline()
    assert head["valid_resample_share"] == 0.75 and head["valid_permutation_share"] is None
    assert len(head["flags"]) == 1 and "75%" in head["flags"][0] and "resamples" in head["flags"][0]
    monkeypatch.undo()
    ok = compare_pair(
        *_side(ans, sc, "a"), *_side(ans, sc, "b"), n_resamples=40, n_permutations=19
    ).headline()
    assert (
        ok["valid_resample_share"] == 1.0
        and ok["valid_permutation_share"] == 1.0
        and ok["flags"] == []
    )


def test_each_side_uses_its_own_top_n():
    """Two runs at TOP-N 4 and 16 whose params set `analysis.top_n`: B is scored at its own N
    (side A's N made B's rank 16 crash: "rank 16 exceeds top_n 4")."""
    from cube.config.sections import AnalysisParams

    a_ans, a_sc = make_tables(60, seed=1, top_n=4, system="a")
    b_ans, b_sc = make_tables(60, seed=2, top_n=16, system="b")
    c = compare_pair(
        a_ans,
        a_sc,
        b_ans,
        b_sc,
        AnalysisParams(top_n=4),
        analysis_params_b=AnalysisParams(top_n=16),
        n_resamples=30,
        n_permutations=19,
    )
    assert c.settings["top_n_a"] == 4 and c.settings["top_n_b"] == 16
    # side A's params with an explicit N for B (the review's repro): B is still scored at 16
    c2 = compare_pair(
        a_ans,
        a_sc,
        b_ans,
        b_sc,
        AnalysisParams(top_n=4),
        top_n_a=4,
        top_n_b=16,
        n_resamples=30,
        n_permutations=19,
    )
    assert (
        c2.settings["top_n_b"] == 16
        and c2.row("jury", "cube_score")["b"] == c.row("jury", "cube_score")["b"]
    )
    quiet = AnalysisParams(bootstrap=0)
    for side, ans, sc, n in (("a", a_ans, a_sc, 4), ("b", b_ans, b_sc, 16)):
        res = E.evaluate(ans, sc, quiet, n)
        assert c.row("jury", "recall_at_k")[side] == pytest.approx(res.recall_at_k)
        for judge in ("judge-a", "judge-b"):
            own = res.cube_table.at[judge, "cube_score"]
            assert c.row(judge, "cube_score")[side] == pytest.approx(own)


def test_sides_with_different_cube_definitions_are_refused_naming_every_key():
    from cube.config.sections import AnalysisParams

    ans, sc = make_tables(30, seed=9)
    a, b = _side(ans, sc, "a"), _side(ans, sc, "b")
    with pytest.raises(ValueError, match="analysis settings differ") as err:
        compare_pair(
            *a,
            *b,
            AnalysisParams(top_n=8),
            n_resamples=10,
            n_permutations=9,
            analysis_params_b=AnalysisParams(top_n=16, trim_proportion=0.2, weights="equal"),
        )
    msg = str(err.value)
    assert (
        "trim_proportion: A=0.1 B=0.2" in msg and "weights: A='rank_correlation' B='equal'" in msg
    )
    assert "top_n" not in msg
    # resampling settings (bootstrap, seed) are not part of the definition: no refusal
    compare_pair(
        *a,
        *b,
        AnalysisParams(),
        analysis_params_b=AnalysisParams(bootstrap=7, seed=3),
        n_resamples=10,
        n_permutations=9,
    )


def test_regressions_name_every_bad_rank_row_of_the_answers_file():
    """Review repro i13_b part 2: a NaN rank gave a bare "cannot convert float NaN to integer"."""
    from cube.config.schema import SchemaError
    from cube.diagnose.regressions import question_changes

    ans, sc = make_tables(20, seed=6)
    bad = ans.copy()
    rag = bad["set"] == "rag"
    bad.loc[rag & bad["question_id"].isin(["q001", "q007"]), "rank"] = np.nan
    bad.loc[rag & (bad["question_id"] == "q004"), "rank"] = -2
    rows = sorted(bad.index[rag & bad["question_id"].isin(["q001", "q004", "q007"])])
    with pytest.raises(SchemaError) as err:
        question_changes(
            ans, sc, bad, sc, ["judge-a"], tables=("a/answers.parquet", "b/answers.parquet")
        )
    msg = str(err.value)
    assert msg.startswith("b/answers.parquet: column 'rank'") and "integer >= 0" in msg
    for row, qid in zip(rows, ("q001", "q004", "q007"), strict=True):
        assert f"row {row} (question_id {qid}, set rag)" in msg
    assert "a/answers.parquet" not in msg
    with pytest.raises(SchemaError, match=r"answers \(A\): missing column\(s\) \['rank'\]"):
        question_changes(ans.drop(columns="rank"), sc, ans, sc, ["judge-a"])


def test_compare_sides_refuses_a_bad_rank_naming_the_file_before_writing(tmp_path):
    from cube.config.runpaths import RunPaths
    from cube.config.schema import SchemaError
    from cube.run.compare import Side, compare_sides

    paths = RunPaths(root=tmp_path / "run", cache=tmp_path / "c.sqlite").ensure()
    ans, sc = make_tables(20, seed=3)
    answers = pd.concat([ans.assign(system="v1"), ans.assign(system="v2")], ignore_index=True)
    bad = answers.index[
        (answers["system"] == "v2") & (answers["set"] == "rag") & (answers["question_id"] == "q002")
    ]
    answers.loc[bad, "rank"] = np.nan
    answers.to_parquet(paths.data_file("answers"))
    pd.concat([sc.assign(system="v1"), sc.assign(system="v2")], ignore_index=True).to_parquet(
        paths.data_file("scores")
    )
    out = tmp_path / "cmp"
    with pytest.raises(SchemaError) as err:
        compare_sides(
            Side("run", "v1", paths, None, 8),
            Side("run", "v2", paths, None, 8),
            out,
            n_permutations=9,
        )
    assert str(err.value).startswith(f"{paths.data_file('answers')} (system v2): column 'rank'")
    assert f"row {bad[0]} (question_id q002, set rag): nan" in str(err.value) and not out.exists()


def test_runs_differing_only_in_the_gates_sample_are_compared_and_the_page_says_so():
    """Issue 40 review M4: `bounds_of_missed` and the gate floor are not part of CuBE's definition
    (given the same jury W and CuBE are identical), so a run made with `all` compares with one
    made with `sample`; the flag (shown on the compare page) says their gates read other items."""
    from cube.config.sections import AnalysisParams
    from cube.method.compare import definition_differences

    ap = AnalysisParams()
    other = ap.model_copy(update={"bounds_of_missed": "all", "gate_bounds_questions": 50})
    assert definition_differences(ap, other) == []
    ans, sc = make_tables(30, seed=9)
    a, b = _side(ans, sc, "a"), _side(ans, sc, "b")
    c = compare_pair(*a, *b, ap, analysis_params_b=other, n_resamples=10, n_permutations=9)
    flag = [f for f in c.flags if "judge gates read different samples" in f]
    assert len(flag) == 1
    assert "bounds_of_missed: A='sample' B='all'" in flag[0]
    assert "gate_bounds_questions: A=30 B=50" in flag[0]
    same = compare_pair(*a, *b, ap, analysis_params_b=ap, n_resamples=10, n_permutations=9)
    assert not [f for f in same.flags if "judge gates" in f]


@pytest.mark.parametrize("seed,recall,scramble", [(1, 0.8, False), (2, 0.5, True), (3, 1.0, True)])
def test_the_jury_is_read_from_the_same_verdicts_evaluate_gives(seed, recall, scramble):
    """compare reads each side's gate from `judge_verdicts`, which leaves out what the CuBE table
    does not read: the table must be evaluate's, a judge failing the gate included."""
    ans, sc = make_tables(60, seed=seed, recall=recall)
    if scramble:  # judge-b's scores shuffled: noise, which the gate should find
        b = sc["judge"] == "judge-b"
        sc.loc[b, "score"] = np.random.default_rng(seed).permutation(sc.loc[b, "score"].to_numpy())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = E.evaluate(ans, sc, None, 8, judges=["judge-a", "judge-b"]).cube_table
        table = E.judge_verdicts(ans, sc, None, 8, judges=["judge-a", "judge-b"])
    pd.testing.assert_frame_equal(table, full)
    assert E.jury_judges_of(table) and set(E.jury_judges_of(table)) | set(
        E.excluded_judges_of(table)
    ) == {"judge-a", "judge-b"}
