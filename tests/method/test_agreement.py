"""Agreement statistics checked against values computed by another route (numpy, by hand)."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pandas as pd
import pytest

from cube.method.agreement import (
    agreement_table,
    krippendorff_alpha,
    pairwise_agreement,
    reliability_table,
    weighted_kappa,
)

DIMS = ("relevance", "completeness")


def _row(
    q: int, judge: str, dim: str, score: float, sample: int = 0, set_name: str = "rag"
) -> dict:
    return {
        "question_id": f"q{q}",
        "system": "sys",
        "set": set_name,
        "judge": judge,
        "dimension": dim,
        "score": score,
        "sample": sample,
    }


@pytest.fixture
def table() -> tuple[pd.DataFrame, dict]:
    """Two human raters, one LLM judge with two samples, on 8 answers x 2 dimensions."""
    rng = np.random.default_rng(7)
    rows, expect = [], {}
    for d in DIMS:
        a = rng.integers(0, 11, 8).astype(float)
        b = np.clip(a + rng.integers(-2, 3, 8), 0, 10).astype(float)
        s0 = rng.integers(0, 11, 8).astype(float)
        s1 = np.clip(s0 + rng.integers(-1, 2, 8), 0, 10).astype(float)
        s0[3] = np.nan  # one NaN sample: the other sample stands alone
        s1[5] = s0[5] = np.nan  # an unscored answer: its pair is dropped and counted
        for q in range(8):
            rows += [_row(q, "human:a", d, a[q]), _row(q, "human:b", d, b[q])]
            rows += [_row(q, "llm", d, s0[q], 0), _row(q, "llm", d, s1[q], 1)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            expect[d] = {"ref": (a + b) / 2, "judge": np.nanmean(np.vstack([s0, s1]), axis=0)}
    return pd.DataFrame(rows), expect


def _ranks(x: np.ndarray) -> np.ndarray:
    return pd.Series(x).rank(method="average").to_numpy()


def _kendall_tau_b(x: np.ndarray, y: np.ndarray) -> float:
    conc = disc = tie_x = tie_y = 0
    for i, j in itertools.combinations(range(len(x)), 2):
        dx, dy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
        if dx == 0 and dy == 0:
            continue
        if dx == 0:
            tie_x += 1
        elif dy == 0:
            tie_y += 1
        elif dx == dy:
            conc += 1
        else:
            disc += 1
    return (conc - disc) / np.sqrt((conc + disc + tie_x) * (conc + disc + tie_y))


def test_agreement_table_matches_numpy_formulas(table):
    scores, expect = table
    out = agreement_table(scores).set_index(["judge", "dimension"])
    # raters forming the consensus are not compared with it
    assert set(out.index.get_level_values("judge")) == {"llm"}
    for d in DIMS:
        ref, judge = expect[d]["ref"], expect[d]["judge"]
        ok = ~np.isnan(judge)
        x, y = judge[ok], ref[ok]
        row = out.loc[("llm", d)]
        assert row["n"] == 7 and row["n_missing"] == 1
        assert row["pearson"] == pytest.approx(np.corrcoef(x, y)[0, 1])
        assert row["spearman"] == pytest.approx(np.corrcoef(_ranks(x), _ranks(y))[0, 1])
        assert row["kendall"] == pytest.approx(_kendall_tau_b(x, y))
        assert row["mean_abs_diff"] == pytest.approx(np.mean(np.abs(x - y)))
        assert row["bias"] == pytest.approx(np.mean(x - y))
        integer = np.all(x == np.round(x)) and np.all(y == np.round(y))
        assert np.isnan(row["weighted_kappa"]) != integer  # kappa only on integer scores


def test_weighted_kappa_hand_computed():
    # Ratings a = [0, 1, 10], b = [0, 10, 10] on the 0-10 scale, weights (i - j)^2.
    # Observed disagreement: only the pair (1, 10): sum w*O = (1 - 10)^2 = 81.
    # Expected counts E_ij = rowmargin_i * colmargin_j / n, rows a (0, 1, 10 once each),
    # columns b (0 once, 10 twice), n = 3:
    #   sum w*E = [0^2*1 + 10^2*2 + 1^2*1 + 9^2*2 + 10^2*1 + 0^2*2] / 3 = 463 / 3
    # kappa = 1 - 81 / (463/3) = 1 - 243/463 = 220/463 = 0.47516...
    # (sklearn on the observed labels only would treat 0, 1, 10 as equally spaced: 0.8.)
    assert weighted_kappa(np.array([0.0, 1, 10]), np.array([0.0, 10, 10])) == pytest.approx(
        220 / 463
    )
    # a = [0, 1, 2], b = [0, 2, 2]: sum w*O = 1; sum w*E = (8/3 + 1 + 4/3) = 5; kappa = 1 - 1/5
    assert weighted_kappa(np.array([0.0, 1, 2]), np.array([0.0, 2, 2])) == pytest.approx(0.8)
    assert np.isnan(weighted_kappa(np.array([1.5, 2, 3]), np.array([1.0, 2, 3])))  # not integers
    assert weighted_kappa(np.array([3.0, 5, 9]), np.array([3.0, 5, 9])) == pytest.approx(1.0)


def test_kappa_in_table_and_any_numeric_scale():
    human = [0, 1, 10, 4, 6]
    llm = [0, 10, 10, 5, 6]
    rows = [_row(q, "human", "quality", h) for q, h in enumerate(human)]
    rows += [_row(q, "llm", "quality", s) for q, s in enumerate(llm)]
    rows += [_row(q, "llm100", "quality", 10 * s + 3) for q, s in enumerate(llm)]  # another scale
    out = agreement_table(pd.DataFrame(rows)).set_index("judge")
    assert out.loc["llm", "weighted_kappa"] == pytest.approx(
        weighted_kappa(np.array(llm, float), np.array(human, float))
    )
    assert out.loc["llm100", "pearson"] == pytest.approx(out.loc["llm", "pearson"])
    assert out.loc["llm100", "spearman"] == pytest.approx(out.loc["llm", "spearman"])
    assert out.loc["llm100", "bias"] == pytest.approx(
        np.mean(10 * np.array(llm) + 3 - np.array(human))
    )


def test_constant_inputs_give_nan_without_warnings():
    rows = [_row(q, "human", "quality", 5.0) for q in range(5)]
    rows += [_row(q, "llm", "quality", float(q)) for q in range(5)]
    rows += [_row(0, "lonely", "quality", 3.0)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = agreement_table(pd.DataFrame(rows), bootstrap=20).set_index("judge")
        matrix = pairwise_agreement(pd.DataFrame(rows), stat="pearson")
    assert out.loc["llm", ["pearson", "spearman", "kendall"]].isna().all()
    # kappa stays defined: the observed disagreement equals the chance one (55 = 55), kappa = 0
    assert out.loc["llm", "weighted_kappa"] == pytest.approx(0.0)
    assert out.loc["llm", "mean_abs_diff"] == pytest.approx(np.mean(np.abs(np.arange(5) - 5)))
    assert out.loc["lonely", "n"] == 1 and np.isnan(out.loc["lonely", "pearson"])
    assert np.isnan(matrix.loc["human", "llm"])


def test_bootstrap_intervals_deterministic_and_order_free(table):
    scores, _ = table
    first = agreement_table(scores, bootstrap=200, seed=3)
    again = agreement_table(scores.sample(frac=1, random_state=1), bootstrap=200, seed=3)
    pd.testing.assert_frame_equal(first, again)
    for stat in ("pearson", "mean_abs_diff", "bias"):
        assert (first[f"{stat}_lo"] <= first[f"{stat}_hi"]).all()
        assert (
            (first[f"{stat}_lo"] <= first[stat] + 1e-9)
            & (first[stat] <= first[f"{stat}_hi"] + 1e-9)
        ).all()


def test_reference_judge_and_unknown_reference(table):
    scores, expect = table
    out = agreement_table(scores, reference_judge="llm").set_index(["judge", "dimension"])
    assert {"human:a", "human:b"} <= set(out.index.get_level_values("judge"))
    with pytest.raises(ValueError, match="'nobody'"):
        agreement_table(scores, reference_judge="nobody")


def test_consensus_row_used_only_without_raters():
    # q0: raters 4 and 6 (consensus 5) and a stale "human" row 9 that must be ignored;
    # q1: only a "human" row 7.
    rows = [
        _row(0, "human:a", "quality", 4),
        _row(0, "human:b", "quality", 6),
        _row(0, "human", "quality", 9),
    ]
    rows += [
        _row(1, "human", "quality", 7),
        _row(0, "llm", "quality", 5),
        _row(1, "llm", "quality", 8),
    ]
    out = agreement_table(pd.DataFrame(rows)).set_index("judge")
    assert out.loc["llm", "bias"] == pytest.approx(((5 - 5) + (8 - 7)) / 2)


def test_krippendorff_alpha_with_missing_values_hand_computed():
    # Raters x units (interval metric, delta = (c - k)^2), NaN = missing:
    #   A: 1  2  .  3
    #   B: 1  3  1  .
    #   C: .  3  2  .
    # Unit 4 has a single value: not pairable, dropped. Pairable values n = 2 + 3 + 2 = 7.
    # D_o = (1/n) sum_u 1/(m_u - 1) sum_{i != j} delta:
    #   u1 {1,1}: 0;  u2 {2,3,3}: four ordered (2,3) pairs = 4, / 2 = 2;  u3 {1,2}: 2 / 1 = 2
    #   D_o = 4/7
    # Pooled values: 1 x3, 2 x2, 3 x2. D_e = sum over ordered pairs of delta / (n (n - 1))
    #   = 2 (3*2*1 + 3*2*4 + 2*2*1) / 42 = 68/42 = 34/21
    # alpha = 1 - (4/7) / (34/21) = 1 - 12/34 = 11/17 = 0.6470...
    data = {"A": [1, 2, None, 3], "B": [1, 3, 1, None], "C": [None, 3, 2, None]}
    rows = [
        _row(u, rater, "quality", float(v))
        for rater, vals in data.items()
        for u, v in enumerate(vals)
        if v is not None
    ]
    rows.append(_row(1, "A", "relevance", 0.0))  # another dimension, excluded by `dimension`
    scores = pd.DataFrame(rows)
    assert krippendorff_alpha(scores, ["A", "B", "C"], dimension="quality") == pytest.approx(
        11 / 17
    )
    assert krippendorff_alpha(scores, dimension="quality", level="ordinal") <= 1.0
    assert np.isnan(krippendorff_alpha(scores, ["A"], dimension="quality"))  # a single rater
    with pytest.raises(ValueError, match="'Z'"):
        krippendorff_alpha(scores, ["A", "Z"])


def test_reliability_table_groups(table):
    scores, _ = table
    out = reliability_table(
        scores, {"humans": ["human:a", "human:b"], "llm": ["llm"]}, bootstrap=30
    )
    humans = out[out["group"] == "humans"].set_index("dimension")
    assert list(humans["n_raters"]) == [2, 2] and list(humans["n_units"]) == [8, 8]
    for d in DIMS:
        assert humans.loc[d, "alpha"] == pytest.approx(
            krippendorff_alpha(scores, ["human:a", "human:b"], dimension=d)
        )
    assert out[out["group"] == "llm"]["alpha"].isna().all()  # one rater: undefined
    assert {"alpha_lo", "alpha_hi"} <= set(out.columns)


def test_pairwise_agreement_matrix(table):
    scores, expect = table
    matrix = pairwise_agreement(scores, dimension="relevance", stat="spearman")
    assert list(matrix.index) == ["human", "human:a", "human:b", "llm"]  # consensus added
    np.testing.assert_allclose(matrix.to_numpy(), matrix.to_numpy().T)
    assert (np.diag(matrix.to_numpy()) == 1).all()
    table_value = (
        agreement_table(scores)
        .set_index(["judge", "dimension"])
        .loc[("llm", "relevance"), "spearman"]
    )
    assert matrix.loc["llm", "human"] == pytest.approx(table_value)
    mae = pairwise_agreement(scores, dimension="relevance", stat="mae")
    ref = expect["relevance"]
    assert mae.loc["human", "human:a"] == pytest.approx(
        np.mean(
            np.abs(
                ref["ref"]
                - scores.query("judge == 'human:a' and dimension == 'relevance'")[
                    "score"
                ].to_numpy()
            )
        )
    )
    assert (np.diag(mae.to_numpy()) == 0).all()
    with pytest.raises(ValueError, match="stat"):
        pairwise_agreement(scores, stat="cosine")


def _set_separating_table(rng_seed: int = 11, n: int = 30) -> pd.DataFrame:
    """Humans vary within each set and the sets differ on average (zero < rag < full); the
    judge gives one constant score per set (rag) or noise unrelated to the humans (zero, full)."""
    rng = np.random.default_rng(rng_seed)
    centre = {"zero": 2.0, "rag": 5.0, "full": 8.0}
    rows = []
    for s, c in centre.items():
        human = np.clip(np.round(c + rng.normal(0, 1.5, n)), 0, 10)
        judge = np.full(n, c) if s == "rag" else np.clip(np.round(c + rng.normal(0, 1.0, n)), 0, 10)
        for q in range(n):
            rows += [
                _row(q, "human", "quality", human[q], set_name=s),
                _row(q, "llm", "quality", judge[q], set_name=s),
            ]
    return pd.DataFrame(rows)


def test_a_judge_that_only_separates_sets_does_not_agree_on_the_rag_set():
    scores = _set_separating_table()
    out = agreement_table(scores, sets=["rag", "zero", "full", "pooled"]).set_index(
        ["judge", "set"]
    )
    pooled = out.loc[("llm", "pooled")]
    assert (
        pooled["pearson"] > 0.7 and pooled["n"] == 90
    )  # the gap between sets manufactures agreement
    rag = out.loc[("llm", "rag")]
    assert (
        rag["n"] == 30 and np.isnan(rag["pearson"]) and np.isnan(rag["spearman"])
    )  # constant on rag
    for s in ("zero", "full"):  # noise within a set: no real agreement
        assert abs(out.loc[("llm", s), "pearson"]) < 0.45
    # the default is the rag set alone; pooling only when asked
    default = agreement_table(scores)
    assert list(default["set"]) == ["rag"]
    assert np.isnan(krippendorff_alpha(scores, ["human", "llm"], "quality")) or (
        krippendorff_alpha(scores, ["human", "llm"], "quality")
        < krippendorff_alpha(scores, ["human", "llm"], "quality", set_name="pooled")
    )
    assert np.isnan(pairwise_agreement(scores).loc["llm", "human"])
    assert pairwise_agreement(scores, set_name="pooled").loc["llm", "human"] > 0.7
    rel = reliability_table(scores, {"all": ["human", "llm"]}, sets=["rag", "pooled"]).set_index(
        "set"
    )
    assert rel.loc["rag", "alpha"] < rel.loc["pooled", "alpha"]


def test_unknown_set_is_refused_with_the_sets_present():
    scores = _set_separating_table(n=5)
    with pytest.raises(
        ValueError, match=r"sets: expected one or more of \['full', 'rag', 'zero', 'pooled'\]"
    ):
        agreement_table(scores, sets=["rag", "mixed"])
    with pytest.raises(ValueError, match="sets"):
        reliability_table(scores, {"all": ["human", "llm"]}, sets=[])
    with pytest.raises(ValueError, match="'mixed'"):
        pairwise_agreement(scores, set_name="mixed")


def test_bootstrap_resamples_questions_not_units():
    # One question, three systems, three sets: resampling questions always draws that question,
    # so every resample is the whole table and the interval collapses onto the point value;
    # resampling (question, set) units would have spread it.
    rows = []
    for i, (system, s) in enumerate(itertools.product(("a", "b", "c"), ("zero", "rag", "full"))):
        for judge, score in (("human", float(i % 5)), ("llm", float((i * 3) % 7))):
            rows.append({**_row(0, judge, "quality", score, set_name=s), "system": system})
    scores = pd.DataFrame(rows)
    out = agreement_table(scores, sets=["rag", "pooled"], bootstrap=50).set_index("set")
    for s in ("rag", "pooled"):
        for stat in ("bias", "mean_abs_diff", "pearson"):
            assert out.loc[s, f"{stat}_lo"] == pytest.approx(out.loc[s, stat])
            assert out.loc[s, f"{stat}_hi"] == pytest.approx(out.loc[s, stat])
    rel = reliability_table(scores, {"all": ["human", "llm"]}, sets="pooled", bootstrap=20).iloc[0]
    assert rel["alpha_lo"] == pytest.approx(rel["alpha"]) and rel["alpha_hi"] == pytest.approx(
        rel["alpha"]
    )


def test_question_draws_are_shared_by_every_row():
    # two dimensions with identical data get identical intervals, and so do two sets: the same
    # question draws apply to every row of the table
    rng = np.random.default_rng(5)
    h, j = rng.integers(0, 11, 12).astype(float), rng.integers(0, 11, 12).astype(float)
    rows = [
        _row(q, judge, d, v[q], set_name=s)
        for q in range(12)
        for d in DIMS
        for s in ("rag", "full")
        for judge, v in (("human", h), ("llm", j))
    ]
    out = agreement_table(pd.DataFrame(rows), sets=["rag", "full"], bootstrap=100, seed=2)
    cols = [c for c in out.columns if c.endswith(("_lo", "_hi"))]
    assert (out[cols].nunique() == 1).all()
