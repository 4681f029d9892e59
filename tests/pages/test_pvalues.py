"""Issue 29 item 6: a p-value below 1e-4 is printed as "< 0.0001" (a table showed 1.7e-53), by one
formatter (`cube.pages.display.format_p`, defined in `cube.method.analysis`) wherever a page
prints one: the formatted tables, the index's comparisons and the audit's sentence."""

from __future__ import annotations

import json
from html import unescape

import pandas as pd

from cube.config.params import parse_params
from cube.config.runpaths import RunPaths
from cube.method import analysis
from cube.pages import display
from cube.pages.publish import write_index


def test_format_p_floors_small_p_values_and_keeps_the_others_readable():
    assert display.format_p is analysis.format_p  # one formatter
    got = [display.format_p(p) for p in (1.7e-53, 9.99e-5, 1e-4, 0.00042, 0.0123, 0.5, 1.0)]
    assert got == ["< 0.0001", "< 0.0001", "0.0001", "0.0004", "0.012", "0.500", "1.000"]
    assert display.format_p(float("nan")) == display.format_p(None) == "n/a"


def test_a_table_prints_its_p_value_columns_by_the_formatter_and_nothing_else():
    df = pd.DataFrame(
        {
            "judge": ["a", "b"],
            "r_all": [0.91, 1.7e-53],
            "p_value_all": [1.7e-53, 0.034],
            "gate_p_value": [3e-9, float("nan")],
            "p_holm": [2e-6, 0.2],
            "top_n": [8, 8],
        }
    )
    html = unescape(display.to_html(df))
    cells = html.split("<tbody>", 1)[1]
    assert cells.count("< 0.0001") == 3  # p_value_all, gate_p_value and p_holm of row a
    assert "0.034" in cells and "0.200" in cells
    assert [display.is_p_column(c) for c in df.columns] == [False, False, True, True, True, False]
    assert not display.is_p_column("P@5") and display.is_p_column("ks_p_value")


def test_the_index_prints_a_comparison_p_value_below_the_floor_as_such(tmp_path):
    paths = RunPaths(root=tmp_path / "run", cache=tmp_path / "cache.sqlite")
    paths.report.mkdir(parents=True)
    row = {
        "a": "s1",
        "b": "s2",
        "delta_cube": 9.0,
        "delta_cube_ci": [5.0, 12.0],
        "p_value": 2.5e-7,
        "p_holm_pairs": 5e-7,
        "n_comparisons": 2,
        "mde": 2.0,
        "n_regressions": 1,
        "n_improvements": 2,
        "n_expected_by_chance": 1.5,
        "page": "compare/s1__vs__s2/index.html",
    }
    from tests.pages.test_index_page import DECISION

    paths.results.write_text(
        json.dumps({"decision": DECISION, "comparisons": [row]}), encoding="utf-8"
    )
    judges = [{"name": "j", "model": {"provider": "offline", "model": "rubric-lenient"}}]
    params = parse_params({"run": "run", "judges": judges}, "p.yaml")
    html = unescape(write_index(params, paths, []).read_text(encoding="utf-8"))
    assert "p < 0.0001 (Holm-adjusted over 2 pairs: < 0.0001)" in html
    assert "2.5e-07" not in html and "0.000," not in html
    # the regressions are beyond the judges' noise, beside the count expected by chance
    assert "1 regressions, 2 improvements beyond the judges' noise (about 1.5 of each" in html


def test_the_audit_sentence_prints_a_tiny_p_value_as_below_the_floor():
    from cube.method.audit import audit_verdict

    summary = {"pairs": 40, "wins": 40, "ties": 0, "losses": 0, "discrimination_p_value": 9e-13}
    blind, text = audit_verdict(summary, 0.05, 10)
    assert blind is False and "one-sided Wilcoxon p < 0.0001" in text and "e-13" not in text
