"""The index's decision summary: verdict badge, judges used and left out, why a verdict is
withheld, the diagnosis lines, links to the comparisons and the judgment browser; all escaped."""

import json
from html import unescape

from cube.config.params import parse_params
from cube.config.runpaths import RunPaths
from cube.pages.publish import write_index

JUDGES = [{"name": "lenient", "model": {"provider": "offline", "model": "rubric-lenient"}}]


def _index(tmp_path, decision, **results):
    paths = RunPaths(root=tmp_path / "run", cache=tmp_path / "cache.sqlite")
    paths.report.mkdir(parents=True)
    paths.results.write_text(json.dumps({"decision": decision, **results}), encoding="utf-8")
    (paths.report / "judgments.html").write_text("<html></html>", encoding="utf-8")
    params = parse_params({"run": "run", "judges": JUDGES}, "p.yaml")
    return write_index(params, paths, []).read_text(encoding="utf-8")


DECISION = {
    "verdict": "withheld",
    "sentence": "s: verdict withheld.",
    "cube_score": 50.0,
    "cube_ci": [10.0, 90.0],
    "confidence": 0.95,
    "recall_at_k": 0.8,
    "top_n": 8,
    "weighted_score": 62.0,
    "weighted_label": "W",
    "withheld_reasons": ["the 95% interval 10.0-90.0 is 80.0 points wide"],
    "n_judges": 1,
    "judges_used": ["lenient"],
    "judges_excluded": {"<b>random</b>": "full - zero = 0.2 points"},
    "suggestions": [],
    "judges": ["lenient"],
    "n_questions": 10,
    "method_note": "",
    "retrieval_quality": {
        "r_at_1": 0.5,
        "near_duplicate_confusion": {
            "rate": 0.2,
            "count": 2,
            "n": 10,
            "region": 1,
            "variant": 1,
            "duplicate": 0,
        },
    },
    "patterns_sentence": "Top failure patterns: retrieval miss (3).",
    "cost_total": 0.0,
    "currency": "USD",
    "tokens_total": 0,
    "calls_total": 0,
    "calls_cached": 0,
    "cost_note": "",
}


def test_the_index_shows_the_badge_the_jury_the_exclusions_and_why_the_verdict_is_withheld(
    tmp_path,
):
    html = _index(
        tmp_path,
        DECISION,
        comparisons=[
            {
                "a": "top8",
                "b": "top16",
                "delta_cube": 1.2,
                "delta_cube_ci": [-0.2, 2.7],
                "p_value": 0.09,
                "mde": 2.1,
                "n_regressions": 3,
                "n_improvements": 7,
                "page": "compare/top8__vs__top16/index.html",
            }
        ],
    )
    assert (
        '<span class="badge withheld">WITHHELD</span>' in html
        and "jury of 1 judge: lenient" in html
    )
    assert (
        "80.0 points wide" in html
        and "&lt;b&gt;random&lt;/b&gt;" in html
        and "<b>random</b>" not in html
    )
    assert (
        "R@1 50.0 %" in html
        and "near-duplicate confusion 20.0 %" in html
        and "retrieval miss (3)" in html
    )
    assert 'href="../compare/top8__vs__top16/index.html"' in html and "ΔCuBE 1.2" in html
    assert 'href="judgments.html"' in html


def test_an_index_without_a_decision_says_so_and_still_links_the_browser(tmp_path):
    paths = RunPaths(root=tmp_path / "run", cache=tmp_path / "cache.sqlite")
    paths.report.mkdir(parents=True)
    (paths.report / "judgments.html").write_text("<html></html>", encoding="utf-8")
    html = write_index(
        parse_params({"run": "run", "judges": JUDGES}, "p.yaml"), paths, []
    ).read_text("utf-8")
    assert (
        'id="no-decision"' in html
        and 'href="judgments.html"' in html
        and "badge" not in html.split("<body")[1]
    )


def test_the_index_shows_holm_adjusted_p_values_the_band_range_and_the_human_calibrated_cube(
    tmp_path,
):
    from cube.run.compare import with_holm

    rows = with_holm(
        [
            {
                "a": "s1",
                "b": b,
                "delta_cube": 1.0,
                "delta_cube_ci": [0.1, 2.0],
                "p_value": p,
                "mde": 2.0,
                "n_regressions": 1,
                "n_improvements": 2,
                "page": f"compare/s1__vs__{b}/index.html",
            }
            for b, p in (("s2", 0.01), ("s3", 0.04))
        ]
    )
    assert [r["p_holm_pairs"] for r in rows] == [0.02, 0.04] and rows[0]["n_comparisons"] == 2
    decision = {
        **DECISION,
        "verdict": "good",
        "verdict_label": "good to excellent",
        "withheld_reasons": [],
        "system": "s1",
    }
    # notebook 07's own key (issue 29: it no longer rewrites the decision)
    human = {"s1": {"n_rated": 30, "n_retrieved": 34, "n_ratings": 720, "cube_score": 61.0}}
    human["s1"] |= {"cube_lo": 52.0, "cube_hi": 70.0, "confidence": 0.95, "flags": []}
    html = _index(tmp_path, decision, comparisons=rows, human_calibrated=human)
    assert "p = 0.010 (Holm-adjusted over 2 pairs: 0.020)" in html
    assert '<span class="badge good">GOOD TO EXCELLENT</span>' in html
    # brackets are written as character references (cube.pages.escape): the text is the same
    assert (
        "With 30 of 34 retrieved questions rated by humans (720 ratings): CuBE 61.0 [52.0, 70.0]"
        in unescape(html)
    )
