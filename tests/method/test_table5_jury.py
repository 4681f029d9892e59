"""Issue 29 item 6: Table 5's "CuBE (judges)" row averages the run's jury only. A random judge
beside a decent one made the row -8.67 ± 66.31 while the decision's jury CuBE was 41.55: the judge
the validity gate excluded is now left out of the mean and named."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from cube.config.sections import AnalysisParams
from cube.method import evaluation as E
from cube.method import tables
from tests.factories import make_tables


def _run():
    answers, scores = make_tables(n_questions=60, seed=8)
    rng = np.random.default_rng(3)
    noise = scores[scores.judge == "judge-b"].assign(
        judge="random", score=rng.integers(0, 11, (scores.judge == "judge-b").sum()).astype(float)
    )
    scores = pd.concat([scores, noise], ignore_index=True)
    rated = sorted(scores.question_id.unique())[:30]
    human = scores[(scores.judge == "judge-a") & scores.question_id.isin(rated)].assign(
        judge="human"
    )
    ap = AnalysisParams(bootstrap=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = E.evaluate(answers, scores, ap)
    return answers, scores, human, ap, full


def test_the_judges_row_averages_the_jury_and_names_the_judge_the_gate_left_out():
    answers, scores, human, ap, full = _run()
    assert "random" not in full.jury_judges and len(full.jury_judges) == 2
    args = (answers, scores, human, ap, {"sys": 8}, {"sys": full.recall_at_k})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        old = tables.table5_human_vs_cube(*args).set_index("group")
        new = tables.table5_human_vs_cube(*args, {"sys": full.jury_judges}).set_index("group")
    judges = new.loc["CuBE (judges)"]
    assert judges["members"] == 2 and judges["left_out"] == "random"
    assert old.loc["CuBE (judges)", "members"] == 3  # the random judge counted before
    # the row is the mean over the jury on the rated sample: recomputed from the per-judge rows
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q = set(human.question_id)
        both = pd.concat([scores[scores.question_id.isin(q)], human], ignore_index=True)
        sample = E.evaluate(answers[answers.question_id.isin(q)], both, ap, 8).cube_table
    w = sample.loc[full.jury_judges, "weighted_score"]
    assert judges["cube_score_mean"] == pytest.approx(w.mean() * full.recall_at_k)
    assert judges["cube_score_sd"] < old.loc["CuBE (judges)", "cube_score_sd"]
    assert new.loc["Human rating", "left_out"] == "" and new.loc["Human rating", "members"] == 1
    assert "excluded" in tables.TABLE5_NOTE and "Left out" in tables.TABLE5_NOTE
