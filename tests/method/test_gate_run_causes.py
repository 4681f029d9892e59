"""Issue 20 (open points 1, 2, 4): the gate excludes a judge only for evidence about the judge.

W undefined or outside the band because the rank-correlation weights are noise (a perfect
retriever), and a bounds test that cannot decide (n <= 4 questions), are facts about the run: the
judge keeps its place and the verdict is withheld naming the cause and the remedy. Simulated tables,
seeded (tests/judge_sim.py)."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import numpy as np
import pytest

from cube.config.sections import AnalysisParams
from cube.diagnose.verdict import withheld_reasons
from cube.method.evaluation import evaluate
from cube.method.gate import bounds_test_can_decide, min_questions
from tests.judge_sim import BLIND, DECENT, WORSE_DROP, bounds, simulate, simulate_probes


def result(answers, scores, probes=None, **ap):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        params = AnalysisParams(**{"bootstrap": 0, **ap})
        r = evaluate(answers, scores, params, audit=probes)
    return r, withheld_reasons(r, SimpleNamespace(analysis=params))[0]


def test_undefined_rank_weights_keep_a_decent_judge_and_withhold_the_verdict_naming_the_weights():
    """Before: 'W undefined (...)' excluded GPT-4o-like (seed 10: every correlation with rank <= 0
    on a perfect retriever) and the verdict blamed the judges."""
    answers, scores = simulate(40, 1.0, 10, judges=("gpt-4o", "qwen2.5-32b"))
    probes = simulate_probes(
        40, 10, judges=("gpt-4o", "qwen2.5-32b")
    )  # the evidence that it reads content
    r, reasons = result(answers, scores, probes)
    t = r.cube_table
    assert t["in_jury"].all(), t["excluded_reason"].to_dict()
    assert np.isnan(t.at["gpt-4o", "weighted_score"])
    said = t.at["gpt-4o", "gate_withhold"]
    assert "its rank-correlation weights are undefined (every correlation with rank is <= 0" in said
    assert "analysis.weights: equal or analysis.weights_fallback: equal" in said
    assert [x for x in reasons if "gpt-4o" in x and "undefined: the W of" not in x] == [
        f"judge gpt-4o: {said}"
    ]
    assert (
        "the jury CuBE and W are undefined: the W of gpt-4o is noise" in reasons[-1]
    )  # said once each
    assert not any("jury CuBE score is undefined" in x or "no judge passed" in x for x in reasons)
    r_eq, reasons_eq = result(
        answers, scores, probes, weights="equal"
    )  # the remedy gives a verdict
    assert r_eq.cube_table["in_jury"].all() and not reasons_eq


def test_every_gold_document_at_rank_1_is_the_ranks_cause_not_the_judges():
    answers, scores = simulate(40, 1.0, 1, judges=("gpt-4o", "deepseek"))
    answers["rank"] = 1  # rank_score constant: no correlation with rank exists
    r, reasons = result(answers, scores, simulate_probes(40, 1, judges=("gpt-4o", "deepseek")))
    assert r.cube_table["in_jury"].all(), r.cube_table["excluded_reason"].to_dict()
    assert len(reasons) == 3 and all("rank_score is constant" in x for x in reasons[:2])
    assert reasons[2].startswith(
        "the jury CuBE and W are undefined: the W of deepseek, gpt-4o is noise"
    )


def test_w_outside_the_band_only_under_rank_weights_keeps_the_judge():
    """Seed 3: Qwen-like W = -47 under rank-correlation weights on a perfect retriever, in the band
    with equal weights. Before: excluded ('W = -47.0 outside the sane band')."""
    answers, scores = simulate(40, 1.0, 3, judges=("gpt-4o", "qwen2.5-32b"))
    r, reasons = result(answers, scores, simulate_probes(40, 3, judges=("gpt-4o", "qwen2.5-32b")))
    t = r.cube_table
    assert (
        t.at["qwen2.5-32b", "in_jury"] and not -25 <= t.at["qwen2.5-32b", "weighted_score"] <= 125
    )
    said = t.at["qwen2.5-32b", "gate_withhold"]
    assert "outside the sane band [-25, 125] under rank-correlation weights, but" in said
    assert said.endswith("(remedy: analysis.weights: equal)")
    assert f"judge qwen2.5-32b: {said}" in reasons


@pytest.mark.parametrize("weights", ["rank_correlation", "equal"])
def test_w_outside_the_band_with_equal_weights_too_still_excludes(weights):
    """The exception is the weights' only: a judge whose rag answers score far above its full bound
    is outside the band with equal weights too, and is excluded."""
    answers, scores = simulate(100, 0.8, 2, judges=("gpt-4o", "deepseek"))
    inflated = (scores["judge"] == "deepseek") & (scores["set"] == "rag")
    scores.loc[inflated, "score"] = (scores.loc[inflated, "score"] + 2).clip(upper=10)
    r, _ = result(answers, scores, weights=weights)
    t = r.cube_table
    assert (
        not t.at["deepseek", "in_jury"]
        and "outside the sane band" in t.at["deepseek", "excluded_reason"]
    )
    assert t.at["deepseek", "gate_withhold"] == "" and t.at["gpt-4o", "in_jury"]


def test_four_questions_withhold_the_verdict_for_the_run_size_and_exclude_nobody():
    """Before: every judge excluded, 'does not separate the bounds: p = 0.0625 on 4 questions'."""
    assert (
        not bounds_test_can_decide(4, 0.05)
        and bounds_test_can_decide(5, 0.05)
        and min_questions(0.05) == 5
    )
    for seed in range(5):
        r, reasons = result(*simulate(4, 1.0, seed, judges=tuple(DECENT)))
        t = r.cube_table
        assert t["in_jury"].all(), (seed, t["excluded_reason"].to_dict())
        assert reasons[0] == (
            "no judge could be validated: the bounds test cannot decide on 4 questions with a "
            "nonzero full - zero difference (smallest "
            "attainable one-sided Wilcoxon p = 2^-4 = 0.0625, not below the level 0.05: at least 5 "
            "questions are needed)"
        )
        assert not any("no judge passed" in x for x in reasons)


def test_four_questions_still_exclude_a_judge_for_what_it_does():
    answers, scores = simulate(4, 1.0, 0, judges=("gpt-4o",))
    scores.loc[scores["question_id"] != "q0000", "score"] = np.nan  # 3 of 4 questions unscored
    r, reasons = result(answers, scores)
    assert not r.cube_table.at["gpt-4o", "in_jury"]
    assert "failure rate" in r.cube_table.at["gpt-4o", "excluded_reason"]
    assert any("no judge passed the validity gate" in x for x in reasons)


def test_a_decent_judge_scores_a_corrupted_answer_somewhat_below_the_correct_one():
    """Before: every worse probe scored at the judge's zero bound (an optimistic audit)."""
    p = simulate_probes(400, 0, judges=("gpt-4o",))
    mean = p.groupby(["probe", "dimension"])["score"].mean()
    z, f = bounds()["gpt-4o"].loc["zero"], bounds()["gpt-4o"].loc["full"]
    drop = mean["original"] - mean["corrupted_facts"]
    assert 1.0 < drop["relevance"] < 3.5 and drop["relevance"] < f["relevance"] - z["relevance"] - 1
    assert (
        abs(drop["quality"]) < 0.3 and abs(drop["specificity"]) < 0.3
    )  # one wrong fact: as clear, as targeted
    assert WORSE_DROP["other_question"][1] == (1.0, 1.0)
    assert abs(mean["other_question"]["relevance"] - z["relevance"]) < 0.4


