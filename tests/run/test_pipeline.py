"""Stages called directly (no papermill): the annotation sheet is never overwritten, and the
decision survives undefined numbers."""

import json
import warnings

import numpy as np
import pandas as pd
import pytest
import yaml

from cube.diagnose.assessment import assess, human_sentence
from cube.diagnose.verdict import verdict
from cube.run import decide, evaluate, human, pipeline
from cube.run.notebook import open_run

JUDGES = [
    {"name": "lenient", "model": {"provider": "offline", "model": "rubric-lenient"}},
    {"name": "strict", "model": {"provider": "offline", "model": "rubric-strict"}},
]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pipe")
    params = tmp / "p.yaml"
    # 24 items and 50 resamples: the BCa interval (the default) is about 31 points wide here, so the
    # width rule would withhold the verdict whose wording these tests read
    analysis = {"bootstrap": 50, "max_interval_width": 45}
    params.write_text(
        yaml.safe_dump(
            {
                "run": "pipe",
                "judges": JUDGES,
                "analysis": analysis,
                "corpus": {"n_items": 24, "seed": 2},
                "human": {"sample_size": 9},
            }
        ),
        encoding="utf-8",
    )
    r = open_run(params, tmp / "pipe")
    for stage in (
        pipeline.corpus_stage,
        pipeline.questions_stage,
        pipeline.answers_stage,
        pipeline.scores_stage,
    ):
        stage(r)
    return r


def test_an_annotation_sheet_being_filled_is_never_overwritten(run):
    first = human.export_annotation(run.params, paths=run.paths)
    sheet = next(p for p in first if p.name == "annotation_sheet.csv")
    filled = pd.read_csv(sheet)
    filled["relevance.total"] = 7
    filled.to_csv(sheet, index=False)
    again = human.export_annotation(run.params, paths=run.paths)
    assert again == first and (pd.read_csv(sheet)["relevance.total"] == 7).all()
    human.export_annotation(run.params, paths=run.paths, overwrite=True)
    assert pd.read_csv(sheet)["relevance.total"].isna().all()


def test_decision_with_undefined_dimensions_is_withheld_not_a_crash(run):
    results = evaluate.evaluate_run(run)
    result = results["bm25-top8"]
    dims = ["relevance", "specificity", "completeness", "quality"]
    result.jury.loc[:, [*dims, "weighted_score", "cube_score"]] = np.nan
    out = assess(results, run.params)
    assert out.verdict == "withheld" and out.weakest == []
    assert any("CuBE score is undefined" in r for r in out.withheld_reasons)
    assert (
        verdict(float("nan"), {"good": 60}) == "undetermined"
        and verdict(59.9, {"good": 60}) == "poor"
    )


def test_decision_names_offline_bounds_and_subset_wording(run):
    out = decide.decision(run, evaluate.evaluate_run(run))
    assert (
        "offline extractive algorithm" in out.synthetic_data and "SYNTHETIC" in out.synthetic_data
    )
    assert (
        "on those the answers" in out.sentence
        and out.weighted_label == "Answer quality when retrieved"
    )


