"""`cube compare` resolves both sides to their run root (issue 13 review): a params file and the
same run's folder (absolute, relative, a subfolder, the run's own params copy) are one run, so
the run's two systems are compared, and a system is never compared with itself."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from cube.cli import main
from cube.run.compare import resolve_side, run_compare
from tests import ROOT
from tests.factories import make_tables


def _run(project: Path, name: str, systems: list[str]) -> Path:
    """A params file with a *relative* outputs_dir (read from the params file's folder, params/)
    and its run's data."""
    params = yaml.safe_load((ROOT / "params" / "default.yaml").read_text(encoding="utf-8"))
    params.update(
        {
            "run": name,
            "outputs_dir": "../out",
            "systems": [{"kind": "builtin", "name": s, "top_n": 8} for s in systems],
        }
    )
    params["analysis"] = {**params["analysis"], "bootstrap": 30}
    path = project / "params" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(params, allow_unicode=True), encoding="utf-8")
    data = project / "out" / name / "data"
    data.mkdir(parents=True)
    (data.parent / "report").mkdir()
    parts = [
        make_tables(30, judges=("rubric-lenient", "rubric-strict"), seed=i, system=s)
        for i, s in enumerate(systems)
    ]
    pd.concat([a for a, _ in parts], ignore_index=True).to_parquet(data / "answers.parquet")
    pd.concat([s for _, s in parts], ignore_index=True).to_parquet(data / "scores.parquet")
    (project / "out" / name / "params.yaml").write_text(
        path.read_text(encoding="utf-8"), encoding="utf-8"
    )
    return path


@pytest.fixture
def project(tmp_path, monkeypatch):
    """The project root is tmp_path; commands start from another folder (relative paths must not
    be read from the working directory)."""
    monkeypatch.setenv("CUBE_PROJECT_ROOT", str(tmp_path))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    return tmp_path


def test_a_params_file_and_its_run_folder_are_one_run(project):
    params = _run(project, "two", ["sys-a", "sys-b"])
    folder = (project / "out" / "two").resolve()
    for spec in (
        folder,
        folder / "report",
        project / "out" / "two" / "params.yaml",
        Path("../out/two"),
    ):
        side = resolve_side(spec)
        assert side.paths.root == folder and side.run == "two" and side.system == "sys-a", spec
    assert resolve_side(params).paths.root == folder


def test_params_file_vs_absolute_run_folder_compares_the_primary_with_the_second_system(
    project, capsys
):
    params = _run(project, "two", ["sys-a", "sys-b"])
    folder = (project / "out" / "two").resolve()
    assert main(["compare", str(params), str(folder), "--permutations", "19", "--top", "3"]) == 0
    out = project / "out" / "compare" / "sys-a__vs__sys-b"
    head = json.loads((out / "comparison.json").read_text(encoding="utf-8"))
    assert (head["a"], head["b"]) == ("sys-a", "sys-b") and head["side_a"]["run"] == head["side_b"][
        "run"
    ] == "two"
    assert head["delta_cube"] != 0.0  # two different systems, not one with itself
    assert capsys.readouterr().out.startswith("sys-b vs sys-a: ΔCuBE ")
    # the named systems are compared as asked, in either order
    out2 = run_compare(folder, params, system_a="sys-b", n_permutations=9, k=2)
    head2 = json.loads((out2 / "comparison.json").read_text(encoding="utf-8"))
    assert (head2["a"], head2["b"]) == ("sys-b", "sys-a")
    assert head2["delta_cube"] == pytest.approx(-head["delta_cube"])


def test_comparing_a_system_with_itself_is_refused(project, capsys):
    params = _run(project, "one", ["solo"])
    folder = (project / "out" / "one").resolve()
    assert main(["compare", str(params), str(folder)]) == 2
    err = capsys.readouterr().err
    assert "only the system(s) ['solo']" in err and "same run" in err
    _run(project, "two", ["sys-a", "sys-b"])
    two = project / "out" / "two"
    assert (
        main(
            [
                "compare",
                str(two / "params.yaml"),
                str(two.resolve()),
                "--system-a",
                "sys-b",
                "--system-b",
                "sys-b",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "both sides are system 'sys-b' of run 'two'" in err and str(two.resolve()) in err
    assert not (project / "out" / "compare").exists()


def test_notebook_09_table_links_each_comparison_and_its_regressions(project):
    from cube.pages.browser import write_browser
    from cube.run.compare import notebook_compare
    from cube.run.notebook import open_run
    from tests.pages.test_browser import _exported, _open

    run = open_run(_run(project, "three", ["sys-a", "sys-b", "sys-c"]))
    shown = notebook_compare(run, n_permutations=9, k=2)
    write_browser(run.paths)
    pages = _exported(run.paths, shown._repr_html_())
    first = (
        run.paths.root / "compare" / "sys-a__vs__sys-b" / "comparison.json"
    )  # the table's first row
    head = json.loads(first.read_text(encoding="utf-8"))
    for page, hrefs in pages.items():
        target = _open(run.paths, page, hrefs[str(head["n_regressions"])])
        assert target.count == str(head["n_regressions"]) and set(target.cards) >= {
            q["question_id"] for q in head["regressions"]
        }, page
        assert hrefs["compare/sys-a__vs__sys-c/index.html"].endswith(
            "compare/sys-a__vs__sys-c/index.html"
        )
    code = pages["report/code/10_diagnostics.html"]["compare/sys-a__vs__sys-c/index.html"]
    assert code == "../../compare/sys-a__vs__sys-c/index.html"


def test_each_pair_page_headlines_the_p_adjusted_over_the_runs_pairs(project):
    from cube.method.compare import holm
    from cube.run.compare import compare_in_run
    from cube.run.notebook import open_run

    run = open_run(_run(project, "three", ["sys-a", "sys-b", "sys-c"]))
    rows = compare_in_run(run, n_permutations=9, k=2)
    assert [r["p_holm_pairs"] for r in rows] == pytest.approx(holm([r["p_value"] for r in rows]))
    for r in rows:
        folder = run.paths.root / r["page"].rsplit("/", 1)[0]
        head = json.loads((folder / "comparison.json").read_text(encoding="utf-8"))
        assert head["p_holm_pairs"] == pytest.approx(r["p_holm_pairs"])
        assert head["n_comparisons"] == 2 and head["n_pairs"] == 2
        html = (folder / "index.html").read_text(encoding="utf-8")
        assert "p-value (Holm over 2 pairs)" in html and "simultaneous interval" in html
