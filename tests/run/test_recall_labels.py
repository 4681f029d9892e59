"""R@k is labelled with each system's own k (issue 37): a run of bm25-top8 and bm25-top2 printed
`R@8` for both, bm25-top2's 65.7 % read as a recall at 8. The decision record (`assess`, not a
hand-made dict) carries each system's top_n, and the terminal and the index read it."""

from __future__ import annotations

import json
import re
import warnings

from cube.config.params import parse_params
from cube.config.runpaths import RunPaths
from cube.config.sections import AnalysisParams
from cube.diagnose import assessment
from cube.method import evaluation as E
from cube.pages.publish import write_index
from cube.run.outcome import outcome_lines
from tests.factories import make_tables

JUDGES = [
    {"name": "judge-a", "model": {"provider": "offline", "model": "rubric-lenient"}},
    {"name": "judge-b", "model": {"provider": "offline", "model": "rubric-strict"}},
]


def _result(system: str, top_n: int, seed: int):
    answers, scores = make_tables(n_questions=40, seed=seed, top_n=top_n, system=system)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return E.evaluate(answers, scores, AnalysisParams(bootstrap=0))


def _decision():
    params = parse_params(
        {
            "run": "t",
            "judges": JUDGES,
            "systems": [
                {"kind": "builtin", "name": "bm25-top8", "top_n": 8},
                {"kind": "builtin", "name": "bm25-top2", "top_n": 2},
            ],
        }
    )
    results = {"bm25-top8": _result("bm25-top8", 8, 1), "bm25-top2": _result("bm25-top2", 2, 2)}
    return assessment.assess(results, params).as_json()


def test_each_system_carries_its_own_k_in_the_record():
    decision = _decision()
    assert decision["top_n"] == 8
    assert [(s["system"], s["top_n"]) for s in decision["systems"]] == [
        ("bm25-top8", 8),
        ("bm25-top2", 2),
    ]


def test_the_terminal_labels_each_system_with_its_own_k():
    lines = outcome_lines(_decision(), "report/index.html")
    assert re.search(r"^bm25-top8 .* R@8 \d", lines[0])
    assert re.search(r"^bm25-top2 .* R@2 \d", lines[1])


def test_an_older_record_without_a_systems_k_never_borrows_the_primarys():
    decision = _decision()
    for entry in decision["systems"]:
        del entry["top_n"]  # a results.json written before systems carried their k
    lines = outcome_lines(decision, "report/index.html")
    assert " R@8 " in lines[0]  # the decision's own system: the decision's N is its N
    assert " R@k " in lines[1] and " R@8 " not in lines[1]


def test_the_index_table_of_systems_names_each_k(tmp_path):
    paths = RunPaths(root=tmp_path / "run", cache=tmp_path / "cache.sqlite")
    paths.report.mkdir(parents=True)
    paths.results.write_text(json.dumps({"decision": _decision()}), encoding="utf-8")
    params = parse_params({"run": "run", "judges": JUDGES}, "p.yaml")
    html = write_index(params, paths, []).read_text(encoding="utf-8")
    table = html[html.index('id="systems"') :].split("</table>")[0]
    rows = table.split("<tr>")[2:]
    assert "bm25-top8" in rows[0] and "R@8" in rows[0]
    assert "bm25-top2" in rows[1] and "R@2" in rows[1] and "R@8" not in rows[1]
