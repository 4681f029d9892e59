"""Issue 29 item 6: Table 4's normalised scores outside 0-100 (-140.0 and 123.3 were shown without
a mark) carry a mark and a footnote saying what such a score means; the CSV keeps the values."""

from __future__ import annotations

import warnings
from html import unescape

import pandas as pd

from cube.config.sections import AnalysisParams
from cube.method import evaluation as E
from cube.method import tables
from cube.pages.display import MARK, mark_outside, to_html
from tests.factories import make_tables


def _marked(html: str) -> list[str]:
    cells = unescape(html).split("<tbody>", 1)[1].split("</td>")
    return [c.rsplit(">", 1)[1] for c in cells if c.endswith(MARK)]


def test_values_outside_the_bounds_are_marked_with_a_footnote_and_the_others_are_not():
    df = pd.DataFrame(
        {
            "judge": ["a", "b", "Jury mean", "Jury SD"],
            "relevance": [-140.0, 55.0, -42.5, 140.0],
            "weighted_score": [123.3, 100.0, 111.65, 16.6],
            "recall_at_k": [0.8, 0.8, 0.8, 0.0],
        }
    )
    shown = mark_outside(
        df, ["relevance", "weighted_score"], 0, 100, "why", skip=lambda r: r["judge"] == "Jury SD"
    )
    html = shown._repr_html_()
    assert _marked(html) == ["-140" + MARK, "123.30" + MARK, "-42.50" + MARK, "111.65" + MARK]
    assert "<caption>† why</caption>" in unescape(html)  # the footnote under the table
    plain = mark_outside(df.iloc[[1]], ["relevance", "weighted_score"], 0, 100, "why")
    assert _marked(plain._repr_html_()) == [] and "<caption>" not in plain._repr_html_()
    assert MARK not in to_html(df)  # nothing marks a table by default


def test_table4_of_a_judge_scoring_rag_below_its_zero_bound_marks_that_score():
    answers, scores = make_tables(n_questions=40, seed=5)
    worse = (scores.judge == "judge-b") & (scores.set == "rag") & (scores.dimension == "relevance")
    scores = scores.assign(score=scores["score"].where(~worse, 0.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = {"sys": E.evaluate(answers, scores, AnalysisParams(bootstrap=0))}
    t4 = tables.table4_cube_scores(results)
    cols = tables.normalised_columns(results)
    assert "relevance" in cols and "weighted_score" in cols and "recall_at_k" not in cols
    value = t4.set_index("judge").at["judge-b", "relevance"]
    assert value < 0  # the case the old table showed unmarked
    html = mark_outside(t4, cols, 0, 100, tables.OUT_OF_BOUNDS_NOTE)._repr_html_()
    assert f"{value:.2f}{MARK}" in unescape(html)
    assert "below the zero bound" in unescape(html) and "not a cap" in unescape(html)
