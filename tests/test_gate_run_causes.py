"""Issue 20 (open points 1, 2, 4): the gate excludes a judge only for evidence about the judge.

W undefined or outside the band because the rank-correlation weights are noise (a perfect retriever),
and a bounds test that cannot decide (n <= 4 questions), are facts about the run: the judge keeps its
place and the verdict is withheld naming the cause and the remedy. Simulated tables, seeded
(tests/judge_sim.py)."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import numpy as np
import pytest
from judge_sim import BLIND, DECENT, WORSE_DROP, bounds, simulate, simulate_probes

from cube.config.sections import AnalysisParams
from cube.diagnose.lta import withheld_reasons
from cube.method.evaluation import evaluate
from cube.method.gate import bounds_test_can_decide, min_questions


def result(answers, scores, probes=None, **ap):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        params = AnalysisParams(bootstrap=0, **ap)
        r = evaluate(answers, scores, params, audit=probes)
    return r, withheld_reasons(r, SimpleNamespace(analysis=params))[0]


def test_undefined_rank_weights_keep_a_decent_judge_and_withhold_the_verdict_naming_the_weights():
    """Before: 'W undefined (...)' excluded GPT-4o-like (seed 10: every correlation with rank <= 0 on a
    perfect retriever) and the verdict blamed the judges."""
    answers, scores = simulate(40, 1.0, 10, judges=("gpt-4o", "qwen2.5-32b"))
    r, reasons = result(answers, scores)
    t = r.cube_table
    assert t["in_jury"].all(), t["excluded_reason"].to_dict()
    assert np.isnan(t.at["gpt-4o", "weighted_score"])
    said = t.at["gpt-4o", "gate_withhold"]
    assert "its rank-correlation weights are undefined (every correlation with rank is <= 0" in said
    assert "analysis.weights: equal or analysis.weights_fallback: equal" in said
    assert [x for x in reasons if "gpt-4o" in x] == [f"judge gpt-4o: {said}"]  # said once
    assert not any("jury CuBE score is undefined" in x or "no judge passed" in x for x in reasons)
    r_eq, reasons_eq = result(answers, scores, weights="equal")  # the remedy gives a verdict
    assert r_eq.cube_table["in_jury"].all() and not reasons_eq


def test_every_gold_document_at_rank_1_is_the_ranks_cause_not_the_judges():
    answers, scores = simulate(40, 1.0, 1, judges=("gpt-4o", "deepseek"))
    answers["rank"] = 1  # rank_score constant: no correlation with rank exists
    r, reasons = result(answers, scores)
    assert r.cube_table["in_jury"].all(), r.cube_table["excluded_reason"].to_dict()
    assert len(reasons) == 2 and all("rank_score is constant" in x for x in reasons)


def test_w_outside_the_band_only_under_rank_weights_keeps_the_judge():
    """Seed 3: Qwen-like W = -47 under rank-correlation weights on a perfect retriever, in the band with
    equal weights. Before: excluded ('W = -47.0 outside the sane band')."""
    answers, scores = simulate(40, 1.0, 3, judges=("gpt-4o", "qwen2.5-32b"))
    r, reasons = result(answers, scores)
    t = r.cube_table
    assert t.at["qwen2.5-32b", "in_jury"] and not -25 <= t.at["qwen2.5-32b", "weighted_score"] <= 125
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
    assert not t.at["deepseek", "in_jury"] and "outside the sane band" in t.at["deepseek", "excluded_reason"]
    assert t.at["deepseek", "gate_withhold"] == "" and t.at["gpt-4o", "in_jury"]


def test_four_questions_withhold_the_verdict_for_the_run_size_and_exclude_nobody():
    """Before: every judge excluded, 'does not separate the bounds: p = 0.0625 on 4 questions'."""
    assert not bounds_test_can_decide(4, 0.05) and bounds_test_can_decide(5, 0.05) and min_questions(0.05) == 5
    for seed in range(5):
        r, reasons = result(*simulate(4, 1.0, seed, judges=tuple(DECENT)))
        t = r.cube_table
        assert t["in_jury"].all(), (seed, t["excluded_reason"].to_dict())
        assert reasons[0] == ("no judge could be validated: the bounds test cannot decide on 4 questions (smallest "
                              "attainable one-sided Wilcoxon p = 2^-4 = 0.0625, not below the level 0.05: at least 5 "
                              "questions are needed)")
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
    assert abs(drop["quality"]) < 0.3 and abs(drop["specificity"]) < 0.3  # one wrong fact: as clear, as targeted
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
    """Found end to end: a kept judge with W undefined made the jury delta NaN and `questions_needed`
    raise ('need a finite non-zero delta'), failing notebook 09."""
    from cube.method.compare import compare_pair

    answers, scores = simulate(40, 1.0, 10, judges=("gpt-4o", "qwen2.5-32b"))  # gpt-4o: weights undefined
    b_answers, b_scores = simulate(40, 0.8, 12, judges=("gpt-4o", "qwen2.5-32b"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cmp = compare_pair(answers, scores, b_answers.assign(system="b"), b_scores.assign(system="b"),
                           AnalysisParams(bootstrap=30), n_resamples=30, n_permutations=30)
    assert any(f.startswith("A: judge gpt-4o: W undefined: its rank-correlation weights are undefined")
               for f in cmp.flags), cmp.flags
    assert not np.isfinite(cmp.row()["delta"])
    assert cmp.power.get("questions_for_observed_delta") is None
