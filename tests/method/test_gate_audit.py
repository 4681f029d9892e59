"""Issue 20: the gate decides with tests that have power, reads the judge audit, and the jury is
honest.

Simulated tables (tests/judge_sim.py: the paper's Table 2 bounds, content-blind judges), seeded."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

from cube.config.schema import SchemaError
from cube.config.sections import AnalysisParams
from cube.method.analysis import jury_summary
from cube.method.audit import audit_summary, audit_verdict, self_preference, validate_probes
from cube.method.evaluation import evaluate
from cube.method.gate import RANK_TEST_MIN_GROUP
from tests.judge_sim import simulate, simulate_probes


def run(answers, scores, probes=None, **ap):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return evaluate(answers, scores, AnalysisParams(bootstrap=0, **ap), audit=probes).cube_table


def test_a_decent_judge_keeps_its_place_on_a_perfect_retriever():
    """Before: a GPT-4o-like judge was excluded in 90 % of runs with the gold document always
    retrieved, because its rag score did not follow rank. Now the retrieval test is not applied
    without misses."""
    for seed in range(3):
        answers, scores = simulate(100, 1.0, seed, judges=("gpt-4o", "deepseek"))
        t = run(answers, scores, weights="equal")
        assert t["in_jury"].all(), t["excluded_reason"].to_dict()
        assert not t["gate_rank_applied"].any()
        assert t["gate_evidence"].str.contains("retrieval test not applied").all()
        assert t["gate_evidence"].str.contains("audit did not run").all()


@pytest.mark.parametrize("weights", ["equal", "rank_correlation"])
def test_the_set_aware_constant_judge_is_excluded_as_content_blind(weights):
    """Before: full = 10, zero = 0, rag = 7 whatever the answer was admitted under equal weights."""
    answers, scores = simulate(40, 0.8, 1, judges=("gpt-4o", "constant"))
    t = run(answers, scores, weights=weights)
    assert not t.at["constant", "in_jury"] and t.at["constant", "content_blind"]
    assert "do not vary within a set" in t.at["constant", "excluded_reason"]
    assert t.at["gpt-4o", "in_jury"]


def test_a_judge_constant_in_one_set_only_is_not_content_blind():
    """Review C1: a reading judge gives the demo's one zero-set text ("I cannot answer ...") the
    same score on every question; one constant set is no evidence of blindness while the others
    vary."""
    answers, scores = simulate(100, 0.8, 2, judges=("gpt-4o", "deepseek"))
    scores = scores.copy()
    scores.loc[(scores["judge"] == "gpt-4o") & (scores["set"] == "zero"), "score"] = 0.0
    t = run(answers, scores, weights="equal")
    assert not t.at["gpt-4o", "content_blind"], t.at["gpt-4o", "excluded_reason"]
    assert "do not vary within a set" not in t.at["gpt-4o", "excluded_reason"]


def test_the_audit_excludes_a_length_judge_and_names_it_content_blind():
    answers, scores = simulate(100, 0.8, 2, judges=("gpt-4o", "length"))
    probes = simulate_probes(40, 2, judges=("gpt-4o", "length"))
    t = run(answers, scores, probes, weights="equal")
    assert not t.at["length", "in_jury"]
    assert (
        "content-blind: does not tell correct from corrupted answers"
        in t.at["length", "excluded_reason"]
    )
    assert t.at["gpt-4o", "in_jury"] and t.at["gpt-4o", "gate_evidence"].startswith(
        "audit: correct answers"
    )


def test_few_audit_pairs_give_no_verdict_and_no_exclusion():
    answers, scores = simulate(60, 0.8, 3, judges=("gpt-4o",))
    probes = simulate_probes(4, 3, judges=("gpt-4o",))  # 8 pairs < min_pairs 10
    t = run(answers, scores, probes, weights="equal")
    assert t.at["gpt-4o", "in_jury"]
    assert "audit inconclusive: 8 scored probe pairs" in t.at["gpt-4o", "gate_evidence"]


def test_the_retrieval_test_needs_enough_misses_and_then_excludes_a_judge_blind_to_retrieval():
    answers, scores = simulate(
        100, 0.5, 4, judges=("gpt-4o",)
    )  # rows: judge, dimension, set, question
    # a judge that scores each rag answer as it scored the zero answer: separates the bounds,
    # ignores retrieval
    fake = scores.copy()
    fake["judge"] = "rag-blind"
    fake.loc[fake["set"] == "rag", "score"] = fake.loc[fake["set"] == "zero", "score"].to_numpy()
    t = run(answers, pd.concat([scores, fake], ignore_index=True), weights="equal")
    assert t.at["gpt-4o", "in_jury"] and t.at["gpt-4o", "gate_rank_applied"]
    assert not t.at["rag-blind", "in_jury"]
    assert "does not follow retrieval" in t.at["rag-blind", "excluded_reason"]
    few = simulate(100, 0.9, 4, judges=("gpt-4o",))  # 10 misses < RANK_TEST_MIN_GROUP
    assert (
        RANK_TEST_MIN_GROUP > 10
        and not run(*few, weights="equal").at["gpt-4o", "gate_rank_applied"]
    )


def test_the_failure_rate_counts_absent_rows_and_blank_error_kinds():
    """Before: with an error_kind column, absent rows were not failures (0.0, admitted; 0.40 without
    it)."""
    answers, scores = simulate(50, 0.8, 5, judges=("gpt-4o", "deepseek"))
    ds = scores["judge"] == "deepseek"
    qs = sorted(scores["question_id"].unique())[:20]  # 40 % of its questions
    absent = scores[~(ds & scores["question_id"].isin(qs))]
    t = run(answers, absent, weights="equal")
    assert not t.at["deepseek", "in_jury"] and t.at["deepseek", "failure_rate"] == pytest.approx(
        0.4
    )
    assert "20 call, 0 parse" not in t.at["deepseek", "excluded_reason"]
    assert "absent or unexplained" in t.at["deepseek", "excluded_reason"]
    blank = scores.copy()
    blank.loc[ds & blank["question_id"].isin(qs), "score"] = (
        np.nan
    )  # unscored, error_kind left blank
    t2 = run(answers, blank, weights="equal")
    assert (
        t2.at["deepseek", "failure_rate"] == pytest.approx(0.4) and not t2.at["deepseek", "in_jury"]
    )
    skipped = blank.copy()
    skipped.loc[ds & skipped["question_id"].isin(qs), "error_kind"] = (
        "skipped"  # a missing answer: not its failure
    )
    assert run(answers, skipped, weights="equal").at["deepseek", "failure_rate"] == 0


def test_the_bounds_test_pairs_each_dimension_so_parse_failures_do_not_drop_questions():
    """Before: the test kept only questions complete in every dimension and set."""
    answers, scores = simulate(60, 0.8, 6, judges=("gpt-4.1-nano",))
    rng = np.random.default_rng(6)
    hit = rng.random(len(scores)) < 0.1
    scores.loc[hit, "score"] = np.nan
    scores.loc[hit, "error_kind"] = "parse"
    t = run(answers, scores, weights="equal", gate_max_failure_rate=0.5)
    # the questions with a nonzero full - zero difference (Wilcoxon drops ties): 55 of the 60 here,
    # where keeping only complete questions left about 60 x 0.9^8 = 26
    assert t.at["gpt-4.1-nano", "gate_questions"] == 55
    assert t.at["gpt-4.1-nano", "in_jury"]


@pytest.mark.parametrize("judge", ["random", "question"])
def test_judges_that_ignore_the_answer_do_not_separate_the_bounds(judge):
    answers, scores = simulate(100, 1.0, 7, judges=("gpt-4o", judge))
    t = run(answers, scores, weights="equal")
    assert (
        not t.at[judge, "in_jury"]
        and "does not separate the bounds" in t.at[judge, "excluded_reason"]
    )


def test_a_dimension_undefined_for_a_member_is_undefined_for_the_jury():
    """Before: the jury averaged a dimension over the judges that had it and still said n_judges
    2."""
    table = pd.DataFrame(
        {
            "relevance": [80.0, 70.0],
            "quality": [90.0, np.nan],
            "cube_score": [60.0, 50.0],
            "in_jury": [True, True],
        },
        index=pd.Index(["a", "b"], name="judge"),
    )
    jury = jury_summary(table)
    assert np.isnan(jury.at["mean", "quality"]) and jury.at["mean", "relevance"] == 75.0
    assert jury.at["mean", "n_judges"] == 2


def test_audit_summary_counts_pairs_and_measures_the_biases():
    rows = []
    for i in range(12):
        q = f"q{i}"
        for probe, expect, score in [
            ("original", "same", 8),
            ("corrupted_facts", "worse", 8 if i < 2 else 3),
            ("padded", "not_worse", 9),
        ]:
            rows.append(
                {
                    "question_id": q,
                    "judge": "j",
                    "probe": probe,
                    "expect": expect,
                    "dimension": "quality",
                    "score": float(score),
                }
            )
    s = audit_summary(pd.DataFrame(rows)).set_index("judge").loc["j"]
    assert (s["pairs"], s["wins"], s["ties"], s["losses"]) == (12, 10, 2, 0)
    assert s["discrimination"] == pytest.approx(11 / 12)
    assert s["verbosity_bias"] == pytest.approx(1.0) and s["verbosity_bias_lo"] == pytest.approx(
        1.0
    )
    assert s["modal_share"] == pytest.approx(
        14 / 36
    )  # 8: the 12 originals and the 2 tied corruptions
    blind, why = audit_verdict(s, 0.05, 10)
    assert blind is False and "10 of 12 pairs" in why
    assert audit_verdict(None, 0.05, 10) == (None, "audit did not run")


def test_bad_probe_tables_name_every_problem():
    bad = pd.DataFrame(
        {
            "question_id": ["q1", "q2"],
            "judge": ["j", "j"],
            "probe": ["shouted", "padded"],
            "expect": ["worse", "worse"],
            "dimension": ["quality"] * 2,
            "score": [3.0, 11.0],
        }
    )
    with pytest.raises(SchemaError) as e:
        validate_probes(bad)
    msg = str(e.value)
    assert (
        "unknown probe kind(s) ['shouted']" in msg
        and "'expect' disagrees" in msg
        and "bad rows [1]" in msg
    )


def _own_and_control(n: int, lenient: float, own_bonus: float, seed: int = 0) -> pd.DataFrame:
    """`n` answers by the judge's model (own) and `n` by another model, two dimensions each, scored
    by `self` (the other judges' score + `lenient` everywhere + `own_bonus` on its own model's
    answers) and by two other judges (a per-answer quality plus noise)."""
    rng = np.random.default_rng(seed)
    rows = []
    for own in (True, False):
        for i in range(n):
            quality = rng.uniform(2, 8)
            for dim in ("relevance", "completeness"):
                base = quality + rng.normal(0, 0.5)
                for j in ("a", "b"):
                    rows.append(
                        {
                            "question_id": f"q{i}",
                            "system": "mine" if own else "theirs",
                            "set": "full",
                            "judge": j,
                            "dimension": dim,
                            "score": float(np.clip(base + rng.normal(0, 1), 0, 10)),
                            "own": own,
                        }
                    )
                rows.append(
                    {
                        "question_id": f"q{i}",
                        "system": "mine" if own else "theirs",
                        "set": "full",
                        "judge": "self",
                        "dimension": dim,
                        "own": own,
                        "score": float(
                            np.clip(base + lenient + own_bonus * own + rng.normal(0, 1), 0, 10)
                        ),
                    }
                )
    return pd.DataFrame(rows)


def test_a_lenient_judge_that_does_not_prefer_its_own_model_has_no_self_preference():
    # the reviewer's case: +4 on every answer is leniency, not self-preference (it was published as
    # +4)
    sp = self_preference(_own_and_control(40, lenient=4.0, own_bonus=0.0), "self")
    assert (
        abs(sp["self_preference"]) < 0.5
        and sp["self_preference_lo"] <= 0 <= sp["self_preference_hi"]
    )
    assert (
        sp["items"] == 40 and sp["control_items"] == 40 and sp["note"] == ""
    )  # one value per answer


def test_a_judge_adding_3_points_to_its_own_models_answers_has_a_self_preference_of_3():
    sp = self_preference(_own_and_control(40, lenient=1.0, own_bonus=3.0, seed=1), "self")
    assert sp["self_preference"] == pytest.approx(3.0, abs=0.5)
    assert 0 < sp["self_preference_lo"] < 3.0 < sp["self_preference_hi"]


def test_self_preference_is_clustered_by_answer_not_by_dimension():
    # two dimensions of one answer are not two items: the interval of 20 answers x 2 dimensions is
    # the interval of 20 values, as wide as the same answers' per-answer means give
    scores = _own_and_control(20, lenient=0.0, own_bonus=1.0, seed=2)
    one_dim = (
        scores.groupby(["question_id", "system", "set", "judge", "own"], as_index=False)["score"]
        .mean()
        .assign(dimension="mean")
    )
    a, b = self_preference(scores, "self"), self_preference(one_dim, "self")
    assert a["items"] == 20
    assert a["self_preference_hi"] - a["self_preference_lo"] == pytest.approx(
        b["self_preference_hi"] - b["self_preference_lo"]
    )


def test_self_preference_without_a_control_is_not_measurable_with_the_cause():
    scores = _own_and_control(20, lenient=4.0, own_bonus=0.0)
    no_other_model = self_preference(scores[scores["own"]], "self")
    assert math.isnan(no_other_model["self_preference"]) and math.isnan(
        no_other_model["self_preference_lo"]
    )
    assert "no answer written by another model" in no_other_model["note"]
    alone = self_preference(scores[scores["judge"] == "self"], "self")
    assert math.isnan(alone["self_preference"]) and "no other judge" in alone["note"]


def _scaled_judges(
    n: int, slope: float, own_better: float, bonus: float = 0.0, seed: int = 0
) -> pd.DataFrame:
    """Issue 30's case: the zero, rag and full answers of n questions by the judge's own model and
    by another (better by `own_better` points of true quality when own), two dimensions each,
    scored by `self` on a scale of slope `slope` (plus `bonus` on its own model's answers) and by
    two other judges of slope 0.8, each score with noise SD 1; a question's answers share its
    difficulty."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        u = rng.normal(0, 0.7)
        for own in (True, False):
            for set_, level in (("zero", 4.5), ("rag", 5.5), ("full", 6.5)):
                q = level + u + own_better * own + rng.normal(0, 0.5)
                for dim in ("relevance", "completeness"):
                    for judge, b in (("self", slope), ("a", 0.8), ("b", 0.8)):
                        extra = bonus * own if judge == "self" else 0.0
                        rows.append(
                            {
                                "question_id": f"q{i}",
                                "system": "mine" if own else "theirs",
                                "set": set_,
                                "judge": judge,
                                "dimension": dim,
                                "score": 5 + b * (q - 6) + extra + rng.normal(0, 1),
                                "own": own,
                            }
                        )
    return pd.DataFrame(rows)


def test_a_steeper_judge_whose_model_writes_better_answers_has_no_self_preference():
    """Issue 30: slope 1.3 beside judges of slope 0.8, its model's answers 2 points better, no
    self-preference: the former difference in differences read about +1 (slope difference x
    quality difference) with an interval excluding 0."""
    sp = self_preference(_scaled_judges(40, slope=1.3, own_better=2.0, seed=3), "self")
    assert sp["slope_from"] == "answer sets" and sp["slope"] == pytest.approx(1.3 / 0.8, abs=0.2)
    assert sp["self_preference_lo"] <= 0 <= sp["self_preference_hi"], sp
    assert abs(sp["self_preference"]) < 0.3 and sp["items"] == 120 and sp["control_items"] == 120


def test_a_steeper_judge_adding_a_point_to_its_own_models_answers_is_detected():
    sp = self_preference(_scaled_judges(40, slope=1.3, own_better=2.0, bonus=1.0, seed=4), "self")
    assert 0 < sp["self_preference_lo"] < 1.0 < sp["self_preference_hi"], sp


def test_the_self_preference_interval_covers_0_at_its_confidence_on_question_clustered_answers():
    """Seeded runs of the scale-differing judge without self-preference: the question-cluster
    bootstrap interval covers 0 in about 95 % of them (the former Welch interval, treating a
    question's answer sets as independent, covered less; issue 30)."""
    runs = 200
    covered = [
        sp["self_preference_lo"] <= 0 <= sp["self_preference_hi"]
        for sp in (
            self_preference(_scaled_judges(30, slope=1.3, own_better=2.0, seed=100 + r), "self")
            for r in range(runs)
        )
    ]
    share = float(np.mean(covered))
    assert 0.91 <= share <= 0.99, share  # 95 % within 2 Monte Carlo SEs (1.5 points at 200 runs)


@pytest.mark.parametrize("seed", range(5))
def test_the_form_only_judge_passed_the_cut_probes_and_is_caught_on_sentence_matched_ones(seed):
    """Issue 30 on simulated probes: with the probes cut at exactly the original's length (63 / 8 /
    7 % of corrupted, sibling and other-question probes end a sentence, every original does) a judge
    scoring only whether the text ends a sentence passes the audit; with the probes ending as their
    original ends it is content-blind, and so is a judge reading the first sentence's length."""
    verdict = {
        form: audit_summary(
            simulate_probes(40, seed, judges=("form", "position"), probe_form=form)
        ).set_index("judge")
        for form in ("cut", "sentence")
    }
    assert audit_verdict(verdict["cut"].loc["form"], 0.05, 10)[0] is False
    for judge in ("form", "position"):
        blind, why = audit_verdict(verdict["sentence"].loc[judge], 0.05, 10)
        assert blind is True, (judge, why)
