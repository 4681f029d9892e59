"""The decision page leads with the decision, and its suggestions never contradict (issue 23)."""

from __future__ import annotations

from cube.diagnose.suggest import KEEP, ordered_suggestions
from cube.pages.decision import decision_markdown, headline

CONFUSION = (
    "26% of the questions retrieved a near-duplicate of the "
    "gold document first (mostly: wrong region); "
    "consider: restrict retrieval to the region the question names."
)
RAISE = (
    "Retrieval misses the gold document for 30% of questions (R@8 "
    "= 70.0%): raise TOP-N above 8 or improve retrieval."
)
PATTERNS = {
    "low": 40,
    "top": [
        {
            "pattern": "field_missing",
            "count": 20,
            "share": 0.5,
            "suggestion": "make the prompt answer the asked aspect",
        },
        {
            "pattern": "wrong_near_duplicate",
            "count": 12,
            "share": 0.3,
            "suggestion": "filter retrieval by region",
        },
        {
            "pattern": "low_rank",
            "count": 8,
            "share": 0.2,
            "suggestion": "re-rank or put fewer, better documents in the prompt",
        },
    ],
}


def test_keep_this_configuration_only_when_nothing_else_is_suggested():
    # issue 23: "restrict retrieval" and "keep this configuration" stood side by side
    assert ordered_suggestions([CONFUSION], []) == [CONFUSION]
    assert ordered_suggestions([], [], {"low": 0, "top": []}) == [KEEP]
    tips = ordered_suggestions([], [], PATTERNS)
    assert KEEP not in tips and len(tips) == 3


def test_one_ordered_list_each_remedy_once_and_low_rank_yields_to_a_larger_top_n():
    tips = ordered_suggestions([CONFUSION], [RAISE], PATTERNS)
    assert tips[:2] == [CONFUSION, RAISE]  # knowledge base and retrieval first, then the patterns
    assert not any(
        "filter retrieval by region" in t for t in tips
    )  # said once, by the confusion figure
    assert tips[2].startswith("Field missing explains 20 of the 40 low-scoring answers (50%)")
    low_rank = [t for t in tips if t.startswith("Low rank")]
    assert (
        len(low_rank) == 1
        and "fewer, better documents" not in low_rank[0]
        and "re-rank" in low_rank[0]
    )
    # without "raise TOP-N" the low_rank remedy is its own
    assert any("fewer, better documents" in t for t in ordered_suggestions([], [], PATTERNS))


def test_the_page_opens_with_the_verdict_score_interval_and_recall():
    decision = {
        "verdict": "good",
        "sentence": "s",
        "suggestions": ["a", "b"],
        "cube_score": 71.26,
        "cube_ci": [66.0, 75.5],
        "confidence": 0.95,
        "recall_at_k": 0.817,
        "top_n": 8,
    }
    md = decision_markdown(decision)
    first = md.splitlines()[0]
    assert first == headline(decision)
    assert (
        "GOOD</span>" in first
        and "<b>71.3</b>" in first
        and "95% interval 66.0–75.5" in first
        and "R@8 81.7%" in first
    )
    assert md.rstrip().endswith("1. a\n2. b")
    withheld = headline({"verdict": "withheld", "cube_score": float("nan"), "cube_ci": None})
    assert "WITHHELD" in withheld and "CuBE" not in withheld  # no score shown when there is none


def test_a_wide_table_is_shown_in_parts_that_repeat_the_name_columns_and_names_do_not_break():
    import re

    import pandas as pd

    from cube.pages.display import MAX_COLUMNS, to_html

    wide = pd.DataFrame(
        {
            "system": ["bm25-top8"],
            "judge": ["rubric-lenient"],
            **{f"metric_{i}": [float(i)] for i in range(23)},
        }
    )
    html = to_html(wide, caption="Table 4")
    tables = re.findall(r"<table.*?</table>", html, re.S)
    assert len(tables) == 3 and 'class="cube-parts"' in html
    for t in tables:
        heads = re.findall(r"<th>(.*?)</th>", t)
        assert heads[:2] == ["System", "Judge"] and len(heads) <= MAX_COLUMNS
    shown = [h for t in tables for h in re.findall(r"<th>(.*?)</th>", t)[2:]]
    assert shown == [f"Metric {i}" for i in range(23)]  # every column once, in order
    assert "Part 3 of 3" in tables[2] and "Table 4" in tables[2] and "Table 4" not in tables[0]
    assert '<td class="text name">rubric-lenient</td>' in html and "white-space:nowrap" in html
    assert "overflow-wrap:anywhere" not in html  # what broke "rubric-lenien / t"
    narrow = to_html(wide.iloc[:, :MAX_COLUMNS])
    assert narrow.count("<table") == 1 and 'class="cube-parts"' not in narrow