def test_the_content_blind_judges_are_still_excluded_with_the_realistic_probes():
    judges = ("gpt-4o", "deepseek", *BLIND)
    answers, scores = simulate(40, 1.0, 11, judges=judges)
    r, _ = result(answers, scores, simulate_probes(40, 11, judges=judges))
    t = r.cube_table
    assert not t.loc[list(BLIND), "in_jury"].any(), t["excluded_reason"].to_dict()
    assert t.loc[["gpt-4o", "deepseek"], "in_jury"].all()
    assert "content-blind" in t.at["length", "excluded_reason"]


def test_compare_names_a_kept_judge_whose_rank_weights_are_undefined_and_does_not_crash():
    """Found end to end: a kept judge with W undefined made the jury delta NaN and
    `questions_needed` raise ('need a finite non-zero delta'), failing notebook 09."""
    from cube.method.compare import compare_pair

    answers, scores = simulate(
        40, 1.0, 10, judges=("gpt-4o", "qwen2.5-32b")
    )  # gpt-4o: weights undefined
    b_answers, b_scores = simulate(40, 0.8, 12, judges=("gpt-4o", "qwen2.5-32b"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cmp = compare_pair(
            answers,
            scores,
            b_answers.assign(system="b"),
            b_scores.assign(system="b"),
            AnalysisParams(bootstrap=30),
            n_resamples=30,
            n_permutations=30,
        )
    # compare has no audit, so nothing shows gpt-4o reads the content: its W failure excludes it
    # (review 2)
    assert "gpt-4o" not in cmp.jury_judges and "W undefined" in cmp.excluded_judges["gpt-4o"], (
        cmp.excluded_judges
    )
    assert not any("A: judge gpt-4o" in f for f in cmp.flags), cmp.flags


# --- review 2: a kept judge's noise W must not reach a published figure
# --------------------------------


def _params(judges, system):
    from cube.config.params import parse_params

    models = (
        "rubric-lenient",
        "rubric-strict",
        "rubric",
    )  # distinct calls, or the params refuse them
    return parse_params(
        {
            "run": "t",
            "judges": [
                {"name": j, "model": {"provider": "offline", "model": m}}
                for j, m in zip(judges, models[: len(judges)], strict=True)
            ],
            "systems": [{"kind": "builtin", "name": system, "top_n": 8}],
        }
    )


def test_a_kept_judge_with_noise_weights_leaves_the_jury_cube_undefined_and_unprinted():
    """Before: gpt-4o 88.2 and qwen -47.0 (its W under noise weights) -> jury 20.6, printed as 'CuBE
    score 20.6' in the withheld sentence and the page headline (seed 3, perfect retriever)."""
    from cube.diagnose.assessment import assess

    judges = ("gpt-4o", "qwen2.5-32b")
    answers, scores = simulate(40, 1.0, 3, judges=judges)
    r, reasons = result(answers, scores, simulate_probes(40, 3, judges=judges), bootstrap=20)
    t = r.cube_table
    assert t["in_jury"].all() and t.at["qwen2.5-32b", "gate_withhold"]
    assert np.isfinite(t.at["gpt-4o", "cube_score"]) and np.isfinite(
        t.at["qwen2.5-32b", "cube_score"]
    )  # per judge
    assert np.isnan(r.jury_cube()) and np.isnan(r.jury.at["mean", "weighted_score"])
    assert all(np.isnan(r.interval("jury", m)).all() for m in ("cube_score", "weighted_score"))
    assert any("jury CuBE and W are undefined" in x and "qwen2.5-32b" in x for x in reasons), (
        reasons
    )
    system = str(answers["system"].iloc[0])
    out = assess({system: r}, _params(judges, system))
    assert (
        out.cube_score is None  # undefined: null in results.json, never NaN
        and "CuBE score of" not in out.sentence
        and "nan" not in out.sentence
    )


def test_the_exception_keeps_a_judge_only_with_evidence_that_it_reads_content():
    """Before: the length-only judge (W undefined under rank weights, 66.7 with equal weights) kept
    its place through the exception without an audit; following the printed remedy published a
    verdict including it."""
    judges = ("gpt-4o", "deepseek", "length")
    answers, scores = simulate(40, 1.0, 0, judges=judges)
    r, reasons = result(
        answers, scores
    )  # no audit, no retrieval test (nothing missed): no evidence
    t = r.cube_table
    assert not t.at["length", "in_jury"] and t.at["length", "excluded_reason"].startswith(
        "W undefined"
    )
    assert t.at["length", "gate_withhold"] == "" and not any("length" in x for x in reasons)
    assert "no evidence that it reads the content" in t.at["length", "gate_evidence"]
    # a decent judge with the same weights problem keeps its place when the audit says it reads
    # content
    answers, scores = simulate(40, 1.0, 3, judges=("gpt-4o", "qwen2.5-32b"))
    r, _ = result(answers, scores)
    assert not r.cube_table.at["qwen2.5-32b", "in_jury"]
    r, _ = result(answers, scores, simulate_probes(40, 3, judges=("gpt-4o", "qwen2.5-32b")))
    assert r.cube_table.at["qwen2.5-32b", "in_jury"]


def test_the_weights_cause_states_what_was_measured():
    answers, scores = simulate(40, 1.0, 3, judges=("gpt-4o", "qwen2.5-32b"))
    r, _ = result(answers, scores, simulate_probes(40, 3, judges=("gpt-4o", "qwen2.5-32b")))
    said = r.cube_table.at["qwen2.5-32b", "gate_withhold"]
    assert "carry no usable signal, not the judge" not in said
    W = r.cube_table.at["qwen2.5-32b", "weighted_score"]
    assert (
        f"W = {W:.1f} outside the sane band [-25, 125] under rank-correlation weights, but " in said
    )
    assert " with equal weights, and the audit shows it reads the content (remedy: " in said


def test_the_cannot_decide_rule_counts_the_nonzero_differences_wilcoxon_uses():
    """Before: 5 questions with one tie -> excluded, 'p = 0.0625 on 5 questions' (Wilcoxon drops the
    tie)."""
    answers, scores = simulate(5, 1.0, 0, judges=("gpt-4o",))
    q = sorted(scores.question_id.unique())[0]
    full = scores[(scores.question_id == q) & (scores.set == "full")].set_index("dimension")[
        "score"
    ]
    zero = (scores.question_id == q) & (scores.set == "zero")
    scores.loc[zero, "score"] = scores.loc[zero, "dimension"].map(full).to_numpy()
    r, reasons = result(answers, scores)
    t = r.cube_table
    assert t.at["gpt-4o", "in_jury"], t.at["gpt-4o", "excluded_reason"]
    assert "cannot decide on 4 questions" in t.at["gpt-4o", "gate_withhold"]
    assert t.at["gpt-4o", "gate_questions"] == 4
    assert any("cannot decide on 4 questions" in x for x in reasons)


def test_a_judge_the_gate_could_not_test_is_listed_as_not_validated():
    """With 4 questions neither content-blindness test can run: the page lists such judges as not
    validated."""
    from cube.diagnose.assessment import assess
    from cube.pages.decision import decision_markdown

    judges = ("gpt-4o", "length")
    answers, scores = simulate(4, 1.0, 0, judges=judges)
    r, _ = result(answers, scores)
    system = str(answers["system"].iloc[0])
    out = assess({system: r}, _params(judges, system))
    text = decision_markdown(out)
    assert "Judges in the jury" not in text and "Judges not validated" in text, text


def _compare(a_seed, b_seed, n, judges, b_recall=0.95, **kw):
    from cube.method.compare import compare_pair

    answers, scores = simulate(n, 1.0, a_seed, judges=judges)
    b_answers, b_scores = simulate(n, b_recall, b_seed, judges=judges)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return compare_pair(
            answers,
            scores,
            b_answers.assign(system="b"),
            b_scores.assign(system="b"),
            AnalysisParams(bootstrap=0),
            n_resamples=40,
            n_permutations=40,
            **kw,
        )


def test_compare_publishes_no_jury_delta_when_a_jury_judge_is_withheld():
    """Before: with 4 questions the jury delta, its interval and p were published though no judge
    could be validated (and seed 3's Qwen-like W = -47 from noise weights gave +63, now excluded:
    compare has no audit)."""
    cmp = _compare(1, 2, 4, ("gpt-4o", "deepseek"), b_recall=0.5)
    flag = "judge gpt-4o: the bounds test cannot decide"
    assert any(flag in f for f in cmp.flags), cmp.flags
    row = cmp.row()
    assert all(
        row.get(k) is None or np.isnan(float(row[k])) for k in ("delta", "lo", "hi", "p_value")
    ), row
    assert np.isnan(float(row["delta"])) and np.isnan(float(row["p_value"]))
    assert cmp.power.get("questions_for_observed_delta") is None
    assert cmp.headline()["delta_cube"] is None or np.isnan(float(cmp.headline()["delta_cube"]))


def test_a_category_publishes_no_jury_cube_when_a_jury_judge_is_withheld():
    """Before: the note named the cause but CuBE and W were published (from the noise W)."""
    import pandas as pd

    from cube.diagnose.categories import category_report

    answers, scores = simulate(4, 1.0, 0, judges=("gpt-4o", "qwen2.5-32b"))
    groups = pd.DataFrame({"question_id": sorted(answers["question_id"].unique()), "topic": "all"})
    classified = pd.DataFrame(
        {
            "question_id": pd.Series(dtype=str),
            "primary": pd.Series(dtype=str),
            "low": pd.Series(dtype=bool),
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = category_report(
            answers,
            scores,
            groups,
            classified,
            str(answers["system"].iloc[0]),
            8,
            "topic",
            AnalysisParams(bootstrap=0),
            min_questions=2,
            bootstrap=0,
        )
    row = out.iloc[0]
    assert "the bounds test cannot decide on 4 questions" in row["note"], row["note"]
    assert all(np.isnan(row[k]) for k in ("W", "CuBE", "W_lo", "CuBE_lo")), row.to_dict()


def test_human_calibration_does_not_average_a_kept_judges_noise_weights():
    """Before: `jury_weights` averaged the rank-correlation weights of the jury, including those of
    a kept judge whose W they made noise (seed 3, perfect retriever), so the human-calibrated CuBE
    used them."""
    from cube.method.ppi import jury_weights

    judges = ("gpt-4o", "qwen2.5-32b")
    answers, scores = simulate(40, 1.0, 3, judges=judges)
    r, _ = result(answers, scores, simulate_probes(40, 3, judges=judges))
    assert r.cube_table.at["qwen2.5-32b", "gate_w_unusable"]
    w = jury_weights(r)
    assert set(w) == set(r.weights["dimension"]) and len(set(w.values())) == 1