def test_a_larger_top_n_system_is_reported_with_its_numbers():
    from cube.config.params import parse_params
    from cube.config.sections import AnalysisParams
    from cube.method.evaluation import evaluate
    from tests.factories import make_tables

    params = parse_params(
        {
            "run": "two",
            "judges": JUDGES,
            "analysis": {"low_recall_below": 0.99},
            "systems": [
                {"kind": "builtin", "name": "top8", "top_n": 8},
                {"kind": "builtin", "name": "top16", "top_n": 16},
            ],
        }
    )
    ap = AnalysisParams(bootstrap=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = {
            "top8": evaluate(*make_tables(60, seed=1, recall=0.7, system="top8"), ap, 8),
            "top16": evaluate(
                *make_tables(60, seed=2, recall=0.9, top_n=16, system="top16"), ap, 16
            ),
        }
    text = " ".join(assess(results, params).suggestions)
    top16 = results["top16"]
    assert (
        f"top16 (TOP-N 16) retrieved {top16.recall_at_k:.1%}" in text
        and f"CuBE {top16.jury_cube():.1f}" in text
    )
    # the measured larger TOP-N replaces the prediction from the rank correlations (they could
    # disagree)
    assert "a larger TOP-N should cost little" not in text


def test_agreement_is_on_the_rag_set_unless_other_sets_are_asked(run):
    section = human.human_agreement(run)
    assert section.sets == ["rag"] and set(section.agreement["set"]) == {"rag"}
    assert set(section.set_scores["set"]) == {"rag"}
    assert "the rag set" in section.agreement_note and "never pooled" in section.agreement_note
    assert "Not included: the full, zero set(s)." in section.agreement_note
    sets, note = human._agreement_sets(
        ["full", "pooled", "zero"], section.scores[section.scores["set"] != "zero"]
    )
    assert (
        sets == ["full", "pooled"] and "all sets pooled" in note and "without scores: zero" in note
    )
    with pytest.raises(ValueError, match=r"human.agreement_sets: none of \['zero'\]"):
        human._agreement_sets(["zero"], section.scores[section.scores["set"] == "rag"])


def test_decision_reports_r_at_1_and_near_duplicate_confusion_from_the_run(run):
    from cube.diagnose.near_duplicates import near_duplicate_confusion
    from cube.method import tables
    from cube.pages.decision import decision_markdown

    results = evaluate.evaluate_run(run)
    out = decide.decision(run, results)
    ranks = results["bm25-top8"].ranks
    expected = near_duplicate_confusion(run.load("answers"), run.load("corpus"), system="bm25-top8")
    quality = out.retrieval_quality
    assert quality.r_at_1 == pytest.approx((ranks["rank"] == 1).mean())
    assert quality.near_duplicate_confusion.count == expected["count"]
    assert quality.duplicate_texts == 0
    page = decision_markdown(out)
    assert f"R@1 {(ranks['rank'] == 1).mean():.1%}" in page and "near-duplicate confusion" in page
    assert "bm25-top8" in set(tables.bootstrap_intervals(results)["system"])


def test_without_a_bootstrap_the_decision_says_its_precision_is_unknown_and_the_table_says_why(run):
    from cube.method import tables

    results = evaluate.evaluate_run(run, bootstrap=False)
    out = assess(results, run.params)
    assert out.cube_ci is None and "precision of this score is unknown" in out.sentence
    table = tables.bootstrap_intervals(results)
    assert set(table["note"]) == {"not computed: analysis.bootstrap is 0"} and len(table) == len(
        results
    )


def test_duplicate_texts_and_high_confusion_become_suggestions(run):
    from cube.diagnose.suggest import retrieval_suggestions

    tips = retrieval_suggestions(
        {
            "duplicate_texts": 3,
            "near_duplicate_confusion": {
                "rate": 0.4,
                "count": 4,
                "n": 10,
                "region": 3,
                "variant": 1,
                "duplicate": 0,
            },
        }
    )
    assert "3 document(s)" in tips[0] and "region_filter" in tips[1]
    assert (
        retrieval_suggestions({"duplicate_texts": 0, "near_duplicate_confusion": {"rate": 0.02}})
        == []
    )


def test_the_sheet_is_blind_and_the_page_counts_its_rows(run, tmp_path):
    import dataclasses

    files = human.export_annotation(run.params, paths=run.paths)
    key_file = next(p for p in files if p.name == "annotation_key.csv")
    sheet = pd.read_csv(
        next(p for p in files if p.name == "annotation_sheet.csv"), dtype=str, keep_default_na=False
    )
    key = pd.read_csv(key_file, dtype=str, keep_default_na=False)
    assert not {"system", "set", "question_id"} & set(sheet.columns) and len(sheet) == len(key)
    pairs = key[["question_id", "system"]].drop_duplicates().shape[0]
    assert (
        pairs == run.params.human.sample_size and len(sheet) == 3 * pairs
    )  # sample_size counts pairs
    section = human.human_agreement(run)
    assert (
        f"({len(sheet)} rows: {pairs} sampled question-system pairs × 3 answer sets"
        in section.message
    )
    assert (
        "set" not in section.sheet_preview.columns and "system" not in section.sheet_preview.columns
    )
    # the filled blind sheet comes back through the run's key (human.ratings = a file outside the
    # run)
    sheet["rater"] = "ann"
    for d in run.params.dimension_names():
        sheet[f"{d}.total"] = "4"
    filled = tmp_path / "ann.csv"
    sheet.to_csv(filled, index=False)
    section = run.params.human.model_copy(update={"ratings": str(filled)})
    rated = dataclasses.replace(run, params=run.params.model_copy(update={"human": section}))
    scores, report = human.human_stage(rated)
    assert report["key"] == str(key_file) and (scores["score"] == 4.0).all()
    got = set(zip(scores["question_id"], scores["system"], scores["set"], strict=True))
    assert got == set(zip(key["question_id"], key["system"], key["set"], strict=True))
    # every rating 4 in every set: no range between the human bounds, so no human-calibrated CuBE,
    # said why
    system = sorted(key["system"])[0]
    from cube.diagnose.decision_record import Decision
    from cube.run.record import DecisionRecord

    # as notebook 06 leaves it
    run.write_record(DecisionRecord(decision=Decision(system=system, verdict="good")))
    before = json.loads(run.paths.results.read_text(encoding="utf-8"))["decision"]
    table, per, heads = human.human_calibration(rated)
    assert set(table["system"]) == set(key["system"]) and (table["n_rated"] > 0).all()
    assert table["human_calibrated_cube"].isna().all() and all(
        h["cube_score"] is None for h in heads.values()
    )
    results = json.loads(run.paths.results.read_text(encoding="utf-8"))
    # stage 07 writes its own key and leaves the decision as 06 wrote it
    assert results["human_calibrated"] == heads and results["decision"] == before
    head = heads[system]
    assert human_sentence(head).startswith(
        f"With {head['n_rated']} of {head['n_retrieved']} retrieved questions rated by humans "
        f"({head['n_ratings']} ratings): the human-calibrated CuBE is undefined (no weighted "
        "dimension"
    )
    # every filled cell of the system's rows is a rating: 4 dimensions x 3 sets per sampled pair
    assert head["n_ratings"] == int((scores["system"] == system).sum()) > head["n_rated"]


def test_a_sheet_named_by_the_user_lists_its_key_once(run, tmp_path):
    files = human.export_annotation(run.params, out=tmp_path / "ratings_round2", paths=run.paths)
    names = [p.name for p in files]
    assert names[-1] == "ratings_round2_key.csv" and names.count("ratings_round2_key.csv") == 1
    again = human.export_annotation(run.params, out=tmp_path / "ratings_round2", paths=run.paths)
    assert again == files  # kept, not rewritten, and still listed once


def test_the_human_calibration_is_its_own_key_and_the_index_says_what_it_counts(run, tmp_path):
    # issue 29: stage 07 rewrote the decision (a `human_basis` hash told a stale one apart), and
    # "With 36 human ratings" counted rated retrieved questions on a run of 960 rating rows
    import dataclasses

    from cube.pages.publish import _human_line

    files = human.export_annotation(run.params, paths=run.paths)
    sheet = pd.read_csv(
        next(p for p in files if p.name == "annotation_sheet.csv"), dtype=str, keep_default_na=False
    )
    key = pd.read_csv(
        next(p for p in files if p.name == "annotation_key.csv"), dtype=str, keep_default_na=False
    )
    on = [c for c in key.columns if c in sheet.columns]
    sets = sheet.merge(key, on=on, how="left")["set"]
    filled = sheet.assign(rater="ann")
    for d in run.params.dimension_names():
        filled[f"{d}.total"] = sets.map({"zero": "2", "rag": "5", "full": "8"}).to_numpy()
    filled.to_csv(tmp_path / "first.csv", index=False)
    section = run.params.human.model_copy(update={"ratings": str(tmp_path / "first.csv")})
    rated = dataclasses.replace(run, params=run.params.model_copy(update={"human": section}))
    results = evaluate.evaluate_run(rated)
    out = decide.decision(rated, results)
    written = json.loads(run.paths.results.read_text(encoding="utf-8"))["decision"]
    assert written == out.as_json() and "human_calibrated" not in written
    _, per, heads = human.human_calibration(rated, results)
    recorded = json.loads(run.paths.results.read_text(encoding="utf-8"))
    assert recorded["decision"] == written and recorded["human_calibrated"] == heads
    head = heads[out.system]
    ratings = human.human_stage(rated)[0]
    n_ratings = int(ratings.loc[ratings["system"] == out.system, "score"].notna().sum())
    line = _human_line(recorded)
    assert head["n_ratings"] == n_ratings and head["n_rated"] == per[out.system].n_rated
    assert line.startswith(
        f"With {head['n_rated']} of {head['n_retrieved']} retrieved questions rated by humans "
        f"({n_ratings} ratings): CuBE "
    )
    assert f"With {head['n_rated']} human ratings" not in line  # the old wording miscounted
