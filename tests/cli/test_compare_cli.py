"""`cube compare A B` on two tiny runs (TOP-N 4 vs 16), stages run directly (no papermill)."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
import yaml

from cube.cli import main
from cube.run import pipeline
from cube.run.notebook import open_run
from tests import ROOT

SCRIPT = "<script>alert('x')</script>"


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.scripts = 0

    def handle_starttag(self, tag, attrs):
        self.scripts += tag == "script"


def _tiny_run(tmp: Path, name: str, top_n: int) -> Path:
    params = yaml.safe_load((ROOT / "params" / "default.yaml").read_text(encoding="utf-8"))
    params.update(
        {
            "run": name,
            "outputs_dir": str(tmp / "outputs"),
            "corpus": {"source": "demo", "n_items": 40, "seed": 3},
            "questions": {"generator": "template", "seed": 3},
            "systems": [{"kind": "builtin", "name": f"bm25-top{top_n}", "top_n": top_n}],
            "analysis": {**params["analysis"], "bootstrap": 60},
        }
    )
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(params, allow_unicode=True), encoding="utf-8")
    run = open_run(path)
    for stage in (
        pipeline.corpus_stage,
        pipeline.questions_stage,
        pipeline.answers_stage,
        pipeline.scores_stage,
    ):
        stage(run)
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cmp")
    mp = pytest.MonkeyPatch()
    mp.chdir(ROOT)
    a, b = _tiny_run(tmp, "v1", 4), _tiny_run(tmp, "v2", 16)
    q = (
        tmp / "outputs" / "v1" / "data" / "questions.parquet"
    )  # untrusted text must stay text on the page
    questions = pd.read_parquet(q)
    pd.DataFrame(questions.assign(question=SCRIPT + questions["question"])).to_parquet(q)
    yield tmp, a, b
    mp.undo()


def test_cube_compare_two_runs_writes_the_comparison(runs, capsys):
    tmp, a, _ = runs
    assert (
        main(["compare", str(a), str(tmp / "outputs" / "v2"), "--permutations", "99", "--top", "5"])
        == 0
    )
    out = tmp / "outputs" / "compare" / "v1-bm25-top4__vs__v2-bm25-top16"
    head = json.loads((out / "comparison.json").read_text(encoding="utf-8"))
    for key in (
        "delta_cube",
        "delta_cube_ci",
        "p_value",
        "mde",
        "n_questions",
        "regressions",
        "improvements",
    ):
        assert key in head
    assert head["n_questions"] == 40 and head["a"] == "bm25-top4" and head["b"] == "bm25-top16"
    ci = head["delta_cube_ci"]
    assert ci[0] <= head["delta_cube"] <= ci[1] and 0 < head["p_value"] <= 1 and head["mde"] > 0
    assert head["retrieval_changes"].get("found", 0) >= 1  # 16 documents find gold that 4 miss
    assert len(head["regressions"]) <= 5 and len(head["improvements"]) <= 5
    assert head["improvements"] and {
        "answer_a",
        "answer_b",
        "diff",
        "retrieved_a",
        "retrieved_b",
        "judgments",
    } <= set(head["improvements"][0])
    for f in (
        "tables/deltas.csv",
        "tables/question_changes.csv",
        "figures/forest.png",
        "figures/scatter.png",
    ):
        assert (out / f).stat().st_size > 0
    html = (out / "index.html").read_text(encoding="utf-8")
    parser = _Tags()
    parser.feed(html)
    assert parser.scripts == 0 and "&lt;script&gt;" in html
    printed = capsys.readouterr().out
    assert printed.startswith("bm25-top16 vs bm25-top4: ΔCuBE ") and "comparison: " in printed
    assert "flag" not in printed and not head["flags"]


def test_cube_compare_same_run_needs_two_systems(runs, capsys):
    tmp, a, _ = runs
    assert main(["compare", str(a), str(a)]) == 2
    assert "only the system(s)" in capsys.readouterr().err


def test_a_comparison_resting_on_few_valid_resamples_is_flagged_in_json_page_and_summary(
    runs, monkeypatch, tmp_path, capsys
):
    import numpy as np

    import cube.method.compare as C

    real = C.cube_from_counts

    def undefined_in_every_second(p, counts):
        res = real(p, counts)
        if counts.shape[0] > 1:  # resamples and permutations, not the point estimate
            res["cube_score"] = res["cube_score"].copy()
            res["cube_score"][:, ::2] = np.nan
        return res

    monkeypatch.setattr(C, "cube_from_counts", undefined_in_every_second)
    _, a, b = runs
    assert (
        main(["compare", str(a), str(b), "--permutations", "20", "--outputs", str(tmp_path)]) == 0
    )
    out = next(tmp_path.rglob("comparison.json"))
    head = json.loads(out.read_text(encoding="utf-8"))
    assert head["valid_resample_share"] == 0.5 and head["valid_permutation_share"] == 0.5
    assert len(head["flags"]) == 2 and all("50%" in f for f in head["flags"])
    html = (out.parent / "index.html").read_text(encoding="utf-8")
    assert html.count('class="warn flag"') == 2
    printed = (
        capsys.readouterr().out.splitlines()
    )  # the summary carries the flags right under its headline
    assert printed[0].startswith("bm25-top16 vs bm25-top4: ΔCuBE ") and printed[0].endswith(
        "(2 flags below)"
    )
    assert printed[1:3] == [f"  flag: {f}" for f in head["flags"]] and printed[3].startswith(
        "comparison: "
    )


def test_two_runs_compare_page_links_each_side_to_its_own_run_browser(runs, tmp_path):
    from urllib.parse import unquote, urljoin, urlparse

    from cube.config.runpaths import RunPaths
    from cube.pages.browser import write_browser

    tmp, a, b = runs
    out_none = tmp_path / "before"
    assert (
        main(
            [
                "compare",
                str(a),
                str(b),
                "--permutations",
                "9",
                "--top",
                "2",
                "--outputs",
                str(out_none),
            ]
        )
        == 0
    )
    head = json.loads(next(out_none.rglob("comparison.json")).read_text(encoding="utf-8"))
    assert head["browser"] is None and all(
        q["links"] == {"a": None, "b": None} for q in head["improvements"]
    )
    for run in ("v1", "v2"):  # the runs' reports are published: the comparison links into both
        root = tmp / "outputs" / run
        write_browser(RunPaths(root=root, cache=root.parent / "cache.sqlite"))
    assert main(["compare", str(a), str(b), "--permutations", "9", "--top", "2"]) == 0
    out = tmp / "outputs" / "compare" / "v1-bm25-top4__vs__v2-bm25-top16"
    head = json.loads((out / "comparison.json").read_text(encoding="utf-8"))
    q = head["improvements"][0]
    for side, run, system in (("a", "v1", "bm25-top4"), ("b", "v2", "bm25-top16")):
        href = q["links"][side]
        assert href.startswith(f"../../{run}/report/judgments.html#")
        target = urlparse(urljoin((out / "index.html").as_uri(), href))
        assert (
            Path(unquote(target.path))
            == (tmp / "outputs" / run / "report" / "judgments.html").resolve()
        )
        assert f"system={system}" in target.fragment and f"q={q['question_id']}" in target.fragment


def test_a_run_outside_the_outputs_folder_is_not_linked_and_its_local_layout_is_not_published(
    runs, tmp_path
):
    """A link from outputs/compare/... to a run elsewhere spelled out the local folder layout
    (../../../../home-alice-.../v2/report/judgments.html): such a side gets no link and a note."""
    import html
    import shutil

    from cube.config.runpaths import RunPaths
    from cube.pages.browser import write_browser

    tmp, a, _ = runs
    private = tmp_path / "home-alice-private-runs"
    b = private / "v2"
    shutil.copytree(tmp / "outputs" / "v2", b)
    for root in (tmp / "outputs" / "v1", b):
        write_browser(RunPaths(root=root, cache=root.parent / "cache.sqlite"))
    assert main(["compare", str(a), str(b), "--permutations", "9", "--top", "2"]) == 0
    out = tmp / "outputs" / "compare" / "v1-bm25-top4__vs__v2-bm25-top16"
    text = (out / "comparison.json").read_text(encoding="utf-8")
    page = (out / "index.html").read_text(encoding="utf-8")
    head = json.loads(text)
    listed = head["improvements"] + head["regressions"]
    assert listed and all(q["links"]["b"] is None for q in listed)
    assert all(
        q["links"]["a"].startswith("../../v1/report/judgments.html#") for q in listed
    )  # inside: linked
    assert private.name not in text and private.name not in page
    assert [n["side"] for n in head["browser_notes"]] == ["b"]
    assert "outside" in head["browser_notes"][0]["note"] and head["browser_notes"][0][
        "note"
    ] in html.unescape(page)


def test_the_compare_page_adjusts_its_p_values_with_holm_over_the_rows_shown(runs):
    from cube.method.compare import holm

    tmp, a, _ = runs
    assert (
        main(["compare", str(a), str(tmp / "outputs" / "v2"), "--permutations", "99", "--top", "5"])
        == 0
    )
    out = tmp / "outputs" / "compare" / "v1-bm25-top4__vs__v2-bm25-top16"
    head = json.loads((out / "comparison.json").read_text(encoding="utf-8"))
    p = [r["p_value"] for r in head["deltas"]]
    shown = [x for x in p if x is not None]
    assert len(shown) > 1
    expect = holm([float("nan") if x is None else x for x in p])
    assert [r["p_holm_rows"] for r in head["deltas"]] == pytest.approx(
        [None if x != x else x for x in expect], nan_ok=True
    )
    assert pd.read_csv(out / "tables" / "deltas.csv")["p_holm_rows"].notna().sum() == len(shown)
    html = (out / "index.html").read_text(encoding="utf-8")
    assert "<th>p (Holm over rows)</th>" in html
    assert f"over the {len(shown)} p-values of this table" in html


@pytest.mark.parametrize("margin", ["inf", "-1", "nan", "five"])
def test_a_margin_that_is_not_a_finite_number_of_points_at_least_zero_is_refused(
    margin, runs, capsys
):
    _, a, b = runs
    with pytest.raises(SystemExit) as exit_:
        main(["compare", str(a), str(b), "--margin", margin])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--margin" in err and "finite number of CuBE points, at least 0" in err
